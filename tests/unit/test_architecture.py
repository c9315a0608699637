"""Model catalog: exact parameter counts, FLOPs/bytes of a forward pass, config.json reading, errors."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdsl.catalog.models import ModelSpec, dtype_bytes, get_model, list_models
from sdsl.errors import ConfigError, InvalidInputError, SDSLError, UnknownNameError

MODELS = list_models()
REQUIRED = (
    "opt-125m opt-350m opt-1.3b opt-2.7b opt-13b opt-30b opt-66b "
    "qwen1.5-0.5b qwen1.5-1.8b qwen1.5-4b qwen1.5-14b qwen1.5-32b qwen1.5-72b qwen1.5-110b "
    "qwen2.5-0.5b qwen2.5-1.5b qwen2.5-3b qwen2.5-14b qwen2.5-32b qwen2.5-72b "
    "llama-3-70b llama-3.1-8b llama-3.1-70b seed-oss-36b llama-2-7b llama-2-13b llama-2-70b "
    "llama-3.2-1b llama-3.2-3b llama-68m llama-160m smollm2-135m "
    "pythia-70m pythia-160m pythia-410m pythia-1b pythia-1.4b pythia-2.8b pythia-6.9b pythia-12b"
).split()


# ---- catalog -------------------------------------------------------------------------------
def test_catalog_names():
    names = [m.name for m in MODELS]
    assert len(names) == len(set(names))
    assert set(REQUIRED) <= set(names)
    assert all(n == n.lower() for n in names)


#: Published totals printed more coarsely than 1% resolves, or counting more than the text model; each is
#: checked against what the card prints instead (tests/unit/test_moe_architecture.py lists them with reasons).
COARSE_TOTALS = {"qwen3-1.7b", "llama-4-scout", "kimi-k2"}


@pytest.mark.parametrize("spec", MODELS, ids=lambda m: m.name)
def test_total_params_within_1pct_of_published(spec):
    # VALIDATION.md "Analytic core", parameter counts: "within 1%" (the COARSE_TOTALS cards print fewer digits)
    assert spec.published_params is not None, f"{spec.name} records no published parameter count"
    assert spec.source.startswith("https://"), spec.name
    if spec.name not in COARSE_TOTALS:
        assert spec.total_params == pytest.approx(spec.published_params, rel=0.01)
    assert spec.total_params == spec.non_embedding_params + spec.embedding_params + (
        0 if spec.tied_embeddings else spec.lm_head_params
    )


# exact counts: the Pythia README (total, non-embedding), and checkpoint tensor sums
@pytest.mark.parametrize(
    "name, total, non_emb",
    [
        ("pythia-70m", 70_426_624, 18_915_328),
        ("pythia-160m", 162_322_944, 85_056_000),
        ("pythia-410m", 405_334_016, 302_311_424),
        ("pythia-1b", 1_011_781_632, 805_736_448),
        ("pythia-1.4b", 1_414_647_808, 1_208_602_624),
        ("pythia-2.8b", 2_775_208_960, 2_517_652_480),
        ("pythia-6.9b", 6_857_302_016, 6_444_163_072),
        ("pythia-12b", 11_846_072_320, 11_327_027_200),
        ("opt-125m", 125_239_296, None),
        ("opt-350m", 331_196_416, None),
        ("llama-2-7b", 6_738_415_616, None),
        ("llama-3.1-8b", 8_030_261_248, None),
        ("llama-3.2-1b", 1_235_814_400, None),
        ("qwen1.5-0.5b", 463_987_712, None),
        ("qwen2.5-0.5b", 494_032_768, None),
        ("smollm2-135m", 134_515_008, None),
    ],
)
def test_exact_counts(name, total, non_emb):
    spec = get_model(name)
    assert spec.total_params == total
    if non_emb is not None:
        assert spec.non_embedding_params == non_emb


@pytest.mark.parametrize("name, non_emb", [("qwen2.5-0.5b", 0.36e9), ("qwen2.5-1.5b", 1.31e9), ("qwen2.5-3b", 2.77e9),
                                           ("qwen2.5-14b", 13.1e9), ("qwen2.5-32b", 31.0e9), ("qwen2.5-72b", 70.0e9)])
def test_qwen25_non_embedding_matches_model_card(name, non_emb):
    assert get_model(name).non_embedding_params == pytest.approx(non_emb, rel=0.01)


def test_opt350m_projections_and_post_ln():
    s = get_model("opt-350m")
    assert s.embed_dim == 512 and not s.final_norm
    assert s.embedding_params == 50272 * 512 + 2050 * 1024
    assert s.linear_layers()["lm_head"] == (512, 50272)


def test_lookup():
    assert get_model("Llama-3.1-8B") is get_model("llama-3.1-8b")
    spec = get_model("llama-3.1-8b")
    assert get_model(spec) is spec
    assert get_model("meta-llama/Llama-3.1-8B") is spec  # Hugging Face id
    with pytest.raises(UnknownNameError) as exc:
        get_model("llama-3.1-7b")
    assert "llama-3.1-8b" in str(exc.value) and isinstance(exc.value, SDSLError)


@pytest.mark.parametrize("spec", MODELS, ids=lambda m: m.name)
def test_dict_roundtrip(spec):
    d = json.loads(json.dumps(spec.to_dict()))
    assert ModelSpec.from_dict(d) == spec


def test_from_dict_rejects_unknown_and_missing_keys():
    d = get_model("llama-68m").to_dict()
    with pytest.raises(ConfigError, match="Unknown"):
        ModelSpec.from_dict({**d, "n_layers": 3})
    del d["d_model"]
    with pytest.raises(ConfigError, match="d_model"):
        ModelSpec.from_dict(d)


# ---- invalid specs -------------------------------------------------------------------------
BASE = dict(name="x", family="llama", n_layer=2, d_model=64, n_head=4, n_kv_head=2, d_ff=128, vocab_size=100)


@pytest.mark.parametrize(
    "change",
    [dict(n_head=5), dict(n_kv_head=3), dict(n_layer=0), dict(d_model=-64), dict(vocab_size=0), dict(d_ff=1.5),
     dict(head_dim=0), dict(norm="batchnorm"), dict(published_params=-1.0), dict(learned_pos=-1)],
)
def test_invalid_specs(change):
    with pytest.raises(InvalidInputError):
        ModelSpec(**{**BASE, **change})


def test_head_dim_given_explicitly():
    s = ModelSpec(**{**BASE, "n_head": 5, "n_kv_head": 5, "head_dim": 16})
    assert s.q_dim == 80 and s.kv_dim == 80
    assert ModelSpec(**BASE).head_dim == 16


# ---- shapes, bytes, FLOPs ------------------------------------------------------------------
def test_dtype_bytes():
    assert [dtype_bytes(d) for d in ("fp32", "bf16", "fp16", "fp8", "BF16", "float16")] == [4, 2, 2, 1, 2, 2]
    with pytest.raises(InvalidInputError):
        dtype_bytes("int4")


def test_kv_and_weight_bytes():
    assert get_model("llama-3.1-8b").kv_bytes_per_token("bf16") == 2 * 32 * 8 * 128 * 2  # 128 KiB
    assert get_model("llama-2-7b").kv_bytes_per_token("fp16") == 512 * 1024
    assert get_model("llama-2-7b").kv_bytes_per_token("fp8") == 256 * 1024
    s = get_model("qwen2.5-0.5b")
    assert s.weight_bytes("bf16") == 2 * s.total_params and s.weight_bytes("fp32") == 4 * s.total_params


def test_linear_layers_match_vidur_shapes():
    s = get_model("llama-3.1-70b")
    assert s.linear_layers(1) == {
        "attn_pre_proj": (8192, 8192 + 2 * 1024),
        "attn_post_proj": (8192, 8192),
        "mlp_up_proj": (8192, 2 * 28672),
        "mlp_down_proj": (28672, 8192),
        "lm_head": (8192, 128256),
    }
    assert s.linear_layers(4) == {
        "attn_pre_proj": (8192, 2048 + 2 * 256),
        "attn_post_proj": (2048, 8192),
        "mlp_up_proj": (8192, 2 * 7168),
        "mlp_down_proj": (7168, 8192),
        "lm_head": (8192, 32064),
    }
    # fewer KV heads than workers: one KV head per worker (replicated)
    assert get_model("qwen2.5-0.5b").linear_layers(2)["attn_pre_proj"] == (896, 448 + 2 * 64)
    assert get_model("opt-125m").linear_layers()["mlp_up_proj"] == (768, 3072)  # not gated
    with pytest.raises(InvalidInputError):
        s.linear_layers(3)
    with pytest.raises(InvalidInputError):
        s.linear_layers(0)


@pytest.mark.parametrize("name", ["llama-3.1-8b", "llama-2-70b", "qwen2.5-32b", "opt-13b", "pythia-1b", "phi-2"])
def test_linear_layers_account_for_all_matrices(name):
    s = get_model(name)
    ly = s.linear_layers(1)
    per_layer = sum(i * o for k, (i, o) in ly.items() if k != "lm_head")
    d = s.d_model
    biases = (s.q_dim + 2 * s.kv_dim) * s.qkv_bias + d * s.attn_out_bias
    biases += ((2 if s.gated_mlp else 1) * s.d_ff + d) * s.mlp_bias
    norms = (2 if s.norm == "layernorm" else 1) * d
    assert s.n_layer * (per_layer + biases + s.norms_per_layer * norms) + s.final_norm * norms == s.non_embedding_params
    i, o = ly["lm_head"]
    assert i * o + o * s.lm_head_bias == s.lm_head_params


DENSE_GQA = [m for m in MODELS if not (m.is_moe or m.is_mla or m.local_layers)]


@pytest.mark.parametrize("spec", DENSE_GQA, ids=lambda m: m.name)
def test_flops_about_two_per_param_per_token(spec):
    b, q = 4, 3
    f = float(spec.forward_flops(b, q, 0))
    matmul = spec.non_embedding_params + spec.lm_head_params
    attn = 4 * spec.n_layer * spec.n_head * spec.head_dim * b * q * q / 2
    assert f == pytest.approx(2 * matmul * b * q + attn, rel=1e-12)
    assert f == pytest.approx(2 * matmul * b * q, rel=1e-3)  # attention is negligible at tiny context
    # 2·params per token, params counted without the input embedding (a lookup, not a GEMM)
    assert 2 * (spec.total_params - spec.embedding_params) * b * q <= f - attn <= 2 * spec.total_params * b * q
    if spec.total_params > 30e9:  # embeddings are a small share of large models
        assert f == pytest.approx(2 * spec.total_params * b * q, rel=0.05)


def test_attention_flops_linear_in_context():
    s = get_model("llama-3.1-8b")
    d = s.forward_flops(2, 5, 1000) - s.forward_flops(2, 5, 0)
    assert d == pytest.approx(4 * 32 * 32 * 128 * 2 * 5 * 1000)


def test_bytes_components():
    s = get_model("llama-3.1-8b")
    kv = s.kv_bytes_per_token("bf16")
    # KV read is b·L·kv; the weights are read once whatever the batch
    assert s.forward_bytes(3, 1, 2000) - s.forward_bytes(3, 1, 1000) == pytest.approx(3 * 1000 * kv)
    w = (s.non_embedding_params + s.lm_head_params) * 2
    one = float(s.forward_bytes(1, 1, 0))
    assert w < one < w * 1.001  # decode at batch 1 is weight bytes
    assert float(s.forward_bytes(1, 1, 0, "fp8")) == pytest.approx(one / 2, rel=1e-3)


def test_broadcasting():
    s = get_model("qwen2.5-0.5b")
    b = np.array([1, 2, 4])[:, None, None]
    q = np.array([1, 5])[None, :, None]
    L = np.array([0, 128, 1024, 4096])[None, None, :]
    f, by = s.forward_flops(b, q, L), s.forward_bytes(b, q, L)
    assert f.shape == by.shape == (3, 2, 4)
    assert by[1, 1, 2] == s.forward_bytes(2, 5, 1024)
    assert isinstance(s.forward_flops(1, 1, 1), np.ndarray)


@pytest.mark.parametrize("args", [(0, 1, 1), (1, 0, 1), (1, 1, -1), (np.nan, 1, 1)])
def test_bad_forward_arguments(args):
    with pytest.raises(InvalidInputError):
        get_model("llama-68m").forward_flops(*args)
    with pytest.raises(InvalidInputError):
        get_model("llama-68m").forward_bytes(*args)


counts = st.integers(min_value=1, max_value=4096)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), counts, counts, st.integers(0, 1 << 17), counts, st.sampled_from(["bf16", "fp8", "fp32"]))
def test_bytes_and_flops_monotone(spec, b, q, L, step, dtype):
    base = spec.forward_bytes(b, q, L, dtype)
    assert spec.forward_bytes(b + step, q, L, dtype) > base
    assert spec.forward_bytes(b, q + step, L, dtype) > base
    fl = spec.forward_flops(b, q, L)
    assert spec.forward_flops(b + step, q, L) > fl
    assert spec.forward_flops(b, q + step, L) > fl
    if spec.chunked_attention:  # a local layer's context restarts at each chunk boundary (Llama-4): not monotone in L
        return
    assert spec.forward_bytes(b, q, L + step, dtype) > base
    assert spec.forward_flops(b, q, L + step) > fl


def test_chunked_attention_restarts_at_each_chunk():
    s = get_model("llama-4-scout")  # 36 local layers attend within chunks of 8192 tokens
    assert s.forward_bytes(1, 1, 8192) < s.forward_bytes(1, 1, 8191) < s.forward_bytes(1, 1, 8192 + 8191)


# ---- config.json -----------------------------------------------------------------------------
def _hf(spec: ModelSpec) -> dict:
    """A config.json as transformers writes it for ``spec``'s family."""
    s = spec
    if s.family in ("llama", "mistral", "qwen2", "seed_oss"):
        cfg = {"model_type": s.family, "hidden_size": s.d_model, "num_hidden_layers": s.n_layer,
               "num_attention_heads": s.n_head, "num_key_value_heads": s.n_kv_head, "intermediate_size": s.d_ff,
               "vocab_size": s.vocab_size, "max_position_embeddings": s.max_context,
               "tie_word_embeddings": s.tied_embeddings, "hidden_act": "silu", "rms_norm_eps": 1e-5}
        if s.head_dim != s.d_model // s.n_head or s.family == "seed_oss":
            cfg["head_dim"] = s.head_dim
        if s.family == "seed_oss":
            cfg.update(attention_bias=True, attention_out_bias=False, mlp_bias=False)
        return cfg
    if s.family == "opt":
        return {"model_type": "opt", "hidden_size": s.d_model, "num_hidden_layers": s.n_layer,
                "num_attention_heads": s.n_head, "ffn_dim": s.d_ff, "vocab_size": s.vocab_size,
                "max_position_embeddings": s.max_context, "word_embed_proj_dim": s.embed_dim,
                "do_layer_norm_before": s.final_norm, "enable_bias": True, "activation_function": "relu"}
    if s.family == "gpt_neox":
        return {"model_type": "gpt_neox", "hidden_size": s.d_model, "num_hidden_layers": s.n_layer,
                "num_attention_heads": s.n_head, "intermediate_size": s.d_ff, "vocab_size": s.vocab_size,
                "max_position_embeddings": s.max_context, "rotary_pct": 0.25, "use_parallel_residual": True,
                "tie_word_embeddings": False}
    if s.family == "phi":
        return {"model_type": "phi", "hidden_size": s.d_model, "num_hidden_layers": s.n_layer,
                "num_attention_heads": s.n_head, "num_key_value_heads": s.n_kv_head, "intermediate_size": s.d_ff,
                "vocab_size": s.vocab_size, "max_position_embeddings": s.max_context, "tie_word_embeddings": False}
    raise AssertionError(s.family)


@pytest.mark.parametrize(
    "name",
    ["llama-3.2-1b", "llama-2-70b", "llama-68m", "smollm2-135m", "mistral-7b", "qwen1.5-0.5b", "qwen2.5-0.5b",
     "qwen1.5-32b", "opt-125m", "opt-350m", "opt-66b", "pythia-70m", "pythia-12b", "seed-oss-36b", "phi-2"],
)
def test_from_hf_config_roundtrip(tmp_path, name):
    spec = get_model(name)
    (tmp_path / "config.json").write_text(json.dumps(_hf(spec)))
    got = ModelSpec.from_hf_config(tmp_path / "config.json", name=spec.name)
    assert got.total_params == spec.total_params
    assert got.non_embedding_params == spec.non_embedding_params
    assert got.linear_layers() == spec.linear_layers()
    assert got.kv_bytes_per_token() == spec.kv_bytes_per_token()
    assert ModelSpec.from_hf_config(tmp_path).total_params == spec.total_params  # a directory works too
    assert get_model(str(tmp_path / "config.json")).total_params == spec.total_params


def test_from_hf_config_defaults_name_from_name_or_path(tmp_path):
    cfg = {**_hf(get_model("llama-68m")), "_name_or_path": "JackFram/llama-68m"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    s = ModelSpec.from_hf_config(tmp_path / "config.json")
    assert s.name == "llama-68m" and s.hf_id == "JackFram/llama-68m" and s.family == "llama"


@pytest.mark.parametrize(
    "content, match",
    [
        (None, "not found"),
        ("{not json", "Malformed JSON"),
        ("[1, 2]", "JSON object"),
        (json.dumps({"model_type": "t5", "d_model": 512}), "unsupported model_type"),
        (json.dumps({"hidden_size": 512}), "unsupported model_type"),
        (json.dumps({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4}), "num_hidden_layers"),
        (json.dumps({**_hf(get_model("llama-68m")), "num_hidden_layers": "2"}), "integer"),
        (json.dumps({**_hf(get_model("llama-68m")), "num_attention_heads": 7}), "invalid model"),
    ],
)
def test_from_hf_config_errors(tmp_path, content, match):
    p = tmp_path / "config.json"
    if content is not None:
        p.write_text(content)
    with pytest.raises(ConfigError, match=match):
        ModelSpec.from_hf_config(p)


def test_worst_deviation_from_published_counts():
    # VALIDATION.md "Analytic core", parameter counts: "every entry within 1% (worst qwen2.5-0.5b, +0.82%)"
    dev = {m.name: m.total_params / m.published_params - 1 for m in MODELS if m.name not in COARSE_TOTALS}
    worst = max(dev, key=lambda name: abs(dev[name]))
    assert worst == "qwen2.5-0.5b"
    assert dev[worst] == pytest.approx(0.008230, rel=1e-3)


def test_a_config_file_is_named_by_its_folder_only_when_it_is_config_json(tmp_path):
    cfg = {"hidden_size": 512, "intermediate_size": 1024, "num_attention_heads": 8, "num_hidden_layers": 2,
           "num_key_value_heads": 8, "vocab_size": 1000, "max_position_embeddings": 2048, "model_type": "llama"}
    (tmp_path / "Tiny-1B").mkdir()
    (tmp_path / "Tiny-1B" / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "Tiny-1B" / "other.json").write_text(json.dumps(cfg))
    assert get_model(tmp_path / "Tiny-1B").name == "tiny-1b"
    assert get_model(tmp_path / "Tiny-1B" / "config.json").name == "tiny-1b"
    assert get_model(tmp_path / "Tiny-1B" / "other.json").name == "other"
