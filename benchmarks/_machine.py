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


def family_benchmark(description: str):
    """The common start of a reference-family timing script: ``--out`` parsed, torch on one thread, and the
    committed byte-level family loaded ({checkpoint stem: model}). Returns (args, models)."""
    import argparse

    import torch

    from sdsl.torch.checkpoint import CHECKPOINT_DIR, list_checkpoints, load_checkpoint

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", default=None, help="write the JSON here (atomically) as well as printing it")
    args = parser.parse_args()
    torch.set_num_threads(1)
    return args, {p.stem: load_checkpoint(p)[0] for p in list_checkpoints(CHECKPOINT_DIR)}


def emit(args, rows: list, clock: str) -> None:
    """Print the result JSON (machine, clock, rows) and write it atomically to ``args.out`` when given."""
    import json

    from sdsl._io import atomic_write_text

    text = json.dumps({"machine": machine(), "clock": clock, "rows": rows}, indent=1)
    if args.out:
        atomic_write_text(args.out, text + "\n")
    print(text)


def median_ms(fn, before=None, repeats: int = 15, clock=None) -> float:
    """Median milliseconds of ``fn`` over ``repeats`` calls after two untimed ones; ``before`` runs ahead of each
    call, outside the timing (a cache flush, the other model's forward); ``clock`` defaults to process CPU time."""
    import time

    import numpy as np

    clock = clock or time.process_time
    times = []
    for _ in range(repeats + 2):
        if before is not None:
            before()
        start = clock()
        fn()
        times.append(clock() - start)
    return 1e3 * float(np.median(times[2:]))
