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
from dataclasses import asdict, dataclass, field, fields, replace
from functools import lru_cache
from typing import Sequence

import numpy as np

from sdsl.core.architecture import dtype_bytes
from sdsl.core.kernels import (FP32_FALLBACK_FRACTION, allreduce_time, compute_peak, elementwise_time,  # noqa: F401
                               gemm_flops_bytes, padded_tokens, smooth_max)
from sdsl.errors import ConfigError, InvalidInputError

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
    "compute_peak",
    "padded_tokens",
    "elementwise_time",
    "layer_elementwise_time",
    "ELEMENTWISE_KINDS",
]

GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
GEMM_KERNELS_PER_LAYER = len(GEMM_OPS) + 1  # four GEMMs and attention, each charged t_kernel
KERNELS_PER_MODEL = 3  # embedding gather, final norm, LM head
#: Elementwise kernel kinds (Vidur: input/post_attention_layernorm, attn_rope, mlp_act, add).
ELEMENTWISE_KINDS = ("norm", "rope", "act", "add")
ELEMENTWISE_ETAS = tuple(f"eta_{k}" for k in ELEMENTWISE_KINDS)
ELEMENTWISE_ROWS = ("row_norm", "row_rope", "row_act")


@dataclass(frozen=True)
class LatencyParams:
    """What calibration fits (sdsl.fit.calibration): efficiencies and fixed overheads of the roofline.

    eta_compute, eta_memory: fractions of datasheet peak FLOP/s and bandwidth reached by kernels.
    t_kernel: fixed cost of one kernel launch (s). t_layer: fixed cost per decoder layer beyond its
    kernels (s; framework dispatch, e.g. eager PyTorch on CPU). t_step: fixed cost per forward pass (s).
    smoothness: p of the smooth maximum between compute and memory time (inf = hard max).
    m_tile: GEMM rows (tokens) per tile of the GPU's GEMM kernels; compute is priced on the token
    count padded to whole tiles (:func:`padded_tokens`); 0 = no padding (CPU, uncalibrated).
    t_elementwise: fixed cost (s) of one elementwise kernel (norm, RoPE, activation, residual add);
    ``None`` prices them like GEMMs (``t_kernel`` + bytes/(η_m·bw)). When set, ``eta_norm``,
    ``eta_rope``, ``eta_act``, ``eta_add`` are their bandwidth fractions and ``row_norm``,
    ``row_rope``, ``row_act`` the time per element of one token's row (s) of the one-CTA-per-token
    kernels (:func:`elementwise_time`).
    allreduce_latency: fixed latency (s) of one all-reduce; allreduce_step_latency: latency (s) of
    each of a ring's 2(t−1) steps; eta_interconnect: achieved over the per-direction link bandwidth in
    the ring formula (up to 2: NVSwitch in-switch reduction, NVLS, sends each byte once, not 2(t−1)/t times).
    """

    eta_compute: float = 0.7
    eta_memory: float = 0.8
    t_kernel: float = 4e-6
    t_layer: float = 0.0
    t_step: float = 0.0
    smoothness: float = math.inf
    m_tile: int = 0
    t_elementwise: float | None = None
    eta_norm: float = 1.0
    eta_rope: float = 1.0
    eta_act: float = 1.0
    eta_add: float = 1.0
    row_norm: float = 0.0
    row_rope: float = 0.0
    row_act: float = 0.0
    allreduce_latency: float = 1.0e-5
    allreduce_step_latency: float = 0.0
    eta_interconnect: float = 0.7
    source: str = "uncalibrated defaults (assumed, not measured)"

    def __post_init__(self) -> None:
        if not (0 < self.eta_interconnect <= 2):  # > 1: in-switch reduction (NVLS) beats the ring, up to 2x
            raise InvalidInputError(f"LatencyParams.eta_interconnect must lie in (0, 2]; got {self.eta_interconnect!r}.")
        for name in ("eta_compute", "eta_memory") + ELEMENTWISE_ETAS:
            v = getattr(self, name)
            if not (0 < v <= 1):
                raise InvalidInputError(f"LatencyParams.{name} must lie in (0, 1]; got {v!r}.")
        for name in ("t_kernel", "t_layer", "t_step", "allreduce_latency", "allreduce_step_latency",
                     "t_elementwise") + ELEMENTWISE_ROWS:
            v = getattr(self, name)
            if v is None and name == "t_elementwise":
                continue
            if not (v >= 0 and math.isfinite(v)):
                raise InvalidInputError(f"LatencyParams.{name} must be a finite non-negative time; got {v!r}.")
        if not (isinstance(self.m_tile, int) and self.m_tile >= 0):
            raise InvalidInputError(f"LatencyParams.m_tile must be a non-negative integer; got {self.m_tile!r}.")
        if not (self.smoothness >= 1):
            raise InvalidInputError(f"LatencyParams.smoothness must be >= 1 (inf = hard max); got {self.smoothness!r}.")

    def replace(self, **changes) -> "LatencyParams":
        return replace(self, **changes)

    def to_dict(self) -> dict:
        d = asdict(self)
        if math.isinf(d["smoothness"]):
            d["smoothness"] = "inf"
        return d

    @classmethod
    def from_dict(cls, data: dict) -> "LatencyParams":
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"Unknown latency parameter(s): {', '.join(sorted(unknown))}.")
        d = dict(data)
        if "smoothness" in d:
            d["smoothness"] = float(d["smoothness"])
        if "m_tile" in d:
            d["m_tile"] = int(d["m_tile"])
        try:
            return cls(**d)
        except TypeError as exc:
            raise ConfigError(f"Bad latency parameters: {exc}.") from None


DEFAULT_PARAMS = LatencyParams()


@lru_cache(maxsize=None)
def _packaged_params(name: str) -> LatencyParams | None:
    from importlib import resources

    from sdsl._io import load_json

    path = resources.files("sdsl") / "data" / "latency" / f"{name}.json"
    return LatencyParams.from_dict(load_json(path)["params"]) if path.is_file() else None


def default_params(hardware) -> LatencyParams:
    """Latency parameters shipped for ``hardware``: its own calibration when sdsl ships one
    (sdsl/data/latency/<name>.json, fitted by ``sdsl calibrate`` to real measurements — H100-SXM and
    A100-80GB from Vidur's operator timings, CPU from this project's harness); for another GPU, the
    H100-SXM fit transferred (its ``source`` says so); otherwise :data:`DEFAULT_PARAMS`."""
    name = getattr(hardware, "name", str(hardware)).lower()
    own = _packaged_params(name)
    if own is not None:
        return own
    if getattr(hardware, "kind", "gpu") == "gpu":
        h100 = _packaged_params("h100-sxm")
        if h100 is not None:
            return h100.replace(source=f"H100-SXM calibration transferred to {name} (not measured on it): {h100.source}")
    return DEFAULT_PARAMS


def op_time(flops, bytes_moved, peak_flops, bandwidth, params: LatencyParams = DEFAULT_PARAMS) -> np.ndarray:
    """Time (s) of one kernel on the roofline (Williams, Waterman & Patterson, CACM 2009; DESIGN.md
    §3.3): smax_p(FLOPs/(η_c·peak), bytes/(η_m·bw)) + t_kernel. ``flops`` are those of the padded
    tiles (:func:`gemm_flops_bytes` with ``m_tile``)."""
    t_compute = np.asarray(flops, dtype=float) / (params.eta_compute * peak_flops)
    t_memory = np.asarray(bytes_moved, dtype=float) / (params.eta_memory * bandwidth)
    return smooth_max(t_compute, t_memory, params.smoothness) + params.t_kernel


def layer_elementwise_time(shapes: "ModelShapes", tokens, dtype_bytes: int, bandwidth,
                           params: LatencyParams) -> np.ndarray:
    """Elementwise kernels of one decoder layer: ``norms_per_layer`` norms (row d, moves 2d per
    token), RoPE on the local q and k heads, the activation (gated: reads 2·ff, writes ff) and two
    residual adds (reads 2d, writes d)."""
    d, qk, ff = shapes.d_model, shapes.q_width + shapes.kv_width, shapes.ff_width
    parts = (shapes.norms * elementwise_time("norm", tokens, d, 2 * d, dtype_bytes, bandwidth, params),
             elementwise_time("rope", tokens, qk, 2 * qk, dtype_bytes, bandwidth, params),
             elementwise_time("act", tokens, ff, (2 + shapes.gated) * ff, dtype_bytes, bandwidth, params,
                              row_limited=shapes.gated > 0),
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
class StepTime:
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
    """Sum of compute times, memory times, and roofline times split by what bounds each op."""
    compute = memory = roof_c = roof_m = 0.0
    for flops, nbytes in ops:
        c = flops / (params.eta_compute * peak)
        m = nbytes / (params.eta_memory * bw)
        roof = smooth_max(c, m, params.smoothness)
        compute, memory = compute + c, memory + m
        roof_c = roof_c + np.where(c > m, roof, 0.0)
        roof_m = roof_m + np.where(c > m, 0.0, roof)
    return compute, memory, roof_c, roof_m


def _layer_ops(shapes: ModelShapes, b, q, L, dt: int, m_tile: int):
    """(FLOPs, bytes) of one layer's four GEMMs and its attention over the KV cache."""
    tokens = b * q
    ops = [gemm_flops_bytes(tokens, shapes.gemm_in[op], shapes.gemm_out[op], dt, m_tile) for op in GEMM_OPS]
    attn_flops = 4.0 * shapes.q_width * tokens * (L + q / 2.0)
    attn_bytes = dt * (b * L * 2.0 * shapes.kv_width + tokens * 2.0 * shapes.kv_width + tokens * 2.0 * shapes.q_width)
    return ops + [(attn_flops, attn_bytes)]


def _allreduce(shapes: ModelShapes, hardware, tokens, dt: int, params: LatencyParams):
    """Two all-reduces per layer of the tokens' hidden states under tensor parallelism."""
    if shapes.tp == 1:
        return 0.0 * tokens
    ic = getattr(hardware, "interconnect_bandwidth", None)
    if not ic:
        raise InvalidInputError(f"{hardware.name} has no interconnect bandwidth in the catalog; tp > 1 needs one.")
    one = allreduce_time(tokens * shapes.d_model * dt, shapes.tp, ic, params.allreduce_latency,
                         params.eta_interconnect, params.allreduce_step_latency)
    return 2.0 * shapes.n_layer * one


def _price(shapes: ModelShapes, hardware, b, q, L, dtype: str, params: LatencyParams, *, logit_tokens=None):
    """Core pricing; returns the StepTime fields as arrays. ``logit_tokens``: positions whose logits
    the LM head computes (default every one of the b·q; a prefill needs only each prompt's last)."""
    dt = dtype_bytes(dtype)
    peak, bw = compute_peak(hardware, dtype), hardware.mem_bandwidth
    tokens = b * q
    n = shapes.n_layer
    c_layer, m_layer, rc_layer, rm_layer = _roofline_sums(_layer_ops(shapes, b, q, L, dt, params.m_tile), params, peak, bw)
    lm = gemm_flops_bytes(tokens if logit_tokens is None else logit_tokens, shapes.lm_in, shapes.lm_out, dt, params.m_tile)
    c_lm, m_lm, rc_lm, rm_lm = _roofline_sums([lm], params, peak, bw)
    t_ew = params.t_kernel if params.t_elementwise is None else params.t_elementwise
    ew_launches = n * (shapes.norms + 4.0) * t_ew  # norms, RoPE, activation, two adds
    elementwise = n * layer_elementwise_time(shapes, tokens, dt, bw, params) - ew_launches
    launches = (n * GEMM_KERNELS_PER_LAYER + KERNELS_PER_MODEL) * params.t_kernel + ew_launches
    overhead = launches + n * params.t_layer + params.t_step
    allreduce = _allreduce(shapes, hardware, tokens, dt, params)
    bound_compute = n * rc_layer + rc_lm
    bound_memory = n * rm_layer + rm_lm + elementwise
    total = bound_compute + bound_memory + overhead + allreduce
    parts = np.stack(np.broadcast_arrays(bound_memory, bound_compute, overhead, allreduce))
    bound = np.array(["memory", "compute", "overhead", "communication"])[np.argmax(parts, axis=0)]
    compute = n * c_layer + c_lm
    memory = n * m_layer + m_lm + elementwise
    return total, compute, memory, overhead + 0.0 * total, allreduce + 0.0 * total, bound


def _shapes(model, tp) -> ModelShapes:
    if isinstance(model, ModelShapes):
        return model
    if isinstance(model, str):
        from sdsl.core.architecture import get_model

        model = get_model(model)
    return ModelShapes.of(model, tp)


def _hardware(hardware):
    if isinstance(hardware, str):
        from sdsl.core.hardware import get_hardware

        return get_hardware(hardware)
    return hardware


def step_time(model, hardware, batch=1, q=1, context=1024, dtype: str = "bf16", tp: int = 1,
              params: LatencyParams | None = None) -> StepTime:
    """Price one forward pass (docs/model.md §3.3); see the module docstring for the model.

    ``model`` is a ModelSpec, a catalog name, or :class:`ModelShapes` (a stack of models for
    vectorised search); ``hardware`` a Hardware or a catalog name. ``batch``, ``q`` and ``context``
    broadcast. ``context`` is the number of tokens already in each sequence's KV cache (use the mean
    for mixed lengths: KV reads and attention FLOPs are linear in it). ``params=None`` uses
    :func:`default_params` of the hardware (its shipped calibration when there is one).
    """
    b, qq, L = _check_grid(batch, q, context)
    hardware = _hardware(hardware)
    params = params or default_params(hardware)
    total, compute, memory, overhead, allreduce, bound = _price(_shapes(model, tp), hardware, b, qq, L, dtype, params)
    return StepTime(total, compute, memory, overhead, allreduce, bound)


def memory_per_gpu(model, batch=1, context=1024, dtype: str = "bf16", tp: int = 1) -> np.ndarray:
    """Bytes each of ``tp`` GPUs holds: its share of the weights plus the KV cache of ``batch``
    sequences of ``context`` tokens (activations and workspace excluded)."""
    b = np.asarray(batch, dtype=float)
    L = np.asarray(context, dtype=float)
    return (model.weight_bytes(dtype) + b * L * model.kv_bytes_per_token(dtype)) / tp


def step_time_s(model, hardware, batch=1, q=1, context=1024, dtype: str = "bf16", tp: int = 1,
                params: LatencyParams | None = None) -> np.ndarray:
    """Total step time only (seconds); same arguments as :func:`step_time`."""
    return step_time(model, hardware, batch, q, context, dtype, tp, params).total_s
