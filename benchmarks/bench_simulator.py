"""Serving-simulator benchmark (issues 5 and 12): simulated requests per second, wall and CPU time.

Run: .venv/bin/python benchmarks/bench_simulator.py   (prints JSON; results recorded in BENCHMARKS.md)
Workload: the first 10,000 requests of the Azure conversation trace (sdsl/data/traces), time-scaled
to each QPS, Llama-2-7B + Llama-160M on H100-SXM (roofline step times), α ~ Beta(mean 0.7, κ = 20),
simulator defaults (adaptive policies: online α̂ from the 0.7 prior, online step-time fit).
Goal (issue 12): every policy at >= 10,000 simulated requests per CPU-second (one core).
Single-threaded numpy (OMP/OPENBLAS threads = 1). CPU time (process time) is reported beside wall
time because the development machine's two cores are shared with other jobs; the load average at
the start of each run is recorded.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import machine  # noqa: E402  (also pins numeric libraries to one thread)


def bench(n_requests: int = 10_000, qps=(1.0, 4.0, 12.0), policies=("none", "k=3", "adaptive", "per-request"),
          repeats: int = 3) -> list[dict]:
    from sdsl.serving import AcceptanceDist, ServingSystem, simulate, trace_workload

    t0 = time.perf_counter()
    system = ServingSystem.from_catalog("llama-2-7b", "llama-160m", "h100-sxm", max_context=4096, max_prompt=4096)
    build_s = time.perf_counter() - t0
    rows = []
    for r in qps:
        w = trace_workload("conv", r, n_requests, AcceptanceDist(0.7), seed=0, max_context=4096)
        for p in policies:
            wall, cpu = [], []
            for _ in range(repeats):
                t0, c0 = time.perf_counter(), time.process_time()
                res = simulate(w, system, p, seed=0, qps=r)
                wall.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
            st = res.stats
            rows.append({"qps": r, "policy": p, "requests": n_requests, "wall_s": statistics.median(wall),
                         "cpu_s": statistics.median(cpu), "requests_per_s": n_requests / statistics.median(wall),
                         "requests_per_cpu_s": n_requests / statistics.median(cpu),
                         "load_average_1min": os.getloadavg()[0],
                         "decode_steps": st["decode_steps"], "mean_batch": round(st["mean_batch"], 2),
                         "table_build_s": build_s})
            print(json.dumps(rows[-1]), file=sys.stderr)
    return rows


if __name__ == "__main__":
    out = {"machine": machine(),
           "simulator": bench()}
    print(json.dumps(out, indent=2))
