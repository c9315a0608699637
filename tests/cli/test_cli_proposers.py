"""`sdsl predict/optimize --proposer/--tree/--export` and `sdsl validate published`."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sdsl.cli import cli


def run(args):
    return CliRunner().invoke(cli, args)


def test_done_when_chain_and_tree():
    base = ["predict", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--accepted-length", "3.1",
            "--hardware", "h100-sxm", "--json"]
    chain = json.loads(run(base + ["--gamma", "4"]).output)
    assert {"tpot_s", "tokens_per_s", "speedup", "tau", "bound"} <= set(chain)
    assert chain["tau"] == pytest.approx(3.1) and chain["verify_tokens"] == 5
    tree = json.loads(run(base + ["--tree", "8,8,64"]).output)
    assert tree["verify_tokens"] == 64 and tree["tree"] == [8, 8, 64]
    assert tree["tpot_s"] == pytest.approx(tree["t_step_s"] / tree["tau"])


@pytest.mark.parametrize("args", [
    ["--proposer", "hydra", "--gamma", "2", "--alpha", "0.5"],
    ["--proposer", "eagle", "--tree", "2,1,9", "--accepted-length", "2"],
    ["--proposer", "eagle", "--tree", "8,8", "--accepted-length", "2"],
    ["--proposer", "eagle", "--gamma", "3", "--acceptance", "0.9,1.2"],
    ["--proposer", "eagle", "--gamma", "3", "--workload", "poetry"],
])
def test_predict_bad_input_one_line_exit_2(args):
    res = run(["predict", "--target", "llama-3.1-8b", *args])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1


@pytest.mark.parametrize("engine,needle", [("vllm", '"method": "eagle3"'), ("sglang", "--speculative-algorithm EAGLE3"),
                                           ("trtllm", '"decoding_type": "Eagle3"')])
def test_optimize_export(engine, needle):
    res = run(["optimize", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--accepted-length", "3.1",
               "--accepted-at", "4", "--gamma-max", "8", "--max-batch", "64", "--export", engine])
    assert res.exit_code == 0, res.output
    assert needle in res.output and "speculation pays at batch 1-64" in res.output


def test_optimize_ranks_all_proposers_json():
    res = run(["optimize", "--target", "llama-3.1-8b", "--proposer", "all", "--alpha", "0.6", "--batch", "1,32",
               "--max-batch", "32", "--json"])
    out = json.loads(res.output)
    assert {r["proposer"] for r in out["configs"]} <= {"eagle", "eagle3", "medusa", "mtp", "ngram"}
    assert out["k_table"][0]["batch_min"] == 1


@pytest.mark.parametrize("args", [["--export", "tgi"], ["--proposer", "medusa", "--export", "sglang"],
                                  ["--proposer", "nope"]])
def test_optimize_bad_input(args):
    res = run(["optimize", "--target", "llama-3.1-8b", "--alpha", "0.6", "--max-batch", "8", *args])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1


def test_validate_published_json():
    out = json.loads(run(["validate", "published", "--json"]).output)
    assert out["summary"]["engine_decode"]["loso"]["n"] == 22 and out["k_sweep"]["measured_best_k"] == 2
    assert {r["profile"] for r in out["rows"]} >= {"vllm-2025-07", "sglang-spec-v2-2025-10", "hf-eager-2024-01"}


def test_tree_from_a_chain_measurement_uses_the_tree_model():
    from sdsl.acceptance import Acceptance, group_decay
    from sdsl.acceptance.trees import TokenTree, tree_matrices

    out = json.loads(run(["predict", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--gamma", "4", "--tree",
                          "8,8,64", "--accepted-length", "3.1", "--json"]).output)
    fit = Acceptance.from_accepted_length(3.1, 4, decay=group_decay("eagle3"))  # EAGLE-3's decay ratio
    P, S = tree_matrices(fit.conditional_at(8), 8)  # SGLang keeps the nodes the draft scores highest
    assert out["tau"] == pytest.approx(float(TokenTree.sglang(8, 8, 64, P, S).tau(P)))
    assert out["tau"] > 3.1 and out["gamma"] is None and out["tree"] == [8, 8, 64]


def test_optimize_trees_and_sglang_tree_export():
    res = run(["optimize", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--accepted-length", "3.1",
               "--accepted-at", "4", "--trees", "--max-batch", "16", "--export", "sglang", "--json"])
    out = json.loads(res.output)
    assert out["trees"] and all(r["tree"] for r in out["trees"])
    pick = out["export"]["pick"]
    if "tree_pick" in out:
        assert pick == out["tree_pick"] and f"--speculative-eagle-topk {pick['tree'][1]}" in out["export"]["config"]
    vllm = json.loads(run(["optimize", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--accepted-length", "3.1",
                           "--accepted-at", "4", "--trees", "--max-batch", "16", "--export", "vllm", "--json"]).output)
    assert vllm["export"]["pick"]["tree"] is None  # vLLM verifies chains


def test_predict_draft_json_keeps_its_keys_and_numbers():
    from sdsl.roofline.deployment import Deployment
    from sdsl.speculation.throughput import predict

    out = json.loads(run(["predict", "--target", "llama-3.1-70b", "--draft", "llama-3.2-1b", "--gamma", "4", "--tp", "4",
                          "--alpha", "0.6", "--json"]).output)
    assert out["draft"] == "llama-3.2-1b" and out["alpha"] == pytest.approx(0.6) and out["alpha_source"] == "given"
    ref = predict("llama-3.1-70b", "llama-3.2-1b", Deployment("h100-sxm", tp=4), gamma=4, alpha=0.6)
    assert out["tokens_per_s"] == pytest.approx(float(ref.tokens_per_s), rel=1e-12)
    plane = json.loads(run(["predict", "--target", "llama-3.1-70b", "--draft", "llama-3.2-1b", "--gamma", "4", "--tp", "4",
                            "--json"]).output)
    assert plane["alpha_source"] == "sdsl-plane"


def test_validate_published_figure(tmp_path):
    pytest.importorskip("matplotlib")
    res = run(["validate", "published", "--figure", str(tmp_path / "v.png")])
    assert res.exit_code == 0 and (tmp_path / "v.png").stat().st_size > 10_000
    bad = run(["validate", "published", "--figure", str(tmp_path / "v.txt")])
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1


def test_predict_with_the_rows_engine_is_the_validation_code_path():
    """The SGLang EAGLE-3 row (PR #4247) priced by `predict --engine sglang:2025-03` equals its shipped row."""
    from sdsl.validation.published_validation import validate_published

    row = next(r for r in validate_published()["rows"] if r["file"] == "speculative" and r["row"] == 26)
    assert row["profile"] == "sglang-2025-01"
    out = json.loads(run(["predict", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--tree", "8,8,64",
                          "--accepted-length", "5.39", "--context", "512", "--engine", "sglang:2025-03",
                          "--json"]).output)
    assert out["engine"] == "sglang-2025-01"
    assert out["tokens_per_s"] == pytest.approx(row["predicted_shipped"], rel=1e-9)


def test_trees_stay_within_a_measured_vector():
    out = json.loads(run(["optimize", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--acceptance", "0.8,0.6,0.4",
                          "--trees", "--max-batch", "4", "--json"]).output)
    assert max(r["tree"][0] for r in out["trees"]) <= 3 and max(r["gamma"] for r in out["configs"]) <= 3
