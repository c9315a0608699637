"""Serving simulator: conservation, memory budget, determinism, workloads, CLI (fast, seeded)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from sdsl.cli import cli
from sdsl.errors import ConfigError, InvalidInputError
from sdsl.serving import (AcceptanceDist, BatchStepModel, ServingSystem, SimConfig, Workload, load_trace,
                          parse_policies, parse_policy, poisson_workload, scale_to_qps, simulate, trace_workload)
from sdsl.serving.k_table import serving_k_table
from sdsl.serving.linear_model import LinearStepModel


TARGET = LinearStepModel(c_kv=5e-5, c_tok=0.02, c_b=0.01, c_0=7.0)
DRAFT = LinearStepModel(c_kv=2e-6, c_tok=0.001, c_b=0.001, c_0=0.6)


def system(kv_budget: int | None = 200_000, max_batch: int = 64) -> ServingSystem:
    sm = BatchStepModel(TARGET.step_fn, DRAFT.step_fn, max_batch=max_batch, max_context=4096, max_prompt=4096)
    return ServingSystem(sm, None, None, kv_budget_override=kv_budget, name="linear test system")


def workload(n=300, qps=8.0, seed=0, **kw) -> Workload:
    rng = np.random.default_rng(seed)
    return poisson_workload(n, qps, prompt_tokens=rng.integers(1, 1500, 500), output_tokens=rng.integers(1, 400, 500),
                            seed=seed, **kw)


POLICIES = ["none", "k=1", "k=3", "k=5", "k=7", "adaptive", "per-request"]


def _check_stops_on_time(res, w, k_max: int) -> None:
    """Each request ran exactly the decode steps its output needed: the tokens its steps produced
    reach output − 1 (one came from prefill) and only its last step overshoots, by at most k."""
    need = w.output_tokens - 1
    assert np.all(res.drawn >= need)
    assert np.all(res.drawn - need <= k_max)
    assert np.all((res.steps == 0) == (need == 0))


@pytest.mark.parametrize("policy", POLICIES)
def test_requests_stop_on_time_within_the_memory_budget(policy):
    w = workload()
    budget = 40_000  # tight: forces queueing on memory
    res = simulate(w, system(budget), policy, SimConfig(max_batch=48), seed=1)
    _check_stops_on_time(res, w, 7)
    assert np.all(np.isfinite(res.finish_s))
    assert np.all(res.first_token_s >= w.arrival_s) and np.all(res.finish_s >= res.first_token_s)
    assert res.stats["peak_reserved_tokens"] <= budget and res.stats["peak_used_tokens"] <= budget
    assert res.stats["mean_batch"] <= 48
    s = res.summary()
    assert s["mean_k"] == 0.0 if policy == "none" else s["mean_k"] > 0
    if policy.startswith("k="):
        assert s["mean_k"] == pytest.approx(int(policy[2:]))


@pytest.mark.parametrize("alpha,k", [(0.5, 1), (0.7, 3), (0.85, 5), (0.6, 7)])
def test_tokens_per_step_match_tau(alpha, k):
    """Tokens per decode step, counted before the output-length cut, average τ(α, k) = (1 − α^{k+1})/(1 − α)
    (Leviathan et al. Eq. 1) within 4 standard errors, and vary between requests as independent steps do."""
    from sdsl.acceptance import tau

    n = 200
    w = Workload(np.linspace(0.0, 20.0, n), np.full(n, 64), np.full(n, 600), np.full(n, alpha))
    res = simulate(w, system(), f"k={k}", seed=11)
    steps = res.steps.astype(float)
    # tokens per step T = min(G, k) + 1 with P(G >= j) = α^j: E[T] = τ, E[T²] = 1 + Σ_{j=1..k} (2j + 1) α^j
    mean = float(tau(alpha, k))
    second = 1.0 + sum((2 * j + 1) * alpha**j for j in range(1, k + 1))
    var = second - mean**2
    pooled = res.drawn.sum() / steps.sum()
    assert abs(pooled - mean) < 4 * np.sqrt(var / steps.sum())
    # the cut at the output length is a small share of the tokens drawn, so it cannot do the work
    assert (res.drawn.sum() - (w.output_tokens - 1).sum()) / res.drawn.sum() < 0.02
    # per-request means: their spread is that of `steps` independent draws (reused draws would inflate it)
    z2 = (res.drawn / steps - mean) ** 2 / (var / steps)
    assert 0.7 < z2.mean() < 1.4


def test_batch_limit_and_single_token_outputs():
    w = Workload(np.zeros(20), np.full(20, 100), np.array([1] * 10 + [50] * 10), np.full(20, 0.6))
    res = simulate(w, system(max_batch=64), "adaptive", SimConfig(max_batch=4), seed=0)
    _check_stops_on_time(res, w, 7)
    assert res.stats["mean_batch"] <= 4
    assert np.all(res.finish_s[:10] == res.first_token_s[:10])


@pytest.mark.parametrize("estimator", ["ema", "window"])
def test_estimators_and_decision_cadence_run_in_the_simulator(estimator):
    w = workload(150)
    for every in (1, 8):
        res = simulate(w, system(), "per-request", SimConfig(estimator=estimator, decide_every=every), seed=2)
        _check_stops_on_time(res, w, 7)


def _same(a, b) -> bool:
    return (np.array_equal(a.finish_s, b.finish_s) and np.array_equal(a.first_token_s, b.first_token_s)
            and np.array_equal(a.steps, b.steps) and np.array_equal(a.k_sum, b.k_sum))


@pytest.mark.parametrize("policy", ["k=3", "adaptive", "per-request"])
def test_deterministic_for_a_seed_and_seed_matters(policy):
    w = workload(200)
    a = simulate(w, system(), policy, seed=7)
    assert _same(a, simulate(w, system(), policy, seed=7))
    assert a.summary() == simulate(w, system(), policy, seed=7).summary()
    assert not _same(a, simulate(w, system(), policy, seed=8))


@pytest.mark.parametrize("policy", ["k=3", "adaptive"])
def test_block_length_does_not_change_the_run(policy):
    """Acceptance draws belong to (request, step), so reading 1, 5 or 512 steps per block gives the same run."""
    w = workload(120, qps=6.0)
    runs = [simulate(w, system(), policy, SimConfig(max_chunk=c), seed=3) for c in (1, 5, 512)]
    for r in runs[1:]:
        np.testing.assert_array_equal(r.steps, runs[0].steps)
        np.testing.assert_array_equal(r.k_sum, runs[0].k_sum)
        np.testing.assert_allclose(r.finish_s, runs[0].finish_s, rtol=1e-12)


def test_online_fit_learns_the_step_times_from_a_wrong_prior():
    """Start the controller's step-time model at half the true cost: after a run it prices steps
    within a few percent of the exact table, and the policy ends where the table-priced one does."""
    from sdsl.serving.online_model import profile_prior

    sys_ = system()
    w = workload(300, qps=4.0, alpha=AcceptanceDist(0.75))
    prior = tuple(0.5 * profile_prior(sys_.step_model))
    res = simulate(w, sys_, "adaptive", SimConfig(step_prior=prior), seed=4)
    coef = np.asarray(res.stats["step_model_coef"])
    n = int(round(res.stats["mean_batch"]))
    exact = sys_.step_model.decode_time_all_k(n, 800.0)
    from sdsl.serving.online_model import step_features
    fitted = np.vstack([step_features(n * 800.0, n, float(k * n), k) for k in range(8)]) @ coef
    assert np.max(np.abs(fitted / exact - 1.0)) < 0.05
    table = simulate(w, sys_, "adaptive", SimConfig(pricing="table"), seed=4).summary()
    assert res.summary()["mean_latency_s"] == pytest.approx(table["mean_latency_s"], rel=0.02)


def test_speculation_helps_at_low_load_and_adaptive_is_close_to_best_fixed():
    w = workload(300, qps=2.0, alpha=AcceptanceDist(0.8))
    lat = {p: simulate(w, system(), p, seed=3).summary()["mean_latency_s"] for p in ["none", "k=3", "k=5", "adaptive"]}
    assert lat["k=3"] < 0.8 * lat["none"]
    assert lat["adaptive"] <= 1.05 * min(lat["k=3"], lat["k=5"])


def test_request_budget_and_draft_errors():
    w = workload(10)
    with pytest.raises(InvalidInputError):
        simulate(w, system(kv_budget=500), "none")
    no_draft = ServingSystem(BatchStepModel(TARGET.step_fn, None, max_batch=8), None, None, kv_budget_override=10**6)
    with pytest.raises(InvalidInputError):
        simulate(w, no_draft, "k=3", SimConfig(max_batch=8))
    assert simulate(w, no_draft, "none", SimConfig(max_batch=8)).summary()["mean_k"] == 0.0
    bad = Workload(w.arrival_s, w.prompt_tokens, w.output_tokens, np.full(10, np.nan))
    with pytest.raises(InvalidInputError):
        simulate(bad, system(), "none")


def test_policy_parsing():
    assert [p.name for p in parse_policies("none,k=3,adaptive,per-request")] == ["none", "k=3", "adaptive", "per-request"]
    assert parse_policy("k=0").kind == "none"
    assert [p.name for p in parse_policies("none,k=0,k=3,none")] == ["none", "k=3"]
    for bad in ["k=x", "k=99", "fast", "", "none,,k=3", "none,"]:
        with pytest.raises(InvalidInputError):
            parse_policies(bad)


def test_acceptance_distribution_and_shift():
    rng = np.random.default_rng(0)
    arr = np.linspace(0, 100, 4000)
    a = AcceptanceDist(0.8, 20.0, shift_at_s=50.0, mean_after=0.4).sample(arr, rng)
    assert abs(a[arr < 50].mean() - 0.8) < 0.02 and abs(a[arr >= 50].mean() - 0.4) < 0.02
    assert np.all(AcceptanceDist(0.7, float("inf")).sample(arr, rng) == 0.7)
    with pytest.raises(InvalidInputError):
        AcceptanceDist(1.2)
    with pytest.raises(InvalidInputError):
        AcceptanceDist(0.5, shift_at_s=3.0)


def test_poisson_rate_and_scaling():
    w = poisson_workload(5000, 4.0, seed=1)
    assert abs(w.qps - 4.0) / 4.0 < 0.05
    assert scale_to_qps(w, 10.0).qps == pytest.approx(10.0)
    with pytest.raises(InvalidInputError):
        poisson_workload(10, 0.0)


def test_trace_file_errors(tmp_path):
    with pytest.raises(ConfigError):
        load_trace(tmp_path / "missing.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ConfigError):
        load_trace(bad)
    ok = tmp_path / "ok.csv"
    ok.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0.5,10,3\n0.1,0,2\n")
    w = load_trace(ok)
    assert w.arrival_s.tolist() == [0.0, 0.4] and w.output_tokens.tolist() == [2, 3] and w.prompt_tokens.tolist() == [1, 10]
    for row, column in (("0.1,20,0", "num_decode_tokens"), ("0.1,-3,2", "num_prefill_tokens"),
                        ("0.1,20,2.5", "num_decode_tokens")):
        ok.write_text(f"arrived_at,num_prefill_tokens,num_decode_tokens\n0.5,10,3\n{row}\n")
        with pytest.raises(ConfigError, match=rf"line 3: {column} must be"):
            load_trace(ok)
    ok.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n")
    with pytest.raises(ConfigError, match="holds no requests"):
        load_trace(ok)


def test_conv_trace_replay():
    w = trace_workload("conv", 3.0, n_requests=400, seed=0, max_context=4096)
    assert len(w) == 400 and w.qps == pytest.approx(3.0)
    assert np.all(w.prompt_tokens + w.output_tokens <= 4096)
    res = simulate(w, system(), "adaptive", seed=0)
    _check_stops_on_time(res, w, 7)


def test_serving_k_table_covers_batches():
    pytest.importorskip("sdsl.roofline.latency")
    table = serving_k_table("llama-2-7b", "llama-160m", "h100-sxm", alpha=0.7, max_batch=64)
    assert table[0]["batch_min"] == 1 and table[-1]["batch_max"] == 64
    for a, b in zip(table, table[1:]):
        assert b["batch_min"] == a["batch_max"] + 1 and a["k"] != b["k"]
    assert all(set(r) == {"batch_min", "batch_max", "k"} for r in table)
    low = serving_k_table("llama-2-7b", "llama-160m", "h100-sxm", alpha=0.05, max_batch=8)
    assert low == [{"batch_min": 1, "batch_max": 8, "k": 0}]


def test_cli_simulate_json_keys():
    r = CliRunner().invoke(cli, ["simulate", "--qps", "1,4", "--policy", "none,k=3,adaptive", "--requests", "60",
                                 "--prompt-tokens", "256", "--output-tokens", "64", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)["results"]
    assert len(rows) == 6
    keys = {"qps", "policy", "mean_latency_s", "p99_latency_s", "ttft_s", "tpot_s", "tokens_per_s", "mean_k"}
    assert all(set(row) == keys for row in rows)
    assert [row["policy"] for row in rows[:3]] == ["none", "k=3", "adaptive"]


def test_cli_simulate_table():
    r = CliRunner().invoke(cli, ["simulate", "--qps", "2", "--policy", "none,adaptive", "--requests", "40",
                                 "--output-tokens", "32", "--estimator", "window", "--spec-overhead", "0.05",
                                 "--alpha-prior", "0.4", "--pricing", "table"])
    assert r.exit_code == 0, r.output
    assert "QPS 2" in r.output and "adaptive" in r.output and "mean lat" in r.output


@pytest.mark.parametrize("args", [
    ["--qps", "0"], ["--qps", "a,b"], ["--policy", "k=x"], ["--alpha", "1.5"], ["--requests", "1"],
    ["--target", "no-such-model"], ["--trace", "/no/such/trace.csv"], ["--tp", "0"],
    ["--prompt-tokens", "4000", "--output-tokens", "4000"], ["--spec-overhead", "-1"], ["--estimator", "nope"],
    ["--alpha-prior", "0"], ["--pricing", "exact"],
    ["--target", "llama-3.1-70b"],
])
def test_cli_simulate_bad_input_exits_2(args):
    r = CliRunner().invoke(cli, ["simulate", "--requests", "20", *args] if "--requests" not in args
                           else ["simulate", *args])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output


def test_invariants_on_random_configurations():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=25, deadline=None)
    @given(seed=st.integers(0, 10_000), n=st.integers(1, 60), qps=st.floats(0.5, 200.0),
           policy=st.sampled_from(POLICIES), max_batch=st.integers(1, 64), budget=st.integers(3_000, 60_000),
           every=st.integers(1, 16), chunk=st.integers(1, 64), estimator=st.sampled_from(["ema", "window"]))
    def check(seed, n, qps, policy, max_batch, budget, every, chunk, estimator):
        rng = np.random.default_rng(seed)
        w = poisson_workload(n, qps, prompt_tokens=rng.integers(1, 2000, 50), output_tokens=rng.integers(1, 500, 50),
                             alpha=AcceptanceDist(float(rng.uniform(0.05, 0.95)), 10.0), seed=seed)
        cfg = SimConfig(max_batch=max_batch, decide_every=every, max_chunk=chunk, estimator=estimator,
                        max_prefill_tokens=int(rng.integers(1, 9000)))
        res = simulate(w, system(budget), policy, cfg, seed=seed)
        _check_stops_on_time(res, w, 7)
        assert np.all(res.finish_s >= res.first_token_s) and np.all(res.first_token_s > w.arrival_s)
        assert res.stats["peak_reserved_tokens"] <= budget and res.stats["peak_used_tokens"] <= budget
        assert res.stats["mean_batch"] <= max_batch + 1e-9

    check()


def test_malformed_trace_error_is_one_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,2\n1,2\n3,4,5,6\n")
    with pytest.raises(ConfigError, match=r"^Malformed trace CSV .*: Line #\d+ [^\n]*\.$"):
        load_trace(bad)
    r = CliRunner().invoke(cli, ["simulate", "--requests", "20", "--trace", str(bad)])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
