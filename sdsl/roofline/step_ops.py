"""The kernels of one priced layer: each op's FLOPs, bytes, waves and tensor-core peak, summed on the roofline
(docs/model.md §3.3; Williams, Waterman & Patterson, CACM 2009), for dense layers, MLA, local attention and
MoE layers (router, grouped GEMMs over the distinct experts, shared experts; docs/model.md §3.8), and the
communication of a layer under tensor and expert parallelism.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sdsl.roofline.deployment import Deployment
from sdsl.catalog.dtypes import dtype_bytes
from sdsl.roofline.kernels import (allreduce_time_with, elementwise_time, format_terms, format_tile, gemm_flops_bytes,
                                   gemm_waves, kernel_size_overhead, padded_tokens, smooth_max)
from sdsl.roofline.attention import measured_attention, measured_share
from sdsl.roofline.latency_params import DEFAULT_PARAMS, LatencyParams
from sdsl.catalog.moe import (TRITON_ROW_TILES, FusedMoEFit, expected_expert_rows, fused_moe_layer_time,
                              fused_moe_provenance, locality_tokens, row_tile_of, select_fused_moe_fit)
from sdsl.roofline.shapes import GEMM_OPS, MLA_OPS, ModelShapes, local_context
from sdsl.roofline.weight_formats import gemm_peak, get_weight_format
from sdsl.errors import InvalidInputError

__all__ = ["op_time", "layer_elementwise_time", "all_to_all_time", "roofline_sums", "precision_of", "gemm_op",
           "layer_ops", "communication_time", "moe_elementwise", "cached_kv_elements", "expert_rows", "Precision",
           "fused_moe_fit_of", "fused_moe_time", "fused_moe_parts", "format_gemms_per_layer", "expert_provenance",
           "attention_op"]

#: MLA's extra GEMM-like kernels per layer: q_b, and the absorbed W_UK and W_UV batched GEMMs.
MLA_EXTRA_GEMM_KERNELS = 3
#: Elementwise kernels of an MoE layer beyond its GEMMs (vLLM fused_moe: topk_softmax, moe_align_block_size,
#: the activation between the two grouped GEMMs, moe_sum), plus the shared experts' activation when it has some.
MOE_ELEMENTWISE_KERNELS = 4


def _compute_time(flops, peak_flops, params: LatencyParams, waves=None) -> np.ndarray:
    """FLOPs/(η_c·peak), times (1 + tail_waves/W) for a tiled GEMM of W waves (:func:`gemm_waves`)."""
    t = np.asarray(flops, dtype=float) / (params.eta_compute * peak_flops)
    if waves is None or not params.tail_waves:
        return t
    if np.min(waves) > 0:
        return t * (1.0 + params.tail_waves / waves)
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero-width GEMM (a model without that op) has 0 waves
        return np.where(waves > 0, t * (1.0 + params.tail_waves / waves), t)


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


def layer_elementwise_time(shapes: ModelShapes, tokens, dtype_bytes: int, bandwidth,
                           params: LatencyParams) -> np.ndarray:
    """Elementwise kernels of one decoder layer: ``norms_per_layer`` norms (row d, moves 2d per
    token), RoPE on the local q and k heads, the activation and two residual adds (reads 2d, writes d).
    A gated activation (reads 2·ff, writes ff) is a fused one-block-per-token kernel (kind ``act``); a
    non-gated one (GELU: reads ff, writes ff) a flat native kernel priced like the adds (kind ``add``;
    VALIDATION.md, elementwise kernels)."""
    d, qk, ff = shapes.d_model, shapes.rope_width, shapes.ff_width
    act = activation_time(shapes, tokens, ff, dtype_bytes, bandwidth, params)
    if shapes.has_moe:  # MoE layers run their experts' activation instead (moe_elementwise)
        act = act * (shapes.n_dense / shapes.n_layer)
    parts = (shapes.norms * elementwise_time("norm", tokens, d, 2 * d, dtype_bytes, bandwidth, params),
             elementwise_time("rope", tokens, qk, 2 * qk, dtype_bytes, bandwidth, params),
             act,
             2 * elementwise_time("add", tokens, d, 3 * d, dtype_bytes, bandwidth, params, row_limited=False))
    return sum(parts)


def activation_time(shapes, rows, width, dtype_bytes: int, bandwidth, params) -> np.ndarray:
    """The MLP activation over ``rows`` rows of ``width``: fused gated kernel or a flat GELU."""
    gated = np.asarray(shapes.gated) > 0
    return np.where(gated, elementwise_time("act", rows, width, 3 * width, dtype_bytes, bandwidth, params),
                    elementwise_time("add", rows, width, 2 * width, dtype_bytes, bandwidth, params, row_limited=False))


class _Op(NamedTuple):
    """One kernel of a layer: FLOPs, bytes, waves (None: not tiled), whether it is a GEMM, the share of layers
    that run it (None: every layer), its tensor-core peak (None: the deployment's), whether it reads routed
    experts' weights (priced into the "expert-weights" bound), whether it is attention over the KV cache and, for
    attention, its (sequence, KV head) blocks and the model's MLA share (:func:`measured_share`)."""

    flops: object
    nbytes: object
    waves: object
    is_gemm: bool
    share: object = None
    peak: float | None = None
    experts: bool = False
    attention: bool = False
    blocks: object = None
    mla: object = 0.0


def roofline_sums(ops, params: LatencyParams, peak: float, bw: float):
    """Sums of compute times, memory times, roofline times split by what bounds each op, the GEMMs' size
    overheads (:func:`kernel_size_overhead`), and the memory-bound roofline times of the expert GEMMs and of
    attention over the KV cache; each op weighted by the share of layers that run it."""
    compute = memory = roof_c = roof_m = size = roof_experts = roof_attention = 0.0
    for op in ops:
        c = _compute_time(op.flops, peak if op.peak is None else op.peak, params, op.waves)
        m = op.nbytes / (params.eta_memory * bw)
        roof = smooth_max(c, m, params.smoothness)
        if op.attention and op.blocks is not None and np.any(on := measured_share(params, op.mla) > 0):
            c_a, m_a, t_a = measured_attention(op.flops, op.nbytes, op.blocks, params, peak, bw)
            c, m, roof = np.where(on, c_a, c), np.where(on, m_a, m), np.where(on, t_a, roof)
        over = kernel_size_overhead(op.nbytes, params) if op.is_gemm else None
        if op.share is not None:
            c, m, roof = c * op.share, m * op.share, roof * op.share
            over = None if over is None else over * op.share
        compute, memory = compute + c, memory + m
        roof_c = roof_c + np.where(c > m, roof, 0.0)
        roof_m = roof_m + np.where(c > m, 0.0, roof)
        if op.experts:
            roof_experts = roof_experts + np.where(c > m, 0.0, roof)
        if op.attention:
            roof_attention = roof_attention + np.where(c > m, 0.0, roof)
        if over is not None:
            size = size + over
    return compute, memory, roof_c, roof_m, size, roof_experts, roof_attention


class Precision(NamedTuple):
    """Bytes per activation element, and per weight with the tensor-core peak for the decoder's linear layers
    and for the routed experts (``None``: the activation dtype's bytes and the deployment's peak). The linear
    layers' weight bytes and peak carry their format's measured efficiency (:func:`format_terms`: bytes over the
    weight-read fraction, peak times the compute fraction) and ``layer_extra_s`` its extra fixed time per GEMM;
    ``kv`` the KV cache's bytes per element (``Deployment.kv_dtype``)."""

    dt: int
    layer_bytes: float | None
    layer_peak: float | None
    expert_bytes: float | None
    expert_peak: float | None
    layer_extra_s: float = 0.0
    kv: int | None = None  # bytes per KV-cache element (None: dt)
    layer_tile: int = 0  # GEMM rows per tile of the linear layers' format kernels (0: the bf16 GEMMs' m_tile)


def precision_of(dep: Deployment) -> Precision:
    dt = dtype_bytes(dep.dtype)
    layer_fmt = dep.weight_dtype
    expert_fmt = dep.expert_dtype or layer_fmt

    def fmt(name):
        if name is None:
            return None, None
        return get_weight_format(name).bytes_per_weight, gemm_peak(dep.hardware, name, dep.dtype)

    layer_bytes, layer_peak = fmt(layer_fmt)
    extra, tile = 0.0, 0
    if layer_fmt is not None:  # the dense GEMMs' measured format terms, where the format runs on its own tensor cores
        native = get_weight_format(layer_fmt).native
        if native in ("fp8", "fp4") and getattr(dep.hardware, f"peak_flops_{native}", None):
            compute, memory, extra = format_terms(dep.params, native)
            layer_bytes, layer_peak = layer_bytes / memory, layer_peak * compute
            tile = format_tile(dep.params, native)
    return Precision(dt, layer_bytes, layer_peak, *fmt(expert_fmt), extra, dtype_bytes(dep.cache_dtype), tile)


def format_gemms_per_layer(shapes: ModelShapes) -> float:
    """GEMMs per (average) layer whose weights are in the linear layers' format: the four dense ones (the MLP's
    two on dense layers only), MLA's extra ones and the shared experts' two; the routed experts have their own."""
    dense_share = (shapes.n_dense / shapes.n_layer) if shapes.has_moe else 1.0
    count = 2.0 + 2.0 * dense_share
    if shapes.has_mla:
        count = count + len(MLA_OPS) * shapes.mla
    if shapes.has_moe:
        count = count + 2.0 * shapes.shared * shapes.n_moe / shapes.n_layer
    return count


def gemm_op(tokens, n_in, n_out, dt: int, params: LatencyParams, sm_count, *, weight_bytes=None, peak=None,
          share=None, m_tile: int = 0) -> _Op:
    """One GEMM on tiles of ``m_tile`` rows (0: ``params``'), :func:`gemm_flops_bytes`, :func:`gemm_waves`; ``weight_bytes``
    per weight when the weights are stored in another format than the activations (with scales), at ``peak``."""
    tile = m_tile or params.m_tile
    flops, nbytes = gemm_flops_bytes(tokens, n_in, n_out, dt, tile, params.m_tile_min)
    if weight_bytes is not None:
        t, i, o = (np.asarray(x, dtype=float) for x in (tokens, n_in, n_out))
        nbytes = weight_bytes * i * o + dt * t * (i + o)
    return _Op(flops, nbytes, gemm_waves(tokens, n_out, tile, sm_count), True, share, peak)


def cached_kv_elements(shapes: ModelShapes, b, L) -> np.ndarray:
    """KV-cache elements ``b`` sequences of ``L`` cached tokens hold in one layer on one GPU: what that layer's
    attention reads per step and what :func:`memory_per_gpu` counts (one formula for both; a local-attention
    layer is called with its window's context, :func:`local_context`)."""
    return b * L * shapes.kv_elements


def attention_op(shapes: ModelShapes, b, q, L, dt: int, share=None, kv_dt: int | None = None) -> _Op:
    """Attention over ``L`` cached tokens: 4·w FLOPs per cached (and, causally, q/2 new) token per new token;
    bytes: the cached KV, the new tokens' KV writes (``kv_dt`` bytes each, default ``dt``), the query read and
    output write; b·h_kv blocks for the measured form (:mod:`sdsl.roofline.attention`; GQA only, MLA keeps the
    roofline)."""
    tokens = b * q
    flops = 4.0 * shapes.attn_width * tokens * (L + q / 2.0)
    kv = dt if kv_dt is None else kv_dt
    nbytes = kv * (cached_kv_elements(shapes, b, L) + tokens * shapes.kv_elements) + dt * tokens * shapes.qo_elements
    blocks = None if shapes.kv_heads is None else b * shapes.kv_heads
    return _Op(flops, nbytes, None, False, share, attention=True, blocks=blocks, mla=shapes.mla)


def expert_rows(shapes: ModelShapes, tokens, params: LatencyParams | None, tile: float | None = None, sequences=None):
    """(distinct experts per MoE layer over all GPUs, padded GEMM rows of those experts) for ``tokens``: each
    expert's rows padded to ``tile`` rows when given (1: unpadded), else to the roofline's row tiles (``params``).
    ``sequences``: the tokens are that many sequences' consecutive positions, whose experts overlap by the model's
    routing locality (:func:`sdsl.catalog.moe.locality_tokens`); None: independent tokens."""
    if tile is not None:
        pad = None if tile <= 1 else (lambda r: np.ceil(r / tile) * tile)
    else:
        pad = (lambda r: padded_tokens(r, params.m_tile, params.m_tile_min)) if params.m_tile else None
    nd = locality_tokens(tokens, sequences, shapes.locality)
    if shapes.expert_probs is not None:
        return expected_expert_rows(tokens, probabilities=shapes.expert_probs, pad=pad, distinct_tokens=nd)
    return expected_expert_rows(tokens, n_experts=shapes.n_experts, top_k=shapes.top_k, pad=pad, distinct_tokens=nd)


def _groupedgemm_op(distinct, rows, active_rows, n_in, n_out, prec: Precision, params: LatencyParams, sm_count,
                  share) -> _Op:
    """A grouped GEMM over ``distinct`` experts on one GPU computing ``rows`` padded rows (``active_rows`` real
    ones): FLOPs 2·rows·in·out, weights distinct·in·out, activations active_rows·(in + out); each expert's rows
    tile separately, so the waves are distinct·⌈m/m_tile⌉·⌈out/N_TILE⌉/SMs at m = active_rows/distinct."""
    i, o = np.asarray(n_in, dtype=float), np.asarray(n_out, dtype=float)
    wb = prec.dt if prec.expert_bytes is None else prec.expert_bytes
    flops = 2.0 * rows * i * o
    nbytes = wb * distinct * i * o + prec.dt * active_rows * (i + o)
    waves = None
    if params.m_tile and sm_count:
        with np.errstate(divide="ignore", invalid="ignore"):
            per_expert = np.where(distinct > 0, active_rows / distinct, 0.0)
        waves = distinct * gemm_waves(per_expert, o, params.m_tile, sm_count)
    return _Op(flops, nbytes, waves, True, share, prec.expert_peak, True)


def _moe_ops(shapes: ModelShapes, tokens, prec: Precision, params: LatencyParams, sm_count, fused: bool = False,
             sequences=None):
    """An MoE layer's GEMMs beyond attention: the router (every GPU routes every token), the grouped up and
    down GEMMs over the experts this GPU holds (1/ep of the distinct ones, by symmetry) unless ``fused`` (the
    measured fused layer prices them, :func:`fused_moe_time`), and the shared experts as a dense MLP. Returns
    (ops, distinct experts over all GPUs, real expert rows on this GPU)."""
    share = shapes.n_moe / shapes.n_layer
    distinct, rows = expert_rows(shapes, tokens, params, sequences=sequences)
    local, local_rows = distinct / shapes.ep, rows / shapes.ep
    active = tokens * shapes.top_k / shapes.ep
    d, dt = shapes.d_model, prec.dt
    ops = [gemm_op(tokens, d, shapes.n_experts, dt, params, sm_count, share=share)]
    if not fused:
        ops += [_groupedgemm_op(local, local_rows, active, d, shapes.expert_up, prec, params, sm_count, share),
                _groupedgemm_op(local, local_rows, active, shapes.expert_down_in, d, prec, params, sm_count, share)]
    if np.any(shapes.shared > 0):  # zero-width for the models of a stack without shared experts
        layer = dict(weight_bytes=prec.layer_bytes, peak=prec.layer_peak, share=share * shapes.shared, m_tile=prec.layer_tile)
        ops += [gemm_op(tokens, d, shapes.shared_up, dt, params, sm_count, **layer),
                gemm_op(tokens, shapes.shared_down_in, d, dt, params, sm_count, **layer)]
    return ops, distinct, active


def layer_ops(shapes: ModelShapes, b, q, L, prec: Precision, params: LatencyParams, sm_count, *,
              fused_experts: bool = False):
    """The ops of one (average) layer: the four dense GEMMs (the MLP's on dense layers only), attention over
    the KV cache (local layers over their window), MLA's extra GEMMs, and an MoE layer's router, experts
    (left out with ``fused_experts``: :func:`fused_moe_time` prices them) and shared experts. Returns (ops,
    distinct experts per MoE layer, real expert rows per GPU)."""
    tokens, dt = b * q, prec.dt
    layer = dict(weight_bytes=prec.layer_bytes, peak=prec.layer_peak, m_tile=prec.layer_tile)
    dense_share = (shapes.n_dense / shapes.n_layer) if shapes.has_moe else None
    ops = [gemm_op(tokens, shapes.gemm_in[op], shapes.gemm_out[op], dt, params, sm_count, **layer,
                 share=dense_share if op.startswith("mlp") else None) for op in GEMM_OPS]
    if not shapes.has_local:
        ops.append(attention_op(shapes, b, q, L, dt, kv_dt=prec.kv))
    else:
        local_share = shapes.n_local / shapes.n_layer
        ops += [attention_op(shapes, b, q, L, dt, 1.0 - local_share, kv_dt=prec.kv),
                attention_op(shapes, b, q, local_context(shapes, L), dt, local_share, kv_dt=prec.kv)]
    if shapes.has_mla:
        ops += [gemm_op(tokens, shapes.gemm_in[op], shapes.gemm_out[op], dt, params, sm_count, **layer, share=shapes.mla)
                for op in MLA_OPS]
    if not shapes.has_moe:
        return ops, 0.0, 0.0
    moe, distinct, active = _moe_ops(shapes, tokens, prec, params, sm_count, fused_experts, sequences=b)
    return ops + moe, np.where(shapes.n_moe > 0, distinct, 0.0), active  # a dense model in the stack routes nothing


def all_to_all_time(message_bytes, n_gpu, interconnect_bandwidth, params: LatencyParams) -> np.ndarray:
    """One all-to-all in which every one of ``n_gpu`` GPUs holds ``message_bytes`` and sends the (t−1)/t of
    them that belong to the others: latency + (t−1)/t·bytes/(η·bw) over the per-direction link bandwidth, with
    the all-reduce's latency and efficiency (``allreduce_latency``, ``eta_interconnect``; an assumption, not a
    fitted all-to-all: DeepEP's README measures its NVLink dispatch and combine at 153–158 GB/s of an H800's
    ~160 GB/s, i.e. near the link rate)."""
    t = np.asarray(n_gpu, dtype=float)
    wire = (t - 1.0) / t * np.asarray(message_bytes, dtype=float) / interconnect_bandwidth
    return params.allreduce_latency + wire / min(params.eta_interconnect, 1.0)


def communication_time(shapes: ModelShapes, dep: Deployment, tokens, dt: int):
    """Two all-reduces per layer of the tokens' hidden states under tensor parallelism. With expert parallelism
    and ``expert_dispatch="all-to-all"`` an MoE layer instead dispatches each token's hidden state to the GPUs
    of its k experts and combines the results back (DeepEP-style: every GPU sends k·d of each of its tokens/ep
    tokens), keeping the attention's all-reduce; with "allreduce" (vLLM's TP + EP without data-parallel
    attention) every GPU already holds every token and the layer's second all-reduce sums the experts' outputs."""
    if shapes.tp == 1:
        return 0.0 * tokens
    hardware, params = dep.hardware, dep.params
    ic = getattr(hardware, "interconnect_bandwidth", None)
    if not ic:
        raise InvalidInputError(f"{hardware.name} has no interconnect bandwidth in the catalog; tp > 1 needs one.")
    message = tokens * shapes.d_model * dt
    one = allreduce_time_with(message, shapes.tp, ic, params)
    engine = getattr(dep, "engine", None)
    if engine is not None and engine.allreduce == "custom":  # the engine's own one-/two-shot kernel (sdsl.engine.profiles)
        from sdsl.engine.allreduce import custom_allreduce_time

        one = custom_allreduce_time(engine, message, shapes.tp, ic, params.eta_interconnect, one)
    if not (shapes.has_moe and shapes.ep > 1 and dep.expert_dispatch == "all-to-all"):
        return 2.0 * shapes.n_layer * one
    a2a = all_to_all_time(tokens / shapes.ep * shapes.top_k * shapes.d_model * dt, shapes.ep, ic, params)
    return (shapes.n_layer + shapes.n_dense) * one + 2.0 * shapes.n_moe * a2a


def moe_elementwise(shapes: ModelShapes, tokens, active, dt: int, bw, params: LatencyParams):
    """Elementwise kernels of the MoE layers (all of them, seconds) and their launches: the experts' activation
    over this GPU's expert rows, top-k softmax over the router logits, the block alignment of the expert rows,
    the sum of each token's k expert outputs, and the shared experts' activation."""
    e = shapes.n_experts
    kernels = (activation_time(shapes, active, shapes.expert_down_in, dt, bw, params)
               + elementwise_time("add", tokens, e, e + 2.0 * shapes.top_k, dt, bw, params, row_limited=False)
               + elementwise_time("add", tokens, shapes.top_k, 2.0 * shapes.top_k, dt, bw, params, row_limited=False)
               + elementwise_time("add", tokens, shapes.d_model, shapes.d_model * (1.0 + shapes.top_k / shapes.ep),
                                  dt, bw, params, row_limited=False)
               + shapes.shared * activation_time(shapes, tokens, shapes.shared_down_in, dt, bw, params))
    t_ew = params.t_kernel if params.t_elementwise is None else params.t_elementwise
    launches = shapes.n_moe * (MOE_ELEMENTWISE_KERNELS + shapes.shared) * t_ew
    return shapes.n_moe * kernels, launches


def _expert_format(dep: Deployment) -> str:
    """The routed experts' weight format: the deployment's expert format, else its weight format, else its dtype."""
    return dep.expert_dtype or dep.weight_dtype or dep.dtype


def expert_provenance(target, dep: Deployment) -> str | None:
    """One line: the measured fused-MoE kernel that prices an MoE target's routed experts on ``dep`` (its GPU, its
    engine's kernel, its expert format), or that they are transferred (the roofline's grouped GEMMs); None for a dense
    target (:func:`sdsl.catalog.moe.fused_moe_provenance`)."""
    if not getattr(target, "is_moe", False):
        return None
    return fused_moe_provenance(dep.hardware, getattr(dep, "engine", None), _expert_format(dep))


def fused_moe_fit_of(shapes: ModelShapes, dep: Deployment) -> FusedMoEFit | None:
    """The measured fused-MoE fit of an MoE deployment (:func:`sdsl.catalog.moe.select_fused_moe_fit`: its GPU, its
    engine's kernel, its expert format), or None (a dense model, or no measured tables: the grouped GEMMs)."""
    if not shapes.has_moe:
        return None
    return select_fused_moe_fit(dep.hardware, getattr(dep, "engine", None), _expert_format(dep))


def fused_moe_time(shapes: ModelShapes, fit: FusedMoEFit, tokens, prec: Precision, hardware, peak,
                   sequences=None) -> np.ndarray:
    """Seconds of one MoE layer's routed experts on one GPU as the measured fused kernel
    (:func:`sdsl.catalog.moe.fused_moe_layer_time`): the distinct experts of sdsl's router (uniform, or the model's
    skewed one), 1/ep of them on this GPU, their rows padded to the kernel's row tile, their weights in the expert
    format, at ``peak`` (the experts' tensor-core rate)."""
    wb = prec.dt if prec.expert_bytes is None else prec.expert_bytes
    n = np.asarray(tokens, dtype=float)
    width = shapes.expert_up + shapes.expert_down_in
    local_experts = shapes.n_experts / shapes.ep
    tile = row_tile_of(fit, n, local_experts)
    distinct, padded = expert_rows(shapes, n, None, tile=1, sequences=sequences)
    for t in TRITON_ROW_TILES if fit.row_tile == "triton" else ():
        padded = np.where(tile == t, expert_rows(shapes, n, None, tile=t, sequences=sequences)[1], padded)
    return fused_moe_layer_time(fit, tokens=n, top_k=shapes.top_k, local_experts_touched=distinct / shapes.ep,
                                padded_rows=padded / shapes.ep, weight_bytes=wb * distinct / shapes.ep * shapes.d_model * width,
                                flops_per_row=2.0 * shapes.d_model * width, bandwidth=hardware.mem_bandwidth, peak=peak)


def fused_moe_parts(shapes: ModelShapes, fit: FusedMoEFit, tokens, prec: Precision, hardware, peak,
                    params: LatencyParams, t_ew: float, sequences=None):
    """What the MoE layers add to a step priced with the measured fused layer: (the shared experts' activation beyond
    its launch, the launches — router and shared-expert GEMMs and the shared activation, less the grouped up and down
    GEMMs the measured layer holds —, the routed experts' seconds over all MoE layers, :func:`fused_moe_time` at the
    experts' peak, the deployment's ``peak`` without an expert format)."""
    bw, dt = hardware.mem_bandwidth, prec.dt
    shared_ew = shapes.n_moe * shapes.shared * activation_time(shapes, tokens, shapes.shared_down_in, dt, bw, params)
    shared_launches = shapes.n_moe * shapes.shared * t_ew
    launches = shared_launches + shapes.n_moe * (2.0 * shapes.shared - 1.0) * params.t_kernel
    experts = shapes.n_moe * fused_moe_time(shapes, fit, tokens, prec, hardware,
                                            peak if prec.expert_peak is None else prec.expert_peak, sequences)
    return shared_ew - shared_launches, launches, experts
