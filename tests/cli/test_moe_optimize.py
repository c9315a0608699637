"""`sdsl optimize` and `sdsl predict` on a mixture-of-experts target: the batch range where speculation pays,
the best k per batch and why (bound, cost driver, distinct experts), in the JSON schema every proposer shares."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from sdsl.cli import cli as main
from sdsl.acceptance import Acceptance
from sdsl.plan.config_table import ROW_KEYS
from sdsl.plan.cost_drivers import PARTS, cost_driver, step_parts
from sdsl.roofline.deployment import Deployment
from sdsl.engine.profiles import IDEAL
from sdsl.catalog.moe import ROUTING_LOCALITY, expected_distinct_experts
from sdsl.plan.plan import plan_speculation
from sdsl.speculation.step import price_step

H100 = Deployment("h100-sxm", context=1024, engine="ideal")  # the roofline alone
#: the roofline plus 4 ms of host time per speculative step (an engine profile's S; plain steps uncharged)
HOST_4MS = IDEAL.replace(name="ideal+4ms-per-speculative-step", spec_step_s=4e-3)


def test_predict_json_prints_the_moe_fields():
    # the command of the done-when list
    args = ["predict", "--target", "qwen3-30b-a3b", "--tp", "4", "--proposer", "eagle3", "--tree", "4,4,16",
            "--accepted-length", "2.5", "--batch", "1", "--hardware", "h100-sxm", "--json"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    for key in ("tokens_per_s", "plain_tokens_per_s", "speedup", "bound", "distinct_experts", "plain_distinct_experts"):
        assert key in out
    # 16 verified positions of one sequence route as 1 + 15(1 - rho) independent tokens: E(1 - (1 - k/E)^n) of
    # Qwen3-30B-A3B's 128 experts, top-8 (72.0, not the 82.4 of independent routing)
    routed = 1 + 15 * (1 - ROUTING_LOCALITY)
    assert out["distinct_experts"] == pytest.approx(float(expected_distinct_experts(128, 8, routed)), rel=1e-12)
    assert out["plain_distinct_experts"] == pytest.approx(8.0, rel=1e-12)
    assert out["speedup"] == pytest.approx(out["tokens_per_s"] / out["plain_tokens_per_s"], rel=1e-12)
    text = CliRunner().invoke(main, args[:-1]).output
    assert "experts per MoE layer" in text and "72.0" in text


def test_step_parts_add_up_to_the_step():
    step = price_step("qwen3-30b-a3b", "eagle3", H100, acceptance=0.7, gamma=np.array([1, 4])[:, None],
                      batch=np.array([1, 16, 256]), overhead_s=1e-3)
    spec, plain = step_parts(step)
    assert set(spec) == set(PARTS) == set(plain)
    np.testing.assert_allclose(sum(spec.values()), step.t_step_s, rtol=1e-12)
    np.testing.assert_allclose(sum(plain.values()), step.t_plain_s, rtol=1e-12)
    assert all(np.all(np.asarray(v) >= -1e-15) for v in (*spec.values(), *plain.values()))


def test_cost_driver_names_the_expert_union_on_moe_and_not_on_dense():
    b = np.array([2, 8])
    moe = price_step("qwen3-30b-a3b", "eagle3", H100, acceptance=0.7, gamma=3, batch=b)
    dense = price_step("qwen3-4b", "eagle3", H100, acceptance=0.7, gamma=3, batch=b)
    assert list(cost_driver(moe)) == ["expert-weights", "expert-weights"]
    assert "expert-weights" not in set(cost_driver(dense))
    assert np.all(np.asarray(dense.verify_time.distinct_experts) == 0)


@pytest.fixture(scope="module")
def plans():
    kw = dict(proposers=["eagle3"], acceptance=Acceptance.from_iid(0.6), max_batch=256)
    return {t: plan_speculation(t, H100.replace(engine=HOST_4MS), **kw) for t in ("qwen3-30b-a3b", "qwen3-4b")}


def test_speculation_pays_from_a_medium_batch_on_moe_only(plans):
    """With 4 ms of host time per speculative step and α = 0.6 on one H100, speculation stops paying at small batch
    on Qwen3-30B-A3B (each verified token routes to new experts) but pays from batch 1 on dense Qwen3-4B."""
    moe, dense = plans["qwen3-30b-a3b"], plans["qwen3-4b"]
    assert moe.speculation_pays[0]["batch_min"] > 4 and moe.speculation_pays[-1]["batch_max"] == 256
    assert dense.speculation_pays == [{"batch_min": 1, "batch_max": 256}]
    first = moe.k_reasons()[0]
    assert first["batch_min"] == 1 and first["k"] == 0 and first["speedup_max"] == 1.0
    assert first["verify_distinct_experts"] > first["plain_distinct_experts"] == pytest.approx(8.0)
    drivers = {r["cost_driver"] for r in moe.k_reasons()}
    assert "expert-weights" in drivers and drivers <= set(PARTS)


def test_k_reasons_cover_every_batch_and_agree_with_the_k_table(plans):
    for plan in plans.values():
        reasons = plan.k_reasons()
        assert reasons[0]["batch_min"] == 1 and reasons[-1]["batch_max"] == 256
        assert all(a["batch_max"] + 1 == b["batch_min"] for a, b in zip(reasons, reasons[1:]))
        k_of = {b: r["k"] for r in plan.k_table for b in range(r["batch_min"], r["batch_max"] + 1)}
        assert all(k_of[b] == r["k"] for r in reasons for b in range(r["batch_min"], r["batch_max"] + 1))
        pays = {b for r in plan.speculation_pays for b in range(r["batch_min"], r["batch_max"] + 1)}
        assert pays == {b for b, k in k_of.items() if k > 0}  # one proposer: it pays exactly where its k > 0


def test_optimize_json_and_text_on_moe(tmp_path):
    engine = tmp_path / "host-4ms.json"
    engine.write_text(json.dumps(HOST_4MS.to_dict()))
    args = ["optimize", "--target", "qwen3-30b-a3b", "--hardware", "h100-sxm", "--proposer", "eagle3", "--alpha",
            "0.5", "--engine", str(engine), "--batch", "1,32", "--max-batch", "64"]
    out = json.loads(CliRunner().invoke(main, args + ["--json"]).output)
    assert {"speculation_pays", "k_reasons"} <= set(out)
    assert all(tuple(r) == ROW_KEYS for r in out["configs"])  # one schema, distinct_experts included
    assert out["configs"][-1]["distinct_experts"] > 8.0
    text = CliRunner().invoke(main, args).output
    assert "speculation pays at batch" in text and "cost driver" in text and "expert-weights" in text


def test_k_zero_is_plain_decoding_in_the_ranking(plans):
    """An EAGLE head priced at γ = 0 still charges its draft-extend pass; the ranking's k = 0 is plain decoding."""
    r = plans["qwen3-30b-a3b"].ranking
    np.testing.assert_array_equal(r.tokens_per_s[0, 0, :, 0], r.plain_tokens_per_s)
