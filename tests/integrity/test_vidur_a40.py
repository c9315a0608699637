"""The reduced copies of Vidur's A40 profiles (sdsl/data/vidur/a40; sdsl/data/README.md says how they were made)."""

import csv

import numpy as np
import pytest

from sdsl._paths import data_path
from sdsl.fit.profiles import read_vidur, read_vidur_elementwise

A40 = data_path("vidur", "a40")
SHAPE = ["n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp", "num_tokens",
         "num_tensor_parallel_workers"]
# (org/model, operators in file order, rows, TP degrees)
FILES = [("microsoft/phi-2", ["emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj", "mlp_up_proj",
                              "mlp_act", "mlp_down_proj", "add"], 261, {1}),
         ("meta-llama/Llama-2-7b-hf", ["emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
                                       "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add"],
          1044, {1, 2, 4, 8}),
         ("meta-llama/Llama-2-70b-hf", ["emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
                                        "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add"],
          1044, {1, 2, 4, 8})]


def _rows(model):
    with open(A40 / model / "mlp.csv", newline="") as f:
        return list(csv.reader(f))


@pytest.mark.parametrize("model, ops, n, tps", FILES)
def test_reduced_columns_rows_and_grid(model, ops, n, tps):
    rows = _rows(model)
    assert rows[0] == [f"time_stats.{o}.{s}" for o in ops for s in ("median", "std")] + SHAPE
    assert len(rows) - 1 == n and {len(r) for r in rows} == {2 * len(ops) + 8}
    tp = [int(r[-1]) for r in rows[1:]]
    tokens = [int(r[-2]) for r in rows[1:]]
    assert set(tp) == tps
    grid = sorted([1, 2, 4, *range(8, 1024, 8), *range(1024, 2048, 16), *range(2048, 4097, 32), 2048, 4096])
    for t in tps:  # Vidur's grid: 1, 2, 4, steps of 8, 16 from 1024, 32 from 2048 (2048, 4096 profiled twice)
        assert sorted(x for x, y in zip(tokens, tp) if y == t) == grid


def test_a40_medians_copied_digit_for_digit():
    phi = _rows("microsoft/phi-2")
    assert phi[1][4:6] == ["1.4344999999999999", "0.03815"] and phi[-1][4] == "0.07200000000000001"  # 4096, 1 tokens
    llama = _rows("meta-llama/Llama-2-7b-hf")
    assert llama[1][12] == "6.739" and llama[1][16] == "3.382"  # TP 1, 4096 tokens: mlp_up, mlp_down
    big = _rows("meta-llama/Llama-2-70b-hf")
    assert big[1][12] == "35.424" and big[1][16] == "16.8845" and big[1][-8:-2] == ["64", "8", "8192", "28672", "32768", "True"]


def test_readers_take_the_reduced_form():
    gemm = read_vidur(A40.parent, hardware="a40")
    assert set(gemm["model"]) == {"microsoft/phi-2", "meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-70b-hf"}
    assert len(gemm) == 4 * (261 + 2 * 1044) and np.all(gemm["time_s"] > 0) and np.all(gemm["time_std_s"] >= 0)
    one = gemm[(gemm.model == "meta-llama/Llama-2-7b-hf") & (gemm.op == "mlp_up_proj") & (gemm.tp == 1)
               & (gemm.num_tokens == 1)]
    assert one["time_s"].item() == pytest.approx(0.321e-3) and one["out_features"].item() == 2 * 11008
    ew = read_vidur_elementwise(A40.parent, hardware="a40")
    assert set(ew["op"]) == {"input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act", "add"}
    assert len(ew) == 4 * 261 + 5 * 2 * 1044  # phi-2 has no post-attention norm


def test_a40_leave_one_model_out_as_published(tmp_path):
    """VALIDATION.md, issue 13: `sdsl validate latency` on the A40 folder alone (each model priced by a fit
    to the other two): pooled GEMM MAPE all / decode, worst held-out model in decode, the 64 < n <= 256
    median bias, elementwise per kernel / decode / worst model / median signed / per layer sum. No A40
    all-reduce data exists (Vidur has none)."""
    from sdsl.validation.latency_validation import validate_latency

    (tmp_path / "a40").symlink_to(A40, target_is_directory=True)
    r = validate_latency(tmp_path)["a40"]
    got = (r["pooled_overall_mape"], r["pooled_decode_mape"], r["worst_model_decode_mape"],
           r["bias_by_tokens"]["64<n<=256"]["median"], r["elementwise_mape"], r["elementwise_decode_mape"],
           r["elementwise_worst_model_mape"], r["elementwise_bias"]["median"], r["elementwise_layer_mape"])
    assert got == pytest.approx((0.07709, 0.06765, 0.07933, 0.00504, 0.10736, 0.20163, 0.23490, -0.01292, 0.05990),
                                rel=1e-3)
    assert r["worst_model"] == "meta-llama/Llama-2-7b-hf" and r["allreduce"] is None


def test_a40_gemms_without_the_kernel_terms():
    """VALIDATION.md: the A40 GEMMs held out with the previous form (row tiles only): 8.2% / 8.2%, worst 13.3%,
    +4.9% at 64 < n <= 256 — the kernel terms, chosen on H100/A100, lower all four on this third GPU."""
    from sdsl.validation.latency_validation import leave_one_model_out, pooled_metrics
    from sdsl.fit.profiles import read_vidur

    _, points, _ = leave_one_model_out(read_vidur(A40.parent, hardware="a40"), kernel_terms=False)
    m = pooled_metrics(points)
    got = (m["pooled_overall_mape"], m["pooled_decode_mape"], m["worst_model_decode_mape"],
           m["bias_by_tokens"]["64<n<=256"]["median"])
    assert got == pytest.approx((0.08215, 0.08150, 0.13258, 0.04856), rel=1e-3)
