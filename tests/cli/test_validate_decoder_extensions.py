"""`sdsl validate decoder --heads --synthetic --no-family`: the summary keys reach --json and the text report."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")


@pytest.fixture()
def fake_runs(monkeypatch):
    import sdsl.validation.decoder.heads as heads
    import sdsl.validation.decoder.synthetic as synthetic

    best = {"proposer": "head", "tree": "3x1x1", "speedup": 2.0, "tau": 3.1, "per_position": [0.8, 0.6]}
    monkeypatch.setattr(heads, "head_tree_validation", lambda **kw: {
        "head_best_speedup": 2.0, "tree_best_speedup": 2.0, "chain_best_speedup": 1.7, "head_best": best,
        "tree_best": best, "chain_best": best | {"tree": "chain3", "speedup": 1.7}, "rows": []})
    monkeypatch.setattr(synthetic, "synthetic_sweep", lambda **kw: {
        "median_speedup_error": 0.05, "median_signed_error": -0.01, "mean_abs_error": 0.06, "worst_error": 0.2,
        "n_rows": 3, "rows": [{}, {}, {}], "settings": {"target": "qwen2.5-0.5b"}})


def test_summary_keys_in_json(fake_runs):
    from click.testing import CliRunner

    from sdsl.cli import cli

    res = CliRunner().invoke(cli, ["validate", "decoder", "--no-family", "--heads", "--synthetic", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert (out["head_best_speedup"], out["tree_best_speedup"], out["chain_best_speedup"]) == (2.0, 2.0, 1.7)
    assert {"median_speedup_error", "median_signed_error", "rows"} <= set(out["synthetic"])
    text = CliRunner().invoke(cli, ["validate", "decoder", "--no-family", "--heads", "--synthetic"]).output
    assert "best head 2.00x" in text and "median |speedup error| 5.0%" in text and "signed -1.0%" in text
