"""Every number VALIDATION.md states about the published development set, recomputed."""

from __future__ import annotations

import pytest

from sdsl.experiments.published_validation import validate_published

R = 1e-3


@pytest.fixture(scope="module")
def result():
    return validate_published()


def test_row_accounting(result):
    assert len(result["rows"]) == 38 and len(result["unpriced"]) == 14  # of 20 + 32 rows
    reasons = " ".join(u["reason"] for u in result["unpriced"])
    assert "RTX 3090" in reasons and "Hydra" in reasons and "Lookahead" in reasons and "no accepted length" in reasons


def test_summaries(result):
    s = result["summary"]
    assert s["engine_decode"]["n"] == 18
    assert s["engine_decode"]["median_abs_error"] == pytest.approx(0.20223, rel=R)
    assert s["engine_decode"]["mean_abs_error"] == pytest.approx(0.202474, rel=R)
    assert s["engine_decode"]["worst_error"] == pytest.approx(-0.458012, rel=R)
    assert s["engine_decode"]["median_signed_error"] == pytest.approx(-0.176059, rel=R)
    assert s["engine_speculative"]["n"] == 5
    assert s["engine_speculative"]["median_abs_error"] == pytest.approx(0.51048, rel=R)
    assert s["engine_speculative"]["worst_error"] == pytest.approx(0.55162, rel=R)
    assert s["engine_speculative_stated_gpu"]["median_abs_error"] == pytest.approx(0.52660, rel=R)
    assert s["spec_bench"]["n"] == 14
    assert s["spec_bench"]["median_abs_error"] == pytest.approx(0.30060, rel=R)
    assert s["spec_bench"]["mean_abs_error"] == pytest.approx(0.26742, rel=R)
    assert s["spec_bench"]["worst_error"] == pytest.approx(0.38931, rel=R)
    assert s["eager"]["worst_error"] == pytest.approx(2.98356, rel=R)


def test_leave_one_source_out_overhead(result):
    loso = result["loso_overhead"]
    assert loso["engine_decode"]["median_abs_error"] == pytest.approx(0.19348, rel=R)
    assert loso["engine_speculative"]["median_abs_error"] == pytest.approx(0.43631, rel=R)
    assert loso["engine_speculative"]["worst_error"] == pytest.approx(0.50822, rel=R)
    fitted = sorted({round(r["overhead_s"] * 1e6) for r in loso["rows"]})
    assert fitted == [40, 275, 375, 380, 390, 695]  # µs, one per held-out source


def test_k_sweep(result):
    ks = result["k_sweep"]
    assert ks["measured_best_k"] == 2
    assert ks["shipped"]["best_k"] == 2 and ks["loso_overhead"]["best_k"] == 2
    assert ks["decay"]["a"] == pytest.approx(0.58763, rel=R) and ks["decay"]["r"] == pytest.approx(0.87566, rel=R)
    assert ks["shipped"]["relative_to_k2"][4] == pytest.approx(0.95602, rel=R)
    assert ks["shipped"]["relative_to_k2"][7] == pytest.approx(0.80994, rel=R)
    assert ks["loso_overhead"]["relative_to_k2"][7] == pytest.approx(0.71898, rel=R)
    assert ks["shipped"]["errors"][2] == pytest.approx(0.29764, rel=R)
    assert ks["loso_overhead"]["errors"][2] == pytest.approx(0.12273, rel=R)
    assert ks["loso_overhead"]["errors"][7] == pytest.approx(-0.04185, rel=R)
    m = ks["measured_relative_to_k2"]
    assert m[4] == pytest.approx(0.98170, rel=R) and m[7] == pytest.approx(0.84248, rel=R)


def test_engine_speculative_rows(result):
    rows = {r["row"]: r for r in result["rows"] if r["group"] == "engine_speculative"}
    expected = {24: (261.72, 0.491), 25: (250.21, 0.510), 26: (577.93, 0.527), 27: (561.22, 0.552), 28: (341.26, 0.483)}
    for i, (pred, err) in expected.items():
        assert rows[i]["predicted"] == pytest.approx(pred, rel=R)
        assert rows[i]["error"] == pytest.approx(err, abs=1e-3)
    loso = {r["row"]: r["error"] for r in result["loso_overhead"]["rows"] if r["group"] == "engine_speculative"}
    for i, err in {24: 0.338, 25: 0.296, 26: 0.470, 27: 0.508, 28: 0.436}.items():
        assert loso[i] == pytest.approx(err, abs=1e-3)


def test_spec_bench_by_method(result):
    errs = {(r["target"], r["proposer"], r["tree"] and r["tree"][2]): r["error"] for r in result["rows"]
            if r["group"] == "spec_bench"}
    assert errs[("llama-2-7b", "medusa", 64)] == pytest.approx(0.133, abs=1e-3)
    assert errs[("llama-2-7b", "draft:llama-68m", None)] == pytest.approx(0.385, abs=1e-3)
    assert errs[("llama-2-13b", "eagle3", 61)] == pytest.approx(0.325, abs=1e-3)
    eagle1 = sorted(r["error"] for r in result["rows"] if r["group"] == "spec_bench" and r["tree"] == [5, 4, 26])
    assert eagle1 == pytest.approx([0.211, 0.319, 0.373], abs=1e-3)
    eagle2 = [r["error"] for r in result["rows"] if r["group"] == "spec_bench" and r["tree"] == [5, 10, 61]]
    assert min(eagle2) == pytest.approx(0.282, abs=1e-3) and max(eagle2) == pytest.approx(0.389, abs=1e-3)
    medusa = [r["error"] for r in result["rows"] if r["group"] == "spec_bench" and r["proposer"] == "medusa"]
    assert medusa == pytest.approx([0.133, 0.143, 0.171], abs=1e-3)
    pld = [r["error"] for r in result["rows"] if r["group"] == "spec_bench" and r["proposer"] == "ngram"]
    assert pld == pytest.approx([0.047], abs=1e-3)
    sps = [r["error"] for r in result["rows"] if r["group"] == "spec_bench" and r["proposer"].startswith("draft")]
    assert min(sps) == pytest.approx(0.255, abs=1e-3) and max(sps) == pytest.approx(0.385, abs=1e-3)


def test_decode_rows_named_in_validation_md(result):
    rows = {r["row"]: r for r in result["rows"] if r["file"] == "decode"}
    assert rows[11]["error"] == pytest.approx(0.169, abs=1e-3)  # gpt-fast Llama-3.1-70B TP2
    assert rows[17]["error"] == pytest.approx(0.225, abs=1e-3)  # vLLM single stream
    assert rows[16]["predicted"] == pytest.approx(162.97, rel=R)
    assert rows[3]["error"] == pytest.approx(-0.458, abs=1e-3)  # gpt-fast Llama-2-7B TP8 (the all-reduce)
    assert rows[4]["error"] == pytest.approx(-0.113, abs=1e-3)  # the smallest TP>1 under-prediction
    assert [rows[i]["error"] for i in (0, 7, 14)] == pytest.approx([-0.019, -0.015, -0.038], abs=1e-3)  # TP1
    assert rows[16]["error"] == pytest.approx(0.029, abs=1e-3)
    assert result["k_sweep"]["overhead_s"] == pytest.approx(375e-6, rel=R)
    assert 1 - result["k_sweep"]["loso_overhead"]["relative_to_k2"][7] == pytest.approx(0.281, abs=1e-3)
    spec_bench = [r["error"] for r in result["rows"] if r["group"] == "spec_bench"]
    assert min(spec_bench) > -1e-3
