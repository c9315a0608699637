"""`sdsl validate decoder` wiring (tiny settings) and the acceptance-plane fit."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")


def test_fit_plane_recovers_a_plane():
    from sdsl.experiments.decoder_validation import fit_plane

    rng = np.random.default_rng(0)
    pts = [{"ppl_draft": x, "ppl_target": y, "alpha": -0.02 * x + 0.03 * y + 0.7}
           for x, y in rng.uniform(3, 9, size=(12, 2))]
    f = fit_plane(pts)
    assert f["A"] == pytest.approx(-0.02) and f["B"] == pytest.approx(0.03) and f["R2"] == pytest.approx(1.0)
    assert f["signs_match_paper"]


def test_validate_decoder_cli_json_tiny(tmp_path):
    from click.testing import CliRunner

    from sdsl.cli import cli
    from sdsl.torch.checkpoint import CHECKPOINT_DIR

    if not (CHECKPOINT_DIR / "byte-d96.safetensors").exists():
        pytest.skip("no committed checkpoints")
    cache = tmp_path / "rows.json"
    args = ["validate", "decoder", "--targets", "byte-d96", "--drafts", "byte-d64", "--gammas", "1,2", "--batches", "1,2",
            "--prompts", "2", "--max-new", "6", "--repeats", "1", "--no-plane", "--cache", str(cache), "--json"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert {"rows", "median_speedup_error", "best_speedup", "best_config", "optimizer_regret"} <= set(out)
    assert len(out["rows"]) == 2 * 2 * 2  # (draft + prompt lookup) x gamma x batch
    r = out["rows"][0]
    assert 0 <= r["alpha"] <= 1 and r["tau"] >= 1 and r["speedup"] > 0 and sum(r["accept_counts"]) > 0
    assert 0 <= out["optimizer_regret"] < 1
    again = CliRunner().invoke(cli, args)  # served from the cache: identical
    assert json.loads(again.output)["rows"] == out["rows"]


def test_leave_pair_out_drops_both_models_forwards(monkeypatch):
    """Each (target, proposer) gets its own fit without the forwards of its models; its rows are re-priced with it."""
    from types import SimpleNamespace

    import sdsl.fit.calibration
    from sdsl.core.deployment import Deployment
    from sdsl.core.hardware import get_hardware
    from sdsl.torch.checkpoint import CHECKPOINT_DIR, list_checkpoints, load_checkpoint
    from sdsl.experiments.decoder_validation import calibrated_params, leave_pair_out, model_spec, priced_speedup

    params, path = calibrated_params()
    if params is None or not list_checkpoints(CHECKPOINT_DIR):
        pytest.skip("no CPU calibration or committed checkpoints")
    spec = {p.stem: model_spec(load_checkpoint(p)[1]["spec"]) for p in list_checkpoints(CHECKPOINT_DIR)}
    seen = []

    def fake_fit(data, hw, *, steps=(), **kw):
        seen.append(sorted(sp.name for _, sp in steps))
        return SimpleNamespace(params=params)

    monkeypatch.setattr(sdsl.fit.calibration, "fit_latency", fake_fit)
    hw = get_hardware("cpu")
    rows = []
    for d in ("byte-d64", "prompt-lookup"):
        for g in (1, 3):
            dep = Deployment(hw, dtype="fp32", context=96, params=params)
            pred = priced_speedup(spec["byte-d192"], None if d == "prompt-lookup" else spec[d], dep, gamma=g,
                                  alpha=0.7, batch=1, overhead_s=3e-4, plain_overhead_s=2e-4)
            rows.append({"target": "byte-d192", "draft": d, "gamma": g, "batch": 1, "alpha": 0.7, "speedup": 1.1 * pred,
                         "overhead_s": 3e-4, "overhead_plain_s": 2e-4, "speedup_error": 1 / 1.1 - 1})
    out = leave_pair_out(rows, spec, 96)
    assert out["fits"] == 2 and len(seen) == 2
    assert "byte-d192" not in seen[0] and "byte-d64" not in seen[0] and "byte-d96" in seen[0]
    assert "byte-d192" not in seen[1] and "byte-d64" in seen[1]
    assert [p["forward_rows_dropped"] for p in out["pairs"]] == [108, 54]
    assert out["median_speedup_error"] == pytest.approx(1 - 1 / 1.1)


@pytest.mark.parametrize("args", [
    ["validate", "decoder", "--targets", "no-such-ckpt", "--cache", ""],
    ["validate", "decoder", "--drafts", "byte-d64,no-such-ckpt", "--cache", ""],
    ["train-family", "--only", "no-such-member"],
    ["train-family", "--steps", "0"],
    ["train-family", "--threads", "0"],
])
def test_reference_cli_bad_input_exits_2_with_one_line(args, tmp_path):
    from click.testing import CliRunner

    from sdsl.cli import cli

    if args[0] == "train-family":
        args = [*args, "--out", str(tmp_path / "ckpt")]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, res.output
    assert res.output.startswith("Error: ") and res.output.count("\n") == 1
    assert not (tmp_path / "ckpt").exists()  # rejected before any training
