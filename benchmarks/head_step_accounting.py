"""Exact accounting of the GEMMs the reference decoder runs per speculative step with an EAGLE-style head
(issue 10: which of the head's priced passes does the decoder actually run?). No timing: every
``nn.Linear`` call of the target and of the head is recorded with its row count (batch × tokens) while
:func:`sdsl.torch.decoder.generate` decodes at forced acceptance, split by where it ran — the head's
passes (its ``fc``), the LM head called by the head proposer, and the target's verify forward — and by
step (step 1 is the first decode step, which also runs the head over the prompt's pairs).

    .venv/bin/python benchmarks/head_step_accounting.py --out benchmarks/results/head_step_accounting.json

Shapes do not change the counts (tiny random models, any width); k = 1..6 chains, batch 1 and 4.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter


def account(gamma: int, batch: int, prompt_len: int = 8, max_new: int = 24, alpha: float = 0.7, seed: int = 0) -> dict:
    """Per decode step: the head's passes (rows of its fc GEMM), the LM head rows the proposer computes,
    and the target's verify rows; plus the accepted counts (τ − 1) of every step."""
    import torch

    import sdsl.torch.decoder as decoder
    from sdsl.catalog.models import ModelSpec
    from sdsl.torch.synthetic import random_model, synthetic_proposer

    spec = ModelSpec(name="acct", family="llama", n_layer=2, d_model=32, n_head=4, n_kv_head=2, d_ff=64,
                     vocab_size=97, max_context=512)
    target = random_model(spec, seed=0, max_context=256)
    proposer = synthetic_proposer("head", target)
    state = {"step": 0, "in_propose": False}
    log: list[tuple[int, str, int]] = []

    def hook(name):
        def record(module, args):
            rows = int(args[0].numel() // args[0].shape[-1])
            where = name if name != "output" else ("head_lm" if state["in_propose"] else "target_lm")
            log.append((state["step"], where, rows))
        return record

    hooks = [proposer.head.fc.register_forward_pre_hook(hook("head_fc")),
             target.output.register_forward_pre_hook(hook("output")),
             target.layers[0].attention.wqkv.register_forward_pre_hook(hook("target_layer0_qkv"))]
    propose, step_fn = proposer.propose, decoder.speculative_step

    def traced_propose(*args):
        state["in_propose"] = True
        try:
            return propose(*args)
        finally:
            state["in_propose"] = False

    def traced_step(*args, **kw):
        state["step"] += 1
        return step_fn(*args, **kw)

    proposer.propose, decoder.speculative_step = traced_propose, traced_step
    accepted: list[list[int]] = []
    real_commit = proposer.commit

    def commit(outcome):
        accepted.append(outcome.accepted.tolist())
        real_commit(outcome)

    proposer.commit = commit
    try:
        prompts = torch.randint(0, spec.vocab_size, (batch, prompt_len), generator=torch.Generator().manual_seed(seed))
        decoder.generate(target, prompts, max_new, proposer, tree=f"chain{gamma}", acceptance=[alpha] * gamma, seed=seed)
    finally:
        decoder.speculative_step = step_fn
        for h in hooks:
            h.remove()
    steps = []
    for s in range(1, state["step"] + 1):
        calls = [(w, r) for step, w, r in log if step == s]
        steps.append({"head_passes_rows": [r for w, r in calls if w == "head_fc"],
                      "head_lm_rows": [r for w, r in calls if w == "head_lm"],
                      "target_verify_rows": [r for w, r in calls if w == "target_layer0_qkv"],
                      "accepted": accepted[s - 1]})
    prefill = Counter(w for step, w, _ in log if step == 0)
    return {"gamma": gamma, "batch": batch, "prompt_len": prompt_len, "prefill_calls": dict(prefill), "steps": steps}


def summarise(rec: dict) -> dict:
    """What one later step (step ≥ 2) runs, checked to be the same at every such step."""
    b, k = rec["batch"], rec["gamma"]
    later = rec["steps"][1:]
    passes = {tuple(s["head_passes_rows"]) for s in later}
    lm = {tuple(s["head_lm_rows"]) for s in later}
    assert len(passes) == 1 and len(lm) == 1, (passes, lm)
    (p,), (m,) = passes, lm
    return {"gamma": k, "batch": b, "head_passes_per_step": len(p), "first_pass_rows": p[0],
            "first_pass_rows_per_sequence": p[0] / b, "other_pass_rows": sorted(set(p[1:])),
            "lm_head_calls_per_step": len(m), "lm_head_rows": sorted(set(m)),
            "step1_first_pass_rows_per_sequence": rec["steps"][0]["head_passes_rows"][0] / b,
            "prompt_pairs_per_sequence": rec["prompt_len"] - 1,
            "priced_by_eaglehead": {"passes_at_q1": k, "extend_rows_per_sequence": "tau", "lm_head_calls": k + 1}}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    records = [account(g, b) for b in (1, 4) for g in range(1, 7)]
    out = {"source": "benchmarks/head_step_accounting.py (nn.Linear pre-hooks on the reference decoder; no timing)",
           "summary": [summarise(r) for r in records], "records": records}
    if args.out:
        with open(args.out, "w") as f:
            f.write(json.dumps(out, indent=1, sort_keys=True) + "\n")
    for s in out["summary"]:
        print({k: v for k, v in s.items() if k != "priced_by_eaglehead"})
    return out


if __name__ == "__main__":
    main()
