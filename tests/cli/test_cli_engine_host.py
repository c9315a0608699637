"""`sdsl predict --engine-host PROFILE | --host-step-us US` and the sourced host summary of `sdsl validate published`."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sdsl.cli import cli

BASE = ["predict", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--accepted-length", "3.1", "--gamma", "4",
        "--hardware", "h100-sxm", "--json"]


def run(args):
    return CliRunner().invoke(cli, args)


def test_engine_host_adds_the_sourced_time_to_the_speculative_step_only():
    plain = json.loads(run(BASE).output)
    host = json.loads(run(BASE + ["--engine-host", "sglang-2025-10"]).output)
    assert plain["host_step_s"] == 0.0 and plain["engine_host"] == "none"
    assert host["host_step_s"] == pytest.approx(1.10677e-3, rel=1e-4) and host["engine_host"] == "sglang-2025-10"
    assert host["t_step_s"] - plain["t_step_s"] == pytest.approx(host["host_step_s"], rel=1e-9)
    assert host["t_plain_s"] == plain["t_plain_s"] and host["tokens_per_s"] < plain["tokens_per_s"]
    given = json.loads(run(BASE + ["--engine-host", "sglang-2025-10", "--host-step-us", "500"]).output)
    assert given["host_step_s"] == pytest.approx(5e-4) and given["engine_host"] == "given"


def test_text_output_names_the_host_line():
    out = run(BASE[:-1] + ["--engine-host", "vllm-v1-2025-09"]).output
    assert "engine host per step" in out and "0.970 ms" in out and "vllm-v1-2025-09" in out


@pytest.mark.parametrize("args", [["--engine-host", "tgi-2024"], ["--host-step-us", "-1"], ["--host-step-us", "nan"]])
def test_bad_host_one_line_exit_2(args):
    res = run(BASE + args)
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1


def test_validate_published_json_carries_the_sourced_summary():
    res = run(["validate", "published", "--json"])
    data = json.loads(res.output)
    s = data["sourced_host"]["engine_speculative"]
    assert {"median_abs_error", "worst_error", "median_signed_error", "share_over_predicted"} <= set(s)
    assert data["goals_met"]["sourced_host"]["engine_decode"] is False  # missed with the fitted A100 all-reduce
    assert data["k_sweep"]["sourced_host"]["best_k"] == 3


def test_help_quotes_the_catalog_values():
    from sdsl.core.engine_host import engine_hosts

    text = " ".join(run(["predict", "--help"]).output.split())
    for name, h in engine_hosts().items():
        assert f"{name} ({round(1e6 * h.host_step_s)} us" in text


OPT = ["optimize", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--proposer", "eagle", "--accepted-length",
       "3.0", "--accepted-at", "4", "--batch", "1", "--json"]


def test_optimize_charges_host_time_to_speculative_rows_and_moves_break_even():
    plain = json.loads(run(OPT).output)
    host = json.loads(run(OPT + ["--engine-host", "sglang-2025-10"]).output)
    assert plain["host_step_s"] == 0.0 and host["host_step_s"] == pytest.approx(1.10677e-3, rel=1e-4)
    assert host["configs"][0]["t_host_s"] == pytest.approx(host["host_step_s"], rel=1e-12)
    assert host["break_even_batch"] is None or plain["break_even_batch"] is None or \
        host["break_even_batch"] <= plain["break_even_batch"]


def test_host_time_grows_tpot_by_host_over_tau_at_every_k():
    """The ranking behind `sdsl optimize --engine-host`: TPOT grows by exactly the host time spread over τ."""
    import numpy as np

    from sdsl.core.deployment import Deployment
    from sdsl.core.engine_host import host_step_s
    from sdsl.core.ranking import rank_proposers

    h = host_step_s("sglang-2025-10")
    args = dict(acceptance=0.7, gammas=range(0, 6), batches=[1])
    base = rank_proposers("llama-3.1-8b", ["eagle", "draft:llama-3.2-1b"], Deployment("h100-sxm"), **args)
    slow = rank_proposers("llama-3.1-8b", ["eagle", "draft:llama-3.2-1b"], Deployment("h100-sxm"), host_step_s=h, **args)
    tau = np.stack(base.taus)[:, 1:, 0, 0]
    np.testing.assert_allclose(slow.tpot_s[:, 1:, 0, 0] - base.tpot_s[:, 1:, 0, 0], h / tau, rtol=1e-9)
    np.testing.assert_array_equal(slow.tokens_per_s[:, 0], base.tokens_per_s[:, 0])  # k = 0 is plain decoding


def test_optimize_host_time_applies_to_catalog_drafts_too():
    """Draft models are ranked by the same ranking as heads, so an engine's host time prices them as well."""
    plain = json.loads(run(["optimize", "--target", "llama-3.1-8b", "--json"]).output)
    host = json.loads(run(["optimize", "--target", "llama-3.1-8b", "--engine-host", "sglang-2025-10", "--json"]).output)
    assert host["host_step_s"] > 0 and all(r["proposer"].startswith("draft:") for r in host["configs"])
    assert host["configs"][0]["tokens_per_s"] < plain["configs"][0]["tokens_per_s"]
