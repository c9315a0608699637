"""The cost of switching models inside a speculative step: the draft re-reads what the target evicted.

docs/model.md §3.7. A speculative step runs the target's verification forward and then, next step, the
draft's first forward. Step times (§3.3) are calibrated on forwards run back to back, whose weights and
KV cache stay in the core's caches between calls; η_m·bandwidth is that warm rate. Between two draft
steps, though, the target streams its weights (megabytes, more than the caches hold), so the draft's first
forward of each step finds its own weights and KV cache evicted and reads them from DRAM:

    t_switch = (W_draft + b · L · kv_bytes_per_token) · (ρ − 1) / (η_m · bandwidth)

where ρ = warm-cache bandwidth / DRAM bandwidth of one core (:func:`dram_ratio`, from a read-bandwidth
sweep, ``profiles/bandwidth-cpu.csv``). The target pays nothing: the draft's working set is small next to
the caches, and the target's own weights were not cache-resident to begin with or survive the draft.

Measured on the 2-core AMD EPYC VM (1 MiB L2 per core, 32 MiB L3; ``benchmarks/bench_model_switch.py``,
median of 15, one thread, 20 (target, draft, batch) pairs of the reference family; VALIDATION.md,
"Reference speculative decoder"): a draft forward right after a target forward costs a median 0.37 ms
more than back to back (byte-d64 0.27 ms, byte-wide 0.44 ms, byte-d128 0.63 ms); this term prices a
median 0.36 ms, with a median error of −31% per pair (it misses a fixed part, visible for the 0.4 MB
byte-d64). A target forward right after a draft forward costs what it costs back to back (median +0.08 ms).
"""

from __future__ import annotations

import numpy as np

from sdsl.roofline.deployment import Deployment
from sdsl.errors import InvalidInputError

__all__ = ["dram_ratio", "switch_time_s"]

CACHE_SIZES = (2 * 2**20, 8 * 2**20)  # working sets (bytes) that one core re-reads from its caches
DRAM_FROM = 4 * 2**20  # smallest buffer whose cold read streams from DRAM at full rate


def dram_ratio(size_bytes, warm_gbs, cold_gbs) -> float:
    """ρ: the median warm read bandwidth of working sets in :data:`CACHE_SIZES` over the median cold
    (after a flush) read bandwidth of working sets from :data:`DRAM_FROM` up, from a bandwidth sweep."""
    size, warm, cold = (np.asarray(a, dtype=float) for a in (size_bytes, warm_gbs, cold_gbs))
    in_cache = (size >= CACHE_SIZES[0]) & (size <= CACHE_SIZES[1])
    from_dram = size >= DRAM_FROM
    if not in_cache.any() or not from_dram.any():
        raise InvalidInputError("The bandwidth sweep needs sizes from 2 to 8 MiB and from 4 MiB up.")
    if np.any(warm <= 0) or np.any(cold <= 0):
        raise InvalidInputError("Bandwidths must be positive.")
    return float(np.median(warm[in_cache]) / np.median(cold[from_dram]))


def switch_time_s(draft, deployment, *, batch=1, context=None, ratio: float) -> np.ndarray:
    """Seconds the draft's first forward of a step adds by re-reading its weights and the KV cache of
    ``batch`` sequences of ``context`` tokens (default the deployment's) from DRAM (module docstring)."""
    if not np.isfinite(ratio) or ratio < 1:
        raise InvalidInputError(f"The DRAM/cache bandwidth ratio must be >= 1; got {ratio}.")
    dep = Deployment.of(deployment)
    b = np.asarray(batch, dtype=float)
    L = np.asarray(dep.context if context is None else context, dtype=float)
    if np.any(b <= 0) or np.any(L < 0):
        raise InvalidInputError("batch must be positive and context non-negative.")
    nbytes = draft.weight_bytes(dep.dtype) + b * L * draft.kv_bytes_per_token(dep.dtype)
    return nbytes * (ratio - 1.0) / (dep.params.eta_memory * dep.hardware.mem_bandwidth)
