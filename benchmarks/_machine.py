"""Shared by the benchmark scripts: single-threaded numeric libraries and a machine description."""

from __future__ import annotations

import os
import platform

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """What the numbers ran on: CPU model, core count, Python version."""
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version()}
