"""Map a Hugging Face ``config.json`` onto :class:`sdsl.catalog.models.ModelSpec` fields.

Per family, the keys and defaults below are those of the ``transformers`` configuration classes
(LlamaConfig, MistralConfig, Qwen2Config, OPTConfig, GPTNeoXConfig, PhiConfig, SeedOssConfig, Qwen3Config,
Qwen3MoeConfig, MixtralConfig, DeepseekV3Config (also Kimi-K2's kimi_k2), GptOssConfig, Llama4TextConfig,
Glm4MoeConfig, Gemma3TextConfig) and the modules their models build (which linear layers carry biases, how many norms a
block has, which layers are MoE or local-attention layers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sdsl.errors import ConfigError

__all__ = ["spec_fields_from_hf", "SUPPORTED_MODEL_TYPES"]

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "opt", "gpt_neox", "phi", "seed_oss", "qwen3", "qwen3_moe",
                         "mixtral", "deepseek_v2", "deepseek_v3", "kimi_k2", "gpt_oss", "llama4", "llama4_text",
                         "glm4_moe", "gemma3", "gemma3_text")


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
    """The config's ``_name_or_path``, else the folder of a file named config.json, else the file's stem."""
    path = Path(origin)
    name = cfg.get("_name_or_path") or (path.parent.name if path.name == "config.json" else "") or path.stem
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


def _qwen3(cfg: dict[str, Any], origin: str) -> dict[str, Any]:
    """Qwen3: Llama-style with an RMSNorm on every q and k head (Qwen3Attention q_norm, k_norm)."""
    out = _llama_like(dict(cfg, model_type="llama"), origin)
    return dict(out, qk_norm=True)


def _first_dense(cfg: dict[str, Any], origin: str, key: str) -> int:
    """Dense layers before the first MoE layer from a list of MLP-only layer indices (a prefix 0..m-1 only)."""
    layers = sorted(_get(cfg, key, origin, []) or [])
    if layers != list(range(len(layers))):
        raise ConfigError(f"{origin}: {key}={layers} is not a prefix of the layers; only leading dense layers are modelled.")
    return len(layers)


def _qwen3_moe(cfg: dict[str, Any], origin: str) -> dict[str, Any]:
    """Qwen3-MoE: Qwen3 attention; layer i is MoE when (i+1) % decoder_sparse_step == 0 and i is not in
    mlp_only_layers (Qwen3MoeDecoderLayer); experts without a shared expert."""
    return dict(_qwen3(cfg, origin), n_experts=_int(cfg, "num_experts", origin),
                experts_per_token=_int(cfg, "num_experts_per_tok", origin),
                expert_d_ff=_int(cfg, "moe_intermediate_size", origin),
                moe_layer_step=_int(cfg, "decoder_sparse_step", origin, 1),
                first_dense_layers=_first_dense(cfg, origin, "mlp_only_layers"))


def _sliding(cfg: dict[str, Any], origin: str, n_layer: int, local: int | None = None) -> dict[str, Any]:
    window = _int(cfg, "sliding_window", origin, None)
    if not window or (cfg.get("use_sliding_window") is False):
        return {}
    return {"sliding_window": window, "local_layers": n_layer if local is None else local}


def _mixtral(cfg: dict[str, Any], origin: str) -> dict[str, Any]:
    """Mixtral: Mistral attention, every layer MoE, each expert as wide as intermediate_size, no shared expert;
    a sliding_window, when set, applies to every layer (MistralAttention)."""
    out = _llama_like(dict(cfg, model_type="mistral"), origin)
    ff = out["d_ff"]
    return dict(out, n_experts=_int(cfg, "num_local_experts", origin), expert_d_ff=ff,
                experts_per_token=_int(cfg, "num_experts_per_tok", origin),
                **_sliding(cfg, origin, out["n_layer"]))


def _deepseek(cfg: dict[str, Any], origin: str) -> dict[str, Any]:
    """DeepSeek-V2/V3: multi-head latent attention; the first first_k_dense_replace layers dense
    (intermediate_size), the rest MoE with n_shared_experts shared experts of moe_intermediate_size; V3's
    router keeps an e_score_correction_bias (topk_method noaux_tc); num_nextn_predict_layers MTP modules.
    kimi_k2 (Kimi-K2) ships DeepseekV3ForCausalLM with DeepseekV3Config's keys, so it reads alike."""
    if _int(cfg, "moe_layer_freq", origin, 1) != 1:
        raise ConfigError(f"{origin}: moe_layer_freq != 1 is not modelled.")
    n_head = _int(cfg, "num_attention_heads", origin)
    rope, nope = _int(cfg, "qk_rope_head_dim", origin), _int(cfg, "qk_nope_head_dim", origin)
    return dict(
        n_layer=_int(cfg, "num_hidden_layers", origin), d_model=_int(cfg, "hidden_size", origin), n_head=n_head,
        n_kv_head=_int(cfg, "num_key_value_heads", origin, n_head), d_ff=_int(cfg, "intermediate_size", origin),
        vocab_size=_int(cfg, "vocab_size", origin), max_context=_int(cfg, "max_position_embeddings", origin, 4096),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", False)), gated_mlp=True, norm="rmsnorm",
        qkv_bias=False, attn_out_bias=False, head_dim=rope + nope,
        kv_lora_rank=_int(cfg, "kv_lora_rank", origin), q_lora_rank=_int(cfg, "q_lora_rank", origin, 0) or 0,
        qk_rope_head_dim=rope, qk_nope_head_dim=nope, v_head_dim=_int(cfg, "v_head_dim", origin),
        n_experts=_int(cfg, "n_routed_experts", origin), experts_per_token=_int(cfg, "num_experts_per_tok", origin),
        expert_d_ff=_int(cfg, "moe_intermediate_size", origin), n_shared_experts=_int(cfg, "n_shared_experts", origin, 0),
        first_dense_layers=_int(cfg, "first_k_dense_replace", origin, 0),
        router_bias=cfg.get("topk_method") == "noaux_tc", mtp_layers=_int(cfg, "num_nextn_predict_layers", origin, 0),
    )


def _gpt_oss(cfg: dict[str, Any], origin: str) -> dict[str, Any]:
    """gpt-oss: biased q/k/v/o, a learned sink per head, every layer MoE with biased experts and router;
    layer_types alternates sliding (sliding_window tokens) and full attention (GptOssAttention)."""
    out = _llama_like(dict(cfg, model_type="llama"), origin)
    n = out["n_layer"]
    types = cfg.get("layer_types") or ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    local = sum(t == "sliding_attention" for t in types)
    return dict(out, attention_sinks=True, n_experts=_int(cfg, "num_local_experts", origin),
                experts_per_token=_int(cfg, "num_experts_per_tok", origin, _int(cfg, "experts_per_token", origin, None)),
                expert_d_ff=out["d_ff"], expert_bias=True, router_bias=True, **_sliding(cfg, origin, n, local))


def _llama4(cfg: dict[str, Any], origin: str) -> dict[str, Any]:
    """Llama-4 text model: MoE layers every interleave_moe_layer_step-th layer, each with one shared expert of
    intermediate_size beside the routed ones, dense layers of intermediate_size_mlp; layers that use RoPE
    (no_rope_layers[i] = 1; by default all but every 4th) attend within chunks of attention_chunk_size."""
    out = _llama_like(dict(cfg, model_type="llama"), origin)
    n = out["n_layer"]
    step = _int(cfg, "interleave_moe_layer_step", origin, 1)
    moe_layers = cfg.get("moe_layers")
    if moe_layers is not None and list(moe_layers) != list(range(step - 1, n, step)):
        raise ConfigError(f"{origin}: moe_layers is not every {step}-th layer; only interleaved MoE layers are modelled.")
    rope_layers = cfg.get("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(n)]
    chunk = _int(cfg, "attention_chunk_size", origin, None)
    local = {"sliding_window": chunk, "local_layers": int(sum(rope_layers)), "chunked_attention": True} if chunk else {}
    return dict(out, d_ff=_int(cfg, "intermediate_size_mlp", origin, out["d_ff"]), n_experts=_int(cfg, "num_local_experts", origin),
                experts_per_token=_int(cfg, "num_experts_per_tok", origin), expert_d_ff=out["d_ff"],
                n_shared_experts=1, moe_layer_step=step, **local)


def _glm4_moe(cfg: dict[str, Any], origin: str) -> dict[str, Any]:
    """GLM-4.5: biased q/k/v (not o), optional q/k norms, first_k_dense_replace dense layers, then MoE layers
    with n_shared_experts shared experts and a router score-correction bias (Glm4MoeTopkRouter)."""
    out = _llama_like(dict(cfg, model_type="qwen2"), origin)
    out.update(qkv_bias=bool(cfg.get("attention_bias", False)), attn_out_bias=False,
               qk_norm=bool(cfg.get("use_qk_norm", False)))
    return dict(out, n_experts=_int(cfg, "n_routed_experts", origin), experts_per_token=_int(cfg, "num_experts_per_tok", origin),
                expert_d_ff=_int(cfg, "moe_intermediate_size", origin), n_shared_experts=_int(cfg, "n_shared_experts", origin, 0),
                first_dense_layers=_int(cfg, "first_k_dense_replace", origin, 0), router_bias=True,
                mtp_layers=_int(cfg, "num_nextn_predict_layers", origin, 0))


def _gemma3(cfg: dict[str, Any], origin: str) -> dict[str, Any]:
    """Gemma-3 text model: GeGLU MLP, four RMSNorms per block (input, post-attention, pre- and
    post-feedforward), q/k norms, tied embeddings; a layer is local (sliding_window) unless (i+1) is a
    multiple of sliding_window_pattern (5 local : 1 global), or as layer_types says (Gemma3DecoderLayer)."""
    out = _llama_like(dict(cfg, model_type="llama"), origin)
    n = out["n_layer"]
    types = cfg.get("layer_types")
    if types:
        local = sum(t == "sliding_attention" for t in types)
    else:
        pattern = _int(cfg, "sliding_window_pattern", origin, 6)
        local = sum(1 for i in range(n) if (i + 1) % pattern != 0)
    return dict(out, tied_embeddings=bool(cfg.get("tie_word_embeddings", True)), norms_per_layer=4, qk_norm=True,
                **_sliding(cfg, origin, n, local))


_FAMILY_FIELDS = {"llama": _llama_like, "mistral": _llama_like, "qwen2": _llama_like, "seed_oss": _llama_like,
                  "opt": _opt, "phi": _phi, "gpt_neox": _gpt_neox, "qwen3": _qwen3, "qwen3_moe": _qwen3_moe,
                  "mixtral": _mixtral, "deepseek_v2": _deepseek, "deepseek_v3": _deepseek, "kimi_k2": _deepseek,
                  "gpt_oss": _gpt_oss,
                  "llama4": _llama4, "llama4_text": _llama4, "glm4_moe": _glm4_moe, "gemma3": _gemma3,
                  "gemma3_text": _gemma3}
#: multimodal wrappers whose language model sits under ``text_config``
_TEXT_CONFIG_TYPES = ("llama4", "gemma3")


def weight_format(cfg: dict[str, Any], origin: str) -> str | None:
    """The stored weight format a config's ``quantization_config`` names (None: none): ``quant_method`` "fp8"
    (DeepSeek/Qwen FP8 checkpoints, block-scaled e4m3) → fp8; "mxfp4" (gpt-oss) → mxfp4; "modelopt" with
    ``quant_algo`` FP8 / NVFP4 → fp8 / nvfp4; "awq", "gptq" with ``bits`` 4 → int4. Another method is a
    ConfigError naming the ones sdsl prices."""
    q = cfg.get("quantization_config")
    if q is None:
        return None
    if not isinstance(q, dict):
        raise ConfigError(f"{origin}: quantization_config must be a JSON object.")
    method = str(q.get("quant_method", "")).lower()
    algo = str(q.get("quant_algo", "")).lower()
    if method in ("fp8", "mxfp4"):
        return method
    if method == "modelopt" and algo in ("fp8", "nvfp4"):
        return algo
    if method in ("awq", "gptq") and int(q.get("bits", 0)) == 4:
        return "int4"
    raise ConfigError(f"{origin}: quantization_config {method or '?'}{'/' + algo if algo else ''} is not a weight "
                      "format sdsl prices (fp8, mxfp4, modelopt fp8/nvfp4, awq/gptq 4-bit); remove it and give "
                      "--dtype, or price the weights as they are stored.")


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
        "weight_format": weight_format(cfg, origin),
    }
    text = cfg
    if mt in _TEXT_CONFIG_TYPES and "text_config" in cfg:
        text = cfg["text_config"]
        if not isinstance(text, dict):
            raise ConfigError(f"{origin}: text_config must be a JSON object.")
        text = dict(text, model_type=mt)
    out.update(_FAMILY_FIELDS[mt](text, origin))
    return out
