"""VALIDATION.md "Measured kernels", the GPUs calibrated on NVIDIA's operator tables alone beyond H200 and B200 (L40S,
B300, GB200, GB300, RTX PRO 6000): each op's fit scored on shapes held out of it, and the shipped defaults and fused-MoE fits they give;
tolerances on errors, never on fitted values. (The L40S's all-reduce, PCIe without NVLink, is the failure
VALIDATION.md reports: its bus bandwidth falls with the GPU count, which no ring form prices; not bounded here.)"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from sdsl.fit.opdb.kernels import (allreduce_rows, attention_rows, fit_attention, fit_gemm, fit_nccl, gemm_rows,
                                   hardware_of, predict_attention, predict_gemm, predict_nccl)

GPUS = ("l40s", "b300_sxm", "gb200", "gb300", "rtx_pro_6000_server")
#: The formats each GPU's vLLM tables time (L40S, Ada: no fp4 tensor cores) and price within the goal (the RTX PRO
#: 6000's nvfp4 GEMMs miss it: 18.9% held out, VALIDATION.md).
FORMATS = {"l40s": ("fp8",), "b300_sxm": ("fp8", "nvfp4"), "gb200": ("fp8", "nvfp4"), "gb300": ("fp8", "nvfp4"),
           "rtx_pro_6000_server": ("fp8",)}
HELD_K = 4096


def _signed(pred, rows):
    return pred / rows["time_s"].to_numpy() - 1.0


@pytest.mark.parametrize("gpu", GPUS)
def test_gemm_formats_price_a_held_out_width(gpu):
    """bf16's whole form and each low-precision format's three terms, fitted without the GEMMs of input width 4096,
    price them within 12% (median) without bias."""
    hw = hardware_of(gpu)
    rows = gemm_rows(gpu, "vllm")
    bf16 = rows[rows["dtype"] == "bfloat16"]
    base = fit_gemm(bf16[bf16["k"] != HELD_K], hw, "bf16")
    assert 0.6 < base.eta_memory <= 1.0  # small-m GEMMs stream their weights at a large fraction of the bandwidth
    for dtype in ("bfloat16",) + FORMATS[gpu]:
        r = rows[rows["dtype"] == dtype]
        fmt = {"bfloat16": "bf16", "fp8": "fp8", "nvfp4": "nvfp4"}[dtype]
        p = base if dtype == "bfloat16" else fit_gemm(r[r["k"] != HELD_K], hw, fmt, base=base)
        test = r[r["k"] == HELD_K]
        e = _signed(predict_gemm(test, hw, fmt, p), test)
        assert np.median(np.abs(e)) < 0.12 and abs(np.median(e)) < 0.06, (gpu, dtype)
        # a format priced at bf16's efficiencies (no terms of its own) misses the same rows by more
        if dtype != "bfloat16":
            nominal = np.median(np.abs(_signed(predict_gemm(test, hw, fmt, base), test)))
            assert nominal > np.median(np.abs(e)), (gpu, dtype)


@pytest.mark.parametrize("gpu, bound", [("l40s", 0.25), ("b300_sxm", 0.10), ("gb200", 0.10), ("gb300", 0.10),
                                        ("rtx_pro_6000_server", 0.25)])
def test_decode_attention_prices_a_held_out_head_shape(gpu, bound):
    """GQA 32/8/128 held out, bf16 and fp8 KV caches (the GDDR cards, L40S and RTX PRO 6000, fit worst: VALIDATION.md)."""
    hw = hardware_of(gpu)
    eta_c = fit_gemm(gemm_rows(gpu, "vllm", "bfloat16"), hw, "bf16").eta_compute
    for kv in ("bfloat16", "fp8"):
        rows = attention_rows(gpu, "vllm", kv)
        held = rows["shape"] == "32/8/128"
        fit = fit_attention(rows[~held], hw, eta_c)
        e = _signed(predict_attention(rows[held], hw, fit), rows[held])
        assert np.median(np.abs(e)) < bound and abs(np.median(e)) < 0.08, (gpu, kv)
        assert 0.5 < fit.eta_kv <= 1.0


@pytest.mark.parametrize("gpu, bound", [("b300_sxm", 0.10), ("gb200", 0.25), ("gb300", 0.25)])
def test_nccl_prices_a_held_out_gpu_count(gpu, bound):
    """NCCL's ring with a per-step latency, one GPU count held out (GB200's and GB300's newest NCCL: 2 and 4 GPUs only)."""
    hw = hardware_of(gpu)
    rows = allreduce_rows(gpu, "nccl")
    rows = rows[rows["message_size"] <= 2 ** 24]
    assert set(rows["engine"]) == {"nccl"}  # NCCL's own collector, not NCCL timed inside an engine's image
    for t in sorted(set(rows["num_gpus"])):
        test = rows[rows["num_gpus"] == t]
        e = _signed(predict_nccl(test, hw, fit_nccl(rows[rows["num_gpus"] != t], hw)), test)
        assert np.median(np.abs(e)) < bound, (gpu, t)


#: Shipped defaults that miss the 12% median on every GEMM row (VALIDATION.md "More GPUs": B300 / GB200 / GB300 fp8
#: 12.5% / 12.4% / 12.0% (12.01%); 10.7% / 10.5% / 10.2% on m <= 512, 22.2% / 23.2% / 23.7% on m 1024-8192; B300's
#: since the GEMM row tiles are fitted, 11.99% before). A known failure, kept visible: strict, so
#: the case reports when the default meets the goal again.
SHIPPED_MISSES = {("b300_sxm", "fp8"): "B300 fp8 default 12.5% median on every GEMM row (goal < 12%)",
                  ("gb200", "fp8"): "GB200 fp8 default 12.4% median on every GEMM row (goal < 12%)",
                  ("gb300", "fp8"): "GB300 fp8 default 12.0% (12.01%) median on every GEMM row (goal < 12%)"}


@functools.lru_cache(maxsize=None)
def _shipped_defaults(gpu):
    from sdsl.validation.kernel_validation import _shipped

    return _shipped(gpu, "vllm")


@pytest.mark.parametrize("gpu, dtype", [
    pytest.param(g, d, marks=[pytest.mark.xfail(strict=True, reason=SHIPPED_MISSES[(g, d)])] if (g, d) in SHIPPED_MISSES
                 else []) for g in GPUS for d in ("bfloat16",) + FORMATS[g]])
def test_shipped_defaults_are_measured_and_price_the_tables(gpu, dtype):
    """What default_params returns for these GPUs: fitted on the tables (sdsl hardware says measured, with the engine
    version), pricing every GEMM row of each format without bias."""
    got = _shipped_defaults(gpu)
    assert got["calibration"]["kind"] == "measured"
    assert any("aiconfigurator-core 0.12.0 (vllm 0.24.0)" in s for s in got["calibration"]["sources"])
    s = got["gemm"][dtype]
    assert s["median_abs"] < 0.12 and abs(s["median_signed"]) < 0.03, (gpu, dtype)


@pytest.mark.parametrize("gpu", GPUS)
def test_fused_moe_prices_a_held_out_model_shape(gpu):
    """vLLM's bf16 fused MoE kernel, one model shape held out at a time: median within 10%, no bias; and the shipped
    fits price these GPUs' MoE layers (measured, not the roofline's grouped GEMMs)."""
    from sdsl.catalog.hardware import get_hardware
    from sdsl.catalog.moe import fused_moe_provenance
    from sdsl.fit.opdb import moe as opdb_moe
    from sdsl.fit.opdb import read_opdb

    df = read_opdb("moe", gpu=gpu, engine="vllm", dtype="bfloat16")
    held = opdb_moe.leave_one_shape_out(opdb_moe.moe_features(opdb_moe._decode_rows(df)))
    assert held["shape"].nunique() >= 3
    assert np.median(np.abs(held["error"])) < 0.10 and abs(np.median(held["error"])) < 0.05
    hw = get_hardware(opdb_moe.OPDB_MOE_GPUS[gpu])
    assert fused_moe_provenance(hw, None, "bf16").startswith("measured: ")


def test_the_shipped_fp8_misses_by_regime():
    """VALIDATION.md "More GPUs": where the B300, GB200 and GB300 fp8 defaults miss (the m ≤ 512 rows of decode against the
    m = 1024-8192 rows), recomputed from what default_params returns."""
    from sdsl.fit.opdb.kernels import GEMM_FORMATS, gemm_rows, hardware_of, predict_gemm
    from sdsl._paths import REPO_ROOT
    from sdsl.roofline.latency_params import default_params

    got = []
    for gpu in ("b300_sxm", "gb200", "gb300"):
        hw, rows = hardware_of(gpu), gemm_rows(gpu, "vllm", "fp8")
        e = predict_gemm(rows, hw, GEMM_FORMATS["fp8"], default_params(hw, "vllm")) / rows["time_s"].to_numpy() - 1.0
        m = rows["m"].to_numpy()
        got.append((np.median(np.abs(e[m <= 512])), np.median(np.abs(e[m >= 1024])), np.median(e[m >= 1024])))
    assert got == [pytest.approx((0.107, 0.222, -0.076), abs=6e-4), pytest.approx((0.105, 0.232, -0.071), abs=6e-4),
                   pytest.approx((0.102, 0.237, -0.064), abs=6e-4)]
    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    assert ("on the rows of m ≤ 512 10.7% / 10.5% / 10.2%, on m 1024–8192 22.2% / 23.2% / 23.7%, median signed −7.6% / "
            "−7.1% / −6.4%"
            in text)
