"""Is speculative decoding worth it on my GPU at batch 32?

Prices plain decoding and every catalog draft (× γ = 0…8) for the target on the GPU at batch 1 and
at your batch, with α either measured (--alpha, e.g. from vLLM's metrics) or predicted by SDSL's
acceptance plane, and prints a verdict.

    python examples/speculation_on_my_gpu.py --target llama-2-7b --hardware h100-sxm --batch 32
    python examples/speculation_on_my_gpu.py --target llama-3.1-8b --hardware a10g --alpha 0.7
"""

from __future__ import annotations

import argparse
import warnings

import sdsl
from sdsl.roofline.latency import default_params

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--target", default="llama-2-7b")
p.add_argument("--hardware", default="h100-sxm")
p.add_argument("--batch", type=int, default=32)
p.add_argument("--context", type=int, default=1024, help="tokens already in each sequence's KV cache")
p.add_argument("--alpha", type=float, default=None, help="measured acceptance rate (default: SDSL's plane)")
args = p.parse_args()

target, hw = sdsl.get_model(args.target), sdsl.get_hardware(args.hardware)
params = default_params(hw)
deployment = sdsl.Deployment(hw, context=args.context, params=params)
drafts = sdsl.candidate_drafts(target)
if not drafts:
    raise SystemExit(f"No catalog draft shares {target.name}'s tokenizer and is at most 1/4 its size.")
mem = float(sdsl.memory_per_gpu(target, deployment, batch=args.batch))
if mem > hw.mem_capacity:
    print(f"warning: {target.name} at batch {args.batch} x {args.context} tokens needs {mem / 1e9:.0f} GB, "
          f"more than the {hw.mem_capacity / 1e9:.0f} GB of one {hw.name}; the numbers below assume it fits.")

with warnings.catch_warnings():
    warnings.simplefilter("ignore", sdsl.acceptance.plane.AlphaClippedWarning)
    grid = sdsl.evaluate_grid(target, deployment, drafts=drafts, gammas=range(0, 9), batch=sorted({1, args.batch}),
                              alpha=None if args.alpha is None else [args.alpha])
rows = grid.best()
alpha_note = f"measured alpha = {args.alpha}" if args.alpha is not None else "alpha from SDSL's plane"
print(f"{target.name} on {hw.name}, context {args.context}, {alpha_note}; latency params: {params.source}\n")
print(f"{'batch':>5}  {'draft':<14}{'alpha':>6}{'gamma':>6}{'plain tok/s':>13}{'SD tok/s':>11}{'speedup':>9}  verify is")
for r in rows:
    print(f"{r['batch']:>5}  {r['draft']:<14}{r['alpha']:>6.2f}{r['gamma']:>6}{r['plain_tokens_per_s']:>13,.0f}"
          f"{r['tokens_per_s']:>11,.0f}{r['speedup']:>8.2f}x  {r['bound']}-bound")

best = max((r for r in rows if r["batch"] == args.batch), key=lambda r: r["speedup"])
print()
if best["gamma"] == 0 or best["speedup"] < 1.05:
    print(f"Verdict: no. At batch {args.batch} the best option is plain decoding (or within 5% of it): the "
          f"verification of extra tokens costs about as much as it saves.")
else:
    print(f"Verdict: yes. At batch {args.batch}, {best['draft']} with gamma = {best['gamma']} is predicted to give "
          f"{best['speedup']:.2f}x ({best['tokens_per_s']:,.0f} vs {best['plain_tokens_per_s']:,.0f} tokens/s).")
    if args.alpha is None:
        print("Measure alpha on your own prompts (vLLM 'mean acceptance length', sdsl.alpha_from_vllm) and rerun "
              "with --alpha: the plane's alpha is a population average (R^2 = 0.60).")
