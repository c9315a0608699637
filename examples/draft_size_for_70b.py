"""What draft size should I train for a 70B model?

Two answers, side by side: SDSL's FLOP-optimal draft size (N* = mu*M + M0, from the paper's
scaling law) and sdsl's hardware-aware optimum for a family of Llama-3-shaped drafts priced on a
GPU roofline at several batch sizes.

    python examples/draft_size_for_70b.py
    python examples/draft_size_for_70b.py --target qwen2.5-72b --hardware h200 --tp 2 --batch 1,16,64
"""

from __future__ import annotations

import argparse
import warnings

import sdsl
from sdsl.plan.families import best_drafts, draft_size_sweep, llama_family

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--target", default="llama-3.1-70b")
p.add_argument("--hardware", default="h100-sxm")
p.add_argument("--tp", type=int, default=4, help="tensor-parallel degree of the target (the draft runs on one GPU)")
p.add_argument("--batch", default="1,8,32")
p.add_argument("--tokens", type=float, default=1e12, help="pre-training tokens of draft and target")
args = p.parse_args()

target = sdsl.get_model(args.target)
m = target.total_params
n_star, s_star, a_star, g_star = sdsl.optimal_draft_size(m, args.tokens, args.tokens)
print(f"Target {target.name}: {m / 1e9:.1f}B parameters, {args.tokens:.0e} pre-training tokens.\n")
print("1) SDSL's FLOP model (cost ratio c = N/M, alpha from the acceptance plane):")
print(f"   N* = {n_star[0] / 1e6:.0f}M parameters (alpha = {a_star[0]:.3f}, gamma* = {g_star[0]:.1f}, "
      f"speedup {s_star[0]:.2f}x);")
print(f"   the paper's law mu*M + M0 = 2.71e-3 * M + 8.71e7 gives {(2.71e-3 * m + 8.71e7) / 1e6:.0f}M.\n")

batches = [int(b) for b in args.batch.split(",")]
with warnings.catch_warnings():
    warnings.simplefilter("ignore", sdsl.acceptance.plane.AlphaClippedWarning)
    sweep = draft_size_sweep(target, sdsl.Deployment(args.hardware, tp=args.tp), drafts=llama_family(target.vocab_size),
                             batch=batches, draft_tokens=args.tokens, target_tokens=args.tokens)
best = best_drafts(sweep)
shapes = {d.name: d for d in llama_family(target.vocab_size)}
print(f"2) Hardware-aware ({args.hardware}, target tp={args.tp}, draft tp=1, context 1024, best integer gamma),")
print("   over Llama-3-shaped drafts with the target's vocabulary:")
for r in best.itertuples():
    d = shapes[r.hw_draft]
    print(f"   batch {r.batch:>3}: N* = {r.hw_n_star / 1e6:5.0f}M (d_model {d.d_model}, {d.n_layer} layers), "
          f"gamma = {r.hw_gamma}, speedup {r.hw_speedup:.2f}x; the FLOP-optimal draft "
          f"({r.flop_n_star / 1e6:.0f}M) would give {r.hw_speedup_at_flop_draft:.2f}x")
lo, hi = best["hw_n_star"].min(), best["hw_n_star"].max()
print(f"\nAnswer: train a draft of about {lo / 1e6:.0f}-{hi / 1e6:.0f}M parameters"
      f" (the FLOP model says {n_star[0] / 1e6:.0f}M); a shallow draft pays off because every draft layer costs "
      "kernel launches and weight reads that the FLOP count does not see. The plane's alpha is an average over "
      "the paper's benchmarks: measure alpha on your data before committing to a training run.")
