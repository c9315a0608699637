"""Ranking all proposers × k ≤ 8 × batch 1–256 × 32 acceptance levels (issue 9 goal: < 0.1 s), and
`sdsl validate published` (every published row priced). Prints JSON; single-threaded numpy."""

from __future__ import annotations

import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np


def run(repeats: int = 5) -> dict:
    from sdsl.core.architecture import get_model
    from sdsl.core.deployment import Deployment
    from sdsl.core.ranking import rank_proposers

    target = get_model("llama-3.1-8b")
    dep = Deployment("h100-sxm", context=1024)
    proposers = ["draft:llama-3.2-1b", "eagle", "eagle3", "medusa", "mtp", "ngram"]
    alphas = np.linspace(0.3, 0.95, 32)
    args = dict(acceptance=alphas, gammas=range(0, 9), batches=range(1, 257))
    rank_proposers(target, proposers, dep, **args)  # warm caches and imports
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = rank_proposers(target, proposers, dep, **args)
        r.best()
        r.break_even_batch()
        times.append(time.perf_counter() - t0)
    out = {"rank_configs": int(np.prod(r.tokens_per_s.shape)), "rank_best_s": min(times),
           "rank_median_s": float(np.median(times))}
    from sdsl.core.acceptance import Acceptance
    from sdsl.core.ranking import rank_trees

    acc = Acceptance.from_accepted_length(3.1, 4)
    heads = ["eagle", "eagle3", "mtp"]
    rank_trees(target, heads, dep, acceptance=acc, batches=range(1, 257))
    t = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        tr = rank_trees(target, heads, dep, acceptance=acc, batches=range(1, 257))
        t.append(time.perf_counter() - t0)
    out["trees_configs"] = int(np.prod(tr.tokens_per_s.shape))
    out["trees_median_s"] = float(np.median(t))
    from sdsl.experiments.published_validation import validate_published

    validate_published()
    t = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        validate_published()
        t.append(time.perf_counter() - t0)
    out["validate_published_median_s"] = float(np.median(t))
    return out


if __name__ == "__main__":
    print(json.dumps(run(7), indent=2))
