"""Integrity check: the GPU calibrations fitted on NVIDIA's operator tables (sdsl/data/latency/<gpu>.json, written by
`make opdb-calibrate`, tools/make_opdb_latency.py) are what a refit on the shipped subset gives now. Compared by what
they price (every GEMM row per format, every NCCL row), to 1e-4: parameters a fit leaves at a bound (the L40S's kernel
terms near 0) move between BLAS builds without changing a price."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sdsl._paths import data_path
from sdsl.fit.opdb.defaults import TRANSFER_BEFORE_CATALOG

GPUS = ("h200_sxm", "b200_sxm", "l40s", "b300_sxm", "gb200", "gb300")


@pytest.mark.parametrize("gpu", GPUS)
def test_shipped_opdb_calibration_is_the_refit(gpu):
    from sdsl.catalog.hardware import get_hardware
    from sdsl.fit.opdb.defaults import build_measured_params, prices_agree, settle
    from sdsl.fit.opdb.kernels import hardware_of
    from sdsl.roofline.gpu_transfer import transfer_params
    from sdsl.roofline.latency_params import LatencyParams, _packaged_params, _transfer_basis

    hw = hardware_of(gpu)
    shipped = json.loads(data_path("latency", f"{hw.name.lower()}.json").read_text())
    basis = {k: (get_hardware(k), _packaged_params(k)) for k in _transfer_basis()}
    refit = build_measured_params(gpu, transfer_params(hw, basis))
    assert settle(gpu, refit, shipped) == shipped  # make opdb-calibrate rewrites the shipped file byte for byte
    assert refit["measured_on"] == shipped["measured_on"] and refit["transferred"] == shipped["transferred"]
    stale = gpu in TRANSFER_BEFORE_CATALOG
    assert (refit["params"]["source"] == shipped["params"]["source"]) != stale
    a, b = LatencyParams.from_dict(shipped["params"]), LatencyParams.from_dict(refit["params"])
    assert prices_agree(gpu, a, b)  # every GEMM row per format and every NCCL row, to 1e-4
    for k in ("t_elementwise", "eta_norm", "eta_rope", "eta_act", "eta_add"):  # the transferred elementwise terms
        assert getattr(a, k) == pytest.approx(getattr(b, k), rel=0.02 if stale else 1e-6), k


def test_shipped_h100_overlay_is_the_refit():
    """latency/opdb/h100-sxm.json (the fp8 terms over Vidur's H100, and the bf16 GEMM terms the newest vLLM builds run)
    is what a refit on the shipped subset gives: compared by what each priced form prices on the tables' rows."""
    from sdsl.fit.opdb.defaults import ATTENTION_SECTIONS, attention_agrees, build_format_overlay, settle
    from sdsl.fit.opdb.kernels import gemm_rows, hardware_of, predict_gemm
    from sdsl.roofline.latency_params import _packaged_params

    hw = hardware_of("h100_sxm")
    shipped = json.loads(data_path("latency", "opdb", "h100-sxm.json").read_text())
    refit = build_format_overlay("h100_sxm")
    assert settle("h100_sxm", refit, shipped) == shipped
    fitted = ("params", "engine_gemm", *ATTENTION_SECTIONS)  # compared by what they price, not digit by digit
    assert {k: v for k, v in refit.items() if k not in fitted} == {k: v for k, v in shipped.items() if k not in fitted}
    for section, kv_dtype in ATTENTION_SECTIONS.items():
        assert attention_agrees("h100_sxm", _packaged_params("h100-sxm"), shipped[section], refit[section], kv_dtype)
    assert refit["engine_gemm"]["source"] == shipped["engine_gemm"]["source"]
    for table_gemms in (False, True):
        base = _packaged_params("h100-sxm", table_gemms)
        terms = {**refit["params"], **(refit["engine_gemm"]["params"] if table_gemms else {})}
        for dtype, fmt in (("bfloat16", "bf16"), ("fp8", "fp8")):
            r = gemm_rows("h100_sxm", "vllm", dtype)
            np.testing.assert_allclose(predict_gemm(r, hw, fmt, base), predict_gemm(r, hw, fmt, base.replace(**terms)),
                                       rtol=1e-4, err_msg=dtype)


def test_settle_keeps_the_shipped_file_only_for_the_same_fit():
    """The refit is written where it prices any table row differently or moves a transferred term; B200 keeps its
    shipped transferred terms either way."""
    import copy

    from sdsl.fit.opdb.defaults import settle

    for gpu, name in (("h200_sxm", "h200"), ("b200_sxm", "b200")):
        shipped = json.loads(data_path("latency", f"{name}.json").read_text())
        moved = copy.deepcopy(shipped)
        moved["params"]["eta_memory"] *= 1.01
        assert settle(gpu, moved, shipped)["params"]["eta_memory"] == moved["params"]["eta_memory"]
        moved = copy.deepcopy(shipped)
        moved["params"]["eta_norm"] *= 1.01
        kept = settle(gpu, moved, shipped)["params"]["eta_norm"]
        assert kept == (shipped if gpu == "b200_sxm" else moved)["params"]["eta_norm"]
    h200 = json.loads(data_path("latency", "h200.json").read_text())
    renamed = copy.deepcopy(h200)
    renamed["params"]["source"] += " (reworded)"
    assert settle("h200_sxm", renamed, h200) == renamed  # a changed source text is written, its prices the same
    assert settle("h200_sxm", h200, None) is h200
