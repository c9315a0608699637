"""`sdsl predict --json` and `sdsl optimize --json` carry the 80% band of every predicted figure."""

from __future__ import annotations

import json

from sdsl.speculation.bands import BAND_FIELDS


def test_predict_and_optimize_json_carry_a_band_for_every_figure():
    from click.testing import CliRunner

    from sdsl.cli import cli

    r = CliRunner().invoke(cli, ["predict", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--gamma", "3", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert all(k in out for k in BAND_FIELDS) and out["band"]["level"] == 0.8
    assert out["tokens_per_s_low"] <= out["tokens_per_s"] <= out["tokens_per_s_high"]
    r = CliRunner().invoke(cli, ["optimize", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--proposer", "ngram",
                                 "--max-batch", "4", "--batch", "1,4", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    for row in out["configs"]:
        assert all(k in row for k in BAND_FIELDS)
        assert row["speedup_low"] <= row["speedup"] <= row["speedup_high"]
    assert set(out["bands"]) == {"eagle3", "ngram"} and not out["bands"]["eagle3"]["profile_has_rows"]
