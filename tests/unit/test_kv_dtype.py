"""An fp8 KV cache (``Deployment.kv_dtype``, ``--kv-dtype``): its bytes in memory and in attention's KV read, and the
decode attention the operator tables measure over an fp8 cache where the engine's kernels are timed."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import sdsl
from sdsl.cli import cli
from sdsl.errors import InvalidInputError
from sdsl.roofline.latency import kv_cache_bytes_per_gpu, memory_per_gpu, step_time


def test_the_cache_holds_and_reads_one_byte_per_element():
    bf16, fp8 = sdsl.Deployment("h200", engine="ideal"), sdsl.Deployment("h200", engine="ideal", kv_dtype="fp8")
    full = float(kv_cache_bytes_per_gpu("llama-3.1-8b", bf16, batch=16, context=4096))
    assert float(kv_cache_bytes_per_gpu("llama-3.1-8b", fp8, batch=16, context=4096)) == pytest.approx(full / 2)
    weights = float(memory_per_gpu("llama-3.1-8b", bf16, batch=1, context=0))
    assert float(memory_per_gpu("llama-3.1-8b", fp8, batch=16, context=4096)) == pytest.approx(weights + full / 2)
    # on the roofline (no measured attention) the KV read halves: attention's memory-bound time at a long context
    a, b = (step_time("llama-3.1-8b", d, batch=64, context=16384).attention_s for d in (bf16, fp8))
    assert float(b) / float(a) == pytest.approx(0.5, abs=0.01)


def test_a_table_engine_prices_the_fp8_cache_on_its_measured_kernels():
    """vLLM's fp8-KV attention on the H200 reads the cache at a lower fraction of the bandwidth than its bf16 one, so
    the measured saving is well short of the bytes' half; the step charges the fp8-KV fit's form."""
    from sdsl.fit.opdb.kernels import AttentionFit, hardware_of, predict_attention

    bf16 = sdsl.Deployment("h200", engine="vllm")
    fp8 = sdsl.Deployment("h200", engine="vllm", kv_dtype="fp8")
    assert "fp8-KV decode attention" in fp8.params.source and "bf16-KV decode attention" in bf16.params.source
    assert fp8.params.attn_eta_kv < bf16.params.attn_eta_kv
    b, L = np.array([1.0, 64.0]), np.array([1024.0, 16384.0])
    new, old = (step_time("llama-3.1-8b", d, batch=b, context=L) for d in (fp8, bf16))
    saved = 1 - new.attention_s / old.attention_s
    assert saved[1] == pytest.approx(0.255, abs=0.005)  # VALIDATION.md "An fp8 KV cache": a saving, not the bytes' 50%
    assert (round(fp8.params.attn_eta_kv, 2), round(bf16.params.attn_eta_kv, 2)) == (0.63, 0.92)
    assert (round(fp8.params.attn_block_bandwidth / 1e12, 1), round(bf16.params.attn_block_bandwidth / 1e12, 1)) == (1.1, 2.7)
    from sdsl._paths import REPO_ROOT

    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    assert "(vLLM on the H200: η_kv 0.63 against 0.92 for bf16, and one block at 1.1 against 2.7 TB/s)" in text
    assert "costs 25.5% less than over a bf16 cache" in text
    p = fp8.params
    rows = pd.DataFrame({"batch_size": b, "context": L, "num_heads": 32.0, "num_key_value_heads": 8.0,
                         "head_dim": 128.0, "kv_bytes": b * L * 2 * 8 * 128 * 1.0})
    fit = AttentionFit.of(p)
    per_layer = predict_attention(rows, hardware_of("h200_sxm"), fit)
    np.testing.assert_allclose(new.attention_s / 32, per_layer, rtol=0.02)  # the new token's KV write aside


def test_the_option_is_checked_and_carried():
    assert sdsl.Deployment("h200", kv_dtype="bf16").kv_dtype is None  # the compute dtype: nothing to say
    assert sdsl.Deployment("h200", kv_dtype="bfloat16").kv_dtype is None  # by its canonical name, as dtype is
    assert sdsl.Deployment("h200", dtype="float16", kv_dtype="float8").kv_dtype == "fp8"
    dep = sdsl.Deployment("h200", kv_dtype="FP8")
    assert dep.kv_dtype == "fp8" == dep.cache_dtype and dep.to_dict()["kv_dtype"] == "fp8"
    assert "kv_dtype" not in sdsl.Deployment("h200").to_dict()
    with pytest.raises(InvalidInputError, match="kv_dtype"):
        sdsl.Deployment("h200", kv_dtype="int4")
    moved = sdsl.Deployment("h200", engine="vllm").replace(kv_dtype="fp8")
    assert moved.params == sdsl.Deployment("h200", engine="vllm", kv_dtype="fp8").params  # defaults follow the cache
    assert moved.for_draft().kv_dtype == "fp8"


def test_the_cli_and_python_agree():
    args = ["predict", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--gamma", "3", "--hardware", "h200",
            "--batch", "64", "--context", "8192", "--json"]
    out = json.loads(CliRunner().invoke(cli, args + ["--kv-dtype", "fp8"]).output)
    base = json.loads(CliRunner().invoke(cli, args).output)
    assert out["kv_dtype"] == "fp8" and base["kv_dtype"] == "bf16"
    assert out["tokens_per_s"] > base["tokens_per_s"] and out["plain_tokens_per_s"] > base["plain_tokens_per_s"]
    py = sdsl.predict("llama-3.1-8b", "eagle3", "h200", gamma=3, batch=64, context=8192, kv_dtype="fp8")
    assert float(py.tokens_per_s) == pytest.approx(out["tokens_per_s"], rel=1e-12)
    bad = CliRunner().invoke(cli, args + ["--kv-dtype", "int4"])
    assert bad.exit_code == 2
