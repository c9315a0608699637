"""Where a speculative step's time goes inside the decoding loop (issue 11): the target's and the draft's
forwards, and the loop's own bookkeeping, against the bookkeeping timed with zero-cost stand-in models.

Run (timing: the idle core, under the lock):
    flock /work/wt/core1.lock taskset -c 1 .venv/bin/python benchmarks/bench_loop_residual.py --out benchmarks/results/loop_residual.json

Per configuration (target, proposer, batch, γ): decode the 16 held-out prompts of ``sdsl validate decoder``
(64 new bytes, temperature 1) with every forward timed in place (process CPU time, one torch thread);
``rest_ms`` is the loop time per step outside the forwards. Beside it the same loop with stand-in models
that cost nothing (``standin_ms``, T_overhead of docs/model.md §3.3) or that first sum a 4 / 32 MiB buffer
per call (``standin_4mib_ms`` / ``standin_32mib_ms``, the sums excluded): the bookkeeping with its caches
evicted. Fastest of 5 stand-in runs.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import emit, family_benchmark  # noqa: E402  (also pins numeric libraries to one thread)

CONFIGS = (("byte-d192", None, 1, 0), ("byte-d192", "prompt-lookup", 1, 4), ("byte-d192", "byte-d64", 1, 4),
           ("byte-d192", "byte-wide", 8, 8))


class _Timed:
    """A model whose decoding forwards (not the 63-token prefill) add their CPU seconds to ``seconds``."""

    def __init__(self, model):
        self.model, self.seconds = model, 0.0

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __call__(self, tokens, cache=None, **kw):
        start = time.process_time()
        out = self.model(tokens, cache, **kw)
        if tokens.shape[1] < 32:
            self.seconds += time.process_time() - start
        return out


class _StandIn:
    """Zero-cost stand-in (uniform logits) that first sums ``nbytes`` of memory, timing the sum apart."""

    def __init__(self, nbytes: int):
        import torch

        from sdsl.torch.model import Shape

        self.shape = Shape(n_layer=0, d_model=1, n_head=1, n_kv_head=1, d_ff=1, vocab_size=256, head_dim=1)
        self.buffer, self.summed = (torch.ones(nbytes // 4) if nbytes else None), 0.0

    def new_cache(self, batch, capacity=None, dtype=None):
        from sdsl.torch.model import KVCache

        return KVCache(self.shape, batch, capacity or 4096)

    def __call__(self, tokens, cache):
        import torch

        if self.buffer is not None:
            start = time.process_time()
            self.buffer.sum()
            self.summed += time.process_time() - start
        cache.lengths = cache.lengths + tokens.shape[1]
        return torch.zeros(tokens.shape[0], tokens.shape[1], 256)


def _proposer(name, model):
    from sdsl.torch.decoder import DraftModel, PromptLookup

    return None if name is None else PromptLookup() if name == "prompt-lookup" else DraftModel(model)


def _standin_ms(draft, batch, gamma, prompts, nbytes) -> float:
    from sdsl.torch.decoder import generate

    best = float("inf")
    for _ in range(5):
        target, drafter = _StandIn(nbytes), _StandIn(nbytes)
        r = generate(target, prompts[:batch], 64, _proposer(draft, drafter), gamma, 1.0, seed=0, clock="cpu")
        best = min(best, (r.decode_s - target.summed - drafter.summed) / r.steps)
    return 1e3 * best


def main() -> None:
    import torch

    from sdsl.validation.decoder.validation import _prompts
    from sdsl.torch.decoder import generate

    args, models = family_benchmark(__doc__.splitlines()[0])
    prompts = _prompts(16, 64)
    rows = []
    with torch.no_grad():
        for t, d, b, g in CONFIGS:
            target = _Timed(models[t])
            drafter = _Timed(models[d]) if d in models else None
            decode = steps = 0.0
            for i in range(0, 16, b):
                r = generate(target, prompts[i:i + b], 64, _proposer(d, drafter), g, 1.0, seed=i, clock="cpu")
                decode, steps = decode + r.decode_s, steps + r.steps
            fwd_t, fwd_d = target.seconds, drafter.seconds if drafter else 0.0
            rows.append({"target": t, "draft": d or "none", "batch": b, "gamma": g, "steps": steps,
                         "step_ms": 1e3 * decode / steps, "rest_ms": 1e3 * (decode - fwd_t - fwd_d) / steps, "target_forward_ms": 1e3 * fwd_t / steps,
                         "draft_forward_ms": 1e3 * fwd_d / steps,
                         "standin_ms": _standin_ms(d, b, g, prompts, 0),
                         "standin_4mib_ms": _standin_ms(d, b, g, prompts, 4 * 2**20),
                         "standin_32mib_ms": _standin_ms(d, b, g, prompts, 32 * 2**20)})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    emit(args, rows, "process CPU time, 1 torch thread")


if __name__ == "__main__":
    main()
