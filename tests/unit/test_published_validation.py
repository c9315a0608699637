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
    assert s["engine_decode"]["median_abs_error"] == pytest.approx(0.027872, rel=R)
    assert s["engine_decode"]["mean_abs_error"] == pytest.approx(0.060506, rel=R)
    assert s["engine_decode"]["worst_error"] == pytest.approx(0.320589, rel=R)
    assert s["engine_decode"]["median_signed_error"] == pytest.approx(-0.012179, rel=R)
    assert s["engine_speculative"]["n"] == 5
    assert s["engine_speculative"]["median_abs_error"] == pytest.approx(0.40618, rel=R)
    assert s["engine_speculative"]["worst_error"] == pytest.approx(0.44360, rel=R)
    assert s["engine_speculative_stated_gpu"]["median_abs_error"] == pytest.approx(0.39220, rel=R)
    assert s["spec_bench"]["n"] == 14
    assert s["spec_bench"]["median_abs_error"] == pytest.approx(0.20989, rel=R)
    assert s["spec_bench"]["mean_abs_error"] == pytest.approx(0.17949, rel=R)
    assert s["spec_bench"]["worst_error"] == pytest.approx(0.35694, rel=R)
    assert s["eager"]["worst_error"] == pytest.approx(2.99500, rel=R)


def test_leave_one_source_out_overhead(result):
    loso = result["loso_overhead"]
    assert loso["engine_decode"]["median_abs_error"] == pytest.approx(0.08009, rel=R)
    assert loso["engine_speculative"]["median_abs_error"] == pytest.approx(0.16029, rel=R)
    assert loso["engine_speculative"]["worst_error"] == pytest.approx(0.25528, rel=R)
    fitted = sorted({round(r["overhead_s"] * 1e6) for r in loso["rows"]})
    assert fitted == [325, 335, 420, 430, 435, 580]  # µs, one per held-out source


def test_k_sweep(result):
    ks = result["k_sweep"]
    assert ks["measured_best_k"] == 2
    assert ks["shipped"]["best_k"] == 2 and ks["loso_overhead"]["best_k"] == 2
    assert ks["decay"]["a"] == pytest.approx(0.58763, rel=R) and ks["decay"]["r"] == pytest.approx(0.87566, rel=R)
    assert ks["shipped"]["relative_to_k2"][4] == pytest.approx(0.95838, rel=R)
    assert ks["shipped"]["relative_to_k2"][7] == pytest.approx(0.81254, rel=R)
    assert ks["loso_overhead"]["relative_to_k2"][7] == pytest.approx(0.71605, rel=R)
    assert ks["shipped"]["errors"][2] == pytest.approx(0.23713, rel=R)
    assert ks["loso_overhead"]["errors"][2] == pytest.approx(0.06069, rel=R)
    assert ks["loso_overhead"]["errors"][7] == pytest.approx(-0.09848, rel=R)
    m = ks["measured_relative_to_k2"]
    assert m[4] == pytest.approx(0.98170, rel=R) and m[7] == pytest.approx(0.84248, rel=R)


def test_engine_speculative_rows(result):
    rows = {r["row"]: r for r in result["rows"] if r["group"] == "engine_speculative"}
    expected = {24: (249.52, 0.422), 25: (239.13, 0.444), 26: (527.05, 0.392), 27: (508.62, 0.406), 28: (314.78, 0.368)}
    for i, (pred, err) in expected.items():
        assert rows[i]["predicted"] == pytest.approx(pred, rel=R)
        assert rows[i]["error"] == pytest.approx(err, abs=1e-3)
    loso = {r["row"]: r["error"] for r in result["loso_overhead"]["rows"] if r["group"] == "engine_speculative"}
    for i, err in {24: 0.255, 25: 0.210, 26: 0.083, 27: 0.160, 28: 0.099}.items():
        assert loso[i] == pytest.approx(err, abs=1e-3)


def test_spec_bench_by_method(result):
    errs = {(r["target"], r["proposer"], r["tree"] and r["tree"][2]): r["error"] for r in result["rows"]
            if r["group"] == "spec_bench"}
    assert errs[("llama-2-7b", "medusa", 64)] == pytest.approx(0.005, abs=1e-3)
    assert errs[("llama-2-7b", "draft:llama-68m", None)] == pytest.approx(0.357, abs=1e-3)
    assert errs[("llama-2-13b", "eagle3", 61)] == pytest.approx(0.196, abs=1e-3)
    eagle1 = sorted(r["error"] for r in result["rows"] if r["group"] == "spec_bench" and r["tree"] == [5, 4, 26])
    assert eagle1 == pytest.approx([0.152, 0.268, 0.312], abs=1e-3)
    eagle2 = [r["error"] for r in result["rows"] if r["group"] == "spec_bench" and r["tree"] == [5, 10, 61]]
    assert min(eagle2) == pytest.approx(0.134, abs=1e-3) and max(eagle2) == pytest.approx(0.243, abs=1e-3)
    medusa = [r["error"] for r in result["rows"] if r["group"] == "spec_bench" and r["proposer"] == "medusa"]
    assert medusa == pytest.approx([0.005, 0.002, 0.017], abs=1e-3)
    pld = [r["error"] for r in result["rows"] if r["group"] == "spec_bench" and r["proposer"] == "ngram"]
    assert pld == pytest.approx([0.028], abs=1e-3)
    sps = [r["error"] for r in result["rows"] if r["group"] == "spec_bench" and r["proposer"].startswith("draft")]
    assert min(sps) == pytest.approx(0.239, abs=1e-3) and max(sps) == pytest.approx(0.357, abs=1e-3)


def test_decode_rows_named_in_validation_md(result):
    rows = {r["row"]: r for r in result["rows"] if r["file"] == "decode"}
    assert rows[11]["error"] == pytest.approx(0.321, abs=1e-3)  # gpt-fast Llama-3.1-70B TP2
    assert rows[17]["error"] == pytest.approx(0.165, abs=1e-3)  # vLLM single stream
    assert rows[16]["predicted"] == pytest.approx(154.96, rel=R)
    assert result["k_sweep"]["overhead_s"] == pytest.approx(420e-6, rel=R)
    assert 1 - result["k_sweep"]["loso_overhead"]["relative_to_k2"][7] == pytest.approx(0.284, abs=1e-3)
    spec_bench = [r["error"] for r in result["rows"] if r["group"] == "spec_bench"]
    assert min(spec_bench) > -1e-3
