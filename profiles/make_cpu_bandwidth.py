"""One core's read bandwidth against working-set size, warm and cold (a few seconds).

    flock /work/wt/core1.lock taskset -c 1 .venv/bin/python profiles/make_cpu_bandwidth.py

Sums an fp32 buffer of each size with one torch thread (wall clock, ``time.perf_counter``):
``warm`` is the median of repeated sums of the same buffer (it stays in whatever cache holds it);
``cold`` the median of sums each right after summing a 128 MiB buffer (the caches hold the flush, so
the buffer streams from DRAM). Their plateaus give ``sdsl.roofline.model_switch.dram_ratio``: how much slower
bytes stream from DRAM than from the cache, the factor a model's forward pays on bytes another model
evicted (VALIDATION.md, "Reference speculative decoder", switching cost).

Writes profiles/bandwidth-cpu.csv (columns size_bytes, warm_gbs, cold_gbs; GB/s = 1e9 B/s) and the
sidecar profiles/bandwidth-cpu.json (CPU, caches from lscpu, torch version, date, method).
"""

from __future__ import annotations

import datetime as _dt
import json
import subprocess
import time
from pathlib import Path

import numpy as np
import torch

from sdsl._io import atomic_write_text

HERE = Path(__file__).resolve().parent
OUT = HERE / "bandwidth-cpu"
SIZES_MIB = (0.25, 0.5, 1, 2, 4, 6, 8, 12, 16, 20, 24, 28, 32, 40, 48, 64)
WARM, COLD = 15, 7


def _lscpu() -> dict:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    keys = ("Model name", "L1d cache", "L2 cache", "L3 cache", "CPU(s)")
    return {k: v.strip() for k, v in (line.split(":", 1) for line in text.splitlines() if ":" in line) if k in keys}


def _median_gbs(buffer: torch.Tensor, repeats: int, before=None) -> float:
    times = []
    for _ in range(repeats + 2):
        if before is not None:
            before()
        start = time.perf_counter()
        buffer.sum()
        times.append(time.perf_counter() - start)
    return buffer.numel() * 4 / float(np.median(times[2:])) / 1e9


def main() -> None:
    torch.set_num_threads(1)
    flush = torch.ones(128 * 2**20 // 4)
    lines = ["size_bytes,warm_gbs,cold_gbs"]
    for mib in SIZES_MIB:
        buffer = torch.ones(int(mib * 2**20) // 4)
        warm, cold = _median_gbs(buffer, WARM), _median_gbs(buffer, COLD, lambda: flush.sum())
        lines.append(f"{buffer.numel() * 4},{warm:.3f},{cold:.3f}")
        print(lines[-1], flush=True)
    atomic_write_text(OUT.with_suffix(".csv"), "\n".join(lines) + "\n")
    meta = {"format": "sdsl-bandwidth-cpu", "format_version": 1, "lscpu": _lscpu(), "threads": 1,
            "torch_version": torch.__version__, "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "method": f"torch.Tensor.sum over an fp32 buffer; warm: median of {WARM} repeated sums; cold: median of "
                      f"{COLD} sums each after summing a 128 MiB buffer; time.perf_counter, 1 thread",
            "source": "profiles/make_cpu_bandwidth.py"}
    atomic_write_text(OUT.with_suffix(".json"), json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    main()
