"""Step time of one forward pass on a roofline, with calibrated efficiencies and overheads.

docs/model.md §3.3. A forward pass of a decoder over ``batch`` sequences, ``q`` new tokens each, with
``context`` tokens already in the KV cache, is priced kernel by kernel (the roofline of Williams,
Waterman & Patterson, CACM 2009, applied per operator):

    t_op = smax_p( FLOPs_op / (η_c · peak),  bytes_op / (η_m · bandwidth) ) + t_kernel

where smax_p(x, y) = (x^p + y^p)^(1/p) is a smooth maximum (p = ∞ is the hard max). Per layer:
the four GEMMs that Vidur profiles (fused QKV ``attn_pre_proj``, ``attn_post_proj``, ``mlp_up_proj``,
``mlp_down_proj``), attention over the KV cache, and six memory-bound elementwise kernels (two norms,
RoPE, activation, two residual adds), plus a fixed per-layer cost ``t_layer``. Per model: the LM head over all b·q positions (verification
needs every position's logits), a fixed per-forward overhead ``t_step`` and, with tensor
parallelism, two all-reduces per layer (ring: 2(t−1)/t of the message over the interconnect).

Everything broadcasts over numpy arrays of batch, q and context, and over a stack of models
(:class:`ModelShapes`), so a whole search grid is one vectorised evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from sdsl._result import Result
from sdsl.core.architecture import dtype_bytes
from sdsl.core.deployment import Deployment
from sdsl.core.kernels import (FP32_FALLBACK_FRACTION, allreduce_time, allreduce_time_with, compute_peak,  # noqa: F401
                               elementwise_time, gemm_flops_bytes, gemm_waves, kernel_size_overhead, padded_tokens,
                               smooth_max)
from sdsl.core.latency_params import (DEFAULT_PARAMS, ELEMENTWISE_KINDS, LatencyParams,  # noqa: F401
                                      default_params)
from sdsl.errors import InvalidInputError

__all__ = [
    "LatencyParams",
    "DEFAULT_PARAMS",
    "default_params",
    "GEMM_OPS",
    "ModelShapes",
    "StepTime",
    "smooth_max",
    "op_time",
    "gemm_flops_bytes",
    "step_time",
    "step_time_s",
    "memory_per_gpu",
    "kv_cache_bytes_per_gpu",
    "memory_with_draft_per_gpu",
    "prefill_time_s",
    "allreduce_time",
    "compute_peak",
    "padded_tokens",
    "elementwise_time",
    "layer_elementwise_time",
    "ELEMENTWISE_KINDS",
]

GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
GEMM_KERNELS_PER_LAYER = len(GEMM_OPS) + 1  # four GEMMs and attention, each charged t_kernel
KERNELS_PER_MODEL = 3  # embedding gather, final norm, LM head




def _compute_time(flops, peak_flops, params: LatencyParams, waves=None) -> np.ndarray:
    """FLOPs/(η_c·peak), times (1 + tail_waves/W) for a tiled GEMM of W waves (:func:`gemm_waves`)."""
    t = np.asarray(flops, dtype=float) / (params.eta_compute * peak_flops)
    return t if waves is None or not params.tail_waves else t * (1.0 + params.tail_waves / waves)


def op_time(flops, bytes_moved, peak_flops, bandwidth, params: LatencyParams = DEFAULT_PARAMS, *,
            waves=None) -> np.ndarray:
    """Time (s) of one kernel on the roofline (Williams, Waterman & Patterson, CACM 2009; docs/model.md
    §3.3): smax_p(t_c, bytes/(η_m·bw)) + t_kernel + t_ks·(1 − e^(−bytes/B)), with t_c = FLOPs/(η_c·peak)
    and, for a tiled GEMM of ``waves`` W (:func:`gemm_waves`), t_c·(1 + tail_waves/W): the tail of the
    last wave (NVIDIA, Matrix Multiplication Background, "wave quantization"). ``flops`` are those of the
    padded tiles (:func:`gemm_flops_bytes` with ``m_tile``); the size overhead is
    :func:`kernel_size_overhead`."""
    t_compute = _compute_time(flops, peak_flops, params, waves)
    t_memory = np.asarray(bytes_moved, dtype=float) / (params.eta_memory * bandwidth)
    return (smooth_max(t_compute, t_memory, params.smoothness) + params.t_kernel
            + kernel_size_overhead(bytes_moved, params))


def layer_elementwise_time(shapes: "ModelShapes", tokens, dtype_bytes: int, bandwidth,
                           params: LatencyParams) -> np.ndarray:
    """Elementwise kernels of one decoder layer: ``norms_per_layer`` norms (row d, moves 2d per
    token), RoPE on the local q and k heads, the activation and two residual adds (reads 2d, writes d).
    A gated activation (reads 2·ff, writes ff) is a fused one-block-per-token kernel (kind ``act``); a
    non-gated one (GELU: reads ff, writes ff) a flat native kernel priced like the adds (kind ``add``;
    VALIDATION.md, elementwise kernels)."""
    d, qk, ff = shapes.d_model, shapes.q_width + shapes.kv_width, shapes.ff_width
    gated = np.asarray(shapes.gated) > 0
    act = np.where(gated, elementwise_time("act", tokens, ff, 3 * ff, dtype_bytes, bandwidth, params),
                   elementwise_time("add", tokens, ff, 2 * ff, dtype_bytes, bandwidth, params, row_limited=False))
    parts = (shapes.norms * elementwise_time("norm", tokens, d, 2 * d, dtype_bytes, bandwidth, params),
             elementwise_time("rope", tokens, qk, 2 * qk, dtype_bytes, bandwidth, params),
             act,
             2 * elementwise_time("add", tokens, d, 3 * d, dtype_bytes, bandwidth, params, row_limited=False))
    return sum(parts)


@dataclass(frozen=True)
class ModelShapes:
    """Per-worker shapes of one model, or of a stack of models as arrays (for vectorised search).

    Arrays are shaped ``(n_models,) + (1,) * extra_dims`` when built from several models, so they
    broadcast against batch/q/context grids laid out on the trailing axes.
    """

    names: tuple[str, ...]
    n_layer: np.ndarray
    d_model: np.ndarray
    q_width: np.ndarray  # n_head/tp · head_dim
    kv_width: np.ndarray  # ceil(n_kv_head/tp) · head_dim
    ff_width: np.ndarray  # d_ff/tp
    norms: np.ndarray  # norms per decoder layer
    gated: np.ndarray  # 1.0 for a gated (SwiGLU) MLP, else 0.0
    gemm_in: dict = field(repr=False)
    gemm_out: dict = field(repr=False)
    lm_in: np.ndarray = field(repr=False)
    lm_out: np.ndarray = field(repr=False)
    tp: int = 1

    @property
    def kv_elements(self) -> np.ndarray:
        """KV-cache elements one token adds to one layer on one GPU: K and V of its ceil(n_kv_head/tp) heads."""
        return 2.0 * self.kv_width

    @classmethod
    def of(cls, models, tp: int = 1, extra_dims: int = 0) -> "ModelShapes":
        """Shapes of a ModelSpec (scalars) or a sequence of ModelSpecs (stacked on axis 0)."""
        single = not isinstance(models, Sequence)
        specs = [models] if single else list(models)
        if not specs:
            raise InvalidInputError("Need at least one model.")
        tp = int(tp)
        if tp < 1:
            raise InvalidInputError(f"Tensor-parallel degree must be >= 1; got {tp}.")
        for s in specs:
            if s.n_head % tp:
                raise InvalidInputError(f"{s.name} has {s.n_head} attention heads, not divisible by tp={tp}.")

        def col(values):
            a = np.asarray(values, dtype=float)
            return a[0] if single else a.reshape((-1,) + (1,) * extra_dims)

        layers = [s.linear_layers(tp) for s in specs]
        return cls(
            names=tuple(s.name for s in specs),
            n_layer=col([s.n_layer for s in specs]),
            d_model=col([s.d_model for s in specs]),
            q_width=col([s.n_head // tp * s.head_dim for s in specs]),
            kv_width=col([-(-s.n_kv_head // tp) * s.head_dim for s in specs]),
            ff_width=col([s.d_ff / tp for s in specs]),
            norms=col([s.norms_per_layer for s in specs]),
            gated=col([float(s.gated_mlp) for s in specs]),
            gemm_in={op: col([ly[op][0] for ly in layers]) for op in GEMM_OPS},
            gemm_out={op: col([ly[op][1] for ly in layers]) for op in GEMM_OPS},
            lm_in=col([ly["lm_head"][0] for ly in layers]),
            lm_out=col([ly["lm_head"][1] for ly in layers]),
            tp=tp,
        )


@dataclass(frozen=True)
class StepTime(Result):
    """Step time of one forward pass and its parts (seconds; arrays broadcast over the inputs).

    compute_s / memory_s: sums over kernels of their pure compute and pure memory times;
    overhead_s: kernel launches and the fixed per-step cost; allreduce_s: tensor-parallel
    communication; total_s: the priced step. ``bound`` names what dominates: "memory", "compute",
    "overhead" or "communication".
    """

    total_s: np.ndarray
    compute_s: np.ndarray
    memory_s: np.ndarray
    overhead_s: np.ndarray
    allreduce_s: np.ndarray
    bound: np.ndarray

    def to_dict(self) -> dict:
        """Every part as a Python number or (nested) list."""
        return {k: np.asarray(getattr(self, k)).tolist() for k in
                ("total_s", "compute_s", "memory_s", "overhead_s", "allreduce_s", "bound")}

    def report(self) -> str:
        """One line per configuration: total, compute, memory, overhead and all-reduce times (ms)."""
        keys = ("total_s", "compute_s", "memory_s", "overhead_s", "allreduce_s")
        shape = np.broadcast_shapes(*(np.shape(getattr(self, k)) for k in keys + ("bound",)))
        cols = {k: np.ravel(np.broadcast_to(np.asarray(getattr(self, k)), shape)) for k in keys + ("bound",)}
        lines = [f"{'total ms':>9} {'compute ms':>11} {'memory ms':>10} {'overhead ms':>12} {'allreduce ms':>13}  bound"]
        for i in range(cols["total_s"].size):
            ms = [1e3 * cols[k][i] for k in keys]
            lines.append(f"{ms[0]:9.3f} {ms[1]:11.3f} {ms[2]:10.3f} {ms[3]:12.3f} {ms[4]:13.3f}  {cols['bound'][i]}")
        return "\n".join(lines)

    def plot(self, ax=None):
        """Grouped bars of the parts of the step time per configuration (:mod:`sdsl.plots.results`)."""
        from sdsl.plots.results import plot_step_breakdown

        return plot_step_breakdown({"total": self.total_s, "compute": self.compute_s, "memory": self.memory_s,
                                    "overhead": self.overhead_s, "all-reduce": self.allreduce_s}, ax=ax)


def _check_grid(batch, q, context):
    b = np.asarray(batch, dtype=float)
    qq = np.asarray(q, dtype=float)
    L = np.asarray(context, dtype=float)
    if np.any(~np.isfinite(b)) or np.any(b <= 0):
        raise InvalidInputError("batch must be a positive number of sequences.")
    if np.any(~np.isfinite(qq)) or np.any(qq < 1):
        raise InvalidInputError("q (new tokens per sequence) must be >= 1.")
    if np.any(~np.isfinite(L)) or np.any(L < 0):
        raise InvalidInputError("context must be a non-negative number of tokens.")
    return b, qq, L


def _roofline_sums(ops, params: LatencyParams, peak: float, bw: float):
    """Sums of compute times, memory times, roofline times split by what bounds each op, and the GEMMs'
    size overheads (:func:`kernel_size_overhead`); ``ops`` are (FLOPs, bytes, waves or None, is a GEMM)."""
    compute = memory = roof_c = roof_m = size = 0.0
    for flops, nbytes, waves, is_gemm in ops:
        c = _compute_time(flops, peak, params, waves)
        m = nbytes / (params.eta_memory * bw)
        roof = smooth_max(c, m, params.smoothness)
        compute, memory = compute + c, memory + m
        roof_c = roof_c + np.where(c > m, roof, 0.0)
        roof_m = roof_m + np.where(c > m, 0.0, roof)
        if is_gemm:
            size = size + kernel_size_overhead(nbytes, params)
    return compute, memory, roof_c, roof_m, size


def _gemm(tokens, n_in, n_out, dt: int, params: LatencyParams, sm_count):
    """(FLOPs, bytes, waves, True) of one GEMM on row tiles (:func:`gemm_flops_bytes`, :func:`gemm_waves`)."""
    flops, nbytes = gemm_flops_bytes(tokens, n_in, n_out, dt, params.m_tile, params.m_tile_min)
    return flops, nbytes, gemm_waves(tokens, n_out, params.m_tile, sm_count), True


def _cached_kv_elements(shapes: ModelShapes, b, L) -> np.ndarray:
    """KV-cache elements ``b`` sequences of ``L`` cached tokens hold in one layer on one GPU: what that layer's
    attention reads per step and what :func:`memory_per_gpu` counts (one formula for both)."""
    return b * L * shapes.kv_elements


def _layer_ops(shapes: ModelShapes, b, q, L, dt: int, params: LatencyParams, sm_count):
    """(FLOPs, bytes, waves, is a GEMM) of one layer's four GEMMs and its attention over the KV cache."""
    tokens = b * q
    ops = [_gemm(tokens, shapes.gemm_in[op], shapes.gemm_out[op], dt, params, sm_count) for op in GEMM_OPS]
    attn_flops = 4.0 * shapes.q_width * tokens * (L + q / 2.0)
    attn_bytes = dt * (_cached_kv_elements(shapes, b, L) + tokens * shapes.kv_elements + tokens * 2.0 * shapes.q_width)
    return ops + [(attn_flops, attn_bytes, None, False)]


def _allreduce(shapes: ModelShapes, hardware, tokens, dt: int, params: LatencyParams):
    """Two all-reduces per layer of the tokens' hidden states under tensor parallelism."""
    if shapes.tp == 1:
        return 0.0 * tokens
    ic = getattr(hardware, "interconnect_bandwidth", None)
    if not ic:
        raise InvalidInputError(f"{hardware.name} has no interconnect bandwidth in the catalog; tp > 1 needs one.")
    one = allreduce_time_with(tokens * shapes.d_model * dt, shapes.tp, ic, params)
    return 2.0 * shapes.n_layer * one


def _price(shapes: ModelShapes, hardware, b, q, L, dtype: str, params: LatencyParams, *, logit_tokens=None):
    """Core pricing; returns the StepTime fields as arrays. ``logit_tokens``: positions whose logits
    the LM head computes (default every one of the b·q; a prefill needs only each prompt's last)."""
    dt = dtype_bytes(dtype)
    peak, bw = compute_peak(hardware, dtype), hardware.mem_bandwidth
    tokens = b * q
    n = shapes.n_layer
    sms = getattr(hardware, "sm_count", None)
    c_layer, m_layer, rc_layer, rm_layer, size_layer = _roofline_sums(_layer_ops(shapes, b, q, L, dt, params, sms),
                                                                      params, peak, bw)
    lm = _gemm(tokens if logit_tokens is None else logit_tokens, shapes.lm_in, shapes.lm_out, dt, params, sms)
    c_lm, m_lm, rc_lm, rm_lm, size_lm = _roofline_sums([lm], params, peak, bw)
    t_ew = params.t_kernel if params.t_elementwise is None else params.t_elementwise
    ew_launches = n * (shapes.norms + 4.0) * t_ew  # norms, RoPE, activation, two adds
    elementwise = n * layer_elementwise_time(shapes, tokens, dt, bw, params) - ew_launches
    launches = (n * GEMM_KERNELS_PER_LAYER + KERNELS_PER_MODEL) * params.t_kernel + ew_launches
    overhead = launches + n * (params.t_layer + size_layer) + size_lm + params.t_step
    allreduce = _allreduce(shapes, hardware, tokens, dt, params)
    bound_compute = n * rc_layer + rc_lm
    bound_memory = n * rm_layer + rm_lm + elementwise
    total = bound_compute + bound_memory + overhead + allreduce
    parts = np.stack(np.broadcast_arrays(bound_memory, bound_compute, overhead, allreduce))
    bound = np.array(["memory", "compute", "overhead", "communication"])[np.argmax(parts, axis=0)]
    compute = n * c_layer + c_lm
    memory = n * m_layer + m_lm + elementwise
    return total, compute, memory, overhead + 0.0 * total, allreduce + 0.0 * total, bound


def _spec(model):
    """A ModelSpec from a ModelSpec or a catalog name / config.json path."""
    if isinstance(model, str):
        from sdsl.core.architecture import get_model

        return get_model(model)
    return model


def _shapes(model, tp) -> ModelShapes:
    if isinstance(model, ModelShapes):
        return model
    if isinstance(model, str):
        from sdsl.core.architecture import get_model

        model = get_model(model)
    return ModelShapes.of(model, tp)


def step_time(model, deployment, *, batch=1, q=1, context=None) -> StepTime:
    """Price one forward pass (docs/model.md §3.3); see the module docstring for the model.

    ``model`` is a ModelSpec, a catalog name, or :class:`ModelShapes` (a stack of models for
    vectorised search); ``deployment`` a :class:`~sdsl.core.deployment.Deployment` or anything
    :meth:`Deployment.of <sdsl.core.deployment.Deployment.of>` accepts (a hardware name, file or
    Hardware), whose hardware, ``tp``, ``dtype`` and latency ``params`` price the pass. ``batch``,
    ``q`` and ``context`` broadcast; ``context=None`` is the deployment's context (tokens already in
    each sequence's KV cache; use the mean for mixed lengths: KV reads and attention FLOPs are
    linear in it).
    """
    dep = Deployment.of(deployment)
    b, qq, L = _check_grid(batch, q, dep.context if context is None else context)
    total, compute, memory, overhead, allreduce, bound = _price(_shapes(model, dep.tp), dep.hardware, b, qq, L,
                                                                dep.dtype, dep.params)
    return StepTime(total, compute, memory, overhead, allreduce, bound)


def kv_cache_bytes_per_gpu(model, deployment, *, batch=1, context=None) -> np.ndarray:
    """KV-cache bytes ``batch`` sequences of ``context`` cached tokens (default: the deployment's) hold on each
    of the deployment's ``tp`` GPUs: every layer's K and V of the ceil(n_kv_head/tp) heads a GPU keeps (KV heads
    fewer than tp are replicated, as vLLM does), in the deployment's dtype. The same elements the step time's
    attention reads (:func:`_cached_kv_elements`), so memory and latency agree on the KV cache."""
    dep = Deployment.of(deployment)
    b = np.asarray(batch, dtype=float)
    L = np.asarray(dep.context if context is None else context, dtype=float)
    shapes = _shapes(model, dep.tp)
    return shapes.n_layer * _cached_kv_elements(shapes, b, L) * dtype_bytes(dep.dtype)


def memory_per_gpu(model, deployment, *, batch=1, context=None) -> np.ndarray:
    """Bytes each of the deployment's ``tp`` GPUs holds: its share of the weights (total / tp) plus the KV
    cache of ``batch`` sequences of ``context`` tokens on that GPU (:func:`kv_cache_bytes_per_gpu`; default
    context: the deployment's; activations and workspace excluded). Compare with ``Hardware.mem_capacity``
    (bytes; the datasheet's GB read as GiB)."""
    dep = Deployment.of(deployment)
    model = _spec(model)
    return model.weight_bytes(dep.dtype) / dep.tp + kv_cache_bytes_per_gpu(model, dep, batch=batch, context=context)


def memory_with_draft_per_gpu(target, draft, deployment, *, batch=1, context=None) -> np.ndarray:
    """Bytes the most loaded GPU holds when ``draft`` (a ModelSpec, or None) runs beside ``target``:
    the target's share (:func:`memory_per_gpu`) plus the draft's weights and KV cache over the
    deployment's ``draft_tp`` GPUs (:meth:`Deployment.for_draft`), which are among the target's."""
    dep = Deployment.of(deployment)
    own = memory_per_gpu(target, dep, batch=batch, context=context)
    return own if draft is None else own + memory_per_gpu(draft, dep.for_draft(), batch=batch, context=context)


def prefill_time_s(model, deployment, *, batch=1, prompt=1, context=0.0) -> np.ndarray:
    """Seconds of one prefill forward: ``batch`` prompts of ``prompt`` new tokens after ``context``
    cached ones (chunked prefill), priced like :func:`step_time` except that the LM head computes
    only each prompt's last position (the one whose next token is sampled), not all b·prompt."""
    dep = Deployment.of(deployment)
    b, qq, L = _check_grid(batch, prompt, context)
    return _price(_shapes(model, dep.tp), dep.hardware, b, qq, L, dep.dtype, dep.params, logit_tokens=b)[0]


def step_time_s(model, deployment, *, batch=1, q=1, context=None) -> np.ndarray:
    """Total step time only (seconds); same arguments as :func:`step_time`."""
    return step_time(model, deployment, batch=batch, q=q, context=context).total_s
