"""One prepared GPU run (≤ 10 minutes on one H200): profiling harness + synthetic decoder sweep.

    python benchmarks/gpu_decoder.py --out "$OUT"              # on the GPU machine
    python benchmarks/gpu_decoder.py --out /tmp/x --tiny       # CPU smoke run at tiny shapes (the test suite's)

1. ``sdsl profile``'s harness (operator GEMMs and whole decoder layers, bf16) for the target
   (llama-3.1-8b) and the draft (llama-3.2-1b): ``<hw>-<model>.csv`` + sidecars under ``--out``;
2. the forced-acceptance sweep (:func:`sdsl.validation.decoder.synthetic.synthetic_sweep`): an
   8B-shaped target with a 1B-shaped draft and an EAGLE-shaped head, bf16, batch 1–64, k 1–6, three
   acceptance levels, each row priced by sdsl on the hardware's shipped calibration:
   ``synthetic.json`` (summary + rows) and ``synthetic_rows.json`` (the resumable row cache).
3. issue 10's tree-versus-chain question where verification is nearly free in tokens: the committed byte-d288
   target and its trained head on the GPU, batch 1, 8 held-out prompts × 64 bytes, temperature 1, round-robin
   rounds of plain decoding, head chains 4–8, static trees and spines and the EAGLE-2-style dynamic spines,
   wall clock, only the requested 64 bytes per prompt counted: ``family_trees.json`` (speedup per round and
   median, τ per configuration, ``tree_beats_chain``).
A deadline keeps the whole run inside ``--budget-s``; ``summary.json`` says what finished.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FAMILY_CONFIGS = ("chain4", "chain5", "chain6", "chain7", "chain8", "2x1x1x1", "3x1x1x1x1", "3x2x1x1x1",
                  "4x2x1x1x1x1", "spine2x1x1x1x1x1", "spine3x1x1x1x1", "vspine7@0.05", "dspine7@0.3")
TINY = {"name": "tiny-target", "family": "llama", "n_layer": 2, "d_model": 64, "n_head": 4, "n_kv_head": 2,
        "d_ff": 160, "vocab_size": 512, "max_context": 2048}


def _models(tiny: bool):
    from sdsl.catalog.models import ModelSpec, get_model

    if tiny:
        return ModelSpec(**TINY), ModelSpec(**(TINY | {"name": "tiny-draft", "n_layer": 1, "d_model": 32, "n_head": 2,
                                                      "n_kv_head": 1, "d_ff": 64}))
    return get_model("llama-3.1-8b"), get_model("llama-3.2-1b")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--tiny", action="store_true", help="tiny shapes on the CPU (smoke test)")
    parser.add_argument("--budget-s", type=float, default=540.0)
    args = parser.parse_args(argv)
    import torch

    from sdsl.validation.decoder.synthetic import synthetic_sweep
    from sdsl.torch.harness.run import Grid, default_grid, quick_grid, run_profile

    start = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = "cpu" if args.tiny or not torch.cuda.is_available() else "cuda"
    hardware = "cpu" if device == "cpu" else _gpu_key()
    target, draft = _models(args.tiny)
    summary = {"device": device, "hardware": hardware, "torch": torch.__version__, "target": target.name,
               "draft": draft.name, "profiles": [], "errors": []}
    grid = quick_grid() if args.tiny else Grid(num_tokens=default_grid("cuda").num_tokens, batch=(1, 4, 16, 64),
                                               q=(1, 2, 4, 7), context=(512, 2048), warmup=3, repeats=10)
    for spec in (target, draft):
        try:
            path = run_profile(spec, out / f"{hardware}-{spec.name}.csv", device=device,
                               dtype="fp32" if args.tiny else "bf16", grid=grid, progress=False,
                               hardware=None if args.tiny else hardware)
            summary["profiles"].append(path.name)
        except Exception as exc:  # keep going: the sweep is worth having without a profile
            summary["errors"].append(f"profile {spec.name}: {exc!r}")
    if device == "cuda":
        torch.set_default_device("cuda")
    try:  # part 3 first, at most two minutes, so that the sweep's deadline bounds the whole run
        trees = family_trees(device, args.tiny, deadline=time.time() + 120)
        (out / "family_trees.json").write_text(json.dumps(trees, indent=1, sort_keys=True) + "\n")
        summary.update(tree_beats_chain=trees["tree_beats_chain"], best_tree=trees["best_tree"],
                       best_chain=trees["best_chain"])
    except Exception as exc:  # the sweep and profiles stand without it
        summary["errors"].append(f"family trees: {exc!r}")
    sweep = synthetic_sweep(target=target, draft=draft, gammas=(1, 2, 3, 4, 6) if not args.tiny else (1, 3),
                            batches=(1, 2, 4, 8, 16, 32, 64) if not args.tiny else (1, 2),
                            alphas=(0.5, 0.7, 0.9) if not args.tiny else (0.8,), prompt_len=128 if not args.tiny else 8,
                            max_new=32 if not args.tiny else 6, repeats=2 if not args.tiny else 1,
                            cache_path=out / "synthetic_rows.json", progress=False, device=device,
                            dtype="fp32" if args.tiny else "bf16", hardware=hardware,
                            deadline=start + args.budget_s - 30)
    (out / "synthetic.json").write_text(json.dumps(sweep, indent=1, sort_keys=True, default=float) + "\n")
    summary.update(rows=sweep["n_rows"], median_speedup_error=sweep["median_speedup_error"],
                   median_signed_error=sweep["median_signed_error"], seconds=round(time.time() - start, 1))
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return summary


def family_trees(device: str, tiny: bool, deadline: float) -> dict:
    """Round-robin of plain decoding and the head's chains and trees on the committed byte-d288 (module docstring,
    part 3); rounds stop at ``deadline``. ``tiny``: one prompt, 8 bytes, one round, three configurations."""
    import numpy as np
    import torch

    from sdsl.validation.decoder.heads import heldout_prompts
    from sdsl.torch.checkpoint import load_checkpoint
    from sdsl.torch.decoder import generate
    from sdsl.torch.dynamic_tree import parse_tree
    from sdsl.torch.head import HeadProposer, load_head

    target = load_checkpoint("byte-d288")[0].to(device)
    head = HeadProposer(load_head("byte-d288-head", target.shape)[0].to(device), target)
    n, max_new, rounds = (1, 8, 1) if tiny else (8, 64, 5)
    prompts = heldout_prompts(n, 64).to(device)
    configs = [None] + list(FAMILY_CONFIGS[:2] + FAMILY_CONFIGS[-1:] if tiny else FAMILY_CONFIGS)
    seconds = {c: [] for c in configs}
    tau = {}
    for _ in range(rounds):
        if seconds[configs[-1]] and time.time() > deadline:
            break
        for c in configs:
            runs = [generate(target, prompts[i:i + 1], max_new, head if c else None, temperature=1.0, seed=i,
                             tree=parse_tree(c) if c else None) for i in range(n)]
            seconds[c].append(sum(r.decode_s for r in runs))
            tau[c] = sum(r.new_tokens for r in runs) / sum(r.steps for r in runs)
    done = min(len(v) for v in seconds.values())
    plain = np.asarray(seconds[None][:done])
    rows = [{"tree": c, "tau": tau[c], "speedup_by_round": (plain / np.asarray(seconds[c][:done])).tolist()}
            for c in configs[1:]]
    for r in rows:
        r["speedup_median"] = float(np.median(r["speedup_by_round"]))
    chains = [r for r in rows if r["tree"].startswith("chain")]
    others = [r for r in rows if not r["tree"].startswith("chain")]
    best = {k: max(v, key=lambda r: r["speedup_median"]) for k, v in (("chain", chains), ("tree", others))}
    return {"device": device, "rounds": done, "prompts": n, "max_new": max_new, "counted": "requested bytes",
            "plain_tokens_per_s": float(np.median(n * max_new / plain)), "rows": rows,
            "best_chain": best["chain"]["tree"], "best_tree": best["tree"]["tree"],
            "tree_beats_chain": best["tree"]["speedup_median"] > best["chain"]["speedup_median"]}


def _gpu_key() -> str:
    from sdsl.torch.harness.run import _guess_hardware

    import torch

    return _guess_hardware(torch.device("cuda")) or "h100-sxm"


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
