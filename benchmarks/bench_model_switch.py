"""The cost of switching models in a speculative step (issue 11): one forward timed back to back, right
after the other model's forward, and right after a 64 MiB flush of the caches.

Run (timing: the idle core, under the lock):
    flock /work/wt/core1.lock taskset -c 1 .venv/bin/python benchmarks/bench_model_switch.py --out benchmarks/results/model_switch.json

For every (target, draft, batch) of the reference family: the target's verification forward (q = 5, after
96 cached tokens) and the draft's forward (q = 1), each the median of 15 process-CPU-time runs after two
warm-ups (one torch thread), back to back / right after the other model's forward / right after summing a
64 MiB buffer. ``sdsl.roofline.model_switch`` prices the draft's extra cost after the target; the test
tests/unit/test_model_switch.py holds the prediction against these rows.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import emit, family_benchmark, median_ms  # noqa: E402  (also pins numeric libraries to one thread)

CONTEXT, Q_VERIFY, REPEATS = 96, 5, 15
TARGETS = ("byte-d192", "byte-d288")
DRAFTS = ("byte-d64", "byte-d96", "byte-d128", "byte-wide", "byte-deep")


def main() -> None:
    import torch


    args, models = family_benchmark(__doc__.splitlines()[0])
    flush = torch.ones(64 * 2**20 // 4)

    def forward(model, cache, batch, q):
        cache.set_lengths(CONTEXT)
        model(torch.zeros(batch, q, dtype=torch.long), cache)

    rows = []
    with torch.no_grad():
        for t in TARGETS:
            for d in DRAFTS:
                for b in (1, 8):
                    caches = {}
                    for name in (t, d):
                        caches[name] = models[name].new_cache(b, CONTEXT + Q_VERIFY + 1)
                        models[name](torch.zeros(b, CONTEXT, dtype=torch.long), caches[name])
                    tgt = lambda: forward(models[t], caches[t], b, Q_VERIFY)  # noqa: E731
                    drf = lambda: forward(models[d], caches[d], b, 1)  # noqa: E731
                    rows.append({"target": t, "draft": d, "batch": b, "q_target": Q_VERIFY, "context": CONTEXT,
                                 "target_ms": median_ms(tgt, repeats=REPEATS), "target_after_draft_ms": median_ms(tgt, drf, repeats=REPEATS),
                                 "target_after_flush_ms": median_ms(tgt, flush.sum, repeats=REPEATS),
                                 "draft_ms": median_ms(drf, repeats=REPEATS), "draft_after_target_ms": median_ms(drf, tgt, repeats=REPEATS),
                                 "draft_after_flush_ms": median_ms(drf, flush.sum, repeats=REPEATS)})
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    emit(args, rows, "process CPU time, median of 15 after 2 warm-ups, 1 torch thread")


if __name__ == "__main__":
    main()
