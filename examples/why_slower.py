"""Why did speculation make my server slower?

Takes what you observed (target, draft, GPU, batch size, speculation length k, and the acceptance
your engine reported) and decomposes one step into its parts to show where the time goes, then
says which k — if any — pays at that batch size.

    python examples/why_slower.py
    python examples/why_slower.py --batch 16 --k 3 --mean-acceptance-length 2.2
"""

from __future__ import annotations

import argparse

import numpy as np

import sdsl
from sdsl.roofline.latency import default_params

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--target", default="llama-2-7b")
p.add_argument("--draft", default="llama-160m")
p.add_argument("--hardware", default="h100-sxm")
p.add_argument("--batch", type=int, default=192, help="running requests per step")
p.add_argument("--k", type=int, default=5, help="draft tokens proposed per step")
p.add_argument("--context", type=int, default=512)
p.add_argument("--mean-acceptance-length", type=float, default=2.0,
               help="vLLM's 'mean acceptance length' (tokens emitted per step, bonus included)")
args = p.parse_args()

target, draft, hw = sdsl.get_model(args.target), sdsl.get_model(args.draft), sdsl.get_hardware(args.hardware)
params = default_params(hw)
alpha = float(sdsl.alpha_from_vllm(args.k, mean_acceptance_length=args.mean_acceptance_length))
b, k, L = args.batch, args.k, args.context
deployment = sdsl.Deployment(hw, context=L, params=params)

plain = sdsl.step_time(target, deployment, batch=b, q=1)
verify = sdsl.step_time(target, deployment, batch=b, q=k + 1)
t_draft = float(sdsl.step_time_s(draft, deployment, batch=b, q=1))
pred = sdsl.predict(target, draft, deployment, gamma=k, alpha=alpha, batch=b)
ms = lambda s: f"{1e3 * float(s):6.2f} ms"  # noqa: E731

print(f"{target.name} + {draft.name} on {hw.name}: batch {b}, k = {k}, context {L}")
print(f"reported mean acceptance length {args.mean_acceptance_length} -> alpha = {alpha:.3f}, "
      f"tau = {float(pred.tau):.2f} tokens per step\n")
print(f"plain step (1 token/seq):          {ms(plain.total_s)}   [{np.asarray(plain.bound)}-bound]")
print(f"  speculative step = {k} draft steps: {ms(k * t_draft)}")
print(f"                   + verify {k + 1} tok/seq: {ms(verify.total_s)}   [{np.asarray(verify.bound)}-bound; "
      f"compute {ms(verify.compute_s).strip()}, memory {ms(verify.memory_s).strip()}]")
print(f"                   = {ms(pred.t_step_s)} for {float(pred.tau):.2f} tokens per sequence")
print(f"\nthroughput: plain {float(pred.plain_tokens_per_s):,.0f} tok/s, speculative {float(pred.tokens_per_s):,.0f} "
      f"tok/s -> {float(pred.speedup):.2f}x\n")

reasons = []
tokens = b * (k + 1)
if float(verify.total_s) > 1.5 * float(plain.total_s):
    reasons.append(f"verification is not free at this batch: {b} x {k + 1} = {tokens} tokens per forward makes the "
                   f"target's GEMMs compute-bound, so verifying costs {float(verify.total_s / plain.total_s):.1f}x a "
                   "plain step")
if k * t_draft > 0.25 * float(plain.total_s):
    reasons.append(f"the {k} draft steps add {1e3 * k * t_draft:.1f} ms ({k * t_draft / float(plain.total_s):.0%} of a "
                   "plain step)")
if float(pred.tau) < 1 + 0.5 * k:
    reasons.append(f"only {float(pred.tau) - 1:.2f} of {k} drafted tokens are accepted on average (alpha = {alpha:.2f})"
                   ": most of the verification work is thrown away")
if float(pred.speedup) < 1:
    print("Why it is slower:")
    for r in reasons or ["the expected tokens per step do not cover the longer step"]:
        print(f"  - {r}")
else:
    print("At these settings speculation is predicted to help; if your server is slower, look at what the model "
          "leaves out (scheduler and sampling overheads, prefill interference, a lower alpha on your traffic).")

ks = np.arange(0, 9)
sp = sdsl.predict(target, draft, deployment, gamma=ks, alpha=alpha, batch=b).speedup
best_k = int(ks[np.argmax(sp)])
print(f"\nWhat to do: at batch {b} the best k is {best_k} ({float(sp[best_k]):.2f}x"
      + (", i.e. turn speculation off" if best_k == 0 else "") + ").")
bs = np.array([1, 2, 4, 8, 16, 32, 64, 128, 192, 256, 384, 512, 768, 1024])
fits = (sdsl.memory_per_gpu(target, deployment, batch=bs) + sdsl.memory_per_gpu(draft, deployment, batch=bs)
        <= hw.mem_capacity)
bs = bs[fits]
s_b = sdsl.predict(target, draft, deployment, gamma=ks[:, None], alpha=alpha, batch=bs[None, :]).speedup.max(axis=0)
pays = bs[s_b > 1.02]
if pays.size == bs.size:
    print(f"With the right k, speculation pays (> 2%) at every batch that fits in memory (up to {int(bs.max())}): "
          "adapt k to the batch size (TurboSpec's goodput controller, sdsl.serving) instead of fixing it.")
elif pays.size:
    print(f"With the right k, speculation pays (> 2%) up to batch {int(pays.max())}; beyond that turn it off. "
          "Adapt k to the batch size (TurboSpec's goodput controller, sdsl.serving) instead of fixing it.")
else:
    print("At this acceptance rate speculation does not pay at any batch size with this draft.")
