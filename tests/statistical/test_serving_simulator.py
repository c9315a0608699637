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


@pytest.mark.parametrize("policy", POLICIES)
def test_conservation_and_memory_budget(policy):
    w = workload()
    budget = 40_000  # tight: forces queueing on memory
    res = simulate(w, system(budget), policy, SimConfig(max_batch=48), seed=1)
    assert np.array_equal(res.emitted, w.output_tokens)  # every request ends with exactly its length
    assert np.all(np.isfinite(res.finish_s))
    assert np.all(res.first_token_s >= w.arrival_s) and np.all(res.finish_s >= res.first_token_s)
    assert res.stats["peak_reserved_tokens"] <= budget and res.stats["peak_used_tokens"] <= budget
    assert res.stats["mean_batch"] <= 48
    s = res.summary()
    assert s["mean_k"] == 0.0 if policy == "none" else s["mean_k"] > 0
    if policy.startswith("k="):
        assert s["mean_k"] == pytest.approx(int(policy[2:]))


def test_batch_limit_and_single_token_outputs():
    w = Workload(np.zeros(20), np.full(20, 100), np.array([1] * 10 + [50] * 10), np.full(20, 0.6))
    res = simulate(w, system(max_batch=64), "adaptive", SimConfig(max_batch=4), seed=0)
    assert np.array_equal(res.emitted, w.output_tokens)
    assert res.stats["mean_batch"] <= 4
    assert np.all(res.finish_s[:10] == res.first_token_s[:10])


@pytest.mark.parametrize("estimator", ["ema", "window"])
def test_estimators_and_decision_cadence_run_in_the_simulator(estimator):
    w = workload(150)
    for every in (1, 8):
        res = simulate(w, system(), "per-request", SimConfig(estimator=estimator, decide_every=every), seed=2)
        assert np.array_equal(res.emitted, w.output_tokens)


def test_deterministic_for_a_seed_and_seed_matters():
    w = workload(200)
    a = simulate(w, system(), "adaptive", seed=7).summary()
    b = simulate(w, system(), "adaptive", seed=7).summary()
    c = simulate(w, system(), "adaptive", seed=8).summary()
    assert a == b and a != c


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
    for bad in ["k=x", "k=99", "fast", ""]:
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
    ok.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0.5,10,3\n0.1,20,0\n")
    w = load_trace(ok)
    assert w.arrival_s.tolist() == [0.0, 0.4] and w.output_tokens.tolist() == [1, 3]


def test_conv_trace_replay():
    w = trace_workload("conv", 3.0, n_requests=400, seed=0, max_context=4096)
    assert len(w) == 400 and w.qps == pytest.approx(3.0)
    assert np.all(w.prompt_tokens + w.output_tokens <= 4096)
    res = simulate(w, system(), "adaptive", seed=0)
    assert np.array_equal(res.emitted, w.output_tokens)


def test_serving_k_table_covers_batches():
    pytest.importorskip("sdsl.core.latency")
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
                                 "--output-tokens", "32", "--estimator", "window", "--spec-overhead", "0.05"])
    assert r.exit_code == 0, r.output
    assert "QPS 2" in r.output and "adaptive" in r.output and "mean lat" in r.output


@pytest.mark.parametrize("args", [
    ["--qps", "0"], ["--qps", "a,b"], ["--policy", "k=x"], ["--alpha", "1.5"], ["--requests", "1"],
    ["--target", "no-such-model"], ["--trace", "/no/such/trace.csv"], ["--tp", "0"],
    ["--prompt-tokens", "4000", "--output-tokens", "4000"], ["--spec-overhead", "-1"], ["--estimator", "nope"],
    ["--target", "llama-3.1-70b"],
])
def test_cli_simulate_bad_input_exits_2(args):
    r = CliRunner().invoke(cli, ["simulate", "--requests", "20", *args] if "--requests" not in args
                           else ["simulate", *args])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output


def test_conservation_property_random_configurations():
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
        assert np.array_equal(res.emitted, w.output_tokens)
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
