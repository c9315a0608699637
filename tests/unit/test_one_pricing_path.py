"""One function prices a speculative step for every caller: predict, the draft grid, the proposer ranking, the
serving simulator's step tables and batch -> k table, the CLI, and the CPU decoder validation give identical
numbers for the same configuration (relative checks only: nothing here depends on the shipped latency
parameters' values). And a trace of `sdsl optimize` never climbs from the core back into the CLI."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import sdsl
from sdsl.roofline.latency import step_time_s
from sdsl.cli import cli

TARGET, DRAFT = "llama-2-7b", "llama-160m"
DEP = sdsl.Deployment("h100-sxm", context=512)
ALPHA, GAMMAS, BATCHES = 0.7, np.arange(0, 8), np.array([1, 4, 32])


def _direct():
    """The step function itself on (k, batch)."""
    return sdsl.price_step(TARGET, f"draft:{DRAFT}", DEP, acceptance=ALPHA, gamma=GAMMAS[:, None],
                           batch=BATCHES[None, :])


def test_predict_grid_ranking_and_simulator_price_the_same_step():
    direct = _direct()
    pred = sdsl.predict(TARGET, DRAFT, DEP, gamma=GAMMAS[:, None], alpha=ALPHA, batch=BATCHES[None, :])
    grid = sdsl.evaluate_grid(TARGET, DEP, drafts=[DRAFT], gammas=GAMMAS, batch=BATCHES, alpha=[ALPHA]).prediction
    rank = sdsl.rank_proposers(TARGET, [f"draft:{DRAFT}"], DEP, acceptance=ALPHA, gammas=GAMMAS, batches=BATCHES)
    for name in ("tau", "t_draft_s", "t_propose_s", "t_verify_s", "t_step_s", "t_plain_s", "tokens_per_s",
                 "plain_tokens_per_s", "speedup", "tpot_s", "cost_ratio"):
        want = np.broadcast_to(getattr(direct, name), (GAMMAS.size, BATCHES.size))
        np.testing.assert_allclose(np.broadcast_to(getattr(pred, name), want.shape), want, rtol=1e-14, err_msg=name)
        np.testing.assert_allclose(np.broadcast_to(getattr(grid, name), (1,) + want.shape + (1,))[0, :, :, 0], want,
                                   rtol=1e-14, err_msg=name)
        np.testing.assert_allclose(np.broadcast_to(getattr(rank.priced[0], name), want.shape + (1,))[..., 0], want,
                                   rtol=1e-14, err_msg=name)
    np.testing.assert_allclose(rank.tokens_per_s[0, :, :, 0], np.broadcast_to(direct.tokens_per_s, rank.tokens_per_s.shape[1:3]),
                               rtol=1e-14)
    # the serving simulator's decode table (at a context on its grid) is the same step's time
    from sdsl.serving import BatchStepModel

    sm = BatchStepModel.from_catalog(TARGET, DRAFT, DEP, max_batch=int(BATCHES.max()), max_k=int(GAMMAS.max()),
                                     max_context=1024, context_points=65)
    assert sm.ctx_grid[32] == DEP.context
    np.testing.assert_allclose(sm.decode[BATCHES - 1][:, :, 32].T, np.broadcast_to(direct.t_step_s, (GAMMAS.size, BATCHES.size)),
                               rtol=1e-14)
    np.testing.assert_allclose(sm.target[BATCHES - 1][:, :, 32].T, np.broadcast_to(direct.t_verify_s, (GAMMAS.size, BATCHES.size)),
                               rtol=1e-14)


def test_one_batch_to_k_table_for_the_export_the_simulator_and_the_cli():
    from sdsl.serving import BatchStepModel, best_k_by_batch, serving_k_table

    rank = sdsl.rank_proposers(TARGET, [f"draft:{DRAFT}"], DEP, acceptance=ALPHA, gammas=range(0, 8),
                               batches=range(1, 65))
    table = rank.k_table(0)
    assert serving_k_table(TARGET, DRAFT, DEP, alpha=ALPHA, max_batch=64, max_k=7) == table
    sm = BatchStepModel.from_catalog(TARGET, DRAFT, DEP, max_batch=64, max_k=7, max_context=1024)
    ks = best_k_by_batch(sm, ALPHA, context=float(DEP.context))[0]
    # the simulator's own per-batch best k is the ranking's with no tolerance (the table merges k within it)
    assert sdsl.plan.ranking.k_ranges(ks, np.arange(1, 65)) == rank.k_table(0, tolerance=0)
    out = json.loads(CliRunner().invoke(cli, ["optimize", "--target", TARGET, "--drafts", DRAFT, "--alpha", str(ALPHA),
                                              "--context", "512", "--gamma-max", "7", "--max-batch", "64",
                                              "--export", "vllm", "--json"]).output)
    assert out["k_table"] == out["serving"]["k_table"] == table
    assert out["export"]["pick"]["proposer"] == f"draft:{DRAFT}"


def test_cli_predict_and_optimize_rows_are_the_step():
    direct = _direct()
    run = CliRunner().invoke
    pred = json.loads(run(cli, ["predict", "--target", TARGET, "--draft", DRAFT, "--gamma", "4", "--batch", "4",
                                "--alpha", str(ALPHA), "--context", "512", "--json"]).output)
    assert pred["tokens_per_s"] == pytest.approx(float(direct.tokens_per_s[4, 1]), rel=1e-14)
    assert pred["t_step_s"] == pytest.approx(float(direct.t_step_s[4, 1]), rel=1e-14)
    opt = json.loads(run(cli, ["optimize", "--target", TARGET, "--drafts", DRAFT, "--alpha", str(ALPHA), "--context",
                               "512", "--batch", "4", "--gamma-max", "7", "--max-batch", "8", "--json"]).output)
    row = opt["configs"][0]
    k = row["gamma"]
    assert row["tokens_per_s"] == pytest.approx(float(direct.tokens_per_s[k, 1]), rel=1e-14)
    # the row deploys the k table's k; the per-batch best k stands beside it with its gain
    assert k == next(r["k"] for r in opt["k_table"] if r["batch_min"] <= 4 <= r["batch_max"])
    assert row["best_gamma"] == int(np.argmax(direct.tokens_per_s[:, 1]))
    assert 1 + row["best_gamma_gain"] == pytest.approx(float(direct.tokens_per_s[row["best_gamma"], 1] /
                                                             direct.tokens_per_s[k, 1]), rel=1e-12)
    assert 0 <= row["best_gamma_gain"] <= opt["tolerance"] / (1 - opt["tolerance"])


def test_decoder_validation_headline_is_the_shared_step():
    """``pred_speedup`` of a decoder row is price_step's speedup (the same numbers `sdsl predict` would give)."""
    from sdsl.catalog.hardware import get_hardware
    from sdsl.roofline.latency import default_params
    from sdsl.validation.decoder.pricing import MODELS, priced_speedup, shared_step

    target, draft, hw = sdsl.get_model("llama-160m"), sdsl.get_model("llama-68m"), get_hardware("cpu")
    args = dict(overhead=4e-4, overhead_plain=2e-4, max_new=64, dram_ratio=3.2)
    dep = sdsl.Deployment(hw, dtype="fp32", context=96, params=default_params(hw))
    for name, terms in MODELS.items():
        value = priced_speedup(target, draft, 4, 0.75, 8, 96, default_params(hw), hw, terms=terms, **args)
        step = shared_step(target, draft, 4, 0.75, 8, dep, terms=terms, **args)
        if "rows" not in terms:
            assert value == pytest.approx(float(step.speedup), rel=1e-14), name
    resync = sdsl.price_step(target, sdsl.DraftModel(draft, first_pass_tokens=2), dep, acceptance=0.75, gamma=4, batch=8)
    plain = sdsl.price_step(target, sdsl.DraftModel(draft), dep, acceptance=0.75, gamma=4, batch=8)
    extra = step_time_s(draft, dep, batch=8, q=2) - step_time_s(draft, dep, batch=8, q=1)
    assert float(resync.t_step_s - plain.t_step_s) == pytest.approx(float(extra), rel=1e-9)


def _frames_in(frame, package: str) -> bool:
    while frame is not None:
        if f"sdsl{package}" in frame.f_code.co_filename.replace("\\", "/"):
            return True
        frame = frame.f_back
    return False


MODEL_ROOMS = ("catalog", "engine", "roofline", "acceptance", "speculation", "plan")


def test_optimize_trace_stays_in_the_model_once_it_leaves_the_cli():
    """Record every Python call while `sdsl optimize --proposer ... --trees --export` runs: no function of sdsl/cli
    is ever called from inside the numpy model (the ranking, the acceptance and the tree τ are the model's)."""
    climbs, core_entries = [], set()

    def profile(frame, event, arg):
        if event != "call":
            return
        name = frame.f_code.co_filename.replace("\\", "/")
        if "/sdsl/cli/" in name and any(_frames_in(frame.f_back, f"/{room}/") for room in MODEL_ROOMS):
            climbs.append(f"{frame.f_code.co_name} ({name})")
        elif any(f"/sdsl/{room}/" in name for room in MODEL_ROOMS) and frame.f_back is not None \
                and "/sdsl/cli/" in frame.f_back.f_code.co_filename:
            core_entries.add(f"{name.split('/sdsl/')[1]}:{frame.f_code.co_name}")

    args = ["optimize", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--drafts", "llama-3.2-1b", "--alpha", "0.7",
            "--trees", "--max-batch", "16", "--export", "sglang", "--json"]
    sys.setprofile(profile)
    try:
        res = CliRunner().invoke(cli, args)
    finally:
        sys.setprofile(None)
    assert res.exit_code == 0, res.output
    assert climbs == []
    assert "plan/plan.py:plan_speculation" in core_entries
    assert not any("ranking.py" in e or "resolve.py" in e or "trees.py" in e for e in core_entries)  # via the plan only
