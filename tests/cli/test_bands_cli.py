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


def test_optimize_trees_table_carries_the_bands_in_text_and_json():
    """The --trees table has the chain tables' band columns (tokens/s and speedup, low-high) and its band line; its
    JSON rows carry every band field and ``tree_bands`` says where they come from."""
    from click.testing import CliRunner

    from sdsl.cli import cli
    from sdsl.plan.config_table import speedup_band, tokens_band

    args = ["optimize", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--max-batch", "4", "--batch", "1,4",
            "--trees", "--top", "2"]
    r = CliRunner().invoke(cli, args + ["--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["trees"] and set(out["tree_bands"]) == {"eagle3"}
    assert out["tree_bands"]["eagle3"]["acceptance_class"] == out["bands"]["eagle3"]["acceptance_class"]
    for row in out["trees"]:
        assert all(k in row for k in BAND_FIELDS)
        assert row["tokens_per_s_low"] < row["tokens_per_s"] < row["tokens_per_s_high"]
        assert row["speedup_low"] < row["speedup"] < row["speedup_high"]
    text = CliRunner().invoke(cli, args).output
    trees = text.split("best SGLang trees")[1].split("best k by batch")[0].splitlines()
    assert trees[1].split() == ["batch", "proposer", "tree", "tau", "tokens/s", "80%", "band", "TPOT", "ms", "speedup",
                                "80%", "band", "bound"]
    for row, line in zip(out["trees"], trees[3:3 + len(out["trees"])]):
        cells = line.split()
        assert cells[5] == tokens_band(row) and cells[8] == speedup_band(row)
    assert any(line.startswith("80% bands (sdsl validate bands): eagle3:") for line in trees)
    assert json.loads(CliRunner().invoke(cli, args[:-3] + ["--json"]).output)["tree_bands"] is None
