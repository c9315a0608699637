"""Where a decoding step's CPU time goes, piece by piece: a tree step against a chain step (issue 10).

Wraps the decoder's pieces (the target's forward, the proposer's ``propose`` and its model or head
forwards, the tree mask, verification, the KV commit of the accepted path, ...) with process-CPU-time
counters and decodes byte-d288 at batch 1, temperature 1, 8 held-out prompts × 64 new bytes, seed =
prompt index, one torch thread. Times are inclusive (``score`` holds ``target.fwd`` holds ``sdpa`` ...)
and carry the wrappers' own few microseconds per call. Run on the idle core, e.g. ``flock
/work/wt/core1.lock taskset -c 1 .venv/bin/python benchmarks/profile_tree_step.py head:chain5
head:2x1x1x1``; with ``PYTHONPATH`` at another checkout it profiles that version (prints JSON).
"""

from __future__ import annotations

import collections
import functools
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import machine  # noqa: E402  (also pins numeric libraries to one thread)


def _instrument(target, proposers, acc, cnt):
    import torch.nn.functional as F

    import sdsl.torch.decoder as D
    import sdsl.torch.head as H
    import sdsl.torch.model as M
    import sdsl.torch.proposers as P

    now = time.process_time

    def wrap(name, fn):
        @functools.wraps(fn)
        def timed(*a, **k):
            start = now()
            out = fn(*a, **k)
            acc[name] += now() - start
            cnt[name] += 1
            return out
        return timed

    def patch(obj, attr, name):
        setattr(obj, attr, wrap(name, getattr(obj, attr)))

    forward = target.forward

    def target_forward(tokens, *a, **k):  # the prefill (64 tokens) is kept apart from the steps' forwards
        return wrap("target.fwd" if tokens.shape[1] <= 32 else "target.prefill", forward)(tokens, *a, **k)

    target.forward = target_forward
    head, wide = proposers["head"], proposers["byte-wide"]
    patch(head.head, "forward", "head.fwd")
    patch(head, "_draft_logits", "head.lm_head")
    patch(wide.model, "forward", "draft.fwd")
    for proposer in (head, wide):
        patch(proposer, "propose", "propose")
        patch(proposer, "commit", "proposer.commit")
    for module in (H, D, P):
        patch(module, "tree_mask", "tree_mask")
    patch(D, "commit_path", "target.commit_path")
    patch(P, "commit_path", "draft.commit_path")
    patch(D, "logits_to_probs", "verify.logits_to_probs")
    patch(P, "logits_to_probs", "draft.logits_to_probs")
    patch(P, "sample_without_replacement", "draft.sample_without_replacement")
    patch(F, "scaled_dot_product_attention", "sdpa")
    patch(M, "apply_rope", "rope")
    patch(M, "step_inputs", "step_inputs")
    patch(H, "step_inputs", "step_inputs")
    for method in ("update", "move", "set_lengths"):
        patch(M.KVCache, method, "kv." + method)
    patch(D, "_score", "score")
    patch(D, "speculative_step", "step")
    return wrap("verify", D.verify), wrap("verify", D.verify_tree)


def main(*configs: str) -> None:
    import torch

    import sdsl
    import sdsl.torch.decoder as D
    from sdsl.validation.decoder.heads import heldout_prompts
    from sdsl.torch.checkpoint import load_checkpoint
    from sdsl.torch.head import HeadProposer, load_head
    from sdsl.torch.proposers import DraftModel

    torch.set_num_threads(1)
    target, _ = load_checkpoint("byte-d288")
    proposers = {"head": HeadProposer(load_head("byte-d288-head", target.shape)[0], target),
                 "byte-wide": DraftModel(load_checkpoint("byte-wide")[0], "byte-wide")}
    acc, cnt = collections.defaultdict(float), collections.Counter()
    verify, verify_tree = _instrument(target, proposers, acc, cnt)
    prompts = heldout_prompts(8, 64)
    rows = []
    for config in configs or ("head:chain5", "head:2x1x1x1"):
        name, tree = config.split(":")
        acc.clear()
        cnt.clear()
        res = [D.generate(target, prompts[i:i + 1], 64, proposers[name], temperature=1.0, seed=i, clock="cpu",
                          tree=tree, verify_fn=verify, tree_verify_fn=verify_tree) for i in range(len(prompts))]
        steps = sum(r.steps for r in res)
        rows.append({"proposer": name, "tree": tree, "steps": steps,
                     "ms_per_step": 1e3 * sum(r.decode_s for r in res) / steps,
                     "tau": sum(r.new_tokens for r in res) / steps,
                     "pieces_ms_per_step": {k: 1e3 * v / steps for k, v in sorted(acc.items()) if k != "target.prefill"},
                     "calls_per_step": {k: v / steps for k, v in sorted(cnt.items()) if k != "target.prefill"}})
    print(json.dumps({"machine": machine(), "torch": torch.__version__, "sdsl": os.path.dirname(sdsl.__file__),
                      "rows": rows}, indent=2))


if __name__ == "__main__":
    main(*sys.argv[1:])
