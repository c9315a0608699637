"""Map a Hugging Face ``config.json`` onto :class:`sdsl.core.architecture.ModelSpec` fields.

Per family, the keys and defaults below are those of the ``transformers`` configuration classes
(LlamaConfig, MistralConfig, Qwen2Config, OPTConfig, GPTNeoXConfig, PhiConfig, SeedOssConfig).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sdsl.errors import ConfigError

__all__ = ["spec_fields_from_hf", "SUPPORTED_MODEL_TYPES"]

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "opt", "gpt_neox", "phi", "seed_oss")


def _get(cfg: dict[str, Any], key: str, origin: str, default: Any = ...) -> Any:
    if key in cfg and cfg[key] is not None:
        return cfg[key]
    if default is ...:
        raise ConfigError(f"{origin} lacks the key {key!r} needed for model_type {cfg.get('model_type')!r}.")
    return default


def _int(cfg: dict[str, Any], key: str, origin: str, default: Any = ...) -> int | None:
    v = _get(cfg, key, origin, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConfigError(f"{origin}: {key} must be an integer, got {v!r}.")
    return v


def _default_name(cfg: dict[str, Any], origin: str) -> str:
    name = cfg.get("_name_or_path") or Path(origin).parent.name or Path(origin).stem
    return str(name).rstrip("/").split("/")[-1].lower()


def _decoder_shape(cfg: dict[str, Any], origin: str, *, kv_heads_key: str | None,
                   default_context: int) -> dict[str, Any]:
    """The shape fields that Llama-, Phi- and GPT-NeoX-style configs name alike."""
    n_head = _int(cfg, "num_attention_heads", origin)
    return {
        "n_layer": _int(cfg, "num_hidden_layers", origin),
        "d_model": _int(cfg, "hidden_size", origin),
        "n_head": n_head,
        "n_kv_head": _int(cfg, kv_heads_key, origin, n_head) if kv_heads_key else n_head,
        "d_ff": _int(cfg, "intermediate_size", origin),
        "vocab_size": _int(cfg, "vocab_size", origin),
        "max_context": _int(cfg, "max_position_embeddings", origin, default_context),
        "tied_embeddings": bool(cfg.get("tie_word_embeddings", False)),
    }


def _llama_like(cfg: dict[str, Any], origin: str) -> dict[str, Any]:
    """llama, mistral, qwen2, seed_oss: RMSNorm, gated MLP, grouped-query attention."""
    mt, attn_bias = cfg["model_type"], bool(cfg.get("attention_bias", False))
    out = dict(_decoder_shape(cfg, origin, kv_heads_key="num_key_value_heads", default_context=4096),
               head_dim=_int(cfg, "head_dim", origin, None), gated_mlp=True, norm="rmsnorm",
               mlp_bias=bool(cfg.get("mlp_bias", False)))
    if mt == "qwen2":  # Qwen2Attention: q/k/v with bias, o_proj without
        out.update(qkv_bias=True, attn_out_bias=False)
    elif mt == "seed_oss":
        out.update(qkv_bias=attn_bias, attn_out_bias=bool(cfg.get("attention_out_bias", False)))
    else:  # LlamaAttention: attention_bias applies to q, k, v and o
        out.update(qkv_bias=attn_bias, attn_out_bias=attn_bias)
    return out


def _opt(cfg: dict[str, Any], origin: str) -> dict[str, Any]:
    """OPT: LayerNorm, plain MLP, learned positions with an offset of 2, optional embedding projection."""
    d = _int(cfg, "hidden_size", origin)
    proj = _int(cfg, "word_embed_proj_dim", origin, d)
    bias = bool(cfg.get("enable_bias", True))
    n_pos = _int(cfg, "max_position_embeddings", origin)
    n_head = _int(cfg, "num_attention_heads", origin)
    return dict(
        n_layer=_int(cfg, "num_hidden_layers", origin), d_model=d, n_head=n_head, n_kv_head=n_head,
        d_ff=_int(cfg, "ffn_dim", origin), vocab_size=_int(cfg, "vocab_size", origin), max_context=n_pos,
        tied_embeddings=bool(cfg.get("tie_word_embeddings", True)), gated_mlp=False, norm="layernorm",
        qkv_bias=bias, attn_out_bias=bias, mlp_bias=bias,
        learned_pos=n_pos + 2,  # OPTLearnedPositionalEmbedding keeps an offset of 2
        embed_proj_dim=None if proj == d else proj,
        final_norm=bool(cfg.get("do_layer_norm_before", True)) and not bool(cfg.get("_remove_final_layer_norm", False)),
    )


def _phi(cfg: dict[str, Any], origin: str) -> dict[str, Any]:
    """phi-2: parallel block with one LayerNorm, biased linears and LM head."""
    return dict(_decoder_shape(cfg, origin, kv_heads_key="num_key_value_heads", default_context=2048),
                gated_mlp=False, norm="layernorm", qkv_bias=True, attn_out_bias=True, mlp_bias=True,
                norms_per_layer=1, lm_head_bias=True)


def _gpt_neox(cfg: dict[str, Any], origin: str) -> dict[str, Any]:
    """GPT-NeoX (Pythia): LayerNorm, plain MLP, multi-head attention."""
    bias = bool(cfg.get("attention_bias", True))
    return dict(_decoder_shape(cfg, origin, kv_heads_key=None, default_context=2048),
                gated_mlp=False, norm="layernorm", qkv_bias=bias, attn_out_bias=bias, mlp_bias=True)


_FAMILY_FIELDS = {"llama": _llama_like, "mistral": _llama_like, "qwen2": _llama_like, "seed_oss": _llama_like,
                  "opt": _opt, "phi": _phi, "gpt_neox": _gpt_neox}


def spec_fields_from_hf(cfg: dict[str, Any], origin: str, name: str | None = None) -> dict[str, Any]:
    """ModelSpec keyword arguments for the Hugging Face config ``cfg`` read from ``origin``."""
    mt = cfg.get("model_type")
    if mt not in SUPPORTED_MODEL_TYPES:
        raise ConfigError(
            f"{origin}: unsupported model_type {mt!r}; supported: {', '.join(SUPPORTED_MODEL_TYPES)}."
        )
    out: dict[str, Any] = {
        "name": (name or _default_name(cfg, origin)),
        "family": mt,
        "source": f"Hugging Face config {origin}",
        "hf_id": str(cfg.get("_name_or_path", "")),
    }
    out.update(_FAMILY_FIELDS[mt](cfg, origin))
    return out
