"""Transformer shapes: exact parameter counts, and FLOPs and bytes of one forward pass.

:class:`ModelSpec` describes a decoder-only transformer precisely enough to count every
parameter of its Hugging Face checkpoint (biases, LayerNorm vs RMSNorm, learned position tables,
OPT-350M's embedding projections, tied embeddings). The catalog lives in
``sdsl/data/models.toml``; each entry records the parameter count its model card / paper
publishes and where that figure comes from, and ``tests/test_architecture.py`` checks every
computed total against it (1%).

Cost of one forward pass over a batch of ``b`` sequences, ``q`` new tokens each, with ``L``
tokens already in the KV cache (docs/model.md §3.3; the 2·N FLOPs-per-token rule is Kaplan et al.,
"Scaling Laws for Neural Language Models", 2020, Table 1; attention as in Chinchilla App. F):

    FLOPs = 2·P_nonemb·b·q + 2·P_lmhead·b·q + 4·n_layer·n_head·d_head·b·q·(L + q/2)
    bytes = W + b·L·kv + b·q·kv + activations

where ``kv`` is :meth:`ModelSpec.kv_bytes_per_token` and ``W`` the weights a forward reads.

Beyond the dense decoder (docs/model.md §3.8): mixture-of-experts layers (routed experts, experts per
token, shared experts, dense-first layers, interleaved MoE layers; Shazeer et al. 2017, Fedus et al. 2022,
DeepSeek-AI arXiv 2401.06066), multi-head latent attention (DeepSeek-V2, arXiv 2405.04434 §2.1),
grouped/multi-query attention, sliding-window and chunked local attention on some layers (gpt-oss,
Gemma-3, Llama-4), per-head q/k norms and attention sinks. For an MoE model the FLOPs above count the
parameters a token uses (:meth:`ModelSpec.active_params`), and ``W`` the experts a batch touches
(:mod:`sdsl.catalog.moe`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from sdsl._io import load_json, load_shipped_toml
from sdsl.catalog.dtypes import DTYPE_BYTES, dtype_bytes
from sdsl.catalog.model_variants import ACTIVE_CONVENTIONS, VariantCounts, local_context  # noqa: F401
from sdsl.errors import ConfigError, InvalidInputError, UnknownNameError

__all__ = ["ModelSpec", "dtype_bytes", "get_model", "list_models", "DTYPE_BYTES", "ACTIVE_CONVENTIONS"]

_NORMS = ("rmsnorm", "layernorm")


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


@dataclass(frozen=True)
class ModelSpec(VariantCounts):
    """Shape of a decoder-only transformer.

    Attributes:
        name: lower-case catalog name (``"llama-3.1-8b"``).
        family: ``"llama"``, ``"qwen2"``, ``"opt"``, ``"gpt_neox"``, ``"mistral"``, ``"phi"``, ``"seed_oss"`` ...
        n_layer, d_model, n_head, n_kv_head, d_ff, vocab_size: the usual shapes.
        gated_mlp: SwiGLU-style gate+up (3 matrices) instead of up/down (2 matrices).
        tied_embeddings: the lm head shares the input embedding matrix.
        max_context: longest context the model was trained for.
        head_dim: per-head width; ``None`` means ``d_model // n_head``.
        norm: ``"rmsnorm"`` (weight only) or ``"layernorm"`` (weight and bias).
        qkv_bias, attn_out_bias, mlp_bias: which linear layers carry a bias.
        learned_pos: rows of a learned absolute position table (OPT: max positions + offset 2), 0 if none.
        embed_proj_dim: token-embedding width when not ``d_model`` (OPT-350M: 512; bias-free ``project_in``/``project_out``).
        final_norm: a norm after the last layer (OPT-350M, post-LN, has none).
        norms_per_layer: norms in each block (2; phi-2's parallel block has 1).
        lm_head_bias: the lm head has a bias (phi-2).
        qk_norm ... expert_load, routing_locality: the architecture variants, :class:`~sdsl.catalog.model_variants.VariantCounts`.
        published_params: the parameter count the model card / paper publishes, or ``None``.
        published_active_params, active_params_convention: an MoE model's published active count and
            what it counts (:data:`ACTIVE_CONVENTIONS`).
        source: where the shapes and the published count come from (for a config.json: the file, and whether it
            matched a catalog model by architecture and shape).
        hf_id: Hugging Face repository id.
        weight_format: the stored weight format a config.json's ``quantization_config`` names (fp8, mxfp4, nvfp4,
            int4; :mod:`sdsl.roofline.weight_formats`), None for weights in the compute dtype; a deployment that
            names no weight format prices the weights in it.
    """

    name: str  # lower-case catalog name (llama-3.1-8b)
    family: str  # llama, qwen2, opt, gpt_neox, mistral, phi, seed_oss ...
    n_layer: int  # decoder layers
    d_model: int  # hidden width (elements)
    n_head: int  # query heads
    n_kv_head: int  # key/value heads (GQA: fewer than n_head)
    d_ff: int  # FFN width of a dense layer (elements)
    vocab_size: int  # tokens in the vocabulary
    gated_mlp: bool = True  # SwiGLU gate + up + down (3 matrices), else up + down (2)
    tied_embeddings: bool = False  # the lm head shares the input embedding matrix
    max_context: int = 4096  # tokens, the longest context the model was trained for
    head_dim: int | None = None  # elements per head (None = d_model // n_head)
    norm: str = "rmsnorm"  # rmsnorm (weight) or layernorm (weight and bias)
    qkv_bias: bool = False  # the q/k/v projections carry a bias
    attn_out_bias: bool = False  # the attention output projection carries a bias
    mlp_bias: bool = False  # the FFN linears carry a bias
    learned_pos: int = 0  # rows of a learned absolute position table (0 = none; OPT: max positions + 2)
    embed_proj_dim: int | None = None  # token-embedding width when not d_model (OPT-350M: 512; None = d_model)
    final_norm: bool = True  # a norm after the last layer (post-LN OPT-350M has none)
    norms_per_layer: int = 2  # norms in each block (2; phi-2's parallel block 1)
    lm_head_bias: bool = False  # the lm head has a bias (phi-2)
    qk_norm: bool = False  # RMSNorm over every query and key head (Qwen3, Gemma-3)
    attention_sinks: bool = False  # a learned sink logit per head (gpt-oss)
    sliding_window: int = 0  # tokens a local layer attends to (0 = none)
    local_layers: int = 0  # layers that attend only to the last sliding_window tokens
    chunked_attention: bool = False  # local layers attend within fixed chunks of sliding_window tokens (Llama-4)
    kv_lora_rank: int = 0  # MLA latent width in the KV cache (0 = not MLA; DeepSeek-V2/V3)
    q_lora_rank: int = 0  # MLA query latent width (0 = uncompressed query)
    qk_rope_head_dim: int = 0  # MLA RoPE key width per head (elements)
    qk_nope_head_dim: int = 0  # MLA non-RoPE query/key width per head (elements)
    v_head_dim: int = 0  # MLA value width per head (elements)
    n_experts: int = 0  # routed experts per MoE layer (0 = dense)
    experts_per_token: int = 0  # routed experts each token uses (top-k)
    expert_d_ff: int = 0  # FFN width of one expert (elements)
    n_shared_experts: int = 0  # experts every token uses (DeepSeek, GLM-4.5, Llama-4)
    shared_expert_d_ff: int = 0  # FFN width of a shared expert (0 = expert_d_ff)
    first_dense_layers: int = 0  # leading dense layers before the first MoE layer
    moe_layer_step: int = 1  # layer i is MoE when i >= first_dense_layers and (i + 1) % step == 0
    expert_bias: bool = False  # biases on the expert linears (gpt-oss)
    router_bias: bool = False  # a bias on the router or its score correction
    mtp_layers: int = 0  # multi-token-prediction modules shipped beside the model (not counted in its parameters)
    routing_skew: float = 0.0  # power-law exponent of expert popularity on a workload (0 = uniform)
    expert_load: tuple = ()  # measured expert-load histogram, one share per expert (overrides routing_skew)
    routing_locality: float | None = None  # ρ of consecutive positions (None: the measured default)
    published_params: float | None = None  # parameter count the model card / paper publishes (None = unpublished)
    published_active_params: float | None = None  # an MoE model's published active parameter count
    active_params_convention: str = "all"  # what the published active count counts (ACTIVE_CONVENTIONS)
    source: str = ""  # where the shapes and the published count come from
    hf_id: str = ""  # Hugging Face repository id
    weight_format: str | None = None  # stored weight format a config.json's quantization_config names (fp8, ...)

    def __post_init__(self) -> None:
        for attr in ("n_layer", "d_model", "n_head", "n_kv_head", "d_ff", "vocab_size", "max_context"):
            v = getattr(self, attr)
            if not _is_int(v) or v <= 0:
                raise InvalidInputError(f"Model {self.name!r}: {attr} must be a positive integer, got {v!r}.")
        for attr in ("head_dim", "embed_proj_dim"):
            v = getattr(self, attr)
            if v is not None and (not _is_int(v) or v <= 0):
                raise InvalidInputError(f"Model {self.name!r}: {attr} must be a positive integer or absent, got {v!r}.")
        for attr in ("learned_pos", "norms_per_layer", "sliding_window", "local_layers", "kv_lora_rank", "q_lora_rank",
                     "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "n_experts", "experts_per_token",
                     "expert_d_ff", "n_shared_experts", "shared_expert_d_ff", "first_dense_layers", "mtp_layers"):
            v = getattr(self, attr)
            if not _is_int(v) or v < 0:
                raise InvalidInputError(f"Model {self.name!r}: {attr} must be a non-negative integer, got {v!r}.")
        self._check_variants()
        if self.head_dim is None:
            if self.d_model % self.n_head:
                raise InvalidInputError(
                    f"Model {self.name!r}: n_head={self.n_head} does not divide d_model={self.d_model}; give head_dim."
                )
            object.__setattr__(self, "head_dim", self.d_model // self.n_head)
        if self.n_head % self.n_kv_head:
            raise InvalidInputError(
                f"Model {self.name!r}: n_kv_head={self.n_kv_head} does not divide n_head={self.n_head}."
            )
        if self.norm not in _NORMS:
            raise InvalidInputError(f"Model {self.name!r}: norm must be one of {_NORMS}, got {self.norm!r}.")
        if self.published_params is not None:
            if not isinstance(self.published_params, (int, float)) or not self.published_params > 0:
                raise InvalidInputError(f"Model {self.name!r}: published_params must be positive.")
            object.__setattr__(self, "published_params", float(self.published_params))
        for attr in ("gated_mlp", "tied_embeddings", "qkv_bias", "attn_out_bias", "mlp_bias", "final_norm", "lm_head_bias",
                     "qk_norm", "attention_sinks", "chunked_attention", "expert_bias", "router_bias"):
            object.__setattr__(self, attr, bool(getattr(self, attr)))
        for attr in ("n_layer", "d_model", "n_head", "n_kv_head", "d_ff", "vocab_size", "max_context", "learned_pos"):
            object.__setattr__(self, attr, int(getattr(self, attr)))

    # ---- shapes -------------------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        """Width of the query projection, n_head·head_dim."""
        return self.n_head * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of each of the key and value projections, n_kv_head·head_dim."""
        return self.n_kv_head * self.head_dim

    @property
    def embed_dim(self) -> int:
        """Width of the token embedding and of the lm head's input."""
        return self.embed_proj_dim or self.d_model

    # ---- parameter counts ---------------------------------------------------------------
    @property
    def _norm_params(self) -> int:
        return (2 if self.norm == "layernorm" else 1) * self.d_model

    @property
    def params_per_layer(self) -> int:
        """Parameters of one dense transformer block (attention, MLP of width d_ff, their biases, the norms)."""
        return self.attention_params + self.mlp_params(self.d_ff) + self.norms_per_layer * self._norm_params

    @property
    def embedding_params(self) -> int:
        """Input token embedding plus any learned position table."""
        return self.vocab_size * self.embed_dim + self.learned_pos * self.d_model

    @property
    def lm_head_params(self) -> int:
        """Weights of the output projection (vocab × embed_dim, plus its bias if any), counted whether or not tied.

        This is what the lm head costs per token (2·this FLOPs). :attr:`total_params` counts a
        tied matrix once.
        """
        return self.vocab_size * (self.embed_dim + self.lm_head_bias)

    @property
    def non_embedding_params(self) -> int:
        """All blocks, the final norm and OPT-350M's project_in/out: total minus embeddings and lm head."""
        proj = 2 * self.embed_dim * self.d_model if self.embed_dim != self.d_model else 0
        blocks = self.n_dense_layers * self.params_per_layer + self.n_moe_layers * self.params_per_moe_layer
        return blocks + self._norm_params * self.final_norm + proj

    @property
    def total_params(self) -> int:
        """Every distinct parameter of the checkpoint (tied matrices once)."""
        head = 0 if self.tied_embeddings else self.lm_head_params
        return self.non_embedding_params + self.embedding_params + head

    # ---- per-GEMM shapes ----------------------------------------------------------------
    def linear_layers(self, tp: int = 1) -> dict[str, tuple[int, int]]:
        """Per-layer GEMM shapes ``(in_features, out_features)`` on one of ``tp`` tensor-parallel workers.

        Keys follow Vidur's operator names: ``attn_pre_proj`` (fused QKV, column-parallel),
        ``attn_post_proj`` (row-parallel), ``mlp_up_proj`` (fused gate+up when gated), ``mlp_down_proj``;
        plus the model-level ``lm_head`` (vocab split ``tp`` ways). KV heads fewer than ``tp`` are
        replicated (one per worker), as vLLM does. OPT-350M's two small embedding projections are
        not listed (they are in :meth:`forward_flops`). An MLA model lists its fused q_a/kv_a projection
        (replicated on every worker) as ``attn_pre_proj`` plus ``attn_q_proj`` and ``attn_kv_b_proj``; an MoE
        model's ``mlp_*`` are its dense layers' MLP (its experts are priced by :mod:`sdsl.roofline.latency`).
        """
        if not _is_int(tp) or tp <= 0:
            raise InvalidInputError(f"tp must be a positive integer, got {tp!r}.")
        if self.n_head % tp:
            raise InvalidInputError(f"tp={tp} does not divide n_head={self.n_head} of {self.name}.")
        if self.n_kv_head % tp and tp % self.n_kv_head:
            raise InvalidInputError(f"tp={tp} and n_kv_head={self.n_kv_head} of {self.name} do not divide each other.")
        ff_local = -(-self.d_ff // tp)
        n_up = 2 if self.gated_mlp else 1
        if self.is_mla:
            return self._mla_linear_layers(tp, ff_local, n_up)
        q_local = self.q_dim // tp
        kv_local = max(1, self.n_kv_head // tp) * self.head_dim
        return {
            "attn_pre_proj": (self.d_model, q_local + 2 * kv_local),
            "attn_post_proj": (q_local, self.d_model),
            "mlp_up_proj": (self.d_model, n_up * ff_local),
            "mlp_down_proj": (ff_local, self.d_model),
            "lm_head": (self.embed_dim, -(-self.vocab_size // tp)),
        }

    # ---- bytes and FLOPs ----------------------------------------------------------------
    def kv_bytes_per_token(self, dtype: str = "bf16") -> int:
        """KV-cache bytes one token occupies on one GPU, all layers: 2·n_layer·n_kv_head·head_dim·bytes (MLA:
        n_layer·(kv_lora_rank + qk_rope_head_dim)·bytes). A local-attention layer keeps only its window, so a
        sequence's cache is :meth:`kv_cache_bytes` of its length; under tensor parallelism see
        :func:`sdsl.roofline.latency.kv_cache_bytes_per_gpu`."""
        return self.n_layer * self.kv_elements_per_layer * dtype_bytes(dtype)

    def weight_bytes(self, dtype: str = "bf16") -> int:
        """Bytes of every distinct parameter stored in ``dtype``."""
        return self.total_params * dtype_bytes(dtype)

    # ---- (de)serialisation --------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """All fields as a JSON-ready dict (``from_dict(to_dict())`` round-trips)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ModelSpec":
        """Build from a dict of field values; unknown keys raise :class:`~sdsl.errors.ConfigError`."""
        if not isinstance(data, Mapping):
            raise ConfigError("A model spec must be a mapping of field names to values.")
        names = {f.name for f in fields(cls)}
        if unknown := sorted(set(data) - names):
            raise ConfigError(f"Unknown model spec key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(names))}.")
        missing = [k for k in ("name", "family", "n_layer", "d_model", "n_head", "n_kv_head", "d_ff", "vocab_size") if k not in data]
        if missing:
            raise ConfigError(f"Model spec {data.get('name', '?')!r} lacks required key(s) {', '.join(missing)}.")
        return cls(**dict(data))

    @classmethod
    def from_hf_config(cls, path: str | Path, name: str | None = None) -> "ModelSpec":
        """Read a Hugging Face ``config.json`` (or a directory holding one).

        Supported ``model_type``: llama, mistral, qwen2 (Qwen1.5 and Qwen2.5), opt, gpt_neox (Pythia),
        phi, seed_oss, qwen3, qwen3_moe, mixtral, deepseek_v2, deepseek_v3, kimi_k2, gpt_oss, llama4 (its
        ``text_config``), glm4_moe, gemma3 (its ``text_config``). A missing or malformed file or another model
        type raises :class:`~sdsl.errors.ConfigError`.
        """
        from sdsl.catalog.hf_config import spec_fields_from_hf  # keeps this module short

        p = Path(path)
        if p.is_dir():
            p = p / "config.json"
        cfg = load_json(p)
        if not isinstance(cfg, dict):
            raise ConfigError(f"{p} must hold a JSON object.")
        try:
            return cls(**spec_fields_from_hf(cfg, str(p), name))
        except InvalidInputError as exc:
            raise ConfigError(f"{p} describes an invalid model: {exc}") from None

    def summary(self) -> str:
        """One line: name, total parameters, layers × width."""
        return (
            f"{self.name}: {self.total_params / 1e9:.3f}B params, {self.n_layer} layers × d={self.d_model}, "
            f"{self.n_head}/{self.n_kv_head} heads"
        )


# ---- catalog ------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _entries() -> dict[str, dict]:
    """models.toml's entries by name, each spec built on first use (:func:`_spec`)."""
    from sdsl._paths import data_path

    out = {}
    for key, entry in load_shipped_toml(data_path("models.toml")).items():
        out[key] = entry = dict(entry)
        entry.setdefault("name", key)
        if entry["name"] != key:
            raise ConfigError(f"models.toml: entry {key!r} has name {entry['name']!r}; they must match.")
    return out


@lru_cache(maxsize=None)
def _spec(key: str) -> ModelSpec:
    return ModelSpec.from_dict(_entries()[key])


@lru_cache(maxsize=1)
def _catalog() -> tuple[ModelSpec, ...]:
    return tuple(_spec(key) for key in _entries())


#: The fields that make two specs one model: the architecture and every shape the roofline prices (not the name,
#: the file, the context length an instruct variant extends, or the published counts).
_SHAPE_FIELDS = ("family", "n_layer", "d_model", "n_head", "n_kv_head", "d_ff", "vocab_size", "head_dim", "gated_mlp",
                 "tied_embeddings", "qkv_bias", "qk_norm", "sliding_window", "local_layers", "kv_lora_rank",
                 "q_lora_rank", "n_experts", "experts_per_token", "expert_d_ff", "n_shared_experts",
                 "shared_expert_d_ff", "first_dense_layers", "moe_layer_step", "mtp_layers")


def _shape_key(spec: ModelSpec) -> tuple:
    return tuple(getattr(spec, f) for f in _SHAPE_FIELDS)


def catalog_match(spec: ModelSpec) -> ModelSpec:
    """A spec read from a config.json, recognised by its architecture and shape (:data:`_SHAPE_FIELDS`), not its file
    name: when a catalog model has them (its Hugging Face id first), the spec takes that model's name, so the
    published acceptance and everything keyed by name price it as the catalog model; ``source`` says whether it
    matched. The config's own fields (its weight format included) are kept."""
    from dataclasses import replace

    same = [m for m in _catalog() if _shape_key(m) == _shape_key(spec)]
    # models of one shape (Llama-3-8B and Llama-3.1-8B): the config's own repository first, then its context length
    same.sort(key=lambda m: (m.hf_id.lower() != spec.hf_id.lower(), m.max_context != spec.max_context))
    if not same:
        return replace(spec, source=f"{spec.source}: no catalog model has this architecture and shape")
    m = same[0]
    return replace(spec, name=m.name, hf_id=spec.hf_id or m.hf_id, published_params=m.published_params,
                   published_active_params=m.published_active_params,
                   active_params_convention=m.active_params_convention,
                   source=f"{spec.source}: matched catalog model {m.name} by architecture and shape")


def list_models(vocab_size: int | None = None) -> list[ModelSpec]:
    """Every catalog model, in catalog order; with ``vocab_size``, those of that vocabulary (the others unbuilt)."""
    if vocab_size is None:
        return list(_catalog())
    return [_spec(key) for key, entry in _entries().items() if entry.get("vocab_size") == vocab_size]


def get_model(name_or_path: str | Path | ModelSpec) -> ModelSpec:
    """A catalog model by name or Hugging Face id (case-insensitive), or a spec read from a ``config.json`` path.

    An unknown name raises :class:`~sdsl.errors.UnknownNameError` that lists the closest names.
    """
    if isinstance(name_or_path, ModelSpec):
        return name_or_path
    text = str(name_or_path).strip()
    key = text.lower().replace("_", "-").replace(" ", "-")
    if key in _entries():
        return _spec(key)
    by_hf = {m.hf_id.lower(): m for m in _catalog() if m.hf_id}
    if text.lower() in by_hf and not Path(text).exists():  # "meta-llama/Llama-3.1-8B"
        return by_hf[text.lower()]
    if isinstance(name_or_path, Path) or "/" in text or "\\" in text or text.endswith(".json") or Path(text).exists():
        return catalog_match(ModelSpec.from_hf_config(text))
    import difflib

    close = difflib.get_close_matches(key, list(_entries()), n=3, cutoff=0.5)
    hint = f"closest: {', '.join(close)}" if close else "see `sdsl models`"
    raise UnknownNameError(f"Unknown model {text!r} ({hint}); pass a catalog name or a path to a config.json.")

