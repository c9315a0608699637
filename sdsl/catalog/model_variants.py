"""Architecture variants of :class:`sdsl.catalog.models.ModelSpec`: mixture-of-experts layers, multi-head
latent attention, local attention, per-head q/k norms and attention sinks (docs/model.md §3.8).

:class:`VariantCounts` holds the parameter counts and KV sizes these variants change, and the FLOPs and bytes
of one forward pass (docs/model.md §3.3: 2·N FLOPs per token, Kaplan et al. 2020 Table 1; attention as in
Chinchilla App. F); ``ModelSpec`` inherits it, so every count below reads the spec's own fields.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdsl.catalog.dtypes import dtype_bytes
from sdsl.catalog.moe import ROUTING_LOCALITY, expected_distinct_experts, locality_tokens
from sdsl.errors import InvalidInputError

__all__ = ["VariantCounts", "ACTIVE_CONVENTIONS", "local_context", "check_bqL"]

#: What a published "active parameters" figure counts besides the layers a token runs (docs/model.md §3.8):
#: "all" also the embedding table and LM head (Mistral, Qwen, Meta), "no-input-embedding" the LM head but not
#: the embedding table (a lookup; OpenAI's gpt-oss card), "no-embeddings" neither.
ACTIVE_CONVENTIONS = ("all", "no-input-embedding", "no-embeddings")


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def local_context(context, model) -> np.ndarray:
    """Cached tokens a local-attention layer of ``model`` attends to at ``context``: min(L, W) for a sliding
    window (Beltagy et al., Longformer 2020; gpt-oss, Gemma-3), L mod W for chunked attention (Llama-4: a
    token attends within its chunk of W). Broadcasts; W = model.sliding_window (0: no local layers)."""
    L = np.asarray(context, dtype=float)
    w = float(model.sliding_window)
    if not w:
        return L
    return np.mod(L, w) if model.chunked_attention else np.minimum(L, w)


def check_bqL(batch: Any, q: Any, context: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    b = np.asarray(batch, dtype=float)
    qq = np.asarray(q, dtype=float)
    L = np.asarray(context, dtype=float)
    if not np.all(np.isfinite(b)) or np.any(b <= 0):
        raise InvalidInputError("batch must be positive.")
    if not np.all(np.isfinite(qq)) or np.any(qq <= 0):
        raise InvalidInputError("q (new tokens per sequence) must be positive.")
    if not np.all(np.isfinite(L)) or np.any(L < 0):
        raise InvalidInputError("context must be non-negative.")
    return b, qq, L


class VariantCounts:
    """Counts and sizes of the MoE, MLA and local-attention variants (a mixin of ModelSpec; no fields).

    The fields these read (ModelSpec's):

    qk_norm: an RMSNorm over every query and key head (Qwen3, Gemma-3): 2·head_dim weights per layer.
    attention_sinks: a learned sink logit per head (gpt-oss): n_head weights per layer, no KV.
    sliding_window, local_layers: ``local_layers`` of the ``n_layer`` layers attend only to the last
        ``sliding_window`` tokens (gpt-oss: 18 of 36 at 128; Gemma-3: 5 of every 6 at 1024); 0 = none.
    chunked_attention: those layers attend within fixed chunks of ``sliding_window`` tokens instead
        (Llama-4's chunked local attention, 8192).
    kv_lora_rank, q_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim: multi-head latent
        attention (DeepSeek-V2/V3): the KV cache holds a ``kv_lora_rank`` latent plus a
        ``qk_rope_head_dim`` RoPE key per token and layer; ``q_lora_rank`` 0 = an uncompressed query.
        ``kv_lora_rank`` 0 = not MLA. ``head_dim`` is then the query/key head width, nope + rope.
    n_experts, experts_per_token, expert_d_ff: routed experts per MoE layer, experts each token uses
        (top-k), and each expert's FFN width; ``n_experts`` 0 = a dense model.
    n_shared_experts, shared_expert_d_ff: experts every token uses (DeepSeek, GLM-4.5, Llama-4), each
        ``shared_expert_d_ff`` wide (0 = ``expert_d_ff``).
    first_dense_layers, moe_layer_step: layer i (from 0) is an MoE layer when i >= first_dense_layers and
        (i + 1) is a multiple of moe_layer_step (DeepSeek ``first_k_dense_replace``, Llama-4
        ``interleave_moe_layer_step``); the others are dense layers of width ``d_ff``.
    expert_bias, router_bias: biases on the expert linears (gpt-oss) and on the router / its score
        correction (gpt-oss; DeepSeek-V3 and GLM-4.5 ``e_score_correction_bias``).
    mtp_layers: multi-token-prediction modules shipped beside the model (not counted in its parameters).
    routing_skew, expert_load: how unevenly the router spreads tokens over the experts on a workload — a
        power-law exponent α of expert popularity (h_i ∝ i^−α; 0 = uniform) or a measured expert-load
        histogram (one share per expert); :func:`sdsl.catalog.moe.selection_probabilities`.
    routing_locality: the share ρ of a position's experts its successor in the same sequence keeps beyond chance
        (:func:`sdsl.catalog.moe.locality_tokens`); None: :data:`sdsl.catalog.moe.ROUTING_LOCALITY`, measured.
    """

    def _check_variants(self) -> None:
        """Consistency of the MoE, MLA and local-attention fields (one sentence per problem)."""
        bad = None
        if self.local_layers > self.n_layer:
            bad = f"local_layers={self.local_layers} exceeds n_layer={self.n_layer}"
        elif (self.sliding_window > 0) != (self.local_layers > 0):
            bad = "sliding_window and local_layers must both be set (or both 0)"
        elif self.kv_lora_rank and not (self.qk_rope_head_dim and self.qk_nope_head_dim and self.v_head_dim):
            bad = "an MLA model (kv_lora_rank > 0) needs qk_rope_head_dim, qk_nope_head_dim and v_head_dim"
        elif self.kv_lora_rank and self.head_dim not in (None, self.qk_rope_head_dim + self.qk_nope_head_dim):
            bad = "an MLA model's head_dim must be qk_nope_head_dim + qk_rope_head_dim"
        elif self.n_experts and not (1 <= self.experts_per_token <= self.n_experts and self.expert_d_ff > 0):
            bad = "an MoE model needs 1 <= experts_per_token <= n_experts and expert_d_ff > 0"
        elif not self.n_experts and (self.experts_per_token or self.n_shared_experts):
            bad = "experts_per_token and n_shared_experts need n_experts > 0"
        elif not _is_int(self.moe_layer_step) or self.moe_layer_step < 1:
            bad = f"moe_layer_step must be a positive integer, got {self.moe_layer_step!r}"
        elif self.first_dense_layers > self.n_layer:
            bad = f"first_dense_layers={self.first_dense_layers} exceeds n_layer={self.n_layer}"
        elif not (isinstance(self.routing_skew, (int, float)) and np.isfinite(self.routing_skew) and self.routing_skew >= 0):
            bad = f"routing_skew must be a non-negative number, got {self.routing_skew!r}"
        elif self.routing_locality is not None and not (isinstance(self.routing_locality, (int, float))
                                                         and 0 <= self.routing_locality < 1):
            bad = f"routing_locality must lie in [0, 1), got {self.routing_locality!r}"
        elif self.expert_load and (len(self.expert_load) != self.n_experts
                                   or not all(isinstance(x, (int, float)) and x >= 0 for x in self.expert_load)
                                   or sum(self.expert_load) <= 0):
            bad = f"expert_load must hold n_experts={self.n_experts} non-negative shares, not all zero"
        elif self.active_params_convention not in ACTIVE_CONVENTIONS:
            bad = f"active_params_convention must be one of {ACTIVE_CONVENTIONS}, got {self.active_params_convention!r}"
        elif self.published_active_params is not None and not (
                isinstance(self.published_active_params, (int, float)) and self.published_active_params > 0):
            bad = "published_active_params must be positive"
        if bad:
            raise InvalidInputError(f"Model {self.name!r}: {bad}.")
        if self.published_active_params is not None:
            object.__setattr__(self, "published_active_params", float(self.published_active_params))
        if self.kv_lora_rank and self.head_dim is None:
            object.__setattr__(self, "head_dim", self.qk_rope_head_dim + self.qk_nope_head_dim)
        object.__setattr__(self, "expert_load", tuple(float(x) for x in self.expert_load))
        object.__setattr__(self, "routing_skew", float(self.routing_skew))

    @property
    def effective_routing_locality(self) -> float:
        """The routing locality ρ that prices this model: its own, else the measured default."""
        return ROUTING_LOCALITY if self.routing_locality is None else float(self.routing_locality)

    @property
    def is_moe(self) -> bool:
        """Has mixture-of-experts layers."""
        return self.n_experts > 0

    @property
    def is_mla(self) -> bool:
        """Uses multi-head latent attention (a compressed KV latent)."""
        return self.kv_lora_rank > 0

    @property
    def n_moe_layers(self) -> int:
        """Layers whose MLP is routed experts: i >= first_dense_layers with (i + 1) % moe_layer_step == 0."""
        if not self.is_moe:
            return 0
        return sum(1 for i in range(self.first_dense_layers, self.n_layer) if (i + 1) % self.moe_layer_step == 0)

    @property
    def n_dense_layers(self) -> int:
        """Layers with a dense MLP of width d_ff."""
        return self.n_layer - self.n_moe_layers

    @property
    def kv_elements_per_layer(self) -> int:
        """KV-cache elements one token adds to one layer (one GPU, no tensor parallelism): K and V of every KV
        head, or for MLA the latent plus the shared RoPE key (DeepSeek-V2 §2.1.2: (d_c + d_h^R) per token)."""
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.kv_dim

    @property
    def attention_params(self) -> int:
        """Parameters of one layer's attention: projections and their biases, q/k norms, sinks. MLA (DeepSeek-V2
        §2.1, HF DeepseekV3Attention): q_a (d × q_lora) + its norm + q_b (q_lora × h·(nope+rope)) or one q
        projection; kv_a (d × (kv_lora + rope)) + its norm; kv_b (kv_lora × h·(nope + v)); o (h·v × d)."""
        d, h = self.d_model, self.n_head
        if self.is_mla:
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = (d * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * h * qk) if self.q_lora_rank else d * h * qk
            kv = d * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
            kv += self.kv_lora_rank * h * (self.qk_nope_head_dim + self.v_head_dim)
            attn = q + kv + h * self.v_head_dim * d + d * self.attn_out_bias
        else:
            qd, kd = self.q_dim, self.kv_dim
            attn = d * qd + 2 * d * kd + qd * d
            attn += (qd + 2 * kd) * self.qkv_bias + d * self.attn_out_bias
        return attn + 2 * self.head_dim * self.qk_norm + h * self.attention_sinks

    def mlp_params(self, d_ff: int, bias: bool | None = None) -> int:
        """Parameters of one MLP of width ``d_ff`` (gate+up+down when gated), with biases when ``bias``
        (default: ``mlp_bias``)."""
        n_up = 2 if self.gated_mlp else 1
        bias = self.mlp_bias if bias is None else bias
        return (n_up + 1) * self.d_model * d_ff + (n_up * d_ff + self.d_model) * bias

    @property
    def expert_params(self) -> int:
        """Parameters of one routed expert (0 for a dense model)."""
        return self.mlp_params(self.expert_d_ff, self.expert_bias) if self.is_moe else 0

    @property
    def shared_expert_width(self) -> int:
        """FFN width of all shared experts together (one dense MLP that every token runs)."""
        return self.n_shared_experts * (self.shared_expert_d_ff or self.expert_d_ff)

    @property
    def router_params(self) -> int:
        """The router's d × n_experts weights (and its bias / score correction)."""
        return self.d_model * self.n_experts + self.n_experts * self.router_bias

    @property
    def params_per_moe_layer(self) -> int:
        """Parameters of one MoE block: attention, router, every routed expert, the shared experts, the norms."""
        shared = self.mlp_params(self.shared_expert_width, False) if self.shared_expert_width else 0
        return (self.attention_params + self.router_params + self.n_experts * self.expert_params + shared
                + self.norms_per_layer * self._norm_params)

    @property
    def inactive_expert_params(self) -> int:
        """Routed-expert parameters one token does not use: (n_experts − k) experts in every MoE layer."""
        return self.n_moe_layers * (self.n_experts - self.experts_per_token) * self.expert_params

    def active_params(self, convention: str | None = None) -> int:
        """Parameters one token uses: every layer, its k routed experts and the shared ones, plus per
        ``convention`` (:data:`ACTIVE_CONVENTIONS`; default this model's ``active_params_convention``) the
        embedding table and the LM head. For a dense model with "all" this is :attr:`total_params`."""
        convention = self.active_params_convention if convention is None else convention
        if convention not in ACTIVE_CONVENTIONS:
            raise InvalidInputError(f"convention must be one of {ACTIVE_CONVENTIONS}; got {convention!r}.")
        layers = self.non_embedding_params - self.inactive_expert_params
        if convention == "all":
            return self.total_params - self.inactive_expert_params
        return layers + (self.lm_head_params if convention == "no-input-embedding" else 0)

    def kv_cache_bytes(self, context: Any = 1, dtype: str = "bf16") -> np.ndarray:
        """KV-cache bytes of one sequence of ``context`` tokens on one GPU: global layers hold every token, the
        ``local_layers`` only their window (sliding: min(L, W); chunked: L mod W, the current chunk)."""
        L = np.asarray(context, dtype=float)
        return self.kv_elements_per_layer * dtype_bytes(dtype) * (
            (self.n_layer - self.local_layers) * L + self.local_layers * local_context(L, self))

    def _attention_flops_per_token(self, L, qq) -> np.ndarray:
        """Attention-score and value FLOPs per new token, all layers: 2·n_head·(qk + v)·(context seen), where a
        local layer sees its window; MLA in the absorbed form engines decode with (DeepSeek-V2 §2.1.2, App. C):
        scores over the latent + RoPE key (kv_lora + rope) and values in the latent (kv_lora)."""
        if self.is_mla:
            width = 2.0 * self.n_head * (2 * self.kv_lora_rank + self.qk_rope_head_dim)
        else:
            width = 4.0 * self.n_head * self.head_dim
        seen = (self.n_layer - self.local_layers) * (L + qq / 2.0) + self.local_layers * (local_context(L, self) + qq / 2.0)
        return width * seen

    def _mla_linear_layers(self, tp: int, ff_local: int, n_up: int) -> dict:
        """MLA's per-worker GEMM shapes (vLLM DeepseekV2MLAAttention: the fused q_a/kv_a projection replicated,
        q_b and kv_b column-parallel, o row-parallel)."""
        h = self.n_head // tp
        rope, nope = self.qk_rope_head_dim, self.qk_nope_head_dim
        return {
            "attn_pre_proj": (self.d_model, self.q_lora_rank + self.kv_lora_rank + rope),
            "attn_q_proj": (self.q_lora_rank or self.d_model, h * (nope + rope)),
            "attn_kv_b_proj": (self.kv_lora_rank, h * (nope + self.v_head_dim)),
            "attn_post_proj": (h * self.v_head_dim, self.d_model),
            "mlp_up_proj": (self.d_model, n_up * ff_local),
            "mlp_down_proj": (ff_local, self.d_model),
            "lm_head": (self.embed_dim, -(-self.vocab_size // tp)),
        }

    def _moe_activation_elems(self, per_layer: int) -> int:
        """GEMM activations per token over the layers of an MoE model: the dense layers' MLP, the k experts'."""
        n_up = 2 if self.gated_mlp else 1
        mlp = (self.d_model + n_up * self.d_ff) + (self.d_ff + self.d_model)
        moe = self.experts_per_token * ((self.d_model + n_up * self.expert_d_ff) + (self.expert_d_ff + self.d_model))
        return self.n_layer * (per_layer - mlp) + self.n_dense_layers * mlp + self.n_moe_layers * moe

    def _variant_flops(self, tokens, L, qq) -> np.ndarray:
        """Forward FLOPs of an MoE / MLA / local-attention model: 2 per active parameter (the k routed experts,
        not all E) per token, plus attention."""
        matmul = 2.0 * self.active_params("no-input-embedding") * tokens
        return np.asarray(matmul + tokens * self._attention_flops_per_token(L, qq), dtype=float)

    def _variant_bytes(self, weights, b, tokens, L, per_token, dtype: str) -> np.ndarray:
        """Forward bytes of an MoE / local-attention model: only the experts the tokens touch, and each local
        layer's window of the KV cache."""
        if self.is_moe:
            routed = locality_tokens(tokens, b, self.effective_routing_locality)
            untouched = self.n_experts - expected_distinct_experts(self.n_experts, self.experts_per_token, routed)
            weights = weights - self.n_moe_layers * untouched * self.expert_params * dtype_bytes(dtype)
        return np.asarray(weights + b * self.kv_cache_bytes(L, dtype) + tokens * per_token, dtype=float)

    # ---- forward FLOPs and bytes (all variants) -------------------------------------------
    def _forward_weight_params(self) -> int:
        # a forward reads every block and the lm head; embeddings only b·q rows (added separately)
        return self.non_embedding_params + self.lm_head_params

    def _activation_elems_per_token(self) -> int:
        # every GEMM reads its input and writes its output once (flash attention: no score matrix); an MoE
        # layer's k experts each read and write their token once
        layers = self.linear_layers(1)
        per_layer = sum(i + o for k, (i, o) in layers.items() if k != "lm_head")
        i, o = layers["lm_head"]
        if self.is_moe:
            return self._moe_activation_elems(per_layer) + i + o
        return self.n_layer * per_layer + i + o

    def forward_flops(self, batch: Any = 1, q: Any = 1, context: Any = 0) -> np.ndarray:
        """FLOPs of one forward pass (docs/model.md §3.3; Kaplan et al. 2020, Table 1), broadcasting.

        ``2·P_nonemb·b·q + 2·P_lmhead·b·q + 4·n_layer·n_head·d_head·b·q·(L + q/2)``: the q new tokens
        attend to the L cached tokens and, causally, to on average q/2 of each other.
        """
        b, qq, L = check_bqL(batch, q, context)
        tokens = b * qq
        if self.is_moe or self.is_mla or self.local_layers:
            return self._variant_flops(tokens, L, qq)
        dense = 2.0 * (self.non_embedding_params + self.lm_head_params) * tokens
        attn = 4.0 * self.n_layer * self.n_head * self.head_dim * tokens * (L + qq / 2.0)
        return np.asarray(dense + attn, dtype=float)

    def forward_bytes(self, batch: Any = 1, q: Any = 1, context: Any = 0, dtype: str = "bf16") -> np.ndarray:
        """Bytes one forward pass moves to/from device memory (docs/model.md §3.3), broadcasting.

        weights (every block and the lm head once, plus b·q embedding rows) + KV read b·L·kv +
        KV write b·q·kv + activations (each GEMM's input and output once per token).
        """
        b, qq, L = check_bqL(batch, q, context)
        db = dtype_bytes(dtype)
        kv = self.kv_bytes_per_token(dtype)
        tokens = b * qq
        weights = self._forward_weight_params() * db
        per_token = (self.embed_dim + self._activation_elems_per_token()) * db + kv
        if self.is_moe or self.local_layers:
            return self._variant_bytes(weights, b, tokens, L, per_token, dtype)
        return np.asarray(weights + b * L * kv + tokens * per_token, dtype=float)
