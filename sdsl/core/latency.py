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

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from sdsl._result import Result
from sdsl.core.architecture import dtype_bytes
from sdsl.core.deployment import Deployment
from sdsl.core.latency_params import DEFAULT_PARAMS, LatencyParams, default_params
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
    "allreduce_time",
]

GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
ELEMENTWISE_KERNELS_PER_LAYER = 6  # input norm, post-attention norm, RoPE, activation, 2 residual adds
KERNELS_PER_LAYER = len(GEMM_OPS) + 1 + ELEMENTWISE_KERNELS_PER_LAYER
KERNELS_PER_MODEL = 3  # embedding gather, final norm, LM head


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


def op_time(flops, bytes_moved, peak_flops, bandwidth, params: LatencyParams = DEFAULT_PARAMS) -> np.ndarray:
    """Time (s) of one kernel on the roofline (Williams, Waterman & Patterson, CACM 2009; docs/model.md
    §3.3): smax_p(FLOPs/(η_c·peak), bytes/(η_m·bw)) + t_kernel."""
    t_compute = np.asarray(flops, dtype=float) / (params.eta_compute * peak_flops)
    t_memory = np.asarray(bytes_moved, dtype=float) / (params.eta_memory * bandwidth)
    return smooth_max(t_compute, t_memory, params.smoothness) + params.t_kernel


def gemm_flops_bytes(tokens, in_features, out_features, dtype_bytes: int):
    """FLOPs and bytes of a dense (tokens × in) @ (in × out) GEMM: 2·T·i·o and (i·o + T·i + T·o)·dtype."""
    t = np.asarray(tokens, dtype=float)
    i = np.asarray(in_features, dtype=float)
    o = np.asarray(out_features, dtype=float)
    return 2.0 * t * i * o, dtype_bytes * (i * o + t * (i + o))


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
    gemm_in: dict = field(repr=False)
    gemm_out: dict = field(repr=False)
    lm_in: np.ndarray = field(repr=False)
    lm_out: np.ndarray = field(repr=False)
    tp: int = 1

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


def allreduce_time(message_bytes, n_gpu, interconnect_bandwidth, latency_s, eta_interconnect) -> np.ndarray:
    """One ring all-reduce: latency + 2(t−1)/t · message / (η · interconnect bandwidth)
    (Patarasuk & Yuan, JPDC 2009; docs/model.md §3.3's tensor-parallel term). Broadcasts."""
    t = np.asarray(n_gpu, dtype=float)
    return latency_s + 2.0 * (t - 1.0) / t * np.asarray(message_bytes, dtype=float) / (eta_interconnect * interconnect_bandwidth)


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


def _price(shapes: ModelShapes, hardware, b, q, L, dtype: str, params: LatencyParams):
    """Core pricing; returns the StepTime fields as arrays."""
    dt = dtype_bytes(dtype)
    peak = hardware.peak_flops_for(dtype)
    bw = hardware.mem_bandwidth
    t_c = lambda f: f / (params.eta_compute * peak)  # noqa: E731
    t_m = lambda by: by / (params.eta_memory * bw)  # noqa: E731
    p = params.smoothness
    tokens = b * q

    layer_ops = []
    for op in GEMM_OPS:
        layer_ops.append(gemm_flops_bytes(tokens, shapes.gemm_in[op], shapes.gemm_out[op], dt))
    attn_flops = 4.0 * shapes.q_width * tokens * (L + q / 2.0)
    attn_bytes = dt * (b * L * 2.0 * shapes.kv_width + tokens * 2.0 * shapes.kv_width + tokens * 2.0 * shapes.q_width)
    layer_ops.append((attn_flops, attn_bytes))
    elementwise_bytes = dt * tokens * (10.0 * shapes.d_model + 2.0 * (shapes.q_width + shapes.kv_width) + 3.0 * shapes.ff_width)
    layer_ops.append((0.0, elementwise_bytes))

    layer_compute = layer_memory = layer_roof_c = layer_roof_m = 0.0
    for flops, nbytes in layer_ops:
        c, m = t_c(flops), t_m(nbytes)
        roof = smooth_max(c, m, p)
        layer_compute = layer_compute + c
        layer_memory = layer_memory + m
        layer_roof_c = layer_roof_c + np.where(c > m, roof, 0.0)
        layer_roof_m = layer_roof_m + np.where(c > m, 0.0, roof)

    lm_flops, lm_bytes = gemm_flops_bytes(tokens, shapes.lm_in, shapes.lm_out, dt)
    lm_c, lm_m = t_c(lm_flops), t_m(lm_bytes)
    lm_roof = smooth_max(lm_c, lm_m, p)
    n = shapes.n_layer
    compute = n * layer_compute + lm_c
    memory = n * layer_memory + lm_m
    bound_compute = n * layer_roof_c + np.where(lm_c > lm_m, lm_roof, 0.0)
    bound_memory = n * layer_roof_m + np.where(lm_c > lm_m, 0.0, lm_roof)
    overhead = (n * KERNELS_PER_LAYER + KERNELS_PER_MODEL) * params.t_kernel + n * params.t_layer + params.t_step

    allreduce = 0.0 * tokens
    if shapes.tp > 1:
        ic = getattr(hardware, "interconnect_bandwidth", None)
        if not ic:
            raise InvalidInputError(f"{hardware.name} has no interconnect bandwidth in the catalog; tp > 1 needs one.")
        one = allreduce_time(tokens * shapes.d_model * dt, shapes.tp, ic, params.allreduce_latency,
                             params.eta_interconnect)
        allreduce = 2.0 * n * one

    total = bound_compute + bound_memory + overhead + allreduce
    parts = np.stack(np.broadcast_arrays(bound_memory, bound_compute, overhead, allreduce))
    labels = np.array(["memory", "compute", "overhead", "communication"])
    bound = labels[np.argmax(parts, axis=0)]
    return total, compute, memory, overhead + 0.0 * total, allreduce + 0.0 * total, bound


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


def memory_per_gpu(model, deployment, *, batch=1, context=None) -> np.ndarray:
    """Bytes each of the deployment's ``tp`` GPUs holds: its share of the weights plus the KV cache
    of ``batch`` sequences of ``context`` tokens (default: the deployment's; activations and
    workspace excluded)."""
    dep = Deployment.of(deployment)
    b = np.asarray(batch, dtype=float)
    L = np.asarray(dep.context if context is None else context, dtype=float)
    return (model.weight_bytes(dep.dtype) + b * L * model.kv_bytes_per_token(dep.dtype)) / dep.tp


def step_time_s(model, deployment, *, batch=1, q=1, context=None) -> np.ndarray:
    """Total step time only (seconds); same arguments as :func:`step_time`."""
    return step_time(model, deployment, batch=batch, q=q, context=context).total_s
