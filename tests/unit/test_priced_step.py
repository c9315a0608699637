"""The priced step's pieces: acceptance resolution (given, then the rules), τ from an acceptance for chains and
trees, the host-time terms, stacked drafts, and the result object. Relative checks only."""

from __future__ import annotations

import json

import numpy as np
import pytest

import sdsl
from sdsl.speculation.resolve import sdsl_plane_rule
from sdsl.errors import InvalidInputError, UnknownNameError

TARGET = sdsl.get_model("llama-3.1-8b")
DEP = sdsl.Deployment("h100-sxm")


def test_resolve_acceptance_given_then_rules():
    acc = sdsl.Acceptance.from_accepted_length(3.1, 4)
    assert sdsl.resolve_acceptance("eagle3", TARGET, acc) is acc
    assert sdsl.resolve_acceptance("eagle3", TARGET, 0.6).is_iid
    by_name = sdsl.resolve_acceptance("eagle3", TARGET, {"eagle3": 0.5, "eagle": 0.9})
    by_kind = sdsl.resolve_acceptance("draft:llama-3.2-1b", TARGET, {"draft": 0.4})
    assert by_name.positions == (0.5,) and by_kind.positions == (0.4,)
    plane = sdsl.resolve_acceptance("draft:llama-3.2-1b", TARGET)
    want = sdsl.acceptance_from_sizes(sdsl.get_model("llama-3.2-1b").total_params, TARGET.total_params)
    assert plane.source == "sdsl-plane" and plane.positions[0] == pytest.approx(float(want), rel=1e-15)
    assert sdsl.resolve_acceptance("eagle3", TARGET).source.startswith("catalog[same-target]:eagle3")
    with pytest.raises(InvalidInputError, match="needs a measured acceptance"):
        sdsl.resolve_acceptance("eagle3", TARGET, rules=(sdsl_plane_rule,))


def test_a_rule_in_front_of_the_plane_extends_resolution():
    """How a catalog of published acceptance plugs in: one more rule, asked before SDSL's plane."""
    def catalog(proposer, target, *, workload="chat", **_):
        if proposer.kind == "eagle3" and workload == "chat":
            return sdsl.Acceptance.from_accepted_length(3.4, 4, source="catalog: chat")
        return None

    rules = (catalog, sdsl_plane_rule)
    assert sdsl.resolve_acceptance("eagle3", TARGET, rules=rules, workload="chat").source == "catalog: chat"
    assert sdsl.resolve_acceptance("draft:llama-3.2-1b", TARGET, rules=rules, workload="chat").source == "sdsl-plane"
    with pytest.raises(InvalidInputError):
        sdsl.resolve_acceptance("eagle3", TARGET, rules=rules, workload="code")


def test_price_step_takes_tau_or_an_acceptance():
    acc = sdsl.Acceptance.from_accepted_length(3.1, 4)
    chain = sdsl.price_step(TARGET, "eagle3", DEP, acceptance=acc, gamma=4)
    assert float(chain.tau) == pytest.approx(3.1) and chain.acceptance is acc and chain.acceptance_source == acc.source
    tree = sdsl.price_step(TARGET, "eagle3", DEP, acceptance=acc, tree="8,8,64")
    assert float(tree.tau) == pytest.approx(sdsl.sglang_tree_tau(acc, 8, 8, 64), rel=1e-15)
    assert tree.acceptance_source.endswith("(tree model)") and tree.tree == [8, 8, 64]
    same = sdsl.price_step(TARGET, "eagle3", DEP, tau=float(tree.tau), tree="8,8,64")
    assert float(same.tokens_per_s) == pytest.approx(float(tree.tokens_per_s), rel=1e-15)
    plane = sdsl.price_step(TARGET, "draft:llama-3.2-1b", DEP, gamma=3)  # no acceptance: SDSL's plane
    alpha = sdsl.resolve_acceptance("draft:llama-3.2-1b", TARGET).positions[0]
    assert float(plane.tau) == pytest.approx(float(sdsl.tau(alpha, 3)), rel=1e-15)
    with pytest.raises(InvalidInputError):
        sdsl.price_step(TARGET, "eagle3", DEP, tau=2.0, acceptance=acc, gamma=4)
    head = sdsl.price_step(TARGET, "eagle3", DEP, gamma=4)  # no acceptance: the published catalog's for chat
    assert head.acceptance_source.startswith("catalog[same-target]:eagle3/chat")
    assert float(head.tau) == pytest.approx(float(sdsl.resolve_acceptance("eagle3", TARGET).tau(4)), rel=1e-15)
    with pytest.raises(UnknownNameError):
        sdsl.price_step(TARGET, "eagle3", DEP, gamma=4, acceptance_options={"workload": "poetry"})


def test_host_terms():
    base = sdsl.price_step(TARGET, "eagle", DEP, acceptance=0.7, gamma=4, batch=8)
    plain = sdsl.price_step(TARGET, "eagle", DEP, acceptance=0.7, gamma=4, batch=8, plain_overhead_s=1e-3)
    assert float(plain.t_step_s) == float(base.t_step_s) and float(plain.t_plain_s - base.t_plain_s) == pytest.approx(1e-3)
    per_pass = sdsl.price_step(TARGET, "eagle", DEP, acceptance=0.7, gamma=4, batch=8, pass_overhead_s=1e-4)
    forwards = 1 + 3 + 1  # verify, steps - 1 drafting passes, the draft-extend pass
    assert float(per_pass.t_host_s - base.t_host_s) == pytest.approx(forwards * 1e-4)  # on top of the engine's
    assert float(per_pass.t_plain_s - base.t_plain_s) == pytest.approx(1e-4)
    step = sdsl.price_step(TARGET, "eagle", DEP, acceptance=0.7, gamma=4, batch=8, overhead_s=2e-4)
    assert float(step.t_host_s - base.t_host_s) == pytest.approx(2e-4) and float(step.t_plain_s) == float(base.t_plain_s)
    with pytest.raises(InvalidInputError):
        sdsl.price_step(TARGET, "eagle", DEP, acceptance=0.7, gamma=4, plain_overhead_s=-1.0)


def test_stacked_drafts_price_like_each_draft_alone():
    drafts = [sdsl.get_model(n) for n in ("llama-3.2-1b", "llama-3.2-3b")]
    g, b = np.arange(0, 6), np.array([1.0, 16.0])
    taus = np.stack([sdsl.tau(a, g) for a in (0.6, 0.7)])[:, :, None, None]
    stack = sdsl.plan.search.price_draft_stack(TARGET, drafts, DEP, tau=taus, gamma=g[None, :, None, None],
                                               batch=b[None, None, :, None])
    for i, (d, a) in enumerate(zip(drafts, (0.6, 0.7))):
        alone = sdsl.price_step(TARGET, sdsl.DraftModel(d), DEP, acceptance=a, gamma=g[:, None], batch=b[None, :])
        part = stack.take(i)
        for name in ("tokens_per_s", "t_step_s", "t_draft_s", "t_verify_s", "tau"):
            np.testing.assert_allclose(np.asarray(getattr(part, name))[..., 0], np.broadcast_to(getattr(alone, name), (6, 2)),
                                       rtol=1e-12, err_msg=name)


def test_draft_model_decoder_terms():
    draft = sdsl.get_model("llama-3.2-1b")
    base = sdsl.price_step(TARGET, sdsl.DraftModel(draft), DEP, acceptance=0.7, gamma=np.arange(0, 4), batch=4)
    resync = sdsl.price_step(TARGET, sdsl.DraftModel(draft, first_pass_tokens=2), DEP, acceptance=0.7,
                             gamma=np.arange(0, 4), batch=4)
    extra = sdsl.step_time_s(draft, DEP, batch=4, q=2) - sdsl.step_time_s(draft, DEP, batch=4, q=1)
    np.testing.assert_allclose(resync.t_propose_s - base.t_propose_s, [0.0, extra, extra, extra], rtol=1e-9, atol=1e-15)
    cold = sdsl.price_step(TARGET, sdsl.DraftModel(draft, switch_ratio=3.0), DEP, acceptance=0.7, gamma=2, batch=4)
    from sdsl.roofline.model_switch import switch_time_s

    warm = sdsl.price_step(TARGET, sdsl.DraftModel(draft), DEP, acceptance=0.7, gamma=2, batch=4)
    assert float(cold.t_step_s - warm.t_step_s) == pytest.approx(float(switch_time_s(draft, DEP, batch=4, ratio=3.0)))
    for bad in (dict(first_pass_tokens=0), dict(switch_ratio=0.5)):
        with pytest.raises(InvalidInputError):
            sdsl.DraftModel(draft, **bad)


def test_priced_step_is_a_result():
    step = sdsl.price_step(TARGET, "eagle3", DEP, acceptance=0.7, gamma=np.arange(1, 5), batch=[[1], [8]])
    d = json.loads(step.to_json())
    assert np.shape(d["tokens_per_s"]) == (2, 4) and d["deployment"]["hardware"] == DEP.hardware.name
    assert d["t_overhead_s"] == d["t_host_s"] and set(d["verify_step"]) >= {"total_s", "memory_s", "bound"}
    assert step["tokens_per_s"] is step.tokens_per_s and step["t_overhead_s"] is step.t_host_s
    assert "tokens/s" in step.report() and len(step.report().splitlines()) == 1 + 8
    assert sdsl.SDPrediction is sdsl.PricedStep
    with pytest.raises(Exception):
        step.tau = 1.0  # frozen
