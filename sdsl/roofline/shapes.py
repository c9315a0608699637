"""Per-GPU shapes of one model or a stack of models (:class:`ModelShapes`), the arrays the step time prices
(docs/model.md §3.3, §3.8): GEMM shapes under tensor parallelism, attention widths (GQA, or MLA's absorbed
latent), local-attention windows, and the MoE layers' expert shapes under expert parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from sdsl.catalog.moe import selection_probabilities
from sdsl.errors import InvalidInputError

__all__ = ["ModelShapes", "GEMM_OPS", "MLA_OPS", "local_context", "attention_widths"]

GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
#: MLA's GEMMs beyond attn_pre_proj (fused q_a + kv_a, replicated) and attn_post_proj: the query up-projection
#: and the absorbed kv_b weights, applied as W_UK before attention and W_UV after it (two batched GEMMs).
MLA_OPS = ("attn_q_proj", "attn_kv_b_proj")


def local_context(shapes: "ModelShapes", L) -> np.ndarray:
    """Cached tokens a local-attention layer reads: min(L, W) (sliding) or L mod W (chunked)."""
    w = shapes.window
    safe = np.where(w > 0, w, 1.0)
    return np.where(w > 0, np.where(shapes.chunked > 0, np.mod(L, safe), np.minimum(L, safe)), L)


@dataclass(frozen=True, eq=False)  # array fields: equal only to itself
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
    # architecture variants; None/0 = a dense decoder with grouped-query attention on every layer
    kv_elements: np.ndarray | None = field(default=None, repr=False)  # KV-cache elements per token, layer, GPU
    attn_width: np.ndarray | None = field(default=None, repr=False)  # attention FLOPs per cached token per token / 4
    qo_elements: np.ndarray | None = field(default=None, repr=False)  # query read + output write per token
    rope_width: np.ndarray | None = field(default=None, repr=False)  # elements RoPE rotates per token
    n_dense: np.ndarray | None = field(default=None, repr=False)  # layers with a dense MLP
    n_moe: np.ndarray = field(default=0.0, repr=False)  # MoE layers
    n_local: np.ndarray = field(default=0.0, repr=False)  # local-attention layers
    window: np.ndarray = field(default=0.0, repr=False)  # their window W (tokens)
    chunked: np.ndarray = field(default=0.0, repr=False)  # 1: chunked (L mod W), 0: sliding (min(L, W))
    mla: np.ndarray = field(default=0.0, repr=False)  # 1.0 for an MLA model
    extra_norms: np.ndarray = field(default=0.0, repr=False)  # MLA latent norms, q/k norms: kernels per layer
    extra_norm_width: np.ndarray = field(default=0.0, repr=False)  # their mean row width
    n_experts: np.ndarray = field(default=0.0, repr=False)
    top_k: np.ndarray = field(default=0.0, repr=False)
    expert_up: np.ndarray = field(default=0.0, repr=False)  # grouped up-GEMM outputs per GPU: n_up·ff_e/(tp/ep)
    expert_down_in: np.ndarray = field(default=0.0, repr=False)  # ff_e/(tp/ep)
    shared: np.ndarray = field(default=0.0, repr=False)  # 1.0 where the MoE layers have shared experts
    shared_up: np.ndarray = field(default=0.0, repr=False)  # n_up·(shared width)/tp
    shared_down_in: np.ndarray = field(default=0.0, repr=False)
    expert_probs: np.ndarray | None = field(default=None, repr=False)  # per-expert pick probability (skewed routers)
    locality: np.ndarray = field(default=0.0, repr=False)  # routing locality ρ of consecutive positions
    kv_heads: np.ndarray | None = field(default=None, repr=False)  # KV heads per GPU, ceil(n_kv_head/tp) (MLA: 1)
    ep: int = 1
    has_moe: bool = False
    has_mla: bool = False
    has_local: bool = False

    def __post_init__(self) -> None:
        defaults = {"kv_elements": lambda: 2.0 * self.kv_width, "attn_width": lambda: self.q_width,
                    "qo_elements": lambda: 2.0 * self.q_width, "rope_width": lambda: self.q_width + self.kv_width,
                    "n_dense": lambda: self.n_layer}
        for name, value in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value())

    @classmethod
    def of(cls, models, tp: int = 1, extra_dims: int = 0, ep: int = 1) -> "ModelShapes":
        """Shapes of a ModelSpec (scalars) or a sequence of ModelSpecs (stacked on axis 0) on one of ``tp``
        tensor-parallel GPUs, the MoE layers' experts spread over ``ep`` groups of tp/ep GPUs each."""
        single = not isinstance(models, Sequence)
        specs = [models] if single else list(models)
        if not specs:
            raise InvalidInputError("Need at least one model.")
        tp, ep = int(tp), int(ep)
        if tp < 1:
            raise InvalidInputError(f"Tensor-parallel degree must be >= 1; got {tp}.")
        if ep < 1 or tp % ep:
            raise InvalidInputError(f"The expert-parallel degree must divide the tensor-parallel degree; got ep={ep}, tp={tp}.")
        for s in specs:
            if s.n_head % tp:
                raise InvalidInputError(f"{s.name} has {s.n_head} attention heads, not divisible by tp={tp}.")

        def col(values):
            a = np.asarray(values, dtype=float)
            return a[0] if single else a.reshape((-1,) + (1,) * extra_dims)

        layers = [s.linear_layers(tp) for s in specs]
        has_moe = any(s.is_moe for s in specs)
        has_mla = any(s.is_mla for s in specs)
        has_local = any(s.local_layers for s in specs)
        ops = GEMM_OPS + (MLA_OPS if has_mla else ())
        out = dict(
            names=tuple(s.name for s in specs),
            n_layer=col([s.n_layer for s in specs]),
            d_model=col([s.d_model for s in specs]),
            q_width=col([s.n_head // tp * s.head_dim for s in specs]),
            kv_width=col([-(-s.n_kv_head // tp) * s.head_dim if not s.is_mla else s.kv_elements_per_layer / 2
                          for s in specs]),
            kv_heads=col([-(-s.n_kv_head // tp) if not s.is_mla else 1 for s in specs]),
            ff_width=col([s.d_ff / tp for s in specs]),
            norms=col([s.norms_per_layer for s in specs]),
            gated=col([float(s.gated_mlp) for s in specs]),
            gemm_in={op: col([ly.get(op, (0, 0))[0] for ly in layers]) for op in ops},
            gemm_out={op: col([ly.get(op, (0, 0))[1] for ly in layers]) for op in ops},
            lm_in=col([ly["lm_head"][0] for ly in layers]),
            lm_out=col([ly["lm_head"][1] for ly in layers]),
            tp=tp, ep=ep, has_moe=has_moe, has_mla=has_mla, has_local=has_local,
        )
        if has_mla or any(s.qk_norm for s in specs):
            out.update(_attention_variant_columns(specs, tp, col))
        if has_local:
            out.update(n_local=col([s.local_layers for s in specs]), window=col([s.sliding_window for s in specs]),
                       chunked=col([float(s.chunked_attention) for s in specs]))
        if has_moe:
            out.update(_moe_columns(specs, tp, ep, col, single, extra_dims))
        return cls(**out)


def attention_widths(heads, *, head_dim=None, kv_heads=None, latent=None, rope=None):
    """(KV elements per token, attention width w — a new token's FLOPs per cached token are 4·w —, query-in plus
    output-out elements per token) of one GPU's attention over ``heads`` query heads: GQA/MQA/MHA with ``kv_heads``
    KV heads of ``head_dim``, or MLA's absorbed decode over a ``latent``-wide cache and a ``rope``-wide key
    (DeepSeek-V2 arXiv 2405.04434 §2.1: scores over latent + rope, values in the latent). Broadcasts."""
    h = np.asarray(heads, dtype=float)
    if latent is not None:
        c, r = float(latent), float(rope)
        return c + r, h * (2 * c + r) / 2.0, h * (c + r) + h * c
    hd = np.asarray(head_dim, dtype=float)
    return 2.0 * np.asarray(kv_heads, dtype=float) * hd, h * hd, 2.0 * h * hd


def _attention_variant_columns(specs, tp: int, col) -> dict:
    """Per-GPU attention widths of MLA models (absorbed decode: DeepSeek-V2 arXiv 2405.04434 §2.1 and App. C;
    the latent is replicated on every tensor-parallel GPU, heads split) and the extra norm kernels of MLA's
    latent norms and of per-head q/k norms; GQA models keep the dense defaults."""
    kv, attn, qo, rope, norms, width = [], [], [], [], [], []
    for s in specs:
        h = s.n_head // tp
        if s.is_mla:
            c, r = s.kv_lora_rank, s.qk_rope_head_dim
            att = attention_widths(h, latent=c, rope=r)  # absorbed query in, latent output out
            rope.append(h * r + r)
            lora = [w for w in (s.q_lora_rank, s.kv_lora_rank) if w]
        else:
            att = attention_widths(h, head_dim=s.head_dim, kv_heads=-(-s.n_kv_head // tp))
            rope.append(h * s.head_dim + (-(-s.n_kv_head // tp)) * s.head_dim)
            lora = []
        for column, value in zip((kv, attn, qo), att):
            column.append(float(value))
        widths = lora + ([h * s.head_dim, (-(-s.n_kv_head // tp)) * s.head_dim] if s.qk_norm else [])
        norms.append(len(widths))
        width.append(sum(widths) / len(widths) if widths else 0.0)
    return dict(kv_elements=col(kv), attn_width=col(attn), qo_elements=col(qo), rope_width=col(rope),
                extra_norms=col(norms), extra_norm_width=col(width), mla=col([float(s.is_mla) for s in specs]))


def _moe_columns(specs, tp: int, ep: int, col, single: bool, extra_dims: int) -> dict:
    """Per-GPU MoE shapes: experts split ep ways whole and each tensor-split tp/ep ways (vLLM FusedMoE with
    expert parallelism; SGLang ``--ep-size``), shared experts tensor-split tp ways; skewed routers as per-expert
    pick probabilities (:func:`sdsl.catalog.moe.selection_probabilities`), zero-padded to the widest model."""
    tp_e = tp // ep
    n_up = [2 if s.gated_mlp else 1 for s in specs]
    out = dict(
        n_dense=col([s.n_dense_layers for s in specs]), n_moe=col([s.n_moe_layers for s in specs]),
        n_experts=col([max(s.n_experts, 1) for s in specs]), top_k=col([max(s.experts_per_token, 1) for s in specs]),
        expert_up=col([u * -(-s.expert_d_ff // tp_e) for u, s in zip(n_up, specs)]),
        expert_down_in=col([-(-s.expert_d_ff // tp_e) for s in specs]),
        shared=col([float(s.shared_expert_width > 0) for s in specs]),
        shared_up=col([u * -(-s.shared_expert_width // tp) for u, s in zip(n_up, specs)]),
        shared_down_in=col([-(-s.shared_expert_width // tp) for s in specs]),
        locality=col([s.effective_routing_locality if s.is_moe else 0.0 for s in specs]),
    )
    if any(s.routing_skew or s.expert_load for s in specs):
        width = max(s.n_experts for s in specs)
        probs = np.zeros((len(specs), width))
        for i, s in enumerate(specs):
            if s.is_moe:
                probs[i, :s.n_experts] = selection_probabilities(s.n_experts, s.experts_per_token,
                                                                 load=s.expert_load or None, skew=s.routing_skew)
        out["expert_probs"] = probs[0] if single else probs.reshape((len(specs),) + (1,) * extra_dims + (width,))
    return out
