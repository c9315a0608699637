"""Core benchmarks (issue 2): one million (draft, γ, batch, α) configurations; CLI start-up time.

Run: .venv/bin/python benchmarks/bench_core.py   (prints JSON; results recorded in BENCHMARKS.md)
Single-threaded numpy (OMP/OPENBLAS/MKL threads = 1) so the number is per core.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import machine  # noqa: E402  (also pins numeric libraries to one thread)



def bench_million_configs(repeats: int = 5) -> dict:
    from sdsl import Deployment, evaluate_grid, get_hardware, get_model
    from sdsl.catalog.models import list_models

    target = get_model("llama-3.1-70b")
    drafts = [m for m in list_models() if m.total_params < 0.25 * target.total_params][:40]
    gammas = range(0, 16)  # 16
    batches = list(range(1, 65))  # 64
    import numpy as np

    alphas = np.linspace(0.3, 0.95, 1_000_000 // (len(drafts) * 16 * 64) + 1)
    hw = get_hardware("h100-sxm")
    times, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        grid = evaluate_grid(target, Deployment(hw, tp=4, context=1024), drafts=drafts, gammas=gammas, batch=batches,
                             alpha=alphas)
        best = np.asarray(grid.prediction.tokens_per_s).max()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    n = int(np.prod(grid.shape))
    return {"configs": n, "drafts": len(drafts), "median_s": statistics.median(times), "min_s": min(times),
            "median_cpu_s": statistics.median(cpu), "best_tokens_per_s": float(best)}


def bench_cli_startup(repeats: int = 7) -> dict:
    sdsl = os.path.join(os.path.dirname(sys.executable), "sdsl")
    out = {}
    for name, args in {"optimize": [sdsl, "optimize"], "help": [sdsl, "--help"]}.items():
        times, cpu = [], []
        for _ in range(repeats):
            r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            subprocess.run(args, check=True, capture_output=True)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            times.append(time.perf_counter() - t0)
            cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        out[name] = {"median_s": statistics.median(times), "min_s": min(times), "median_cpu_s": statistics.median(cpu)}
    return out


if __name__ == "__main__":
    result = {
        "machine": machine(),
        "load_average": os.getloadavg()[0],
        "million_configs": bench_million_configs(),
        "cli_startup": bench_cli_startup(),
    }
    print(json.dumps(result, indent=2))
