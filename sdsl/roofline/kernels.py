"""Kernel-level pricing of the latency model: the roofline pieces every operator shares.

The smooth maximum, GEMM FLOPs/bytes on row tiles, the elementwise kernels, the ring all-reduce
and the compute peak of a dtype (DESIGN.md §3.3; Williams, Waterman & Patterson, CACM 2009).
:mod:`sdsl.roofline.latency` assembles them into a forward pass; :mod:`sdsl.fit` fits their parameters.
Everything broadcasts over numpy arrays.
"""

from __future__ import annotations

import math
import numpy as np

__all__ = ["smooth_max", "padded_tokens", "gemm_flops_bytes", "gemm_waves", "min_row_tile", "kernel_size_overhead",
           "elementwise_time", "allreduce_time", "allreduce_time_with", "compute_peak", "format_terms", "format_tile",
           "FP32_FALLBACK_FRACTION", "N_TILE"]

#: Output columns per GEMM tile (CUTLASS/cuBLAS threadblock tiles are 128 or 256 wide; the tail term
#: :func:`gemm_waves` enters is nearly independent of this choice, VALIDATION.md).
N_TILE = 128
#: Smallest GEMM row tile by architecture: Hopper's and Blackwell's warpgroup MMA computes 64 rows
#: (PTX ISA, ``wgmma.mma_async`` shapes m64nNk16); older tensor cores 16 (``mma.sync`` m16n8k16).
_MIN_ROW_TILE = {"hopper": 64, "blackwell": 64}


def smooth_max(x, y, p: float) -> np.ndarray:
    """(x^p + y^p)^(1/p) for x, y >= 0, computed as max·(1 + (min/max)^p)^(1/p); p = inf gives max."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    hi = np.maximum(x, y)
    if math.isinf(p):
        return hi
    lo = np.minimum(x, y)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(hi > 0, lo / hi, 0.0)
    return hi * (1.0 + r**p) ** (1.0 / p)


def padded_tokens(tokens, m_tile: int, m_tile_min: int = 0) -> np.ndarray:
    """Tokens (GEMM rows) a tiled GEMM kernel computes: a kernel library tiles the rows in blocks of
    ``m_tile`` and picks the smallest power-of-two tile that covers fewer rows, so ``tokens`` ≤
    ``m_tile`` round up to a power of two (at least ``m_tile_min``, the tensor-core instruction's
    rows, :func:`min_row_tile`) and more round up to whole tiles (CUTLASS/cuBLAS threadblock tiles;
    the measured step every 128 tokens is in VALIDATION.md). ``m_tile = 0``: no padding."""
    t = np.asarray(tokens, dtype=float)
    if not m_tile:
        return t
    small = np.maximum(2.0 ** np.ceil(np.log2(np.maximum(t, 1.0))), float(m_tile_min))
    return np.where(t <= m_tile, np.minimum(small, m_tile), np.ceil(t / m_tile) * m_tile)


def gemm_flops_bytes(tokens, in_features, out_features, dtype_bytes: int, m_tile: int = 0, m_tile_min: int = 0):
    """FLOPs and bytes of a dense (tokens × in) @ (in × out) GEMM: 2·T'·i·o and (i·o + T·i + T·o)·dtype,
    with T' the tokens padded to the kernel's row tiles (:func:`padded_tokens`; T' = T when ``m_tile`` = 0)."""
    t = np.asarray(tokens, dtype=float)
    i = np.asarray(in_features, dtype=float)
    o = np.asarray(out_features, dtype=float)
    return 2.0 * padded_tokens(t, m_tile, m_tile_min) * i * o, dtype_bytes * (i * o + t * (i + o))


def gemm_waves(tokens, out_features, m_tile: int, sm_count):
    """Waves of output tiles over the SMs, W = ⌈T/m_tile⌉·⌈out/N_TILE⌉ / SMs (NVIDIA's Matrix
    Multiplication Background guide, "wave quantization"): each SM computes one tile at a time, so a
    GEMM takes W waves of one tile's time plus the tail of the last, partial wave. ``None`` when the
    kernel is not tiled (``m_tile`` 0) or the hardware has no SM count."""
    if not m_tile or not sm_count:
        return None
    t = np.asarray(tokens, dtype=float)
    return np.ceil(np.maximum(t, 1.0) / m_tile) * np.ceil(np.asarray(out_features, dtype=float) / N_TILE) / sm_count


def min_row_tile(hardware) -> int:
    """Smallest GEMM row tile of ``hardware``'s tensor cores: 64 on Hopper/Blackwell (warpgroup MMA,
    PTX ``wgmma`` m64), 16 otherwise (``mma.sync`` m16n8k16); 0 for CPUs (no tiles)."""
    if getattr(hardware, "kind", "gpu") != "gpu":
        return 0
    return _MIN_ROW_TILE.get(getattr(hardware, "architecture", None) or "", 16)


def kernel_size_overhead(bytes_moved, params) -> np.ndarray:
    """Fixed cost of a GEMM beyond its launch that grows with the bytes it moves and saturates:
    t_ks·(1 − exp(−bytes/B)) (``params.t_kernel_size``, ``params.kernel_size_bytes``; 0 when t_ks = 0).
    Measured on Vidur's H100 GEMMs at one token, time − bytes/bandwidth rises from 2.7 µs at 4.2 MB to
    6.5 µs at 20–140 MB (VALIDATION.md, "GEMM kernel terms"); the mechanism is a hypothesis (a kernel
    of one partial wave drains sooner than one whose last wave follows full ones)."""
    if not params.t_kernel_size:
        return 0.0 * np.asarray(bytes_moved, dtype=float)
    return params.t_kernel_size * -np.expm1(-np.asarray(bytes_moved, dtype=float) / params.kernel_size_bytes)


def elementwise_time(kind: str, tokens, row_elements, moved_elements, dtype_bytes: int, bandwidth,
                     params, *, row_limited=True) -> np.ndarray:
    """Time (s) of one elementwise kernel (``kind`` in :data:`ELEMENTWISE_KINDS`) over ``tokens`` rows.

    Calibrated (``params.t_elementwise`` set): t_ew + max(r_kind·row, T·moved·dtype/(η_kind·bw)).
    vLLM's norm, RoPE and gated-activation kernels run one thread block per token, so with few
    tokens the kernel lasts as long as one block takes to stream its row (r_kind per element,
    ``row_elements`` per token); with many, the whole tensor streams at a fraction η_kind of the
    bandwidth (roofline, Williams et al. 2009). ``row_limited`` False (residual adds, non-gated
    activations: flat elementwise launches) drops the row term. Uncalibrated (``None``): priced as a
    memory-bound GEMM-like kernel, t_kernel + bytes/(η_m·bw). Broadcasts.
    """
    nbytes = np.asarray(tokens, dtype=float) * np.asarray(moved_elements, dtype=float) * dtype_bytes
    if params.t_elementwise is None:
        return params.t_kernel + nbytes / (params.eta_memory * bandwidth)
    row = getattr(params, f"row_{kind}", 0.0) * np.asarray(row_elements, dtype=float) * np.asarray(row_limited)
    return params.t_elementwise + np.maximum(row, nbytes / (getattr(params, f"eta_{kind}") * bandwidth))


def allreduce_time(message_bytes, n_gpu, interconnect_bandwidth, latency_s, eta_interconnect,
                   step_latency_s=0.0, *, ll_latency_s=0.0, ll_efficiency=0.0, floor_s=0.0,
                   floor_smoothness=4.0) -> np.ndarray:
    """One all-reduce of ``message_bytes`` over ``n_gpu`` GPUs (s); ``bw`` is the PER-DIRECTION link
    bandwidth of one GPU (the catalog's ``interconnect_gbs``). Broadcasts.

    NCCL's own cost model (``src/graph/tuning.cc``, ``ncclTopoGetAlgoTime``): each (algorithm,
    protocol) costs latency + bytes/bandwidth, a ring's latency is base + 2(t−1)·per-step latency,
    its algorithm bandwidth is bus bandwidth · t/(2(t−1)) (nccl-tests' busbw definition,
    doc/PERFORMANCE.md; the ring of Patarasuk & Yuan, JPDC 2009), and NCCL runs the fastest one:

    - Simple protocol: latency + 2(t−1)·step_latency + 2(t−1)/t · bytes/(η·bw);
    - low-latency protocol, LL/LL128 (when ``ll_efficiency`` > 0): ll_latency + 2(t−1)/t · bytes/(η_LL·bw),
      a lower latency and a fraction of the bandwidth (NCCL's tuning prices ring LL at 1/4–1/2 and LL128
      at 0.92 of the bus bandwidth; LL's per-step latency, 0.47 µs on NVLink, is below Vidur's 1 µs
      resolution and not modelled);
    - t = smax_p(floor, min(Simple, LL)) with p = ``floor_smoothness``: a measured all-reduce never
      beats the time the profiler waits for the last rank to arrive (Vidur times each call alone:
      the same size measures 7 µs or 40 µs in one run, VALIDATION.md). ``floor_s`` = 0: no floor.
    With ``ll_efficiency`` = ``floor_s`` = 0 this is the plain ring of earlier calibrations.
    """
    t = np.asarray(n_gpu, dtype=float)
    wire = 2.0 * (t - 1.0) / t * np.asarray(message_bytes, dtype=float) / interconnect_bandwidth
    proto = latency_s + 2.0 * (t - 1.0) * step_latency_s + wire / eta_interconnect
    if ll_efficiency > 0:
        proto = np.minimum(proto, ll_latency_s + wire / ll_efficiency)
    if floor_s > 0:
        proto = smooth_max(floor_s, proto, floor_smoothness)
    return proto


def allreduce_time_with(message_bytes, n_gpu, interconnect_bandwidth, params) -> np.ndarray:
    """:func:`allreduce_time` with every all-reduce term taken from ``params`` (a LatencyParams)."""
    return allreduce_time(message_bytes, n_gpu, interconnect_bandwidth, params.allreduce_latency,
                          params.eta_interconnect, params.allreduce_step_latency,
                          ll_latency_s=params.allreduce_ll_latency, ll_efficiency=params.allreduce_ll_efficiency,
                          floor_s=params.allreduce_floor, floor_smoothness=params.allreduce_floor_smoothness)


def format_terms(params, native: str | None) -> tuple[float, float, float]:
    """(compute fraction, weight-read fraction, extra fixed seconds) of a GEMM whose weights run on tensor-core
    kind ``native`` ("fp8", "fp4"; anything else: 1, 1, 0), relative to a bf16 GEMM's η_c, η_m and fixed cost
    (``params.fp8_*``, ``params.fp4_*``). Measured on NVIDIA's operator tables: an H200 fp8 GEMM of 4096 x 4096
    at one token takes 10.5 us against bf16's 12.6 us (0.83x), not the half its bytes say
    (VALIDATION.md, "Measured kernels")."""
    if native in ("fp8", "fp4"):
        return (getattr(params, f"{native}_compute", 1.0), getattr(params, f"{native}_memory", 1.0),
                getattr(params, f"{native}_t_extra", 0.0))
    return 1.0, 1.0, 0.0


def format_tile(params, native: str | None) -> int:
    """GEMM rows per tile of the kernels a format ``native`` ("fp8", "fp4") runs on: ``params.fp8_m_tile`` /
    ``fp4_m_tile`` where fitted (vLLM's CUTLASS fp8 kernels on H100 and H200 price best on 256-row tiles: the
    operator tables time them +30-34% slower one row past a tile edge; VALIDATION.md "GEMM row tiles on the operator
    tables"), else the bf16 GEMMs' ``m_tile``."""
    own = getattr(params, f"{native}_m_tile", 0) if native in ("fp8", "fp4") else 0
    return int(own or params.m_tile)


#: fp32 without tensor cores as a fraction of the dense bf16 tensor peak, for chips whose catalog
#: entry has no fp32 figure: A100 19.5/312 (datasheet), H100-SXM 67/989 ≈ 1/15. CPUs: bf16 dot
#: products run at twice the fp32 FMA rate (the catalog's derivation), hence 1/2.
FP32_FALLBACK_FRACTION = {"gpu": 1.0 / 16.0, "cpu": 0.5}


def compute_peak(hardware, dtype: str) -> float:
    """Peak FLOP/s that prices ``dtype``: fp32 runs on the fp32 (non-tensor-core) units — the
    catalog's ``peak_flops_fp32`` where the entry has one, else :data:`FP32_FALLBACK_FRACTION` of the
    bf16 peak — not TF32 tensor cores (PyTorch's default for fp32 matmuls); others per
    :meth:`Hardware.peak_flops_for`."""
    if str(dtype).lower() in ("fp32", "float32"):
        own = getattr(hardware, "peak_flops_fp32", None)
        return own if own else hardware.peak_flops * FP32_FALLBACK_FRACTION.get(getattr(hardware, "kind", "gpu"), 0.5)
    return hardware.peak_flops_for(dtype)
