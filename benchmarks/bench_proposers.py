"""Ranking all proposers × k ≤ 8 × batch 1–256 × 32 acceptance levels (goal: < 0.1 s) on a dense target and on
mixture-of-experts targets (Qwen3-30B-A3B; DeepSeek-V3 with MLA, fp8, TP 8 on H200), SGLang trees, and the
published validations (`sdsl validate published`, `sdsl validate moe`). Prints JSON; single-threaded numpy."""

from __future__ import annotations

import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np


def _timed(fn, repeats: int) -> tuple:
    """(last result, best seconds, median seconds) of ``repeats`` calls after one warm-up call."""
    fn()
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return result, min(times), float(np.median(times))


def _rank(target, proposers, dep, repeats: int) -> tuple:
    from sdsl.plan.ranking import rank_proposers

    args = dict(acceptance=np.linspace(0.3, 0.95, 32), gammas=range(0, 9), batches=range(1, 257))

    def once():
        r = rank_proposers(target, proposers, dep, **args)
        r.best()
        r.break_even_batch()
        return r

    return _timed(once, repeats)


def run(repeats: int = 5) -> dict:
    from sdsl.acceptance import Acceptance
    from sdsl.catalog.models import get_model
    from sdsl.roofline.deployment import Deployment
    from sdsl.plan.ranking import rank_trees

    target = get_model("llama-3.1-8b")
    dep = Deployment("h100-sxm", context=1024)
    r, best, median = _rank(target, ["draft:llama-3.2-1b", "eagle", "eagle3", "medusa", "mtp", "ngram"], dep, repeats)
    out = {"rank_configs": int(np.prod(r.tokens_per_s.shape)), "rank_best_s": best, "rank_median_s": median}
    moe = get_model("qwen3-30b-a3b")
    r, best, median = _rank(moe, ["draft:qwen3-0.6b", "eagle", "eagle3", "medusa", "mtp", "ngram"], dep, repeats)
    out.update({"moe_rank_configs": int(np.prod(r.tokens_per_s.shape)), "moe_rank_best_s": best,
                "moe_rank_median_s": median})
    v3 = get_model("deepseek-v3")
    h200 = Deployment("h200", tp=8, dtype="bf16", weight_dtype="fp8", context=1024)
    r, best, median = _rank(v3, ["eagle", "eagle3", "medusa", "mtp", "ngram"], h200, repeats)
    out.update({"mla_moe_rank_configs": int(np.prod(r.tokens_per_s.shape)), "mla_moe_rank_best_s": best,
                "mla_moe_rank_median_s": median})
    acc = Acceptance.from_accepted_length(3.1, 4)
    heads = ["eagle", "eagle3", "mtp"]
    tr, _, median = _timed(lambda: rank_trees(target, heads, dep, acceptance=acc, batches=range(1, 257)), repeats)
    out["trees_configs"] = int(np.prod(tr.tokens_per_s.shape))
    out["trees_median_s"] = median
    tr, _, median = _timed(lambda: rank_trees(moe, heads, dep, acceptance=acc, batches=range(1, 257)), repeats)
    out["moe_trees_configs"] = int(np.prod(tr.tokens_per_s.shape))
    out["moe_trees_median_s"] = median
    from sdsl.validation.moe_validation import validate_moe
    from sdsl.validation.published_validation import validate_published

    out["validate_published_median_s"] = _timed(validate_published, repeats)[2]
    out["validate_moe_median_s"] = _timed(validate_moe, repeats)[2]
    return out


if __name__ == "__main__":
    print(json.dumps(run(7), indent=2))
