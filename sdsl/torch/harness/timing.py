"""Timing one callable: warm-up, then CUDA events (GPU) or synchronised wall clock (CPU); median."""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

__all__ = ["time_callable", "synchronize"]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_callable(fn: Callable[[], object], device: torch.device, *, warmup: int = 3, repeats: int = 10,
                  min_time_s: float = 0.0) -> tuple[float, float, float, int]:
    """``(median, min, std, repeats)`` of ``fn``'s run time in seconds.

    On CUDA each repeat is bracketed by a pair of CUDA events (elapsed_time is GPU time between
    them, launch included, host jitter excluded); on CPU by ``time.perf_counter`` around the call.
    ``min_time_s`` keeps repeating (up to 10× ``repeats``) until that much time was measured, which
    steadies microsecond-scale CPU timings.
    """
    for _ in range(max(warmup, 0)):
        fn()
    synchronize(device)
    times: list[float] = []
    total = 0.0
    cap = max(repeats, 1) * 10
    if device.type == "cuda":
        while len(times) < repeats or (total < min_time_s and len(times) < cap):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            t = start.elapsed_time(end) * 1e-3
            times.append(t)
            total += t
    else:
        while len(times) < repeats or (total < min_time_s and len(times) < cap):
            t0 = time.perf_counter()
            fn()
            t = time.perf_counter() - t0
            times.append(t)
            total += t
    std = statistics.pstdev(times) if len(times) > 1 else 0.0
    return statistics.median(times), min(times), std, len(times)
