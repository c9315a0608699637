"""Step time of one forward pass on a roofline, with calibrated efficiencies and overheads.

docs/model.md §3.3. A forward pass of a decoder over ``batch`` sequences, ``q`` new tokens each, with
``context`` tokens already in the KV cache, is priced kernel by kernel (the roofline of Williams,
Waterman & Patterson, CACM 2009, applied per operator; decode attention on the form NVIDIA's operator tables
measure where the deployment's engine runs the kernels they time, :mod:`sdsl.roofline.attention`):

    t_op = smax_p( FLOPs_op / (η_c · peak),  bytes_op / (η_m · bandwidth) ) + t_kernel

where smax_p(x, y) = (x^p + y^p)^(1/p) is a smooth maximum (p = ∞ is the hard max). Per layer:
the four GEMMs that Vidur profiles (fused QKV ``attn_pre_proj``, ``attn_post_proj``, ``mlp_up_proj``,
``mlp_down_proj``), attention over the KV cache, and six memory-bound elementwise kernels (two norms,
RoPE, activation, two residual adds), plus a fixed per-layer cost ``t_layer``. Per model: the LM head over all b·q positions (verification
needs every position's logits), a fixed per-forward overhead ``t_step`` and, with tensor
parallelism, two all-reduces per layer (ring: 2(t−1)/t of the message over the interconnect).

Beyond the dense decoder (docs/model.md §3.8): a mixture-of-experts layer replaces the dense MLP by a router
GEMM, grouped GEMMs over the experts the step's b·q tokens touch (:mod:`sdsl.catalog.moe`: expected distinct
experts, each expert's rows padded to the kernel's row tile) — on a GPU whose fused-MoE layer NVIDIA's operator
database measures (H100-SXM, H200, B200, A100-80GB), the whole routed-expert layer priced instead by its fitted
closed form (:func:`sdsl.catalog.moe.fused_moe_layer_time`, the engine's own kernel) — and the shared experts,
with expert parallelism (``Deployment.ep``) and its all-to-all dispatch/combine; multi-head latent attention reads
a compressed latent per token (absorbed decode form); local-attention layers read only their window; weight formats
(``Deployment.weight_dtype``, ``expert_dtype``; :mod:`sdsl.roofline.weight_formats`) set each GEMM's weight
bytes and tensor-core rate.

Everything broadcasts over numpy arrays of batch, q and context, and over a stack of models
(:class:`ModelShapes`), so a whole search grid is one vectorised evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdsl._result import Result
from sdsl.catalog.models import dtype_bytes
from sdsl.roofline.deployment import Deployment
from sdsl._checks import broadcast_shapes, count, non_negative, numbers, positive
from sdsl.roofline.shapes import GEMM_OPS, MLA_OPS, ModelShapes, local_context  # noqa: F401
from sdsl.roofline.step_ops import (MLA_EXTRA_GEMM_KERNELS, all_to_all_time, cached_kv_elements, communication_time,  # noqa: F401
                                    expert_rows, format_gemms_per_layer, fused_moe_fit_of, fused_moe_parts, gemm_op,
                                    layer_elementwise_time, layer_ops, moe_elementwise, op_time, precision_of,
                                    roofline_sums)
from sdsl.roofline.attention import measured_share
from sdsl.roofline.weight_formats import get_weight_format
from sdsl.roofline.kernels import (FP32_FALLBACK_FRACTION, allreduce_time, allreduce_time_with, compute_peak,  # noqa: F401
                               elementwise_time, gemm_flops_bytes, gemm_waves, kernel_size_overhead, padded_tokens,
                               smooth_max)
from sdsl.roofline.latency_params import (DEFAULT_PARAMS, ELEMENTWISE_KINDS, LatencyParams,  # noqa: F401
                                      default_params)
from sdsl.errors import InvalidInputError

__all__ = [
    "memory_remedies",
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
    "padded_step_time",
    "memory_per_gpu",
    "kv_cache_bytes_per_gpu",
    "weight_bytes_per_gpu",
    "all_to_all_time",
    "expert_reads",
    "memory_with_draft_per_gpu",
    "prefill_time_s",
    "allreduce_time",
    "compute_peak",
    "padded_tokens",
    "elementwise_time",
    "layer_elementwise_time",
    "ELEMENTWISE_KINDS",
]

GEMM_KERNELS_PER_LAYER = len(GEMM_OPS) + 1  # four GEMMs and attention, each charged t_kernel
KERNELS_PER_MODEL = 3  # embedding gather, final norm, LM head
EXPERT_DISPATCH = ("allreduce", "all-to-all")


@dataclass(frozen=True, eq=False)  # a result object: equal only to itself
class StepTime(Result):
    """Step time of one forward pass and its parts (seconds; arrays broadcast over the inputs).

    compute_s / memory_s: sums over kernels of their pure compute and pure memory times;
    overhead_s: kernel launches and the fixed per-step cost; allreduce_s: tensor-parallel
    communication (with expert parallelism's all-to-all dispatch and combine); total_s: the priced step.
    ``bound`` names what dominates: "memory", "compute", "overhead", "communication", or on an MoE model
    "expert-weights" (the routed experts: their weight reads, or the whole measured fused-MoE layer).
    ``distinct_experts``: the expected routed experts one MoE layer reads for the step's b·q tokens, over all
    GPUs (0 for a dense model). ``expert_weights_s``: the routed experts' time — the measured fused-MoE layer on
    a GPU with operator tables (:func:`sdsl.roofline.step_ops.fused_moe_time`), else the memory-bound roofline time
    of their grouped GEMMs (0 for a dense model); ``attention_s``: the memory-bound time of attention over the KV cache
    (its measured form where the deployment's engine runs it, :mod:`sdsl.roofline.attention`); ``compute_bound_s``: the
    roofline time of the compute-bound kernels. All three are parts of ``total_s``, reported so a caller can say
    what a step's time goes to (:mod:`sdsl.plan.cost_drivers`).
    """

    total_s: np.ndarray
    compute_s: np.ndarray
    memory_s: np.ndarray
    overhead_s: np.ndarray
    allreduce_s: np.ndarray
    bound: np.ndarray
    distinct_experts: np.ndarray = 0.0
    expert_weights_s: np.ndarray = 0.0
    attention_s: np.ndarray = 0.0
    compute_bound_s: np.ndarray = 0.0

    def to_dict(self) -> dict:
        """Every part as a Python number or (nested) list."""
        return {k: np.asarray(getattr(self, k)).tolist() for k in
                ("total_s", "compute_s", "memory_s", "overhead_s", "allreduce_s", "bound", "distinct_experts",
                 "expert_weights_s", "attention_s", "compute_bound_s")}

    def report(self) -> str:
        """One line per configuration: total, compute, memory, overhead and all-reduce times (ms)."""
        keys = ("total_s", "compute_s", "memory_s", "overhead_s", "allreduce_s")
        shape = np.broadcast_shapes(*(np.shape(getattr(self, k)) for k in keys + ("bound",)))
        cols = {k: np.ravel(np.broadcast_to(np.asarray(getattr(self, k)), shape)) for k in keys + ("bound",)}
        experts = np.ravel(np.broadcast_to(np.asarray(self.distinct_experts, dtype=float), shape))
        moe = bool(np.any(experts > 0))
        lines = [f"{'total ms':>9} {'compute ms':>11} {'memory ms':>10} {'overhead ms':>12} {'allreduce ms':>13}  bound"
                 + ("  distinct experts/layer" if moe else "")]
        for i in range(cols["total_s"].size):
            ms = [1e3 * cols[k][i] for k in keys]
            lines.append(f"{ms[0]:9.3f} {ms[1]:11.3f} {ms[2]:10.3f} {ms[3]:12.3f} {ms[4]:13.3f}  {cols['bound'][i]}"
                         + (f"  {experts[i]:.1f}" if moe else ""))
        return "\n".join(lines)

    def plot(self, ax=None):
        """Grouped bars of the parts of the step time per configuration (:mod:`sdsl.plots.results`)."""
        from sdsl.plots.results import plot_step_breakdown

        return plot_step_breakdown({"total": self.total_s, "compute": self.compute_s, "memory": self.memory_s,
                                    "overhead": self.overhead_s, "all-reduce": self.allreduce_s}, ax=ax)


def _check_grid(batch, q, context, q_name="q", whole_batch=True):
    """(batch, q, context) as float arrays: batch a positive whole number of sequences (any positive number with
    ``whole_batch`` False: a forward padded to a captured token count), q >= 1 new tokens per sequence, context
    a non-negative number of tokens, shapes that broadcast (:mod:`sdsl._checks`)."""
    b = count(batch) if whole_batch else positive(batch, "batch")
    qq = numbers(q, q_name)
    if np.any(~np.isfinite(qq)) or np.any(qq < 1):
        bad = float(qq[~(qq >= 1)].ravel()[0])
        raise InvalidInputError(f"{q_name} (new tokens per sequence) must be >= 1; got {bad:g}.")
    L = non_negative(context, "context", "a non-negative number of tokens")
    broadcast_shapes(batch=b, **{q_name: qq}, context=L)
    return b, qq, L


def _price(shapes: ModelShapes, dep: Deployment, b, q, L, *, logit_tokens=None):
    """Core pricing; returns the StepTime fields as arrays. ``logit_tokens``: positions whose logits
    the LM head computes (default every one of the b·q; a prefill needs only each prompt's last)."""
    hardware, params = dep.hardware, dep.params
    prec = precision_of(dep)
    dt = prec.dt
    peak, bw = compute_peak(hardware, dep.dtype), hardware.mem_bandwidth
    tokens = b * q
    n = shapes.n_layer
    sms = getattr(hardware, "sm_count", None)
    fused = fused_moe_fit_of(shapes, dep)  # the measured fused MoE layer, where its GPU and format are measured
    ops, distinct, active = layer_ops(shapes, b, q, L, prec, params, sms, fused_experts=fused is not None)
    c_layer, m_layer, rc_layer, rm_layer, size_layer, re_layer, ra_layer = roofline_sums(ops, params, peak, bw)
    lm = gemm_op(tokens if logit_tokens is None else logit_tokens, shapes.lm_in, shapes.lm_out, dt, params, sms)
    c_lm, m_lm, rc_lm, rm_lm, size_lm, _, _ = roofline_sums([lm], params, peak, bw)
    t_ew = params.t_kernel if params.t_elementwise is None else params.t_elementwise
    if shapes.has_moe:  # the dense MLP's activation runs on the dense layers only
        ew_launches = (n * (shapes.norms + 3.0) + shapes.n_dense) * t_ew
    else:
        ew_launches = n * (shapes.norms + 4.0) * t_ew  # norms, RoPE, activation, two adds
    elementwise = n * layer_elementwise_time(shapes, tokens, dt, bw, params) - ew_launches
    launches = (n * GEMM_KERNELS_PER_LAYER + KERNELS_PER_MODEL) * params.t_kernel + ew_launches
    if shapes.kv_heads is not None:  # the measured attention's t0 holds its launch
        launches = launches - n * measured_share(params, shapes.mla) * params.t_kernel
    if np.any(shapes.extra_norms):
        extra = n * shapes.extra_norms * elementwise_time("norm", tokens, shapes.extra_norm_width,
                                                          2.0 * shapes.extra_norm_width, dt, bw, params)
        extra_launches = n * shapes.extra_norms * t_ew
        elementwise, launches = elementwise + extra - extra_launches, launches + extra_launches
    if shapes.has_mla:
        launches = launches + n * shapes.mla * MLA_EXTRA_GEMM_KERNELS * params.t_kernel
    fused_experts = 0.0
    if shapes.has_moe and fused is None:  # router, grouped up and down replace the MLP's two GEMMs; two more with shared experts
        moe_ew, moe_launches = moe_elementwise(shapes, tokens, active, dt, bw, params)
        elementwise = elementwise + moe_ew - moe_launches
        launches = launches + moe_launches + shapes.n_moe * (1.0 + 2.0 * shapes.shared) * params.t_kernel
    elif shapes.has_moe:  # the measured layer holds routing, both grouped GEMMs (their launches), activation and sum
        ew, more, fused_experts = fused_moe_parts(shapes, fused, tokens, prec, hardware, peak, params, t_ew, b)
        elementwise, launches = elementwise + ew, launches + more
    overhead = launches + n * (params.t_layer + size_layer) + size_lm + params.t_step
    if prec.layer_extra_s:  # a low-precision format's extra fixed time per GEMM (its activation quantisation)
        overhead = overhead + n * format_gemms_per_layer(shapes) * prec.layer_extra_s
    allreduce = communication_time(shapes, dep, tokens, dt)
    bound_compute = n * rc_layer + rc_lm
    bound_memory = n * rm_layer + rm_lm + elementwise + fused_experts
    total = bound_compute + bound_memory + overhead + allreduce
    if shapes.has_moe:
        experts = n * re_layer + fused_experts
        parts = np.stack(np.broadcast_arrays(bound_memory - experts, bound_compute, overhead, allreduce, experts))
        labels = np.array(["memory", "compute", "overhead", "communication", "expert-weights"])
    else:
        parts = np.stack(np.broadcast_arrays(bound_memory, bound_compute, overhead, allreduce))
        labels = np.array(["memory", "compute", "overhead", "communication"])
    bound = labels[np.argmax(parts, axis=0)]
    compute = n * c_layer + c_lm
    memory = n * m_layer + m_lm + elementwise + fused_experts
    return (total, compute, memory, overhead + 0.0 * total, allreduce + 0.0 * total, bound,
            np.asarray(distinct) + 0.0 * total, n * re_layer + fused_experts + 0.0 * total, n * ra_layer + 0.0 * total,
            bound_compute + 0.0 * total)


def _spec(model):
    """A ModelSpec from a ModelSpec or a catalog name / config.json path."""
    if isinstance(model, str):
        from sdsl.catalog.models import get_model

        return get_model(model)
    return model


def _shapes(model, dep_or_tp, ep: int = 1) -> ModelShapes:
    """ModelShapes of ``model`` on a deployment (its tp and ep) or on ``tp`` GPUs; a given ModelShapes must
    match the deployment's expert parallelism when it holds MoE models."""
    tp = dep_or_tp.tp if isinstance(dep_or_tp, Deployment) else int(dep_or_tp)
    ep = dep_or_tp.ep if isinstance(dep_or_tp, Deployment) else ep
    if isinstance(model, ModelShapes):
        if model.has_moe and model.ep != ep:
            raise InvalidInputError(f"These shapes were built for ep={model.ep}, the deployment has ep={ep}.")
        return model
    return ModelShapes.of(_spec(model), tp, ep=ep if _spec(model).is_moe else 1)


def step_time(model, deployment, *, batch=1, q=1, context=None) -> StepTime:
    """Price one forward pass (docs/model.md §3.3, §3.8); see the module docstring for the model.

    ``model`` is a ModelSpec, a catalog name, or :class:`ModelShapes` (a stack of models for
    vectorised search); ``deployment`` a :class:`~sdsl.roofline.deployment.Deployment` or anything
    :meth:`Deployment.of <sdsl.roofline.deployment.Deployment.of>` accepts (a hardware name, file or
    Hardware), whose hardware, ``tp``, ``ep``, ``dtype``, weight formats and latency ``params`` price the
    pass. ``batch``, ``q`` and ``context`` broadcast; ``context=None`` is the deployment's context (tokens
    already in each sequence's KV cache; use the mean for mixed lengths: KV reads and attention FLOPs are
    linear in it). On an MoE model the b·q tokens route to ``StepTime.distinct_experts`` experts per layer.
    ``batch`` is a whole number of sequences (:func:`padded_step_time` prices an engine's padded forward).
    """
    return _step_time(model, deployment, batch, q, context, whole_batch=True)


def padded_step_time(model, deployment, *, batch, q=1, context=None) -> StepTime:
    """:func:`step_time` at any positive ``batch``: the forward an engine pads to a captured token count prices
    b = tokens / q sequences, which need not be whole (:func:`sdsl.engine.profiles.padded_batch`)."""
    return _step_time(model, deployment, batch, q, context, whole_batch=False)


def _step_time(model, deployment, batch, q, context, *, whole_batch):
    dep = Deployment.of(deployment)
    b, qq, L = _check_grid(batch, q, dep.context if context is None else context, whole_batch=whole_batch)
    return StepTime(*_price(_shapes(model, dep), dep, b, qq, L))


def expert_reads(model, deployment, *, batch=1, q=1) -> dict:
    """What one MoE layer's routed experts cost a step of ``batch`` × ``q`` tokens on one GPU, as the step time
    prices it (the q positions of each sequence sharing experts by the model's routing locality):
    ``distinct_experts`` (expected, over all GPUs), ``experts_per_gpu`` (distinct / ep),
    ``rows_per_gpu`` (the grouped GEMMs' rows, each expert's padded to the row tile) and ``weight_bytes_per_gpu``
    (the up and down weights of those experts, in the expert format). Broadcasts; zeros for a dense model."""
    dep = Deployment.of(deployment)
    shapes = _shapes(model, dep)
    b, qq, _ = _check_grid(batch, q, 0.0)
    if not shapes.has_moe:
        zero = 0.0 * b * qq
        return {"distinct_experts": zero, "experts_per_gpu": zero, "rows_per_gpu": zero, "weight_bytes_per_gpu": zero}
    prec = precision_of(dep)
    distinct, rows = expert_rows(shapes, b * qq, dep.params, sequences=b)
    wb = prec.dt if prec.expert_bytes is None else prec.expert_bytes
    local = distinct / shapes.ep
    weights = wb * local * (shapes.d_model * shapes.expert_up + shapes.expert_down_in * shapes.d_model)
    return {"distinct_experts": distinct, "experts_per_gpu": local, "rows_per_gpu": rows / shapes.ep,
            "weight_bytes_per_gpu": weights}


def kv_cache_bytes_per_gpu(model, deployment, *, batch=1, context=None) -> np.ndarray:
    """KV-cache bytes ``batch`` sequences of ``context`` cached tokens (default: the deployment's) hold on each
    of the deployment's ``tp`` GPUs: every layer's K and V of the ceil(n_kv_head/tp) heads a GPU keeps (KV heads
    fewer than tp are replicated, as vLLM does), or MLA's latent and RoPE key, which every GPU keeps whole
    (vLLM and SGLang replicate it across tensor-parallel ranks); a local-attention layer holds only its window.
    In the deployment's KV dtype (``kv_dtype``, else ``dtype``). The same elements the step time's attention reads (:func:`cached_kv_elements`),
    so memory and latency agree on the KV cache."""
    dep = Deployment.of(deployment)
    b, _, L = _check_grid(batch, 1, dep.context if context is None else context)
    shapes = _shapes(model, dep)
    dt = dtype_bytes(dep.cache_dtype)
    if not shapes.has_local:
        return shapes.n_layer * cached_kv_elements(shapes, b, L) * dt
    local = shapes.n_local * cached_kv_elements(shapes, b, local_context(shapes, L))
    return ((shapes.n_layer - shapes.n_local) * cached_kv_elements(shapes, b, L) + local) * dt


def weight_bytes_per_gpu(model, deployment) -> float:
    """Weight bytes each of the deployment's ``tp`` GPUs holds: every weight / tp (the experts split ep ways and
    each tensor-split tp/ep ways is also 1/tp of them), the decoder's linear layers in ``weight_dtype``, the
    routed experts in ``expert_dtype`` (scales included, :mod:`sdsl.roofline.weight_formats`) and the embeddings and
    LM head in ``dtype``. Without weight formats: weight_bytes(dtype) / tp."""
    dep = Deployment.of(deployment)
    spec = _spec(model)
    if dep.weight_dtype is None and dep.expert_dtype is None:
        return spec.weight_bytes(dep.dtype) / dep.tp
    dt = dtype_bytes(dep.dtype)
    layer = dt if dep.weight_dtype is None else get_weight_format(dep.weight_dtype).bytes_per_weight
    expert_fmt = dep.expert_dtype or dep.weight_dtype
    expert = get_weight_format(expert_fmt).bytes_per_weight
    embeddings = spec.embedding_params + (0 if spec.tied_embeddings else spec.lm_head_params)
    experts = spec.n_moe_layers * spec.n_experts * spec.expert_params
    rest = spec.total_params - embeddings - experts
    return (embeddings * dt + experts * expert + rest * layer) / dep.tp


def memory_per_gpu(model, deployment, *, batch=1, context=None) -> np.ndarray:
    """Bytes each of the deployment's ``tp`` GPUs holds: its share of the weights (:func:`weight_bytes_per_gpu`)
    plus the KV cache of ``batch`` sequences of ``context`` tokens on that GPU (:func:`kv_cache_bytes_per_gpu`;
    default context: the deployment's; activations and workspace excluded). Compare with
    ``Hardware.mem_capacity`` (bytes; the datasheet's GB read as GiB)."""
    dep = Deployment.of(deployment)
    model = _spec(model)
    return weight_bytes_per_gpu(model, dep) + kv_cache_bytes_per_gpu(model, dep, batch=batch, context=context)


def memory_with_draft_per_gpu(target, draft, deployment, *, batch=1, context=None) -> np.ndarray:
    """Bytes the most loaded GPU holds when ``draft`` (a ModelSpec, or None) runs beside ``target``:
    the target's share (:func:`memory_per_gpu`) plus the draft's weights and KV cache over the
    deployment's ``draft_tp`` GPUs (:meth:`Deployment.for_draft`), which are among the target's."""
    dep = Deployment.of(deployment)
    own = memory_per_gpu(target, dep, batch=batch, context=context)
    return own if draft is None else own + memory_per_gpu(draft, dep.for_draft(), batch=batch, context=context)


def memory_remedies(model, deployment, *, batch, need: float, also: tuple = ()) -> str:
    """What would make a deployment that needs ``need`` bytes per GPU fit, naming only what it does not already do:
    fp8 weights where its linear layers are 16-bit or wider, an fp8 KV cache where the cache is 16-bit or wider and at
    least a tenth of ``need``; then ``also``."""
    dep = Deployment.of(deployment)
    remedies = ["raise the tensor parallelism", "lower the batch or the context"]
    if get_weight_format(dep.weight_dtype or dep.dtype).bytes_per_weight >= 2:
        remedies.append("use fp8 weights")
    if dtype_bytes(dep.cache_dtype) >= 2 and float(np.max(kv_cache_bytes_per_gpu(model, dep, batch=batch))) >= 0.1 * need:
        remedies.append("use an fp8 KV cache")
    remedies += list(also)
    return ", ".join(remedies[:-1]) + " or " + remedies[-1]


def prefill_time_s(model, deployment, *, batch=1, prompt=1, context=0.0) -> np.ndarray:
    """Seconds of one prefill forward: ``batch`` prompts of ``prompt`` new tokens after ``context``
    cached ones (chunked prefill), priced like :func:`step_time` except that the LM head computes
    only each prompt's last position (the one whose next token is sampled), not all b·prompt."""
    dep = Deployment.of(deployment)
    b, qq, L = _check_grid(batch, prompt, context, q_name="prompt")
    return _price(_shapes(model, dep), dep, b, qq, L, logit_tokens=b)[0]


def step_time_s(model, deployment, *, batch=1, q=1, context=None) -> np.ndarray:
    """Total step time only (seconds); same arguments as :func:`step_time`: the GPU time of the forward, without the
    engine's host time (:func:`sdsl.speculation.step.price_step`'s ``t_plain_s`` adds it)."""
    return step_time(model, deployment, batch=batch, q=q, context=context).total_s
