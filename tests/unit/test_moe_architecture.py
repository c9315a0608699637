"""Mixture-of-experts, MLA, local-attention and q/k-norm models: parameter counts against the model cards,
config.json reading for every supported 2025 family, and the shapes they imply."""

import json
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from sdsl.catalog.models import ModelSpec, get_model, list_models
from sdsl.catalog.hf_config import SUPPORTED_MODEL_TYPES
from sdsl.errors import ConfigError, InvalidInputError

NEW = ("qwen3-0.6b qwen3-1.7b qwen3-4b qwen3-8b qwen3-14b qwen3-32b qwen3-30b-a3b qwen3-235b-a22b deepseek-v3 "
       "deepseek-r1 gpt-oss-20b gpt-oss-120b llama-3.3-70b llama-4-scout llama-4-maverick mixtral-8x7b glm-4.5-air "
       "qwen3-coder-480b-a35b kimi-k2 mixtral-8x22b").split()
MOE = [m for m in list_models() if m.is_moe]

#: Published figures printed to fewer digits than 1% resolves (or counting more than the text model). Each is
#: checked to lie within one unit of the card's last printed digit, and its gap is pinned so it stays visible.
COARSE = {
    # name, which count: (gap computed/published - 1, unit of the last printed digit, reason)
    ("qwen3-1.7b", "total"): (+0.0121, 0.1e9, "card prints '1.7B'; its non-embedding '1.4B' is within 0.7%"),
    ("qwen3-30b-a3b", "active"): (+0.0161, 0.1e9, "card prints '3.3B' for 3.35B (two significant figures)"),
    ("deepseek-v3", "active"): (-0.0101, 1e9, "report prints '37B' (36.6B without the embedding table)"),
    ("deepseek-r1", "active"): (-0.0101, 1e9, "card prints '37B', same architecture as DeepSeek-V3"),
    ("glm-4.5-air", "active"): (+0.0152, 1e9, "README prints '12' billion (12.18B without embeddings)"),
    ("llama-4-scout", "active"): (+0.0102, 1e9, "card prints '17B'"),
    ("llama-4-maverick", "active"): (+0.0109, 1e9, "card prints '17B'"),
    ("llama-4-scout", "total"): (-0.0113, 2e9, "card's 109B includes the vision encoder this text-only entry omits"),
    ("qwen3-coder-480b-a35b", "active"): (+0.0136, 1e9, "card prints '35B' for 35.5B (two significant figures)"),
    ("kimi-k2", "total"): (+0.0264, 1e12, "card prints '1 trillion' for 1026.4B (no MTP module is shipped)"),
}


def test_new_catalog_entries_exist_with_sources():
    names = {m.name for m in list_models()}
    assert set(NEW) <= names
    for name in NEW:
        m = get_model(name)
        assert m.source.startswith("https://huggingface.co/") and "config.json" in m.source, name
        assert "params:" in m.source, name
        if m.is_moe:
            assert m.published_active_params is not None, name


@pytest.mark.parametrize("spec", MOE, ids=lambda m: m.name)
def test_active_params_within_1pct_of_published(spec):
    assert spec.active_params() < spec.total_params
    gap = spec.active_params() / spec.published_active_params - 1.0
    if (spec.name, "active") in COARSE:
        return  # test_coarse_card_figures
    assert abs(gap) < 0.01, f"{spec.name}: {gap:+.2%}"


@pytest.mark.parametrize("key", sorted(COARSE), ids=lambda k: f"{k[0]}-{k[1]}")
def test_coarse_card_figures(key):
    name, which = key
    gap, unit, _reason = COARSE[key]
    m = get_model(name)
    computed = m.active_params() if which == "active" else m.total_params
    published = m.published_active_params if which == "active" else m.published_params
    assert computed / published - 1.0 == pytest.approx(gap, abs=5e-4)
    assert abs(computed - published) < unit


@pytest.mark.parametrize("name, non_emb", [("qwen3-0.6b", 0.44e9), ("qwen3-1.7b", 1.4e9), ("qwen3-4b", 3.6e9),
                                           ("qwen3-8b", 6.95e9), ("qwen3-14b", 13.2e9), ("qwen3-32b", 31.2e9),
                                           ("qwen3-30b-a3b", 29.9e9), ("qwen3-235b-a22b", 234e9)])
def test_qwen3_non_embedding_matches_model_card(name, non_emb):
    assert get_model(name).non_embedding_params == pytest.approx(non_emb, rel=0.01)


def test_gpt_oss_breakdown_matches_its_model_card():
    # gpt-oss model card: 116.83B total = MLP 114.71B + attention 0.96B + embedding and unembedding 1.16B
    m = get_model("gpt-oss-120b")
    mlp = m.n_moe_layers * (m.n_experts * m.expert_params + m.router_params)
    assert mlp == pytest.approx(114.71e9, rel=1e-3)
    assert m.n_layer * m.attention_params == pytest.approx(0.96e9, rel=5e-3)
    assert m.embedding_params + m.lm_head_params == pytest.approx(1.16e9, rel=5e-3)
    assert m.active_params() == pytest.approx(5.13e9, rel=1e-3)


def test_active_conventions():
    m = get_model("qwen3-30b-a3b")
    emb, head = m.embedding_params, m.lm_head_params
    assert m.active_params("all") - m.active_params("no-input-embedding") == emb
    assert m.active_params("no-input-embedding") - m.active_params("no-embeddings") == head
    dense = get_model("qwen3-8b")
    assert dense.active_params("all") == dense.total_params and dense.inactive_expert_params == 0
    with pytest.raises(InvalidInputError):
        m.active_params("some")


def test_layer_plans():
    assert get_model("deepseek-v3").n_moe_layers == 58 and get_model("deepseek-v3").n_dense_layers == 3
    assert get_model("glm-4.5-air").n_moe_layers == 45
    assert get_model("llama-4-maverick").n_moe_layers == 24  # interleave_moe_layer_step = 2
    assert get_model("llama-4-scout").n_moe_layers == 48
    assert get_model("gpt-oss-120b").local_layers == 18 and get_model("gpt-oss-120b").sliding_window == 128
    assert get_model("llama-4-scout").local_layers == 36 and get_model("llama-4-scout").chunked_attention


def test_mla_kv_bytes_per_token():
    # DeepSeek-V2 §2.1.2: the cache holds (d_c + d_h^R) = 512 + 64 elements per token and layer
    m = get_model("deepseek-v3")
    assert m.kv_elements_per_layer == 576 and m.head_dim == 192
    assert m.kv_bytes_per_token("bf16") == 61 * 576 * 2
    # versus the 2·128·128 per layer of full multi-head attention at the same head count
    assert m.kv_elements_per_layer < 2 * m.n_head * m.qk_nope_head_dim / 50


def test_local_attention_cache():
    m = get_model("gpt-oss-120b")
    per_layer = m.kv_elements_per_layer * 2
    assert float(m.kv_cache_bytes(10_000)) == per_layer * (18 * 10_000 + 18 * 128)
    assert float(m.kv_cache_bytes(100)) == per_layer * 36 * 100
    scout = get_model("llama-4-scout")  # chunked: a local layer holds the current chunk, L mod 8192
    assert float(scout.kv_cache_bytes(10_000)) == scout.kv_elements_per_layer * 2 * (12 * 10_000 + 36 * (10_000 - 8192))


def test_moe_forward_flops_count_the_active_experts():
    m = get_model("qwen3-30b-a3b")
    f = float(m.forward_flops(2, 3, 0))
    attn = 4.0 * m.n_layer * m.n_head * m.head_dim * 2 * 3 * 1.5
    assert f == pytest.approx(2 * m.active_params("no-input-embedding") * 6 + attn, rel=1e-12)
    # the weights a forward reads grow with the experts its tokens touch
    assert float(m.forward_bytes(1, 1, 0)) < float(m.forward_bytes(1, 8, 0)) < float(m.forward_bytes(64, 8, 0))
    assert float(m.forward_bytes(512, 8, 0)) > m._forward_weight_params() * 2 * 0.999  # all experts touched


@pytest.mark.parametrize("bad, match", [
    (dict(n_experts=8, experts_per_token=9, expert_d_ff=16), "experts_per_token"),
    (dict(n_experts=8, experts_per_token=2), "expert_d_ff"),
    (dict(experts_per_token=2), "n_experts"),
    (dict(sliding_window=128), "local_layers"),
    (dict(sliding_window=128, local_layers=5), "exceeds"),
    (dict(kv_lora_rank=64), "qk_rope_head_dim"),
    (dict(n_experts=4, experts_per_token=1, expert_d_ff=8, expert_load=(1.0, 2.0)), "expert_load"),
    (dict(n_experts=4, experts_per_token=1, expert_d_ff=8, routing_skew=-1.0), "routing_skew"),
    (dict(active_params_convention="most"), "active_params_convention"),
])
def test_invalid_variant_fields(bad, match):
    base = dict(name="x", family="llama", n_layer=4, d_model=64, n_head=4, n_kv_head=2, d_ff=128, vocab_size=100)
    with pytest.raises(InvalidInputError, match=match):
        ModelSpec(**base, **bad)


# ---- config.json ---------------------------------------------------------------------------
def _base(s: ModelSpec) -> dict:
    return {"hidden_size": s.d_model, "num_hidden_layers": s.n_layer, "num_attention_heads": s.n_head,
            "num_key_value_heads": s.n_kv_head, "vocab_size": s.vocab_size, "max_position_embeddings": s.max_context,
            "tie_word_embeddings": s.tied_embeddings, "head_dim": s.head_dim, "rms_norm_eps": 1e-6}


def _hf(s: ModelSpec) -> dict:
    """config.json as transformers writes it for ``s``'s family (the keys each configuration class reads)."""
    cfg = _base(s)
    if s.family in ("qwen3", "qwen3_moe"):
        cfg.update(model_type=s.family, intermediate_size=s.d_ff, attention_bias=False)
        if s.is_moe:
            cfg.update(num_experts=s.n_experts, num_experts_per_tok=s.experts_per_token,
                       moe_intermediate_size=s.expert_d_ff, decoder_sparse_step=1, mlp_only_layers=[])
    elif s.family == "mixtral":
        cfg.update(model_type="mixtral", intermediate_size=s.expert_d_ff, num_local_experts=s.n_experts,
                   num_experts_per_tok=s.experts_per_token, sliding_window=None)
    elif s.family in ("deepseek_v3", "kimi_k2"):
        cfg.pop("head_dim")
        cfg.update(model_type=s.family, intermediate_size=s.d_ff, kv_lora_rank=s.kv_lora_rank,
                   q_lora_rank=s.q_lora_rank, qk_rope_head_dim=s.qk_rope_head_dim, qk_nope_head_dim=s.qk_nope_head_dim,
                   v_head_dim=s.v_head_dim, n_routed_experts=s.n_experts, num_experts_per_tok=s.experts_per_token,
                   moe_intermediate_size=s.expert_d_ff, n_shared_experts=s.n_shared_experts,
                   first_k_dense_replace=s.first_dense_layers, moe_layer_freq=1, topk_method="noaux_tc",
                   num_nextn_predict_layers=s.mtp_layers)
    elif s.family == "gpt_oss":
        cfg.update(model_type="gpt_oss", intermediate_size=s.expert_d_ff, attention_bias=True,
                   num_local_experts=s.n_experts, num_experts_per_tok=s.experts_per_token, sliding_window=s.sliding_window,
                   layer_types=["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(s.n_layer)])
    elif s.family == "llama4":
        text = dict(cfg, model_type="llama4_text", intermediate_size=s.expert_d_ff, intermediate_size_mlp=s.d_ff,
                    num_local_experts=s.n_experts, num_experts_per_tok=s.experts_per_token,
                    interleave_moe_layer_step=s.moe_layer_step, attention_chunk_size=s.sliding_window)
        return {"model_type": "llama4", "text_config": text, "vision_config": {"hidden_size": 1408}}
    elif s.family == "glm4_moe":
        cfg.update(model_type="glm4_moe", intermediate_size=s.d_ff, attention_bias=True, use_qk_norm=False,
                   n_routed_experts=s.n_experts, num_experts_per_tok=s.experts_per_token,
                   moe_intermediate_size=s.expert_d_ff, n_shared_experts=s.n_shared_experts,
                   first_k_dense_replace=s.first_dense_layers, num_nextn_predict_layers=s.mtp_layers)
    elif s.family == "llama":
        cfg.update(model_type="llama", intermediate_size=s.d_ff)
    else:
        raise AssertionError(s.family)
    return cfg


@pytest.mark.parametrize("name", NEW)
def test_new_configs_load_to_the_catalog_entry(tmp_path, name):
    spec = get_model(name)
    (tmp_path / "config.json").write_text(json.dumps(_hf(spec)))
    got = ModelSpec.from_hf_config(tmp_path / "config.json", name=name)
    assert got.total_params == spec.total_params
    assert got.active_params() == replace(spec, active_params_convention="all").active_params()
    assert got.linear_layers() == spec.linear_layers()
    assert got.kv_bytes_per_token() == spec.kv_bytes_per_token()
    assert (got.n_moe_layers, got.local_layers, got.sliding_window) == (spec.n_moe_layers, spec.local_layers,
                                                                        spec.sliding_window)


def test_kimi_k2_config_reads_as_deepseek_v3(tmp_path):
    # moonshotai/Kimi-K2-Instruct config.json (its architecture keys): model_type kimi_k2, DeepseekV3ForCausalLM
    cfg = {"model_type": "kimi_k2", "architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168,
           "num_hidden_layers": 61, "num_attention_heads": 64, "num_key_value_heads": 64, "intermediate_size": 18432,
           "vocab_size": 163840, "max_position_embeddings": 131072, "tie_word_embeddings": False,
           "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
           "v_head_dim": 128, "n_routed_experts": 384, "num_experts_per_tok": 8, "moe_intermediate_size": 2048,
           "n_shared_experts": 1, "first_k_dense_replace": 1, "moe_layer_freq": 1, "topk_method": "noaux_tc",
           "num_nextn_predict_layers": 0,
           "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                   "weight_block_size": [128, 128]}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    got = ModelSpec.from_hf_config(tmp_path / "config.json")
    from sdsl.catalog.hf_config import spec_fields_from_hf
    from sdsl.catalog.models import catalog_match

    v3 = ModelSpec(**spec_fields_from_hf(dict(cfg, model_type="deepseek_v3"), "v3.json", got.name))
    assert replace(v3, family="kimi_k2", source=got.source, hf_id=got.hf_id) == got  # DeepSeek-V3's reader
    assert (got.weight_format, got.n_dense_layers, got.n_moe_layers, got.n_experts) == ("fp8", 1, 60, 384)
    m = catalog_match(got)
    assert m.name == "kimi-k2" and m.weight_format == "fp8" and m.total_params == get_model("kimi-k2").total_params
    assert get_model("kimi-k2").weight_format == get_model("deepseek-v3").weight_format == "fp8"


def test_gemma3_text_config():
    # Gemma3TextConfig: five local (sliding_window 1024) layers to one global, four norms per block, q/k norms
    text = {"model_type": "gemma3_text", "hidden_size": 2560, "num_hidden_layers": 34, "num_attention_heads": 8,
            "num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 10240, "vocab_size": 262208,
            "max_position_embeddings": 131072, "sliding_window": 1024, "sliding_window_pattern": 6}
    from sdsl.catalog.hf_config import spec_fields_from_hf

    for cfg in (text, {"model_type": "gemma3", "text_config": text, "vision_config": {}}):
        s = ModelSpec(**spec_fields_from_hf(cfg, "gemma-3-4b/config.json", "gemma-3-4b"))
        assert (s.local_layers, s.sliding_window, s.norms_per_layer, s.qk_norm, s.tied_embeddings) == (29, 1024, 4, True, True)
        assert float(s.kv_cache_bytes(4096)) == 2 * 4 * 256 * 2 * (5 * 4096 + 29 * 1024)


def test_every_listed_model_type_has_a_reader():
    from sdsl.catalog.hf_config import _FAMILY_FIELDS

    assert set(SUPPORTED_MODEL_TYPES) == set(_FAMILY_FIELDS)
    for mt in ("qwen3", "qwen3_moe", "deepseek_v3", "gpt_oss", "llama4", "mixtral", "glm4_moe", "gemma3"):
        assert mt in SUPPORTED_MODEL_TYPES


def test_unrepresentable_layer_plans_are_refused(tmp_path):
    cfg = {**_hf(get_model("qwen3-30b-a3b")), "mlp_only_layers": [5, 9]}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="mlp_only_layers"):
        ModelSpec.from_hf_config(tmp_path / "config.json")


def test_unknown_model_type_one_line_exit_2(tmp_path):
    from sdsl.cli import cli

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "mamba2", "hidden_size": 64}))
    r = CliRunner().invoke(cli, ["predict", "--target", str(path), "--draft", "llama-160m", "--gamma", "2"])
    assert r.exit_code == 2
    lines = [ln for ln in (r.stderr if hasattr(r, "stderr") else r.output).strip().splitlines() if ln]
    assert len(lines) == 1 and "unsupported model_type 'mamba2'" in lines[0] and "Traceback" not in r.output


def test_spec_roundtrips_through_dict():
    for name in ("deepseek-v3", "gpt-oss-120b", "llama-4-maverick"):
        s = get_model(name)
        assert ModelSpec.from_dict(s.to_dict()) == s
    skewed = replace(get_model("mixtral-8x7b"), expert_load=[1, 2, 3, 4, 5, 6, 7, 8])
    assert skewed.expert_load == (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0)
    assert np.isclose(sum(skewed.expert_load), 36)
