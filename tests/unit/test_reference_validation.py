"""`sdsl validate decoder`: leak-free pricing, the max_new accounting, and the committed result recomputed."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")

RESULT = "benchmarks/results/validate_decoder.json"
PRICED = ("pred_speedup", "speedup_error", "pred_speedup_in_sample", "pred_speedup_pooled_alpha", "pred_steps")


def test_fit_plane_recovers_a_plane():
    from sdsl.experiments.decoder_validation import fit_plane

    rng = np.random.default_rng(0)
    pts = [{"ppl_draft": x, "ppl_target": y, "alpha": -0.02 * x + 0.03 * y + 0.7}
           for x, y in rng.uniform(3, 9, size=(12, 2))]
    f = fit_plane(pts)
    assert f["A"] == pytest.approx(-0.02) and f["B"] == pytest.approx(0.03) and f["R2"] == pytest.approx(1.0)
    assert f["signs_match_paper"]


def test_run_counts_only_the_first_max_new_tokens(tiny_transformer):
    """Overshoot past max_new and idle batch members cost time but add no tokens; steps are the batch's."""
    from sdsl.experiments.decoder_validation import _run
    from sdsl.torch.decoder import DraftModel

    target, draft = tiny_transformer(0), tiny_transformer(1, scale=0.5)
    prompts = np.random.default_rng(0).integers(0, 256, size=(4, 8))
    import torch

    out = _run(target, DraftModel(draft), 4, 2, torch.as_tensor(prompts), 9, 1.0, seed=0, repeats=2)
    assert out["tokens"] == 4 * 9 and out["overshoot"] >= 0 and out["repeats"] == 2
    assert out["chunk_sizes"] == [2, 2] and sum(out["chunk_steps"]) == out["steps"]
    assert out["tokens_per_s"] == pytest.approx(out["tokens"] / out["decode_s"])
    assert out["steps"] >= 2 * int(np.ceil(9 / 5))  # at most γ + 1 = 5 tokens per step


def test_validate_decoder_cli_json_tiny(tmp_path):
    from click.testing import CliRunner

    from sdsl.cli import cli
    from sdsl.torch.checkpoint import CHECKPOINT_DIR

    if not (CHECKPOINT_DIR / "byte-d96.safetensors").exists():
        pytest.skip("no committed checkpoints")
    cache = tmp_path / "rows.json"
    args = ["validate", "decoder", "--targets", "byte-d96", "--drafts", "byte-d64", "--gammas", "1,2", "--batches", "1,2",
            "--prompts", "2", "--max-new", "6", "--repeats", "2", "--no-plane", "--in-sample", "--cache", str(cache), "--json"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert {"rows", "median_speedup_error", "median_signed_error", "share_over_predicted", "best_speedup",
            "best_config", "optimizer_regret", "models"} <= set(out)
    rows = out["rows"]
    assert len(rows) == 2 * 2 * 2  # (draft + prompt lookup) x gamma x batch
    for r in rows:
        assert r["tokens"] == r["plain_tokens"] == 2 * 6 and r["repeats"] == r["plain_repeats"] == 2
        assert r["speedup"] == pytest.approx(r["tokens_per_s"] / r["plain_tokens_per_s"])
        assert r["pred_speedup"] == r["pred_speedup_in_sample"]  # --in-sample prices with the committed calibration
    err = np.array([r["pred_speedup"] / r["speedup"] - 1 for r in rows])
    assert out["median_speedup_error"] == pytest.approx(np.median(np.abs(err)))
    assert out["median_signed_error"] == pytest.approx(np.median(err))
    assert out["share_over_predicted"] == pytest.approx((err > 0).mean())
    best = max(rows, key=lambda r: r["speedup"])
    same = [r for r in rows if r["target"] == best["target"] and r["batch"] == best["batch"]]
    pick = max(same, key=lambda r: r["pred_speedup_pooled_alpha"])
    assert out["optimizer_regret"] == pytest.approx(1 - pick["speedup"] / best["speedup"])
    again = CliRunner().invoke(cli, args)  # served from the cache: identical
    assert json.loads(again.output)["rows"] == rows


def test_heldout_fit_drops_every_row_of_both_models():
    """The pair's operator/layer profiles (same name or layer width) and forwards are gone from its fit."""
    from sdsl.experiments.decoder_pricing import heldout_inputs, heldout_params
    from sdsl.experiments.decoder_validation import model_spec
    from sdsl.torch.checkpoint import CHECKPOINT_DIR, list_checkpoints, load_checkpoint

    if not list_checkpoints(CHECKPOINT_DIR):
        pytest.skip("no committed checkpoints")
    spec = {p.stem: model_spec(load_checkpoint(p)[1]["spec"]) for p in list_checkpoints(CHECKPOINT_DIR)}
    ops, layers, steps = inputs = heldout_inputs()
    seen = []
    import sdsl.fit.calibration as cal

    real = cal.fit_latency

    def spy(data, hw, *, layers=(), steps=(), **kw):
        seen.append((set(data.columns), [sp for _, sp in layers], [sp.name for _, sp in steps]))
        return real(data, hw, layers=layers, steps=steps, **kw)

    cal.fit_latency = spy
    try:
        params, dropped = heldout_params(("byte-deep", "byte-d192"), spec, inputs)
    finally:
        cal.fit_latency = real
    (_, kept_layers, kept_steps), = seen
    assert {sp.d_model for sp in kept_layers}.isdisjoint({64, 192})  # byte-deep shares byte-d64's layer width
    assert "byte-deep" not in kept_steps and "byte-d192" not in kept_steps and "byte-d288" in kept_steps
    assert dropped["forward_rows"] == sum(len(r) for r, sp in steps if sp.name in ("byte-deep", "byte-d192")) > 0
    assert dropped["layer_rows"] > 0 and dropped["operator_rows"] > 0
    assert params.t_step > 0
