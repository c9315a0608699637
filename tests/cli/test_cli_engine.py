"""`--engine` on the command line: `sdsl predict` prints the fields and the profile that priced them (recomputed here
from the profile's terms on the roofline's parts), `sdsl optimize` and `sdsl simulate` name the engine, `sdsl engines`
lists the catalog, and a bad engine is one line and exit 2."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import sdsl
from sdsl.cli import cli
from sdsl.engine.profiles import resolve_engine
from sdsl.roofline.latency import padded_step_time, step_time

PREDICT = ["predict", "--target", "llama-3.1-8b", "--proposer", "eagle", "--gamma", "4", "--accepted-length", "2.4",
           "--hardware", "h100-sxm", "--engine", "vllm:2025-07", "--json"]


def test_predict_prints_the_step_and_its_engine():
    out = json.loads(CliRunner().invoke(cli, PREDICT).output)
    for key in ("tpot_s", "tokens_per_s", "plain_tokens_per_s", "speedup", "engine"):
        assert key in out
    assert out["engine"] == "vllm-2025-07" and out["engine_profile"]["date"] == "2025-07-10"
    # recomputed: the GPU parts on the profile's own kernels (its measured attention; verify padded from 5 to 8
    # captured tokens, the rejection sampler's probabilities) plus H + S + d·passes, summed without overlap in this build
    from sdsl.roofline.latency_params import default_params

    eng = resolve_engine("vllm-2025-07")
    ideal = sdsl.Deployment("h100-sxm", engine="ideal", params=default_params("h100-sxm", eng))
    assert ideal.params.attn_eta_kv > 0
    roof = sdsl.price_step("llama-3.1-8b", "eagle", ideal, tau=2.4, gamma=4)
    verify = float(padded_step_time("llama-3.1-8b", ideal, batch=8 / 5, q=5, context=1024 * 5 / 8).total_s)
    probs = out["t_worker_s"] - float(roof.t_worker_s)
    assert 0 < probs < 1e-4  # 5 positions x 128256 fp32 probabilities, written and read: a few microseconds
    gpu = float(roof.t_propose_s) + verify + out["t_worker_s"]
    host = eng.host_step_s + eng.spec_step_s + eng.draft_pass_s * 4  # 3 drafting passes + the draft extend
    assert out["t_verify_s"] == pytest.approx(verify, rel=1e-12)
    assert out["t_step_s"] == pytest.approx(gpu + host, rel=1e-9)
    assert out["tpot_s"] == pytest.approx((gpu + host) / 2.4, rel=1e-9)
    plain = float(step_time("llama-3.1-8b", ideal, batch=1, q=1).total_s) + eng.host_step_s
    assert out["plain_tokens_per_s"] == pytest.approx(1 / plain, rel=1e-9)
    assert out["speedup"] == pytest.approx(out["tokens_per_s"] / out["plain_tokens_per_s"], rel=1e-12)
    assert out["tpot_s"] == pytest.approx(5.011e-3, abs=5e-7) and out["tokens_per_s"] == pytest.approx(199.6, abs=0.05)


def test_the_default_engine_is_the_newest_vllm_and_ideal_is_the_roofline():
    base = [a for a in PREDICT if a not in ("--engine", "vllm:2025-07")]
    default = json.loads(CliRunner().invoke(cli, base).output)
    ideal = json.loads(CliRunner().invoke(cli, base + ["--engine", "ideal"]).output)
    assert default["engine"] == resolve_engine("vllm").name
    assert ideal["engine"] == "ideal" and ideal["t_host_s"] == 0.0
    assert ideal["tokens_per_s"] > default["tokens_per_s"]
    text = CliRunner().invoke(cli, base[:-1]).output
    assert f"engine {default['engine']}:" in text and "engine host per step" in text


def test_optimize_and_simulate_name_the_engine():
    opt = json.loads(CliRunner().invoke(cli, ["optimize", "--target", "llama-3.1-8b", "--proposer", "eagle", "--alpha",
                                              "0.7", "--max-batch", "8", "--engine", "sglang", "--json"]).output)
    assert opt["engine"]["name"] == resolve_engine("sglang").name and "host_step_s" not in opt
    sim = CliRunner().invoke(cli, ["simulate", "--target", "llama-3.2-1b", "--draft", "llama-160m", "--qps", "2",
                                   "--requests", "8", "--engine", "vllm:2025-07", "--json"])
    assert sim.exit_code == 0, sim.output
    assert json.loads(sim.output)["engine"] == "vllm-2025-07"


def test_engines_lists_every_profile():
    out = CliRunner().invoke(cli, ["engines"]).output
    for name in ("vllm-2025-04", "vllm-2026-03", "sglang-spec-v2-2025-10", "trtllm-2025-06", "hf-eager-2024-01",
                 "gpt-fast-2023-11", "llamacpp-2024-04", "ideal"):
        assert name in out
    rows = json.loads(CliRunner().invoke(cli, ["engines", "--json"]).output)
    assert {r["name"] for r in rows} >= {"vllm-2025-07", "ideal"}
    # which H100 GEMM source each profile prices with: vLLM 0.24's tables for the vLLM builds from 2026 only
    assert sorted(r["name"] for r in rows if r["table_gemms"]) == ["vllm-2026-01", "vllm-2026-03"]
    assert "H100 GEMMs" in out and out.count("vLLM 0.24") >= 2
    # whose measured decode attention each profile prices GQA layers on: the three engines the tables time
    attention = {r["name"]: r["table_attention"] for r in rows}
    assert attention["sglang-spec-v2-2025-10"] == "sglang" and attention["trtllm-2025-06"] == "trtllm"
    assert attention["vllm-2025-04"] == "vllm" and attention["gpt-fast-2023-11"] is None and attention["ideal"] is None
    assert "sglang tables" in out and "roofline" in out


@pytest.mark.parametrize("engine, message", [("tgi", "Unknown engine"), ("vllm:2023-01", "No vllm profile"),
                                             ("vllm:2025-13", "YYYY-MM"), ("missing.json", "not found")])
def test_a_bad_engine_is_one_line_and_exit_2(engine, message):
    res = CliRunner().invoke(cli, PREDICT[:-3] + ["--engine", engine])
    assert res.exit_code == 2 and message in res.output and len(res.output.strip().splitlines()) == 1


@pytest.mark.parametrize("target, proposer, engine, want", [
    ("llama-3.1-8b", "eagle", "ideal", {1: (4, 2.0488), 32: (3, 1.8390)}),
    ("llama-3.1-8b", "eagle", "vllm:2025-07", {1: (4, 1.6358), 32: (3, 1.5843)}),
    ("llama-3.1-8b", "eagle", "vllm", {1: (4, 2.0397), 32: (3, 1.9709)}),
    ("llama-3.1-8b", "eagle", "sglang", {1: (5, 1.5892), 32: (3, 1.4847)}),
    ("llama-2-7b", "draft:llama-160m", "ideal", {1: (5, 2.1432), 32: (3, 1.9553)}),
    ("llama-2-7b", "draft:llama-160m", "vllm:2025-07", {1: (3, 1.5993), 32: (3, 1.7037)}),
    ("llama-2-7b", "draft:llama-160m", "vllm", {1: (3, 1.5620), 32: (3, 1.7413)}),
    ("llama-2-7b", "draft:llama-160m", "sglang", {1: (5, 1.5688), 32: (3, 1.6438)}),
])
def test_the_engine_moves_the_best_k(target, proposer, engine, want):
    """VALIDATION.md "What the engine changes in a ranking": best k and speedup at batch 1 and 32 (alpha 0.7)."""
    out = json.loads(CliRunner().invoke(cli, ["optimize", "--target", target, "--proposer", proposer, "--alpha", "0.7",
                                              "--batch", "1,32", "--gamma-max", "8", "--max-batch", "64", "--engine",
                                              engine, "--json"]).output)
    # the per-batch best k beside the row's deployed (k table) k, and its speedup
    got = {r["batch"]: (r["best_gamma"], r["speedup"] * (1 + r["best_gamma_gain"])) for r in out["configs"]}
    for b, (k, s) in want.items():
        assert got[b][0] == k and got[b][1] == pytest.approx(s, abs=6e-4)


def test_the_batch_to_k_table_and_padding():
    """VALIDATION.md: vllm:2025-07's batch -> k table at alpha 0.7 is not monotone, and removing the captured sizes
    moves it at batch 17 only (the other steps come from the latency form's row tiles)."""
    from sdsl.acceptance import Acceptance
    from sdsl.plan.plan import plan_speculation

    eng = resolve_engine("vllm-2025-07")
    padded, unpadded = (plan_speculation("llama-3.1-8b", sdsl.Deployment("h100-sxm", engine=e), proposers=["eagle"],
                                         acceptance=Acceptance.from_iid(0.7), gamma_max=8, max_batch=64, tolerance=0)
                        for e in (eng, eng.replace(capture_sizes=())))
    assert [(r["batch_min"], r["batch_max"], r["k"]) for r in padded.k_table[:5]] == [(1, 12, 4), (13, 16, 3), (17, 17, 4),
                                                                                       (18, 18, 2), (19, 25, 4)]

    def per_batch(table):
        return {b: r["k"] for r in table for b in range(r["batch_min"], r["batch_max"] + 1)}

    a, b = per_batch(padded.k_table), per_batch(unpadded.k_table)
    assert a.keys() == b.keys() and {n for n in a if a[n] != b[n]} == {17}
    # the default table merges what the tolerance cannot tell apart: fewer ranges than the per-batch best
    out = json.loads(CliRunner().invoke(cli, ["optimize", "--target", "llama-3.1-8b", "--proposer", "eagle", "--alpha",
                                              "0.7", "--max-batch", "64", "--gamma-max", "8", "--engine", "vllm:2025-07",
                                              "--json"]).output)
    assert len(out["k_table"]) < len(padded.k_table)


@pytest.mark.parametrize("command", [["validate", "acceptance"], ["validate", "moe"]])
def test_validation_commands_take_an_engine_and_refuse_an_unknown_one(command):
    res = CliRunner().invoke(cli, command + ["--engine", "tgi"])
    assert res.exit_code == 2 and "Unknown engine" in res.output and len(res.output.strip().splitlines()) == 1
    assert "--engine" in CliRunner().invoke(cli, command + ["--help"]).output
