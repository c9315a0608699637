"""Figure timings: every registered figure computed and rendered to PNG (what `make figures` does).

Run: .venv/bin/python benchmarks/bench_figures.py   (prints JSON; results recorded in BENCHMARKS.md)
Each figure once, in a fresh process's order of the registry; wall and process CPU time per figure, the
load average before and after (other jobs on the machine inflate wall time, less so CPU time).
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import machine  # noqa: E402  (also pins numeric libraries to one thread)


def bench_figures() -> dict:
    from sdsl.validation.figures import FIGURES, render_png

    rows = {}
    for entry in FIGURES:
        w0, c0 = time.perf_counter(), time.process_time()
        render_png(entry)
        rows[entry.name] = {"wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0}
    total = {k: sum(r[k] for r in rows.values()) for k in ("wall_s", "cpu_s")}
    return {"figures": rows, "total": total}


if __name__ == "__main__":
    load_before = os.getloadavg()
    figures = bench_figures()
    print(json.dumps({"machine": machine(), "load_average_before_after": [load_before[0], os.getloadavg()[0]],
                      **figures}, indent=2))
