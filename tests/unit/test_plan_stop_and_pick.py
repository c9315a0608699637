"""Where speculation pays, where it stops paying and the pick agree with each other and with the batch → k table,
on a mixture-of-experts target routed independently at a low acceptance (speculation pays only from a medium batch)
and on a dense one."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import sdsl
from sdsl.catalog.models import get_model
from sdsl.roofline.latency import step_time_s
from sdsl.speculation.throughput import plain_tokens_per_s
from sdsl.acceptance import Acceptance
from sdsl.plan.export import export_config


def _independent_router():
    """Qwen3-30B-A3B with its experts routed independently at every position (routing locality 0)."""
    return replace(get_model("qwen3-30b-a3b"), routing_locality=0.0)


#: An EAGLE-3 head accepting each token at 0.6 (i.i.d.): on the independent router under SGLang it pays only from
#: batch 7 (at small batch the verify step's extra experts cost more than the accepted tokens).
LOW_ACCEPTANCE = Acceptance.from_iid(0.6)


@pytest.fixture(scope="module")
def moe_plan():
    return sdsl.plan_speculation(_independent_router(), sdsl.Deployment("h100-sxm", engine="sglang"),
                                 proposers=["eagle3"], acceptance=LOW_ACCEPTANCE, batches=[1, 64], export="vllm")


def _k_at(plan, batch):
    return next(r["k"] for r in plan.k_table if r["batch_min"] <= batch <= r["batch_max"])


def test_no_stop_is_reported_before_speculation_starts_paying(moe_plan):
    pays = moe_plan.speculation_pays
    assert pays[0]["batch_min"] == 7 and pays[-1]["batch_max"] == 256
    assert moe_plan.break_even_batch is None  # it pays at every batch from its first paying one
    assert moe_plan.stop_line() == f"speculation pays at batch {pays[0]['batch_min']}-256 and does not stop paying up to batch 256"


def test_the_pick_is_the_best_k_at_the_first_batch_and_the_export_follows(moe_plan):
    assert moe_plan.pick["gamma"] == _k_at(moe_plan, 1) == 0  # plain decoding is faster at batch 1
    first = moe_plan.export["config"].splitlines()[0]
    assert json.loads(first) == {"speculative_config": None}
    assert "--speculative-algorithm" not in export_config("sglang", moe_plan.pick, moe_plan.k_table).splitlines()[0]


def test_a_stop_after_paying_and_a_resumption_are_both_stated():
    # under SGLang's profile (its larger host time per speculative step) n-gram stops paying at 41 and pays again from 71
    plan = sdsl.plan_speculation("llama-3.1-8b", sdsl.Deployment("h100-sxm", engine="sglang"), proposers=["ngram"],
                                 batches=[256])
    pays, stop = plan.speculation_pays, plan.break_even_batch
    assert pays[0]["batch_min"] == 1 and stop == pays[0]["batch_max"] + 1
    assert all(_k_at(plan, b) == 0 for b in range(stop, pays[1]["batch_min"])) if len(pays) > 1 else True
    assert plan.stop_line().endswith(f"it stops paying at batch {stop}")
    assert plan.pick["gamma"] == _k_at(plan, 256)
    assert (stop, pays[1]["batch_min"]) == (41, 71)
    # the default profile (vLLM 0.24's measured H100 GEMMs: a verify step's rows cost less) pays at every batch
    default = sdsl.plan_speculation("llama-3.1-8b", sdsl.Deployment("h100-sxm"), proposers=["ngram"], batches=[256])
    assert default.speculation_pays == [{"batch_min": 1, "batch_max": 256}] and default.break_even_batch is None


def test_speculation_that_never_pays():
    plan = sdsl.plan_speculation("llama-3.1-8b", sdsl.Deployment("h100-sxm"), proposers=["eagle3"],
                                 acceptance=Acceptance.from_iid(0.05), batches=[1], max_batch=32)
    assert plan.speculation_pays == [] and plan.break_even_batch == 1 and plan.pick["gamma"] == 0
    assert plan.stop_line() == "speculation pays at no batch of 1-32: plain decoding is faster"


@pytest.mark.parametrize("engine", ["hf-eager", "sglang", "vllm", "ideal"])
def test_plain_tokens_per_s_is_price_steps_plain_side(engine):
    """The public plain rate includes the engine's plain-step host time, as price_step's does (a speedup computed
    against it is price_step's); hf-eager's eager launches halve it at batch 1."""
    import numpy as np

    dep = sdsl.Deployment("h100-sxm", engine=engine)
    b = np.array([1, 64])
    plain = plain_tokens_per_s("llama-3.1-8b", dep, batch=b)
    step = sdsl.price_step("llama-3.1-8b", "eagle3", dep, gamma=3, tau=2.5, batch=b)
    np.testing.assert_allclose(plain, step.plain_tokens_per_s, rtol=1e-12)
    gpu_only = b / step_time_s("llama-3.1-8b", dep, batch=b)
    assert np.all(plain <= gpu_only * (1 + 1e-12)) and (engine != "hf-eager" or plain[0] < 0.6 * gpu_only[0])


def test_predict_says_whether_the_deployment_fits():
    from click.testing import CliRunner

    from sdsl.cli import cli as main

    args = ["predict", "--target", "llama-3.1-70b", "--proposer", "eagle3", "--gamma", "3", "--accepted-length", "2.5",
            "--hardware", "h100-sxm", "--json"]
    one = json.loads(CliRunner().invoke(main, args).output)
    four = json.loads(CliRunner().invoke(main, args + ["--tp", "4"]).output)
    assert not one["fits_in_memory"] and four["fits_in_memory"]
    assert one["memory_per_gpu_bytes"] > 130 * 2**30 > one["memory_capacity_bytes"]  # 70.6B bf16 weights alone
    assert four["memory_per_gpu_bytes"] == pytest.approx(one["memory_per_gpu_bytes"] / 4, rel=0.05)
    text = CliRunner().invoke(main, args[:-1]).output
    assert "DOES NOT FIT" in text


def test_mtp_on_a_target_without_mtp_modules_is_flagged_and_not_exported():
    from click.testing import CliRunner

    from sdsl.cli import cli
    from sdsl.errors import InvalidInputError

    out = json.loads(CliRunner().invoke(cli, ["predict", "--target", "llama-3.1-8b", "--proposer", "mtp", "--gamma", "2",
                                              "--alpha", "0.7", "--json"]).output)
    assert any("ships no MTP module" in w for w in out["warnings"])
    ok = json.loads(CliRunner().invoke(cli, ["predict", "--target", "deepseek-v3", "--tp", "8", "--proposer", "mtp",
                                             "--gamma", "1", "--alpha", "0.7", "--hardware", "h200", "--dtype", "fp8", "--json"]).output)
    assert ok["warnings"] == []
    with pytest.raises(InvalidInputError, match="ships no MTP module"):
        sdsl.plan_speculation("llama-3.1-8b", "h100-sxm", proposers=["mtp"], acceptance=Acceptance.from_iid(0.8),
                              export="vllm")


def test_a_calibration_of_another_gpu_or_an_empty_one_is_refused(tmp_path):
    from click.testing import CliRunner

    from sdsl.cli import cli

    cpu = tmp_path / "cpu.json"
    cpu.write_text(json.dumps({"hardware": "cpu", "params": {"eta_compute": 0.01, "eta_memory": 0.06}}))
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    base = ["predict", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--gamma", "4", "--alpha", "0.7"]
    for path, needle in ((cpu, "was calibrated on cpu, not on H100-SXM"), (empty, "holds no latency parameters")):
        res = CliRunner().invoke(cli, base + ["--calibration", str(path)])
        assert res.exit_code == 2 and needle in res.output and len(res.output.strip().splitlines()) == 1
    assert CliRunner().invoke(cli, base + ["--hardware", "cpu", "--calibration", str(cpu)]).exit_code == 0


def test_a_draft_with_another_vocabulary_is_flagged():
    from click.testing import CliRunner

    from sdsl.cli import cli

    run = lambda *a: json.loads(CliRunner().invoke(cli, ["predict", "--gamma", "3", "--alpha", "0.6", "--json", *a]).output)  # noqa: E731
    assert any("vocabulary (50272 tokens)" in w for w in run("--target", "llama-3.1-8b", "--draft", "opt-125m")["warnings"])
    assert run("--target", "llama-3.1-8b", "--draft", "llama-3.2-1b")["warnings"] == []
    assert run("--target", "qwen2.5-32b", "--draft", "qwen2.5-0.5b")["warnings"] == []  # one tokenizer, padded apart


def test_exports_say_what_the_engine_still_needs():
    """A head's checkpoint is the user's to name; a draft model's TP goes into vLLM's config when it is not the
    target's (vLLM's default), so the engine runs what sdsl priced."""
    dep = sdsl.Deployment("h100-sxm", tp=4)
    draft = sdsl.plan_speculation("llama-3.1-70b", dep, proposers=["draft:llama-3.2-1b"], batches=[1], export="vllm")
    assert json.loads(draft.export["config"].splitlines()[0])["speculative_config"]["draft_tensor_parallel_size"] == 1
    same = sdsl.plan_speculation("llama-3.1-70b", dep.replace(draft_tp=4), proposers=["draft:llama-3.2-1b"], batches=[1],
                                 export="vllm")
    assert "draft_tensor_parallel_size" not in same.export["config"].splitlines()[0]
    head = sdsl.plan_speculation("llama-3.1-70b", dep, proposers=["eagle3"], batches=[1], export="sglang")
    assert "head checkpoint" in head.export["config"].splitlines()[1]


def test_a_tree_under_a_chains_only_engine_is_refused():
    from sdsl.engine.profiles import resolve_engine
    from sdsl.errors import InvalidInputError

    v2 = resolve_engine("sglang-spec-v2")
    assert v2.chains_only and "topk 1" in v2.sources["chains_only"]["quote"] and not resolve_engine("sglang").chains_only
    with pytest.raises(InvalidInputError, match="verifies chains only"):
        sdsl.price_step("llama-3.1-8b", "eagle3", sdsl.Deployment("h100-sxm", engine=v2), tree="4,4,16", tau=3.0)
    chain = sdsl.price_step("llama-3.1-8b", "eagle3", sdsl.Deployment("h100-sxm", engine=v2), tree="4,1,5", tau=3.0)
    assert float(chain.tokens_per_s) > 0


def test_second_qa_pass_fixes():
    """TensorRT-LLM's schedule keeps k = 0 ranges; a batch above max_batch extends the table; a k = 0 step of a
    proposer with no drafter left running is the plain step under every engine; the optimize JSON carries warnings."""
    from click.testing import CliRunner

    from sdsl.cli import cli

    plan = sdsl.plan_speculation(_independent_router(), sdsl.Deployment("h100-sxm", engine="sglang"), proposers=["eagle3"],
                                 acceptance=LOW_ACCEPTANCE, batches=[1], export="trtllm")
    schedule = json.loads(plan.export["config"])["speculative_config"]["draft_len_schedule"]
    assert schedule["6"] == 0 and all(str(r["batch_max"]) in schedule for r in plan.k_table)
    never = sdsl.plan_speculation("llama-3.1-8b", "h100-sxm", proposers=["eagle3"], acceptance=Acceptance.from_iid(0.05),
                                  batches=[1], max_batch=8, export="trtllm")
    assert json.loads(never.export["config"]) == {"speculative_config": None}
    big = sdsl.plan_speculation("llama-3.1-8b", "h100-sxm", proposers=["eagle3"], batches=[64], max_batch=8)
    assert big.max_batch == 64 and big.k_table[-1]["batch_max"] == 64
    assert all(a["batch_max"] + 1 == b["batch_min"] for a, b in zip(big.k_table, big.k_table[1:]))
    with pytest.raises(sdsl.SDSLError, match="at most 16384"):
        sdsl.plan_speculation("llama-3.1-8b", "h100-sxm", proposers=["eagle3"], batches=[100000])
    for engine in ("hf-eager", "sglang", "vllm"):
        step = sdsl.price_step("llama-3.1-8b", "draft:llama-3.2-1b", sdsl.Deployment("h100-sxm", engine=engine),
                               gamma=0, tau=1.0)
        assert float(step.t_step_s) == pytest.approx(float(step.t_plain_s), rel=1e-12)
    out = json.loads(CliRunner().invoke(cli, ["optimize", "--target", "llama-3.1-8b", "--context", "200000",
                                              "--json"]).output)
    assert out["warnings"] and "exceeds" in out["warnings"][0]


def test_a_tree_with_an_infinite_entry_is_one_typed_error():
    from sdsl.speculation.step import parse_tree

    with pytest.raises(sdsl.SDSLError, match="three whole numbers"):
        parse_tree("inf,1,2")


def test_a_target_no_catalog_draft_can_serve_ranks_its_heads_mtp_and_lookup():
    """DeepSeek-V3's vocabulary is shared by no catalog draft: the default ranks the head kinds, its MTP module and
    n-gram lookup (what needs no separate model) instead of refusing, and picks one the target can run."""
    plan = sdsl.plan_speculation("deepseek-v3", sdsl.Deployment("h200", tp=8, weight_dtype="fp8"), batches=(1,),
                                 max_batch=8)
    names = [p.name for p in plan.ranking.proposers]
    assert {"eagle", "eagle3", "mtp", "ngram"} <= set(names) and not any(n.startswith("draft:") for n in names)
    assert plan.ranking.runnable[names.index(plan.pick["proposer"])]
    dense = [p.name for p in sdsl.plan_speculation("llama-3.1-70b", "h100-sxm", batches=(1,), max_batch=8).ranking.proposers]
    assert all(n.startswith("draft:") for n in dense)  # a target with catalog drafts keeps them as the default
