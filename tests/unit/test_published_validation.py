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
    assert s["engine_decode"]["median_abs_error"] == pytest.approx(0.172505, rel=R)
    assert s["engine_decode"]["mean_abs_error"] == pytest.approx(0.173425, rel=R)
    assert s["engine_decode"]["worst_error"] == pytest.approx(-0.367241, rel=R)
    assert s["engine_decode"]["median_signed_error"] == pytest.approx(-0.159451, rel=R)
    assert s["engine_speculative"]["n"] == 5
    assert s["engine_speculative"]["median_abs_error"] == pytest.approx(0.499535, rel=R)
    assert s["engine_speculative"]["mean_abs_error"] == pytest.approx(0.520739, rel=R)
    assert s["engine_speculative"]["worst_error"] == pytest.approx(0.599607, rel=R)
    assert s["engine_speculative"]["median_signed_error"] == pytest.approx(0.499535, rel=R)
    assert s["engine_speculative_stated_gpu"]["median_abs_error"] == pytest.approx(0.566502, rel=R)
    assert s["spec_bench"]["n"] == 14
    assert s["spec_bench"]["median_abs_error"] == pytest.approx(0.301540, rel=R)
    assert s["spec_bench"]["mean_abs_error"] == pytest.approx(0.277350, rel=R)
    assert s["spec_bench"]["worst_error"] == pytest.approx(0.405362, rel=R)
    assert s["eager"]["worst_error"] == pytest.approx(2.96254, rel=R)


def test_leave_one_source_out_overhead(result):
    loso = result["loso_overhead"]
    assert loso["engine_decode"]["median_abs_error"] == pytest.approx(0.177705, rel=R)
    assert loso["engine_speculative"]["median_abs_error"] == pytest.approx(0.434385, rel=R)
    assert loso["engine_speculative"]["worst_error"] == pytest.approx(0.536906, rel=R)
    fitted = sorted({round(r["overhead_s"] * 1e6) for r in loso["rows"]})
    assert fitted == [55, 315, 405, 410, 415, 700]  # µs, one per held-out source


def test_leave_one_source_out_host_step(result):
    host = result["loso_host_step"]["engine_speculative"]
    assert host["n"] == 5
    assert host["median_abs_error"] == pytest.approx(0.11416, rel=R)
    assert host["mean_abs_error"] == pytest.approx(0.109485, rel=R)
    assert host["worst_error"] == pytest.approx(-0.137800, rel=R)
    assert host["median_signed_error"] == pytest.approx(0.098491, rel=R)
    fitted = {r["source"]: round(r["overhead_s"] * 1e6) for r in result["loso_host_step"]["rows"]}
    assert fitted == {"github-pr:vllm-project/vllm#16035": 5110, "github-pr:sgl-project/sglang#4247": 3690}
    errs = {r["row"]: r["error"] for r in result["loso_host_step"]["rows"]}
    for i, err in {24: -0.13780, 25: -0.076738, 26: 0.11416, 27: 0.098491, 28: 0.12023}.items():
        assert errs[i] == pytest.approx(err, abs=1e-3)


def test_k_sweep(result):
    ks = result["k_sweep"]
    assert ks["measured_best_k"] == 2
    assert ks["shipped"]["best_k"] == 2 and ks["loso_overhead"]["best_k"] == 2 and ks["host_step"]["best_k"] == 3
    assert ks["decay"]["a"] == pytest.approx(0.58763, rel=R) and ks["decay"]["r"] == pytest.approx(0.87566, rel=R)
    assert ks["shipped"]["relative_to_k2"][4] == pytest.approx(0.956445, rel=R)
    assert ks["shipped"]["relative_to_k2"][7] == pytest.approx(0.809139, rel=R)
    assert ks["loso_overhead"]["relative_to_k2"][7] == pytest.approx(0.715045, rel=R)
    assert ks["host_step"]["relative_to_k2"][4] == pytest.approx(1.006202, rel=R)
    assert ks["host_step"]["relative_to_k2"][7] == pytest.approx(0.902598, rel=R)
    assert ks["shipped"]["errors"][2] == pytest.approx(0.269564, rel=R)
    assert ks["shipped"]["errors"][7] == pytest.approx(0.220461, rel=R)
    assert ks["loso_overhead"]["errors"][2] == pytest.approx(0.090121, rel=R)
    assert ks["loso_overhead"]["errors"][7] == pytest.approx(-0.074774, rel=R)
    assert ks["host_step"]["errors"][2] == pytest.approx(-0.207952, rel=R)
    assert ks["host_step"]["errors"][7] == pytest.approx(-0.151435, rel=R)
    assert ks["host_step_s"] == pytest.approx(4.4500e-3, rel=R)
    tps = ks["shipped"]["tokens_per_s"]
    assert tps[1] == pytest.approx(256.0584, rel=R) and tps[2] == pytest.approx(255.332, rel=R)  # k = 2 vs 3
    m = ks["measured_relative_to_k2"]
    assert m[4] == pytest.approx(0.98170, rel=R) and m[7] == pytest.approx(0.84248, rel=R)


def test_engine_speculative_rows(result):
    rows = {r["row"]: r for r in result["rows"] if r["group"] == "engine_speculative"}
    expected = {24: (256.058, 0.45911), 25: (244.987, 0.47894), 26: (593.031, 0.56650), 27: (578.578, 0.59961), 28: (345.013, 0.49954)}
    for i, (pred, err) in expected.items():
        assert rows[i]["predicted"] == pytest.approx(pred, rel=R)
        assert rows[i]["error"] == pytest.approx(err, abs=1e-3)
    loso = {r["row"]: r["error"] for r in result["loso_overhead"]["rows"] if r["group"] == "engine_speculative"}
    for i, err in {24: 0.29350, 25: 0.24752, 26: 0.48559, 27: 0.53691, 28: 0.43438}.items():
        assert loso[i] == pytest.approx(err, abs=1e-3)


def test_spec_bench_by_method(result):
    errs = {(r["target"], r["proposer"], r["tree"] and r["tree"][2]): r["error"] for r in result["rows"]
            if r["group"] == "spec_bench"}
    assert errs[("llama-2-7b", "medusa", 64)] == pytest.approx(0.16270, abs=1e-3)
    assert errs[("llama-2-7b", "draft:llama-68m", None)] == pytest.approx(0.40536, abs=1e-3)
    assert errs[("llama-2-13b", "eagle3", 61)] == pytest.approx(0.31065, abs=1e-3)
    eagle1 = sorted(r["error"] for r in result["rows"] if r["group"] == "spec_bench" and r["tree"] == [5, 4, 26])
    assert eagle1 == pytest.approx([0.22339, 0.32847, 0.38453], abs=1e-3)
    eagle2 = [r["error"] for r in result["rows"] if r["group"] == "spec_bench" and r["tree"] == [6, 10, 61]]
    assert min(eagle2) == pytest.approx(0.29243, abs=1e-3) and max(eagle2) == pytest.approx(0.38068, abs=1e-3)
    medusa = [r["error"] for r in result["rows"] if r["group"] == "spec_bench" and r["proposer"] == "medusa"]
    assert medusa == pytest.approx([0.16270, 0.17696, 0.20974], abs=1e-3)
    pld = [r["error"] for r in result["rows"] if r["group"] == "spec_bench" and r["proposer"] == "ngram"]
    assert pld == pytest.approx([0.049885], abs=1e-3)
    sps = [r["error"] for r in result["rows"] if r["group"] == "spec_bench" and r["proposer"].startswith("draft")]
    assert min(sps) == pytest.approx(0.25989, abs=1e-3) and max(sps) == pytest.approx(0.40536, abs=1e-3)


def test_decode_rows_named_in_validation_md(result):
    rows = {r["row"]: r for r in result["rows"] if r["file"] == "decode"}
    assert rows[11]["error"] == pytest.approx(0.16613, abs=1e-3)  # gpt-fast Llama-3.1-70B TP2
    assert rows[17]["error"] == pytest.approx(0.19929, abs=1e-3)  # vLLM single stream
    assert rows[16]["predicted"] == pytest.approx(159.51, rel=R)
    assert result["k_sweep"]["overhead_s"] == pytest.approx(4.0500e-4, rel=R)
    assert 1 - result["k_sweep"]["loso_overhead"]["relative_to_k2"][7] == pytest.approx(0.284, abs=1e-3)
    spec_bench = [r["error"] for r in result["rows"] if r["group"] == "spec_bench"]
    assert min(spec_bench) > -1e-3


def test_term_ablation(result):
    """VALIDATION.md's per-term table: each EAGLE worker term added in turn (the first step is the old model)."""
    steps = result["terms"]
    expected = [(0.513166, 0.607730, 0.303946), (0.513110, 0.607660, 0.303908), (0.501824, 0.602898, 0.301971),
                (0.499535, 0.599607, 0.301540)]
    assert len(steps) == len(expected)
    for step, (median, worst, spec_bench) in zip(steps, expected):
        e = step["engine_speculative"]
        assert e["n"] == 5 and e["median_abs_error"] == pytest.approx(median, rel=R)
        assert e["worst_error"] == pytest.approx(worst, rel=R) and e["median_signed_error"] == pytest.approx(median, rel=R)
        assert step["spec_bench"]["median_abs_error"] == pytest.approx(spec_bench, rel=R)


def test_term_sizes_on_sglang_eagle3_row():
    """The SGLang EAGLE-3 8-step row (τ 5.39, tree 8,8,64, Llama-3.1-8B, H100): size of each term in ms."""
    from sdsl.core.architecture import get_model
    from sdsl.core.deployment import Deployment
    from sdsl.core.proposers import make_proposer
    from sdsl.core.speculation import price_speculation

    dep, target = Deployment("h100-sxm", context=512), get_model("llama-3.1-8b")

    def worker(**terms):
        out = price_speculation(target, make_proposer("eagle3", **terms), dep, tau_value=5.39, tree="8,8,64")
        return 1e3 * float(out["t_worker_s"]), 1e3 * float(out["t_step_s"])

    extend, _ = worker(select_kernels=0, verify_kernels=0)
    select = worker(verify_kernels=0)[0] - extend
    verify, step = worker()
    verify -= extend + select
    assert (extend, select, verify) == pytest.approx((0.32831, 0.038257, 0.016605), abs=1e-4)
    assert step == pytest.approx(9.0889, abs=1e-3) and worker(draft_extend=False, select_kernels=0,
                                                               verify_kernels=0)[1] == pytest.approx(9.0336, abs=1e-3)
    # the extend pass drafts depth 1, so it replaces one of the 8 drafting passes (q = topk = 8): net +0.003 ms
    assert worker(select_kernels=0, verify_kernels=0)[1] == pytest.approx(9.0340, abs=1e-3)
    assert 1e3 * 5.39 / 378.57 == pytest.approx(14.238, abs=1e-3)  # measured step


def test_residual_host_time_numbers(result):
    """VALIDATION.md: the stated-GPU summary, the calibrated step times against the measured ones (the ≈3–4 ms
    residual), and vLLM's exposed plain-decode host time."""
    s = result["summary"]["engine_speculative_stated_gpu"]
    assert s["mean_abs_error"] == pytest.approx(0.555215, rel=R) and s["worst_error"] == pytest.approx(0.599607, rel=R)
    rows = {r["row"]: r for r in result["rows"] if r["group"] == "engine_speculative"}
    steps = {24: (7.3811, 10.770), 25: (8.4902, 12.557), 26: (9.0889, 14.238), 27: (8.0888, 12.939), 28: (10.898, 16.342)}
    for i, (pred, meas) in steps.items():
        assert 1e3 * rows[i]["t_step_s"] == pytest.approx(pred, abs=1e-3)
        assert 1e3 * rows[i]["accepted_length"] / rows[i]["measured"] == pytest.approx(meas, abs=1e-3)
    residual = [1e3 * (r["accepted_length"] / r["measured"] - r["t_step_s"]) for r in rows.values()]
    assert min(residual) == pytest.approx(3.3887, abs=1e-3) and max(residual) == pytest.approx(5.4440, abs=1e-3)
    vllm_plain = next(r for r in result["rows"] if r["file"] == "decode" and r["row"] == 17)
    assert 1e3 * (1 / vllm_plain["measured"] - 1 / vllm_plain["predicted"]) == pytest.approx(1.2494, abs=1e-3)
    ks = result["k_sweep"]
    assert 1 - ks["shipped"]["relative_to_k2"][7] == pytest.approx(0.191, abs=1e-3)
    assert 1 - ks["host_step"]["relative_to_k2"][7] == pytest.approx(0.097402, abs=1e-3)


def test_sourced_host_time(result):
    """VALIDATION.md's row 'with the sourced host time per speculative step' (engine_host.csv, fitted to nothing here)."""
    src = result["sourced_host"]
    assert src["hosts"]["sglang"] == pytest.approx(1.10677e-3, rel=R) and src["hosts"]["vllm"] == pytest.approx(0.97e-3, rel=R)
    s = src["engine_speculative"]
    assert s["n"] == 5 and s["share_over_predicted"] == 1.0
    assert s["median_abs_error"] == pytest.approx(0.361288, rel=R)
    assert s["mean_abs_error"] == pytest.approx(0.356350, rel=R)
    assert s["worst_error"] == pytest.approx(0.407080, rel=R)
    assert s["median_signed_error"] == pytest.approx(0.361288, rel=R)
    errs = {r["row"]: r["error"] for r in src["rows"]}
    for i, err in {24: 0.28963, 25: 0.32730, 26: 0.39645, 27: 0.40708, 28: 0.36129}.items():
        assert errs[i] == pytest.approx(err, abs=1e-3)
    assert result["summary"]["engine_decode"]["median_abs_error"] == pytest.approx(0.172505, rel=R)  # plain: not charged


def test_k_sweep_with_sourced_host(result):
    ks = result["k_sweep"]
    assert ks["sourced_host_s"] == pytest.approx(0.97e-3, rel=R)
    s = ks["sourced_host"]
    assert s["best_k"] == 3 and s["best_measured_k"] == 2
    assert s["tokens_per_s"][2] == pytest.approx(227.522, rel=R) and s["tokens_per_s"][1] == pytest.approx(226.317, rel=R)
    assert s["relative_to_k2"][4] == pytest.approx(0.970816, rel=R) and s["relative_to_k2"][7] == pytest.approx(0.836425, rel=R)
    for k, err in {2: 0.12210, 4: 0.110441, 7: 0.114036}.items():
        assert s["errors"][k] == pytest.approx(err, rel=R)


def test_goal_status(result):
    # the engine-decode goal (median |error| <= 5%) is missed with the fitted A100 all-reduce (VALIDATION.md)
    assert result["goals_met"]["sourced_host"] == {"engine_speculative": False, "engine_decode": False, "k_sweep_best_k": True}
    assert result["goals_met"]["no_host"] == {"engine_speculative": False, "engine_decode": False, "k_sweep_best_k": True}


def _with_hosts(result, hosts):
    from sdsl.experiments.published_host import sourced_host
    from sdsl.experiments.published_validation import _interpreted, _price, summarize

    specs = [s for s in _interpreted()[0] if s.proposer and s.engine in ("sglang", "vllm")]
    return {**result, "sourced_host": sourced_host(specs, _price, summarize, hosts=hosts)}


def test_goal_check_fails_with_wrong_host_and_can_pass(result):
    """A host of 0 reproduces the calibrated model (50.0%, goal failed); the check itself can pass: with the
    leave-one-source-out fits' magnitude (4.4 ms, the mean of 3.69 and 5.11 ms) the speculative goal is met.
    Neither value ships."""
    from sdsl.experiments.published_host import goal_status

    zero = _with_hosts(result, {"sglang": 0.0, "vllm": 0.0})
    assert zero["sourced_host"]["engine_speculative"]["median_abs_error"] == pytest.approx(0.499535, rel=R)
    assert goal_status(zero)["engine_speculative"] is False
    fitted = _with_hosts(result, {"sglang": 4.4e-3, "vllm": 4.4e-3})
    assert fitted["sourced_host"]["engine_speculative"]["median_abs_error"] <= 0.10
    assert goal_status(fitted)["engine_speculative"] is True


def test_overlap_source_check(result):
    """SGLang PR #11398's own rows on an assumed H100: overlap hides only part of the time the roofline misses."""
    c = result["overlap_source_check"]
    assert c["hardware"] == "h100-sxm"
    assert c["no_overlap"]["error"] == pytest.approx(0.193409, rel=R)
    assert c["overlap"]["error"] == pytest.approx(0.217075, rel=R)
    assert c["no_overlap"]["measured_step_s"] - c["no_overlap"]["t_step_s"] == pytest.approx(1.9634e-3, rel=1e-2)


def test_fitted_host_is_a_multiple_of_the_sourced(result):
    """VALIDATION.md: the leave-one-source-out fits are 3.1–4.0× the sourced overlap differences."""
    fitted = sorted(r["overhead_s"] for r in result["loso_host_step"]["rows"])
    sourced = result["sourced_host"]["hosts"]
    ratios = [f / h for f in (fitted[0], fitted[-1]) for h in sourced.values()]
    assert min(ratios) == pytest.approx(3.3340, abs=5e-3) and max(ratios) == pytest.approx(5.2680, abs=5e-3)
    vllm_plain = next(r for r in result["rows"] if r["file"] == "decode" and r["row"] == 16)["predicted"]
    assert 1 / 133 - 1 / vllm_plain == pytest.approx(1.2494e-3, rel=1e-2)  # k-sweep build's plain host time
