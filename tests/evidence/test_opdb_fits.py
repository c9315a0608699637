"""VALIDATION.md "Measured kernels": the terms fitted on NVIDIA's measured operator tables (sdsl.fit.opdb.kernels), scored
on shapes held out of the fit, and the FP8 step they price; tolerances on errors, not on fitted values."""

from __future__ import annotations

import numpy as np
import pytest

from sdsl._paths import REPO_ROOT

from sdsl.fit.opdb.kernels import (allreduce_rows, attention_rows, fit_allreduce, fit_attention, fit_gemm, fit_nccl,
                               gemm_rows, hardware_of, predict_allreduce, predict_attention, predict_gemm, predict_nccl)

H200 = "h200_sxm"


def _err(pred, rows):
    return np.abs(pred / rows["time_s"].to_numpy() - 1.0)


@pytest.fixture(scope="module")
def h200_bf16():
    hw = hardware_of(H200)
    rows = gemm_rows(H200, "vllm", "bfloat16")
    return hw, rows, fit_gemm(rows[rows["k"] != 4096], hw, "bf16")


def test_bf16_gemm_form_prices_a_held_out_width(h200_bf16):
    hw, rows, params = h200_bf16
    test = rows[rows["k"] == 4096]
    signed = predict_gemm(test, hw, "bf16", params) / test["time_s"].to_numpy() - 1.0
    assert np.median(np.abs(signed)) < 0.10 and np.quantile(np.abs(signed), 0.9) < 0.25
    assert abs(np.median(signed)) < 0.05  # no bias on the held-out width
    assert 0.75 < params.eta_memory <= 1.0  # small-m GEMMs stream their weights near the bandwidth


def test_fp8_terms_price_a_held_out_width_and_the_measured_ratio(h200_bf16):
    hw, rows, base = h200_bf16
    fp8 = gemm_rows(H200, "vllm", "fp8")
    params = fit_gemm(fp8[fp8["k"] != 4096], hw, "fp8", base=base)
    test = fp8[fp8["k"] == 4096]
    assert np.median(_err(predict_gemm(test, hw, "fp8", params), test)) < 0.10
    one = lambda df: df[(df["m"] == 1) & (df["n"] == 4096) & (df["k"] == 4096)]  # noqa: E731
    measured = one(fp8)["time_s"].iloc[0] / one(rows)["time_s"].iloc[0]  # about 0.83 (10.5 us / 12.6 us)
    priced = predict_gemm(one(fp8), hw, "fp8", params)[0] / predict_gemm(one(rows), hw, "bf16", base)[0]
    nominal = predict_gemm(one(fp8), hw, "fp8", base)[0] / predict_gemm(one(rows), hw, "bf16", base)[0]
    assert priced == pytest.approx(measured, rel=0.10)
    assert nominal < 0.70  # half the bytes at bf16's efficiency: what sdsl priced before the format terms


def test_the_gemm_rows_run_to_8192_tokens_and_what_512_alone_gave():
    """VALIDATION.md "Measured kernels", the GEMM rows: the shipped subset keeps the tables' m = 1024, 2048, 4096, 8192
    and one row past each row-tile edge (513, 1025 above 512 rows); fitted on m <= 512 alone the bf16 form put the
    H100's and H200's GEMMs near the tensor-core peak (eta_c 0.991 / 1.000) and priced the m >= 1024 rows 12.9% / 13.8%
    too fast; on every row eta_c 0.860 / 0.875, those rows -1.4% / -3.0%."""
    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    sg = lambda x: ("+" if x >= 0 else "−") + f"{100 * abs(x):.1f}%"  # noqa: E731
    eta, before, after, fp8, m8192 = {}, {}, {}, {}, []
    for gpu in ("h100_sxm", "h200_sxm"):
        hw, rows = hardware_of(gpu), gemm_rows(gpu, "vllm", "bfloat16")
        assert sorted(set(rows["m"][rows["m"] > 512])) == [513, 1024, 1025, 2048, 4096, 8192]
        small, large = rows[rows["m"] <= 512], rows[rows["m"] >= 1024]
        signed = lambda p: float(np.median(predict_gemm(large, hw, "bf16", p) / large["time_s"].to_numpy() - 1))  # noqa: E731
        p512, pall = fit_gemm(small, hw, "bf16"), fit_gemm(rows, hw, "bf16")
        eta[gpu], before[gpu], after[gpu] = (p512.eta_compute, pall.eta_compute), signed(p512), signed(pall)
        largest = rows[rows["m"] == 8192]
        m8192.append(float(np.median(predict_gemm(largest, hw, "bf16", pall) / largest["time_s"].to_numpy() - 1)))
        f = gemm_rows(gpu, "vllm", "fp8")
        fp8[gpu] = (fit_gemm(f[f["m"] <= 512], hw, "fp8", base=p512).fp8_compute, fit_gemm(f, hw, "fp8", base=pall).fp8_compute)
    h, g = "h100_sxm", "h200_sxm"
    assert (f"Fitted on m ≤ 512 alone, the bf16 form put the H100's and H200's GEMMs at η_c {eta[h][0]:.3f} / {eta[g][0]:.3f} "
            f"of the tensor-core peak and priced their m ≥ 1024 rows a median signed {sg(before[h])} / {sg(before[g])} (too "
            f"fast); fitted on every row, η_c is {eta[h][1]:.3f} / {eta[g][1]:.3f} and those rows err {sg(after[h])} / "
            f"{sg(after[g])} (fp8: {100 * fp8[h][0]:.1f}% / {100 * fp8[g][0]:.1f}% of the fp8 peak then, {100 * fp8[h][1]:.1f}% / "
            f"{100 * fp8[g][1]:.1f}% now)") in text
    # the m <= 512 fit: >10% fast at m >= 1024; every row's fit at least four times closer there (64-row tiles price
    # the largest GEMMs a few percent fast: VALIDATION.md states m = 8192)
    assert min(before.values()) < -0.10 and max(map(abs, after.values())) < 0.25 * min(map(abs, before.values()))
    assert f"(m = 8192: {sg(m8192[0])} / {sg(m8192[1])})" in text


def test_decode_attention_prices_a_held_out_head_shape():
    hw = hardware_of(H200)
    for kv in ("bfloat16", "fp8"):
        rows = attention_rows(H200, "vllm", kv)
        held = rows["shape"] == "32/8/128"
        fit = fit_attention(rows[~held], hw, 1.0)
        e = _err(predict_attention(rows[held], hw, fit), rows[held])
        assert np.median(e) < 0.12, kv
    assert 0.5 < fit.eta_kv <= 1.0


def test_allreduce_forms_price_a_held_out_gpu_count():
    hw = hardware_of(H200)
    graph = allreduce_rows(H200, "vllm")
    graph = graph[(graph["mode"] == "graph") & (graph["message_size"] <= 2 ** 24)]
    fit = fit_allreduce(graph[graph["num_gpus"] != 4], hw, "custom")
    test = graph[graph["num_gpus"] == 4]
    assert np.median(_err(predict_allreduce(test, hw, fit), test)) < 0.15
    assert 2e-6 < fit.latency < 8e-6  # the CUDA-graph custom kernel: about 4.4 us at 2 GPUs and 128 bytes
    nccl = allreduce_rows(H200, "nccl")
    nccl = nccl[nccl["message_size"] <= 2 ** 24]
    p = fit_nccl(nccl[nccl["num_gpus"] != 4], hw)
    test = nccl[nccl["num_gpus"] == 4]
    assert np.median(_err(predict_nccl(test, hw, p), test)) < 0.15


def test_fp8_decode_step_is_priced_near_the_measured_kernels():
    """VALIDATION.md "FP8 plain decode of a dense target", the check against the tables: fp8/bf16 of one Qwen3-8B layer
    composed from the measured kernels (vLLM 0.24.0) against sdsl's priced steps on the default engine, whose H100 GEMMs
    are the same tables' (batch 1, 8, 32): within 10% on the H100 and H200, not the 0.5x the weight bytes say."""
    from sdsl.validation.kernel_validation import _fp8_layer

    want = {"h100_sxm": [(0.81, 0.75, -0.0723), (0.71, 0.76, 0.0714), (0.77, 0.80, 0.0351)],
            "h200_sxm": [(0.76, 0.80, 0.0559), (0.76, 0.81, 0.067), (0.87, 0.84, -0.0367)],
            "b200_sxm": [(1.64, 0.89, -0.4574), (0.84, 0.90, 0.0615), (0.91, 0.91, -0.0009)]}
    for gpu, rows in want.items():
        got = _fp8_layer(gpu, "vllm")
        assert [r["batch"] for r in got] == [1, 8, 32]
        for r, (measured, priced, error) in zip(got, rows):
            assert (r["measured_layer_ratio"], r["priced_step_ratio"]) == (pytest.approx(measured, abs=5e-3),
                                                                           pytest.approx(priced, abs=5e-3))
            assert r["error"] == pytest.approx(error, abs=5e-4)
            assert gpu == "b200_sxm" or abs(r["error"]) < 0.10
    # the H100 on Vidur's 2024 GEMMs (the parameters the profiles before 2026 get): 0.78, 0.79, 0.82
    from sdsl.roofline.deployment import Deployment
    from sdsl.roofline.latency import step_time

    old = [float(step_time("qwen3-8b", Deployment("h100-sxm", weight_dtype="fp8", engine="vllm:2025-07"), batch=b,
                           context=1024).total_s
                 / step_time("qwen3-8b", Deployment("h100-sxm", engine="vllm:2025-07"), batch=b, context=1024).total_s)
           for b in (1, 8, 32)]
    assert old == [pytest.approx(x, abs=5e-3) for x in (0.78, 0.79, 0.82)]


def test_the_shipped_h200_and_b200_defaults_price_the_tables():
    """VALIDATION.md: the shipped H200 and B200 calibrations (what default_params returns) on every GEMM row of the
    tables they were fitted on, per format, without bias: a median 6.0% and 7.5% (bf16), 8.5% and 14.4% (fp8), B200
    nvfp4 9.3% (the H200's fp8 within the 10% median goal since it prices its own kernels' 256-row tile)."""
    from sdsl.validation.kernel_validation import _shipped

    want = {"h200_sxm": {"bfloat16": 0.060, "fp8": 0.0854}, "b200_sxm": {"bfloat16": 0.0747, "fp8": 0.144, "nvfp4": 0.0925}}
    for gpu, medians in want.items():
        got = _shipped(gpu, "vllm")
        assert got["calibration"]["kind"] == "measured"
        for dtype, median in medians.items():
            s = got["gemm"][dtype]
            assert s["median_abs"] == pytest.approx(median, abs=5e-4) and abs(s["median_signed"]) < 0.03, (gpu, dtype)
    meets = {(g, d) for g, medians in want.items() for d in medians if _shipped(g, "vllm")["gemm"][d]["median_abs"] <= 0.10}
    assert meets == {("h200_sxm", "bfloat16"), ("h200_sxm", "fp8"), ("b200_sxm", "bfloat16"), ("b200_sxm", "nvfp4")}
    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    assert ("the shipped H200 and B200 defaults err by a median 6.0% and 7.5% (bf16), 8.5% and 14.4% (fp8), B200 nvfp4 "
            "9.3%, with no bias (in sample): the H200's fp8 meets the 10% median goal, the B200's does not") in text


def test_block_scaled_fp8_on_the_engines_whose_kernels_scale_with_the_work():
    """VALIDATION.md "Measured kernels", fp8_block: vLLM 0.24.0's block-scaled rows are a fixed cost, flat in n and k,
    so no roofline form fits them; SGLang's and TensorRT-LLM's scale with the work, and the same three format terms
    held out by input width price them within 10.4% median (``sdsl validate kernels --op gemm --engine sglang``)."""
    from sdsl.validation.kernel_validation import validate_kernels

    flat = gemm_rows(H200, "vllm", "fp8_block")
    one = flat[flat["m"] == 1]
    spread = one["time_s"].quantile(0.9) / one["time_s"].quantile(0.1)
    work = (one["n"] * one["k"]).max() / (one["n"] * one["k"]).min()
    assert spread < 1.3 and work > 100 and one["time_s"].median() > 50e-6  # 100x the weights in the same time
    expect = {"sglang": {"h100_sxm": 0.085, "h200_sxm": 0.104, "b200_sxm": 0.096},
              "trtllm": {"h100_sxm": 0.077, "h200_sxm": 0.095, "b200_sxm": 0.086}}
    for engine, by_gpu in expect.items():
        data = validate_kernels(ops=("gemm",), engine=engine).to_dict()
        for gpu, median in by_gpu.items():
            assert data["gpus"][gpu]["gemm"]["fp8_block"]["heldout"]["median_abs"] == pytest.approx(median, abs=3e-3)
    vllm = validate_kernels(gpus=[H200], ops=("gemm",)).to_dict()["gpus"][H200]["gemm"]["fp8_block"]["heldout"]
    assert vllm["median_abs"] > 0.15  # the flat rows: what no roofline form prices


def test_the_two_h100_sources_part_where_a_verify_step_fills_the_row_tiles():
    """VALIDATION.md "The two sources on the H100": the H100's Vidur calibration (2024 GEMMs) prices vLLM 0.24's bf16
    GEMMs +3.7...+9.0% slow at m <= 64 and +10.0...+51.4% slow at m > 64 (+17.9...+51.4% at 64 < m <= 512, where
    b(k + 1) verify rows run, the most one row past a tile edge: 129, 257, 513; +28.4% at 1024, +10.0% at 8192); the
    tables' fit prices Vidur's rows up to 512 tokens 19.9% fast. A wrong statement about which regime the sources
    disagree in fails here."""
    from sdsl.fit.opdb.sources import vidur_vs_tables

    out = vidur_vs_tables()
    by_m = out["shipped_on_opdb_median_signed_by_m"]
    assert {65, 129, 193, 257, 513, 1025} <= set(by_m)  # one row past each row-tile edge
    small = [e for m, e in by_m.items() if m <= 64]
    large = [e for m, e in by_m.items() if m > 64]
    assert (min(small), max(small)) == (pytest.approx(0.037, abs=0.005), pytest.approx(0.090, abs=0.005))
    assert (min(large), max(large)) == (pytest.approx(0.100, abs=0.005), pytest.approx(0.514, abs=0.005))
    verify = [e for m, e in by_m.items() if 64 < m <= 512]
    assert (min(verify), max(verify)) == (pytest.approx(0.179, abs=0.005), pytest.approx(0.465, abs=0.005))
    assert (by_m[192], by_m[512]) == (pytest.approx(0.315, abs=0.01), pytest.approx(0.339, abs=0.01))
    assert [by_m[m] for m in (129, 257, 513)] == [pytest.approx(x, abs=0.01) for x in (0.433, 0.465, 0.514)]
    assert (by_m[1024], by_m[8192]) == (pytest.approx(0.284, abs=0.01), pytest.approx(0.100, abs=0.01))
    assert by_m[1] == pytest.approx(0.088, abs=1e-3)  # "8.8% slower than the tables' at one token" (attention check)
    # and the other way: the tables' fit (the newest vLLM profiles' H100 GEMMs) prices Vidur's rows up to 512 tokens fast
    back = out["tables_on_vidur_to_512"]
    assert (back["median_abs"], back["median_signed"]) == (pytest.approx(0.199, abs=0.005), pytest.approx(-0.199, abs=0.005))
    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    assert ("+3.7…+9.0% slow at m ≤ 64 (decode, where weight reads dominate) and +10.0…+51.4% slow at m > 64: +17.9…+51.4% "
            "from 65 to 512 rows (+31.5% at 192, +33.9% at 512; one row past a tile edge +43.3% / +46.5% / +51.4% at 129 / "
            "257 / 513") in text
    assert "(+28.4% at 1024, +10.0% at 8192)" in text and "rows of up to 512 tokens 19.9% fast (median signed)" in text


def _small_kv_gap(gpu: str, rows, roofline: bool = False) -> float:
    """Median measured minus step-priced seconds of the bf16-KV attention rows whose KV read is at most 4 MiB, at the
    shipped defaults of the newest vLLM profile (``roofline``: with the measured attention form switched off)."""
    import dataclasses

    from sdsl.fit.opdb.kernels import predict_attention_step
    from sdsl.roofline.latency_params import default_params

    hw = hardware_of(gpu)
    params = default_params(hw, "vllm")
    if roofline:
        params = dataclasses.replace(params, attn_eta_kv=0.0)
    rows = rows[(rows["kv_cache_dtype"] != "fp8") & (rows["kv_bytes"] <= 4 << 20)]
    return float(np.median(rows["time_s"].to_numpy() - predict_attention_step(rows, hw, params)))


def test_the_shipped_steps_decode_attention_matches_the_tables_and_mla_still_misses():
    """VALIDATION.md "Measured kernels": the attention a priced step charges (the measured form t0 + t_blk·b·h_kv +
    KV read, shipped defaults of the newest vLLM profile) on the tables' 6,726 bf16-KV decode-attention rows per GPU
    (in sample): no bias at any KV size, the fixed cost at a small KV read paid, the worst case still over 25%. The
    roofline plus one launch (what `ideal`, other engines and MLA are charged) misses them by 65-80%, and MLA, which
    keeps it, still misses SGLang's MLA rows: a failed check, kept visible."""
    import dataclasses

    from sdsl.fit.opdb.kernels import predict_attention_step
    from sdsl.roofline.latency_params import default_params
    from sdsl.validation.kernel_validation import _shipped

    expected = {"h100_sxm": ((0.0085, 0.0042, 0.0063), 0.058, 0.525, -0.05, (-0.796, -0.865, -0.098), 10.66),
                "h200_sxm": ((0.0024, 0.0014, 0.0076), 0.057, -0.608, -0.02, (-0.729, -0.763, -0.120), 9.39),
                "b200_sxm": ((0.018, 0.011, -0.0084), 0.052, 0.643, -0.10, (-0.653, -0.672, -0.095), 6.12)}
    beyond_l2 = {"h100_sxm": (0.0014, 0.034, 0.354), "h200_sxm": (0.0012, 0.037, 0.297), "b200_sxm": (-0.0084, 0.038, 0.643)}
    for gpu, (signed, median, worst, gap_us, roof, roof_gap_us) in expected.items():
        shipped = _shipped(gpu, "vllm")
        assert shipped["forms"] == {"attention": "measured form, in sample", "mla": "roofline + one launch"}
        a = shipped["attention"]
        got = (a["all"]["median_signed"], a["kv <= 4 MiB"]["median_signed"], a["kv > 64 MiB"]["median_signed"])
        assert got == pytest.approx(signed, abs=1e-3), gpu
        assert (a["all"]["median_abs"], a["all"]["worst"]) == pytest.approx((median, worst), abs=1e-3), gpu
        assert a["all"]["n"] == 6726 and not a["all"]["meets_goal"]
        b = a["cache beyond L2"]  # what a step's read is like: the rows the tables do not time from L2
        assert (b["median_signed"], b["median_abs"], b["worst"]) == pytest.approx(beyond_l2[gpu], abs=1e-3), gpu
        rows = attention_rows(gpu, "vllm")
        assert 1e6 * _small_kv_gap(gpu, rows) == pytest.approx(gap_us, abs=0.05), gpu
        assert 1e6 * _small_kv_gap(gpu, rows, roofline=True) == pytest.approx(roof_gap_us, abs=0.05), gpu
        hw = hardware_of(gpu)  # the roofline plus one launch on the same rows
        bf16 = rows[rows["kv_cache_dtype"] != "fp8"]
        e = predict_attention_step(bf16, hw, dataclasses.replace(default_params(hw, "vllm"), attn_eta_kv=0.0)) \
            / bf16["time_s"].to_numpy() - 1
        kv = bf16["kv_bytes"].to_numpy()
        got = (np.median(e), np.median(e[kv <= 4 << 20]), np.median(e[kv > 64 << 20]))
        assert got == pytest.approx(roof, abs=1e-3), gpu
    for gpu, (every, small, large) in {"h100_sxm": (-0.745, -0.866, -0.249), "h200_sxm": (-0.716, -0.765, -0.297),
                                       "b200_sxm": (-0.707, -0.722, -0.358)}.items():  # MLA (SGLang 0.5.14's rows)
        m = _shipped(gpu, "vllm")["mla"]
        got = (m["all"]["median_signed"], m["kv <= 4 MiB"]["median_signed"], m["kv > 64 MiB"]["median_signed"])
        assert got == pytest.approx((every, small, large), abs=1e-3) and m["all"]["n"] == 1136, gpu
        assert not m["all"]["meets_goal"]
    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    for fragment in ("a median signed +0.1% / +0.1% / −0.8% (median |error| 3.4% / 3.7% / 3.8%, worst +35.4% / +29.7% / "
                     "+64.3%", "over all rows +0.8% / +0.2% / +1.8% (median |error| 5.8% / 5.7% / 5.2%, worst +52.5% / "
                     "−60.8% / +64.3%)", "+0.4% / +0.1% / +1.1% where one layer's KV read is at most 4 MiB",
                     "−0.05 / −0.02 / −0.10 µs", "+0.6% / +0.8% / −0.8% above 64 MiB",
                     "median signed −79.6% / −72.9% / −65.3%", "10.7 / 9.4 / 6.1 µs", "−9.8% / −12.0% / −9.5%",
                     "MLA (SGLang 0.5.14's 1,136 bf16-KV rows per GPU): −74.5% / −71.6% / −70.7%",
                     # the claims index restates them
                     "in sample median signed +0.1% / +0.1% / −0.8% on the caches beyond L2, where the roofline plus one "
                     "launch erred −79.6% / −72.9% / −65.3% on all rows; MLA's step still −74.5% / −71.6% / −70.7%",
                     "−24.9% / −29.7% / −35.8%"):
        assert fragment in text, fragment
    model = " ".join((REPO_ROOT / "docs" / "model.md").read_text().split())
    for fragment in ("median signed +0.1% / +0.1% / −0.8% on H100 / H200 / B200 over the caches beyond L2 (median |error| "
                     "3.4% / 3.7% / 3.8%; the worst case, 29.7–64.3%, misses the 25% goal), where the roofline errs by −79.6% "
                     "/ −72.9% / −65.3%",
                     "still errs by −74.5% / −71.6% / −70.7%"):
        assert fragment in model, fragment


def test_what_the_measured_attention_adds_to_the_default_h100_step():
    """VALIDATION.md "Measured kernels": on the default H100 deployment (vLLM) decode attention costs a Llama-3.1-8B
    batch-1 step 0.42 ms of its 6.64 ms, against the roofline's 0.05 ms of 6.32 ms (5.2% more). That each layer is
    charged the fitted form, and MLA the roofline, is checked in tests/unit/test_measured_attention.py."""
    import sdsl

    dep = sdsl.Deployment("h100-sxm")
    roof = sdsl.Deployment("h100-sxm", params=dep.params.replace(attn_eta_kv=0.0))
    step = sdsl.step_time("llama-3.1-8b", dep, batch=1, q=1, context=1024)
    plain = sdsl.step_time("llama-3.1-8b", roof, batch=1, q=1, context=1024)
    assert 1e3 * float(step.attention_s) == pytest.approx(0.421, abs=5e-3)
    assert 1e3 * float(plain.attention_s) == pytest.approx(0.046, abs=5e-3)
    assert (1e3 * float(step.total_s), 1e3 * float(plain.total_s)) == pytest.approx((6.644, 6.316), abs=5e-3)
    assert float(step.total_s / plain.total_s) - 1 == pytest.approx(0.052, abs=2e-3)
    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    assert ("charges 0.42 ms of Llama-3.1-8B's 6.64 ms batch-1 step on the default H100 deployment (the roofline: "
            "0.05 ms of 6.32 ms)") in text


def test_the_shipped_attention_terms_span_the_ranges_the_docs_state():
    """README.md, VALIDATION.md and sdsl.roofline.attention state the shipped attention terms' ranges over every GPU and
    engine (bf16 KV): t0 8.6-11.8 us per call, t_block 7.5-23.3 ns, eta_kv 0.72-0.99, B_blk 0.3-4.1 TB/s."""
    import json

    import sdsl.roofline.attention as attention
    from sdsl._paths import data_path

    files = list(data_path("latency").glob("*.json")) + list(data_path("latency", "opdb").glob("*.json"))
    terms = [v["params"] for f in files for v in json.loads(f.read_text()).get("attention", {}).values()]
    assert len(terms) == 14
    span = lambda key, scale: (round(min(t[key] for t in terms) * scale, 1), round(max(t[key] for t in terms) * scale, 1))  # noqa: E731
    assert (span("attn_t0", 1e6), span("attn_t_block", 1e9)) == ((8.6, 11.8), (7.5, 23.3))
    assert (round(min(t["attn_eta_kv"] for t in terms), 2), round(max(t["attn_eta_kv"] for t in terms), 2)) == (0.72, 0.99)
    assert span("attn_block_bandwidth", 1e-12) == (0.3, 4.1)
    doc = " ".join(attention.__doc__.split())
    assert "(8.6–11.8 µs)" in doc and "(7.5–23.3 ns)" in doc and "(0.72–0.99)" in doc and "(0.3–4.1 TB/s over a bf16 cache;" in doc
    assert "an 8.6-11.8 µs fixed cost per call" in " ".join((REPO_ROOT / "README.md").read_text().split())
    assert "a fixed cost of 8.6–11.8 µs per call" in " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())


def test_what_the_tables_allow_a_monotone_form():
    """VALIDATION.md "What the tables allow": the series in which the tables alone rule out a 25% worst case for any form
    monotone in the work (their floor, rows), and the held-out worst on the rows they allow it, which misses 25% for every
    fit but one. A floor or a worst case stated wrong, or a fit meeting the goal where the text says none does, fails here."""
    from sdsl._evidence import monotone_floor
    from sdsl.validation.kernel_validation import validate_kernels

    data = validate_kernels().to_dict()["gpus"]
    pct = lambda x: f"{100 * x:.1f}%"  # noqa: E731
    fl = lambda gpu, op, key: data[gpu][op][key]["floor"]  # noqa: E731
    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    b200_fp8 = fl("b200_sxm", "gemm", "fp8")
    cutlass = "trtllm:{}:moe_torch_flow_cutlass"
    modelopt = "vllm:fp8:vllm_modeloptfp8moe_flashinfer_cutlass_flashinferexperts"
    marlin = "vllm:int4_wo:vllm_marlin_int4_moe"
    nvfp4 = "vllm:nvfp4:vllm_compressedtensorsw4a4nvfp4moe_flashinfer_trtllm_trtllmnvfp4expertsmonolithic"
    fragments = [
        f"bf16 GEMM {pct(fl('h100_sxm', 'gemm', 'bfloat16')['worst_abs'])} (H100, "
        f"{fl('h100_sxm', 'gemm', 'bfloat16')['rows_above_goal']} rows) and {pct(fl('h200_sxm', 'gemm', 'bfloat16')['worst_abs'])} "
        f"(H200, {fl('h200_sxm', 'gemm', 'bfloat16')['rows_above_goal']} rows)",
        f"fp8 GEMM {pct(fl('h100_sxm', 'gemm', 'fp8')['worst_abs'])} (H100, {fl('h100_sxm', 'gemm', 'fp8')['rows_above_goal']} "
        f"rows) and {pct(fl('h200_sxm', 'gemm', 'fp8')['worst_abs'])} (H200, {fl('h200_sxm', 'gemm', 'fp8')['rows_above_goal']} rows)",
        f"B200 {pct(b200_fp8['worst_abs'])} ({b200_fp8['rows_above_goal']:,} of its "
        f"{len(gemm_rows('b200_sxm', 'vllm', 'fp8')):,} rows",
        "block-scaled fp8 GEMM " + " / ".join(pct(fl(g, "gemm", "fp8_block")["worst_abs"]) for g in ("h100_sxm", "h200_sxm", "b200_sxm")),
        f"H200 decode attention {pct(fl('h200_sxm', 'attention', 'bfloat16')['worst_abs'])} (bf16 KV, "
        f"{fl('h200_sxm', 'attention', 'bfloat16')['rows_above_goal']} rows) and {pct(fl('h200_sxm', 'attention', 'fp8')['worst_abs'])} "
        f"(fp8 KV, {fl('h200_sxm', 'attention', 'fp8')['rows_above_goal']} rows)",
        f"SGLang's all-reduce on the H100 (eager {pct(fl('h100_sxm', 'allreduce', 'sglang:eager')['worst_abs'])}, graph "
        f"{pct(fl('h100_sxm', 'allreduce', 'sglang:graph')['worst_abs'])}), eager all-reduce on the B200 (vLLM "
        f"{pct(fl('b200_sxm', 'allreduce', 'vllm:eager')['worst_abs'])}, SGLang {pct(fl('b200_sxm', 'allreduce', 'sglang:eager')['worst_abs'])})",
        f"(H100 bf16 {pct(fl('h100_sxm', 'moe', cutlass.format('bfloat16'))['worst_abs'])}, fp8 "
        + " / ".join(f"{100 * fl(g, 'moe', cutlass.format('fp8'))['worst_abs']:.1f}" for g in ("h100_sxm", "h200_sxm", "b200_sxm"))
        + f"%; H200 bf16 {pct(fl('h200_sxm', 'moe', cutlass.format('bfloat16'))['worst_abs'])})",
        f"ModelOpt fp8 FlashInfer path ({pct(fl('h100_sxm', 'moe', modelopt)['worst_abs'])}, {pct(fl('h200_sxm', 'moe', modelopt)['worst_abs'])})",
        f"Marlin int4 (H200 {pct(fl('h200_sxm', 'moe', marlin)['worst_abs'])}, B200 {pct(fl('b200_sxm', 'moe', marlin)['worst_abs'])})",
        # "An fp8 KV cache": the fp8-KV attention terms a step takes, held out one shape at a time
        "held out " + " / ".join(pct(data[g]["attention"]["fp8"]["heldout"]["median_abs"])
                                 for g in ("h100_sxm", "h200_sxm", "b200_sxm")) + " median on H100 / H200 / B200",
        f"nvfp4 path on the B200 ({pct(fl('b200_sxm', 'moe', nvfp4)['worst_abs'])})",
    ]
    # B200's fp8 rows: the shapes whose one-token GEMM takes longer than their two-token one, and by how much
    fp8 = gemm_rows("b200_sxm", "vllm", "fp8")
    one, two = (fp8[fp8["m"] == m].set_index(["n", "k"])["time_s"] for m in (1, 2))
    series = fp8.assign(floor=monotone_floor(fp8, ["n", "k"], "m")).groupby(["n", "k"])["floor"].max()
    fragments.append(f"in {int((series > 0.25).sum())} of its {len(series)} shapes: at m = 1 it takes a median "
                     f"{float(np.median(one / two)):.2f}× its m = 2 time")
    for fragment in fragments:
        assert fragment in text, fragment
    # the goals the result table states: the held-out medians within 10%, and the best worst case (GEMM, attention, MLA)
    gpus = ("h100_sxm", "h200_sxm", "b200_sxm")
    medians_met = {(g, op, k) for g in gpus for op in ("gemm", "attention") for k, r in data[g][op].items()
                   if k != "fp8_block" and r["heldout"]["median_abs"] <= 0.10}
    assert medians_met == ({(g, "gemm", "bfloat16") for g in gpus} | {(g, "attention", kv) for g in gpus for kv in ("bfloat16", "fp8")}
                   | {("h100_sxm", "gemm", "fp8"), ("h200_sxm", "gemm", "fp8"), ("b200_sxm", "gemm", "nvfp4")})
    best = min([data[g][op][k]["heldout"]["worst_abs"] for g in gpus for op in ("gemm", "attention") for k in data[g][op]
                if k != "fp8_block"] + [data[g]["mla"]["bfloat16"]["heldout"]["worst_abs"] for g in gpus])
    graph = data["h100_sxm"]["allreduce"]["vllm:graph"]["heldout"]["worst_abs"]
    assert (f"for fp8 GEMM on the H100 ({pct(data['h100_sxm']['gemm']['fp8']['heldout']['median_abs'])}) and H200 "
            f"({pct(data['h200_sxm']['gemm']['fp8']['heldout']['median_abs'])}) and for B200 nvfp4 "
            f"({pct(data['b200_sxm']['gemm']['nvfp4']['heldout']['median_abs'])}); missed for fp8 GEMM on the B200 "
            f"({pct(data['b200_sxm']['gemm']['fp8']['heldout']['median_abs'])}); the worst case is missed everywhere** "
            f"({pct(best)} at best over GEMM, attention and MLA, the H100's MLA; the custom all-reduce {pct(graph)})") in text
    assert best == data["h100_sxm"]["mla"]["bfloat16"]["heldout"]["worst_abs"]
    # exactly those series: every other fit's floor is within the goal
    named = {("h100_sxm", "gemm", "bfloat16"), ("h200_sxm", "gemm", "bfloat16"), ("b200_sxm", "gemm", "fp8"),
             ("h100_sxm", "gemm", "fp8"), ("h200_sxm", "gemm", "fp8"),
             ("h200_sxm", "attention", "bfloat16"), ("h200_sxm", "attention", "fp8"),
             ("h100_sxm", "allreduce", "sglang:eager"), ("h100_sxm", "allreduce", "sglang:graph"),
             ("b200_sxm", "allreduce", "vllm:eager"), ("b200_sxm", "allreduce", "sglang:eager"),
             ("h100_sxm", "moe", cutlass.format("bfloat16")), ("h200_sxm", "moe", cutlass.format("bfloat16")),
             ("h200_sxm", "moe", marlin), ("b200_sxm", "moe", marlin), ("b200_sxm", "moe", nvfp4)}
    named |= {(g, "gemm", "fp8_block") for g in ("h100_sxm", "h200_sxm", "b200_sxm")}
    named |= {(g, "moe", cutlass.format("fp8")) for g in ("h100_sxm", "h200_sxm", "b200_sxm")}
    named |= {(g, "moe", modelopt) for g in ("h100_sxm", "h200_sxm")}
    above = {(g, op, k) for g, res in data.items() for op, entries in res.items() for k, r in entries.items()
             if r["floor"]["worst_abs"] > 0.25 and not k.startswith("all:")}
    assert above == named
    # and where the tables allow 25%, every fit but MLA's over the H200's fp8 cache still misses it
    allowed = {(g, op, k): r["floor"]["heldout_where_allowed"]["worst_abs"] for g, res in data.items()
               for op, entries in res.items() for k, r in entries.items() if not k.startswith("all:")}
    met = [key for key, worst in allowed.items() if worst <= 0.25]
    assert met == [("h200_sxm", "mla", "fp8")]
    missed = {key: worst for key, worst in allowed.items() if worst > 0.25}
    lo, hi = min(missed, key=missed.get), max(missed, key=missed.get)
    assert (lo, hi) == (("h100_sxm", "mla", "fp8"), ("b200_sxm", "moe", "trtllm:nvfp4:moe_torch_flow_min_latency"))
    gpus, mla = ("h100_sxm", "h200_sxm", "b200_sxm"), lambda g, kv, key: pct(data[g]["mla"][kv]["heldout"][key])  # noqa: E731
    eta_kv = {(g, kv): round(data[g]["mla"][kv]["fitted"]["eta_kv"], 2) for g in gpus[:2] for kv in ("bfloat16", "fp8")}
    assert eta_kv == {("h100_sxm", "bfloat16"): 0.85, ("h100_sxm", "fp8"): 0.08, ("h200_sxm", "bfloat16"): 0.81,
                      ("h200_sxm", "fp8"): 0.06}  # VALIDATION: the fp8 cache's dequantising path
    assert "0.08 / 0.06 of the bandwidth on H100 / H200, against 0.85 / 0.81 over a bf16 cache" in text
    assert (f"the MLA fit {' / '.join(mla(g, 'bfloat16', 'median_abs') for g in gpus)} (bf16 cache), over an fp8 cache "
            f"{' / '.join(mla(g, 'fp8', 'median_abs') for g in gpus)}, worst {' / '.join(mla(g, 'fp8', 'worst_abs') for g in gpus)}"
            " (the H200's within both goals)") in text  # the claims index
    assert (f"one fit meets it, MLA with an fp8 KV cache on the H200 ({pct(allowed[met[0]])}); every other fit's held-out "
            f"worst there is still {pct(missed[lo])} (the same on the H100) to {pct(missed[hi])} (TensorRT-LLM's nvfp4 "
            "min-latency MoE path on the B200; vLLM's block-scaled fp8 GEMM on the B200 "
            f"{pct(missed[('b200_sxm', 'gemm', 'fp8_block')])})") in text


def test_mla_streams_its_queries_apart_from_an_fp8_latent_cache():
    """VALIDATION.md "Measured kernels": MLA's 128 heads of queries and outputs read at the GEMMs' rate, apart from the
    latent cache, price SGLang's fp8-cache MLA rows on the H200 with one head count held out; charged at the cache's own
    (dequantising, about 6% of the bandwidth) rate, as a GQA call's are, the short-context rows come out several times
    too slow."""
    from sdsl.fit.opdb.kernels import mla_rows

    hw = hardware_of(H200)
    rows = mla_rows(H200, "sglang", "fp8")
    eta = fit_gemm(gemm_rows(H200, "vllm", "bfloat16"), hw, "bf16")
    held = rows["num_heads"] == 128
    apart, within = (fit_attention(rows[~held], hw, eta.eta_compute, eta_stream) for eta_stream in (eta.eta_memory, 0.0))
    assert apart.eta_kv < 0.15  # the fp8 cache's path: far below the bf16 cache's 0.8
    e_apart, e_within = (_err(predict_attention(rows[held], hw, f), rows[held]) for f in (apart, within))
    assert np.median(e_apart) < 0.10 and e_apart.max() < 0.35
    assert e_within.max() > 2.0


def _mla_held_out(gpu: str, kv: str, eta_stream_of) -> np.ndarray:
    """SGLang's MLA rows of ``gpu`` over a ``kv`` cache, one head count held out at a time, priced by the fit on the
    others with queries and outputs read at ``eta_stream_of(GEMM fit)`` (0: within the KV read)."""
    from sdsl.fit.opdb.kernels import mla_rows

    hw = hardware_of(gpu)
    gemm = fit_gemm(gemm_rows(gpu, "vllm", "bfloat16"), hw, "bf16")
    rows = mla_rows(gpu, "sglang", kv)
    errors = []
    for heads in sorted(set(rows["shape"])):
        held = rows["shape"] == heads
        fit = fit_attention(rows[~held], hw, gemm.eta_compute, eta_stream_of(gemm))
        errors.append(predict_attention(rows[held], hw, fit) / rows[held]["time_s"].to_numpy() - 1.0)
    return np.abs(np.concatenate(errors))


def test_the_mla_forms_compared():
    """VALIDATION.md "Measured kernels": MLA's queries and outputs read within the KV read, as the fit priced them
    before, against read apart at the GEMMs' rate: on Hopper's fp8 cache the first misses by up to 5.5x; over a bf16
    cache and on B200 the two forms' held-out medians are within 0.3 points."""
    from sdsl._paths import REPO_ROOT

    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    pct = lambda x: f"{100 * x:.1f}%"  # noqa: E731
    within, apart = (lambda g: 0.0), (lambda g: g.eta_memory)
    for gpu, name in (("h100_sxm", "H100"), ("h200_sxm", "H200")):
        e = _mla_held_out(gpu, "fp8", within)
        assert f"{pct(np.median(e))} / {pct(np.quantile(e, 0.95))} / {pct(e.max())} ({name})" in text, name
    worst = max(_mla_held_out(g, "fp8", within).max() for g in ("h100_sxm", "h200_sxm"))
    assert round(1 + worst, 1) == 5.5 and "rows came out up to 5.5× too slow" in text
    pairs = [("h100_sxm", "bfloat16"), ("h200_sxm", "bfloat16"), ("b200_sxm", "bfloat16"), ("b200_sxm", "fp8")]
    moved = [abs(np.median(_mla_held_out(g, kv, apart)) - np.median(_mla_held_out(g, kv, within))) for g, kv in pairs]
    assert max(moved) < 0.003 and "the two forms are within 0.3 points of median" in text


def test_the_fp8_mla_slowdown_the_warning_states():
    """sdsl.roofline.attention.FP8_MLA_SLOWDOWN, which predict and optimize warn with, is the tables' median fp8/bf16
    cache time of SGLang's MLA at 8k tokens or more on Hopper; on the Blackwell GPUs the fp8 cache is faster (no
    warning there), and the warning fires for an MLA target over an fp8 cache under SGLang on Hopper only."""
    import sdsl
    from sdsl.fit.opdb.kernels import mla_rows
    from sdsl.roofline.attention import FP8_MLA_SLOWDOWN, fp8_mla_warning

    def ratios(gpu):
        r = mla_rows(gpu, "sglang")
        r = r[r["context"] >= 8192]
        p = r.pivot_table(index=["num_heads", "batch_size", "context"], columns="kv_cache_dtype", values="time_s")
        return (p["fp8"] / p["bfloat16"]).dropna()

    hopper = {name: ratios(gpu) for gpu, name in (("h100_sxm", "h100-sxm"), ("h200_sxm", "h200"))}
    assert {name: round(float(r.median()), 1) for name, r in hopper.items()} == FP8_MLA_SLOWDOWN
    assert [round(float(r.max()), 1) for r in hopper.values()] == [5.2, 6.6]  # VALIDATION's "up to"
    blackwell = [float(ratios(gpu).median()) for gpu in ("b200_sxm", "b300_sxm", "gb200", "gb300")]
    assert (round(min(blackwell), 2), round(max(blackwell), 2)) == (0.60, 0.62)
    deepseek, llama = sdsl.get_model("deepseek-v3"), sdsl.get_model("llama-3.1-70b")
    dep = lambda **kw: sdsl.Deployment(**{"hardware": "h200", "tp": 8, "engine": "sglang", "kv_dtype": "fp8", **kw})  # noqa: E731
    assert "4.5x its bf16-cache time" in fp8_mla_warning(deepseek, dep())
    assert all(fp8_mla_warning(m, d) is None for m, d in ((llama, dep()), (deepseek, dep(kv_dtype=None)),
                                                         (deepseek, dep(engine="vllm")), (deepseek, dep(hardware="b200"))))


def test_what_one_table_row_times():
    """VALIDATION.md "What one table row times": the GEMM launch floor fitted on the tables (one op per replayed CUDA
    graph) against the one fitted on Vidur's kernel timings of the H100."""
    from sdsl.roofline.latency_params import default_params

    floors = [default_params(hw, "vllm-2026-03").t_kernel * 1e6 for hw in ("h100-sxm", "h200", "b200")]
    assert floors == pytest.approx([1.49, 2.72, 2.94], abs=5e-3)
    vidur = default_params("h100-sxm", "vllm-2025-07").t_kernel * 1e6
    assert vidur == pytest.approx(1.20, abs=5e-3)
    assert (round(min(floors) - vidur, 1), round(max(floors) - vidur, 1)) == (0.3, 1.7)  # what an op may carry
    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    assert ("The GEMM launch floor fitted on the tables is 1.49 / 2.72 / 2.94 µs (H100 under vLLM 0.24, H200, B200), "
            "against 1.20 µs fitted on Vidur's kernel timings of the H100; so each op priced on the tables may carry "
            "0.3–1.7 µs") in text


def test_few_blocks_of_a_long_context_read_below_the_bandwidth():
    """VALIDATION.md "Measured kernels", the per-block bandwidth: at 32k cached tokens or more 1, 2, 4, 8 (sequence, KV
    head) blocks read a median share of the bandwidth that grows with the blocks, and the shipped terms price one and two
    blocks far too fast without B_blk; the fitted B_blk ranges over H100 / H200 / B200 and every engine's tables."""
    import json

    from sdsl._paths import data_path
    from sdsl.validation.kernel_validation import _shipped

    want = {"h100_sxm": ((0.45, 0.73, 0.81, 0.86), (0.0206, -0.344), (0.1486, -0.1624)),
            "h200_sxm": ((0.31, 0.58, 0.75, 0.82), (-0.0576, -0.4083), (0.0845, -0.2508)),
            "b200_sxm": ((0.23, 0.51, 0.71, 0.78), (-0.0032, -0.4613), (0.2752, -0.3081))}
    for gpu, (shares, one, two) in want.items():
        got = _shipped(gpu, "vllm")["long_blocks"]
        assert [round(got[n]["read_share"], 2) for n in (1, 2, 4, 8)] == list(shares), gpu
        for n, (w, wo) in ((1, one), (2, two)):
            assert (got[n]["median_signed_with"], got[n]["median_signed_without"]) == pytest.approx((w, wo), abs=5e-4)
    files = [data_path("latency", f) for f in ("h200.json", "b200.json")] + [data_path("latency", "opdb", "h100-sxm.json")]
    span = {}
    for section in ("attention", "attention_fp8_kv"):
        bw = [v["params"]["attn_block_bandwidth"] / 1e12 for f in files for v in json.loads(f.read_text())[section].values()]
        span[section] = (round(min(bw), 1), round(max(bw), 1))
    assert span == {"attention": (2.1, 2.9), "attention_fp8_kv": (1.1, 1.8)}
    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    for fragment in ("one block reads at a median 0.45 / 0.31 / 0.23 of the bandwidth (H100 / H200 / B200), two at 0.73 / "
                     "0.58 / 0.51, four at 0.81 / 0.75 / 0.71, eight at 0.86 / 0.82 / 0.78",
                     "median 34.4% / 40.8% / 46.1% too fast and two blocks 16.2% / 25.1% / 30.8%; with it +2.1% / −5.8% / "
                     "−0.3% and +14.9% / +8.5% / +27.5%",
                     "Fitted B_blk 2.1–2.9 TB/s over a bf16 cache on H100 / H200 / B200 (each engine's tables), 1.1–1.8 "
                     "TB/s over an fp8 one"):
        assert fragment in text, fragment


def test_the_fp8_gemm_by_regime_held_out():
    """VALIDATION.md "Measured kernels": `sdsl validate kernels`' fp8 GEMMs held out by input width k, split at 512
    tokens (``decode_m``: decode steps) and beyond (``prefill_m``, 513-8192: prefill and large verify steps); one fp8
    compute fraction prices both, on the fp8 kernels' own row tile (256 rows on H100 / H200, 128 on B200)."""
    from sdsl.validation.kernel_validation import validate_kernels

    data = validate_kernels(ops=("gemm",)).to_dict()["gpus"]
    got = {gpu: (g["decode_m"]["median_abs"], g["prefill_m"]["median_abs"], g["prefill_m"]["median_signed"])
           for gpu, g in ((gpu, data[gpu]["gemm"]["fp8"]) for gpu in ("h100_sxm", "h200_sxm", "b200_sxm"))}
    assert got["h100_sxm"] == pytest.approx((0.056, 0.107, -0.069), abs=6e-4)
    assert got["h200_sxm"] == pytest.approx((0.074, 0.147, -0.036), abs=6e-4)
    assert got["b200_sxm"] == pytest.approx((0.138, 0.205, -0.062), abs=6e-4)
    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    assert "the H100 / H200 / B200 fp8 GEMM errs 5.6% / 7.4% / 13.8% at m ≤ 512" in text
    assert "and 10.7% / 14.7% / 20.5% at m = 513–8192 (signed −6.9% / −3.6% / −6.2%; keys `decode_m`, `prefill_m`)" in text
