"""Token-tree benchmarks (issue 9): Sequoia's dynamic program and the SGLang triple grid.

Run: .venv/bin/python benchmarks/bench_trees.py   (prints JSON; results recorded in BENCHMARKS.md)
Single-threaded numpy (OMP/OPENBLAS/MKL threads = 1) so the number is per core.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import machine  # noqa: E402  (also pins numeric libraries to one thread)


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    from sdsl.acceptance import Acceptance
    from sdsl.plan.tree_search import best_tree, sglang_grid
    from sdsl.acceptance.trees import rank_acceptance

    p = Acceptance.from_accepted_length(3.1, 4).conditional_at(64)
    P = rank_acceptance(p, 8)  # 64 depths x 8 ranks
    out = {"machine": machine()}
    for nodes, depth in ((63, 16), (63, 64)):
        best = best_tree(P, nodes, depth)
        out[f"best_tree_n{nodes + 1}_depth{depth}_s"] = _median_time(lambda: best_tree(P, nodes, depth), 7)
        out[f"best_tree_n{nodes + 1}_depth{depth}_tau"] = best.tau
    out["sglang_grid_steps1-8_topk1-8_tokens<=64_s"] = _median_time(
        lambda: sglang_grid(P, range(1, 9), range(1, 9), 64), 7)
    out["sglang_grid_triples"] = int(sglang_grid(P, range(1, 9), range(1, 9), 64).tau.size)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
