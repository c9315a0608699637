"""`sdsl validate decoder` wiring (tiny settings) and the acceptance-plane fit."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")


def test_fit_plane_recovers_a_plane():
    from sdsl.reference.validation import fit_plane

    rng = np.random.default_rng(0)
    pts = [{"ppl_draft": x, "ppl_target": y, "alpha": -0.02 * x + 0.03 * y + 0.7}
           for x, y in rng.uniform(3, 9, size=(12, 2))]
    f = fit_plane(pts)
    assert f["A"] == pytest.approx(-0.02) and f["B"] == pytest.approx(0.03) and f["R2"] == pytest.approx(1.0)
    assert f["signs_match_paper"]


def test_validate_decoder_cli_json_tiny(tmp_path):
    from click.testing import CliRunner

    from sdsl.cli import cli
    from sdsl.reference.checkpoint import CHECKPOINT_DIR

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
