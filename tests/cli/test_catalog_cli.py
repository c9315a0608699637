"""Default acceptance from the published catalog on the command line: optimize/predict/acceptance, --workload,
--acceptance-for, and the one-proposer meaning of --accepted-length."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sdsl.cli import cli


def run(*args):
    return CliRunner().invoke(cli, list(args))


def _optimize(*extra):
    r = run("optimize", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--max-batch", "8", "--gamma-max", "8",
            "--json", *extra)
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_optimize_ranks_every_proposer_with_its_own_acceptance():
    out = _optimize("--proposer", "all", "--proposer", "draft:llama-3.2-1b")
    by = out["acceptance_by_proposer"]
    assert out["alpha_source"] == "per-proposer"
    assert by["draft:llama-3.2-1b"]["source"] == "sdsl-plane"
    assert "mtp" not in by  # llama-3.1-8b ships no MTP modules: 'all' does not rank one
    for name in ("eagle", "eagle3", "medusa", "ngram"):
        ev = by[name]["evidence"]
        assert by[name]["source"].startswith("catalog[") and ev["rows"] and ev["sources"] and ev["spread"]["by_task"]
    assert by["eagle3"]["evidence"]["tier"] == "same-target"
    at_1 = [c for c in out["configs"] if c["batch"] == 1]
    assert at_1[0]["proposer"] != "ngram"  # lookup does not win on chat: the catalog puts it near tau 1.5
    ngram = next(c for c in at_1 if c["proposer"] == "ngram")
    eagle3 = next(c for c in at_1 if c["proposer"] == "eagle3")
    assert ngram["tau"] < 1.6 < eagle3["tau"] and ngram["speedup"] < eagle3["speedup"]
    assert {c["acceptance_source"] for c in at_1} >= {"sdsl-plane", "catalog[same-target]:eagle3/chat"}


def test_text_output_names_each_proposers_acceptance():
    r = run("optimize", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--proposer", "ngram", "--max-batch", "4")
    assert r.exit_code == 0, r.output
    assert "acceptance by proposer:" in r.output and "catalog[same-target]:eagle3/chat (7 rows from 2 sources" in r.output


def test_acceptance_for_overrides_one_proposer_only():
    base = _optimize("--proposer", "eagle3", "--proposer", "ngram")
    over = _optimize("--proposer", "eagle3", "--proposer", "ngram", "--acceptance-for", "eagle3=2.0@4")
    assert over["acceptance_by_proposer"]["eagle3"]["source"] == "given:eagle3"
    assert over["acceptance_by_proposer"]["ngram"] == base["acceptance_by_proposer"]["ngram"]
    from sdsl.acceptance import Acceptance

    got = Acceptance.from_dict(over["acceptance_by_proposer"]["eagle3"])
    assert float(got.tau(4)) == pytest.approx(2.0, rel=1e-9)
    at = _optimize("--proposer", "eagle3", "--proposer", "ngram", "--acceptance-for", "eagle3=2.0", "--accepted-at", "4")
    assert at["acceptance_by_proposer"]["eagle3"] == over["acceptance_by_proposer"]["eagle3"]


def test_workload_picks_the_catalog_tasks():
    code = _optimize("--proposer", "eagle3", "--workload", "code")["acceptance_by_proposer"]["eagle3"]["evidence"]
    assert code["workload"] == "code" and set(code["spread"]["by_task"]) <= {"HumanEval", "LiveCodeBench"}


def test_accepted_length_is_one_proposers_measurement():
    r = run("optimize", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--proposer", "eagle", "--proposer", "ngram",
            "--proposer", "draft:llama-3.2-1b", "--accepted-length", "3.1", "--accepted-at", "4")
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1 and "--acceptance-for" in r.output
    one = _optimize("--proposer", "eagle3", "--accepted-length", "3.1", "--accepted-at", "4")
    assert one["acceptance"]["source"] == "accepted-length" and one["acceptance"]["tail_ratio"] == 1.0  # EAGLE-3: r = 1
    alpha = _optimize("--proposer", "eagle3", "--proposer", "ngram", "--alpha", "0.6")  # a what-if for every proposer
    assert {a["source"] for a in alpha["acceptance_by_proposer"].values()} == {"iid"}


@pytest.mark.parametrize("args", [
    ["optimize", "--proposer", "eagle3", "--acceptance-for", "eagle3=3.1"],  # no k
    ["optimize", "--proposer", "eagle3", "--acceptance-for", "eagle3"],
    ["optimize", "--proposer", "eagle3", "--acceptance-for", "eagle3=abc@4"],
    ["optimize", "--proposer", "eagle3", "--acceptance-for", "eagle3=0.7@4"],  # an accepted length is >= 1
    ["optimize", "--proposer", "eagle3", "--acceptance-for", "eagle3=9@4"],  # above k + 1
    ["optimize", "--proposer", "eagle3", "--acceptance-for", "medusa=2@4"],  # not ranked
    ["optimize", "--proposer", "eagle3", "--workload", "poetry"],
    ["predict", "--proposer", "eagle3", "--gamma", "4", "--workload", "poetry"],
    ["acceptance", "--proposer", "eagle3"],  # needs --target
    ["acceptance", "--proposer", "hydra", "--target", "llama-3.1-8b"],
    ["acceptance", "--proposer", "eagle3", "--target", "llama-3.1-8b", "--workload", "poetry"],
    ["acceptance", "--proposer", "eagle3", "--target", "llama-3.1-8b", "--alpha", "0.5"],
])
def test_bad_input_is_one_line_exit_2(args):
    if args[0] in ("optimize", "predict"):
        args = args[:1] + ["--target", "llama-3.1-8b", "--max-batch" if args[0] == "optimize" else "--batch", "4"] + args[1:]
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output


def test_acceptance_shows_a_proposers_default():
    r = run("acceptance", "--proposer", "eagle3", "--target", "llama-3.1-8b", "--workload", "chat", "--k", "4", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert len(out["conditional"]) == len(out["marginal"]) == 4 and out["k"] == 4
    assert out["tau"] == pytest.approx(1 + sum(out["marginal"]), rel=1e-12)
    ev = out["evidence"]
    assert ev["tier"] == "same-target" and ev["sources"] == ["sgl-project/SpecForge", "vllm-project/vllm#26191"]
    assert ev["spread"]["k"] == 4 and ev["spread"]["min"] <= out["tau"] <= ev["spread"]["max"]
    from sdsl.acceptance.catalog import catalog_rows

    ids = {x.row_id for x in catalog_rows()}
    assert set(ev["rows"]) <= ids


def test_predict_names_the_catalog_rows():
    r = run("predict", "--target", "llama-3.1-8b", "--proposer", "ngram", "--gamma", "5", "--json")
    out = json.loads(r.output)
    assert out["acceptance_source"] == "catalog[same-family]:ngram/chat"
    assert out["acceptance"]["evidence"]["sources"] == ["NVIDIA/TensorRT-LLM"]


def test_all_ranks_mtp_only_where_the_target_ships_it():
    from sdsl.cli.optimize import all_proposers

    assert "mtp" not in all_proposers("llama-3.1-8b") and "mtp" in all_proposers("deepseek-v3")
    assert set(all_proposers("deepseek-v3")) - {"mtp"} == set(all_proposers("llama-3.1-8b"))
