"""Default acceptance from the published catalog (sdsl.acceptance.rules), the decay ratio per proposer
group and the draft-score tree model: the shipped constants are recomputed from the catalog, and the rules are
checked on cases a wrong rule fails."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sdsl
from sdsl.speculation.proposers import PROPOSER_KINDS
from sdsl.acceptance import GROUP_DECAY, Acceptance, decay_group
from sdsl.speculation.resolve import resolve_acceptance, sdsl_plane_rule
from sdsl.acceptance.rules import (KIND_METHODS, TIERS, USER_WORKLOADS, estimate, estimate_for_proposer,
                                                predict_row, row_fit, row_is_evidence, row_tau, target_family,
                                                target_key)
from sdsl.acceptance.catalog import catalog_rows, chain_tree_pairs
from sdsl.acceptance.trees import (DEFAULT_DRAFT_TEMPERATURE, TokenTree, draft_scores, sglang_tree_tau, sglang_tree_tau_stack,
                             tree_matrices)
from sdsl.errors import UnknownNameError

TARGET = sdsl.get_model("llama-3.1-8b")


# --- shipped constants, recomputed --------------------------------------------------------------------------------

def test_group_decay_ratios_are_the_catalog_fit():
    from sdsl.fit.acceptance_fit import fit_decay_groups

    fit = fit_decay_groups()
    assert fit == {"eagle1": pytest.approx(GROUP_DECAY["eagle1"], abs=1e-9),
                   "mtp_chained": pytest.approx(GROUP_DECAY["mtp_chained"], abs=1e-9), "other": 1.0}
    assert GROUP_DECAY["eagle1"] == pytest.approx(0.825, abs=1e-9)
    assert GROUP_DECAY["mtp_chained"] == pytest.approx(0.71, abs=1e-9)
    # the rejected alternative: fitting the other proposers' ratio too (it rises above 1)
    assert fit_decay_groups(fit_other=True)["other"] == pytest.approx(1.015, abs=1e-9)
    assert decay_group("eagle2") == "eagle1" and decay_group("eagle3") == "other" and decay_group("ngram") == "other"
    # a single MTP module reused at every depth decays; a drafter with one module per position is i.i.d.
    assert decay_group("mtp") == "mtp_chained" and decay_group("mtp", "Inkling") == "other"
    # each of the chained module's two sources alone: its ratio stays well below 1 (0.615 and 0.735)
    held = {src: fit_decay_groups(exclude_sources=(src,))["mtp_chained"]
            for src in ("NVIDIA/TensorRT-LLM", "vllm-project/vllm#41044")}
    assert held == {"NVIDIA/TensorRT-LLM": pytest.approx(0.615), "vllm-project/vllm#41044": pytest.approx(0.735)}


def test_draft_temperature_is_the_pair_fit():
    from sdsl.fit.acceptance_fit import fit_draft_temperature

    fit = fit_draft_temperature()
    assert fit["n_pairs"] == 176 and fit["temperature"] == pytest.approx(DEFAULT_DRAFT_TEMPERATURE, abs=1e-9)
    assert fit["median_abs_error"] == pytest.approx(0.0699, abs=5e-4)
    assert not fit_draft_temperature(exclude_sources=("sgl-project/SpecForge",))  # the only source with pairs


# --- the tree model -----------------------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.floats(0.05, 0.98), st.floats(0.8, 1.05),
       st.sampled_from(["draft", "acceptance"]), st.data())
def test_vectorised_tree_tau_equals_the_token_tree(steps, topk, a, r, selection, data):
    pool = topk + (steps - 1) * topk * topk
    n = data.draw(st.integers(2, pool + 1))
    cond = Acceptance((a,), r).conditional_at(steps)
    P, S = tree_matrices(cond, topk, selection=selection)
    want = TokenTree.sglang(steps, topk, n, P, S).tau(P)
    assert sglang_tree_tau_stack(cond[None, :], steps, topk, n, selection=selection)[0] == pytest.approx(want, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 7), st.integers(2, 5), st.floats(0.3, 0.95))
def test_a_tree_chosen_by_acceptance_never_loses_to_the_chain(steps, topk, p):
    """Choosing by acceptance keeps the chain inside the tree at an equal budget: the tree can only gain."""
    acc = Acceptance.from_iid(p)
    tree = sglang_tree_tau(acc, steps, topk, steps + 1, selection="acceptance")
    assert tree >= float(acc.tau(steps)) - 1e-12


def test_a_dynamic_tree_can_accept_less_than_the_chain_at_an_equal_budget():
    """What 136 of 176 SpecForge pairs show and the acceptance-chosen model cannot produce: siblings the draft
    scores highly displace the chain's deep nodes."""
    acc = Acceptance.from_accepted_length(3.55, 5, decay=1.0)  # SpecForge Llama-3.1-8B MT-Bench chain, k = 5
    chain = float(acc.tau(5))
    assert sglang_tree_tau(acc, 5, 3, 6) < chain < sglang_tree_tau(acc, 8, 8, 64)
    assert sglang_tree_tau(acc, 5, 3, 6, selection="acceptance") == pytest.approx(chain)
    # a sharp draft (T -> 0) keeps the chain; a flat one (large T) spends the budget on siblings
    assert sglang_tree_tau(acc, 5, 3, 6, draft_temperature=0.05) == pytest.approx(chain)
    assert sglang_tree_tau(acc, 5, 3, 6, draft_temperature=50.0) < sglang_tree_tau(acc, 5, 3, 6)


def test_draft_scores_are_a_distribution_over_ranks():
    q = draft_scores([0.8, 0.6], 200)
    np.testing.assert_allclose(q.sum(axis=1), 1.0, atol=1e-9)
    assert np.all(np.diff(q, axis=1) <= 0)


# --- matching targets ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,key", [("Llama-3.1-8B-Instruct", "llama-3.1-8b"), ("meta-llama/Llama-3.1-8B", "llama-3.1-8b"),
                                      ("Meta-Llama-3-70B-Instruct", "llama-3-70b"),
                                      ("Qwen3-235B-A22B-Instruct-2507", "qwen3-235b-a22b"),
                                      ("Qwen3-Next-80B-A3B-Instruct-FP8", "qwen3-next-80b-a3b")])
def test_target_key(name, key):
    assert target_key(name) == key


def test_every_catalogued_target_has_a_family():
    names = {r.target for r in catalog_rows()} - {"unstated"}
    assert all(target_family(n) for n in names)
    assert target_family("Vicuna-7B-v1.3") == target_family("llama-3.1-8b") == "llama"


# --- the rules ----------------------------------------------------------------------------------------------------

def test_eagle3_on_llama_chat_is_the_same_targets_rows():
    est = estimate_for_proposer(sdsl.make_proposer("eagle3"), TARGET, "chat")
    assert est.tier == "same-target" and est.sources == ("sgl-project/SpecForge", "vllm-project/vllm#26191")
    assert {f.row.target for f in est.fits} == {"Llama-3.1-8B-Instruct"} and {f.row.workload for f in est.fits} == {"chat"}
    assert all(f.row.structure == "chain" for f in est.fits)  # chains before trees
    assert est.r == 1.0 and float(est.tau(4)) == pytest.approx(3.124, abs=2e-3)
    acc = resolve_acceptance("eagle3", TARGET)
    assert acc.source == "catalog[same-target]:eagle3/chat" and acc.evidence["rows"] == list(est.row_ids)
    assert set(acc.evidence["spread"]["by_task"]) == {f.row.task for f in est.fits}


def test_lookup_does_not_beat_heads_on_chat_unless_the_catalog_says_so():
    """n-gram lookup on chat comes from chat rows (TensorRT-LLM's Magpie), not from its translation rows."""
    ngram = estimate_for_proposer(sdsl.make_proposer("ngram"), TARGET, "chat")
    assert ngram.tier == "same-family" and {f.row.workload for f in ngram.fits} == {"chat"}
    assert float(ngram.tau(5)) < 1.6 < float(estimate_for_proposer(sdsl.make_proposer("eagle3"), TARGET, "chat").tau(5))
    translation = estimate_for_proposer(sdsl.make_proposer("ngram"), TARGET, "translation")
    assert float(translation.tau(10)) > 3.0  # the same rules say lookup is strong on translation


def test_workload_changes_the_default():
    code = estimate_for_proposer(sdsl.make_proposer("eagle3"), TARGET, "code")
    chat = estimate_for_proposer(sdsl.make_proposer("eagle3"), TARGET, "chat")
    assert code.tier == "same-target" and {f.row.workload for f in code.fits} == {"code"}
    assert float(code.tau(5)) > float(chat.tau(5))  # SpecForge: HumanEval/LiveCodeBench above MT-Bench
    with pytest.raises(UnknownNameError):
        estimate_for_proposer(sdsl.make_proposer("eagle3"), TARGET, "poetry")


def test_transfer_tiers():
    qwen = sdsl.get_model("qwen2.5-14b")  # no catalogued EAGLE-3 row for it: other Qwen targets on chat
    est = estimate_for_proposer(sdsl.make_proposer("eagle3"), qwen, "chat")
    assert est.tier == "same-family" and {target_family(f.row.target) for f in est.fits} == {"qwen"}
    medusa = estimate_for_proposer(sdsl.make_proposer("medusa"), TARGET, "chat")  # only Spec-Bench's mixed rows
    assert medusa.tier == "any" and medusa.sources == ("hemingkx/Spec-Bench",)


def test_draft_models_keep_sdsl_plane_unless_the_pair_is_catalogued():
    acc = resolve_acceptance("draft:llama-3.2-1b", TARGET)
    assert acc.source == "sdsl-plane" and acc.positions[0] == sdsl_plane_rule(sdsl.make_proposer("draft:llama-3.2-1b"),
                                                                             TARGET).positions[0]


def test_rule_order_and_given_acceptance_wins():
    given = Acceptance.from_accepted_length(2.5, 4)
    assert resolve_acceptance("eagle3", TARGET, {"eagle3": given}) is given
    assert resolve_acceptance("eagle3", TARGET, workload="math").evidence["workload"] == "math"


def test_tree_rows_invert_to_their_own_accepted_length():
    """The a of a tree row is where the tree model's τ(a) first reaches the measured τ (it can jump there, where
    the draft's scores switch nodes): τ just below a is under it, τ just above is not."""
    rows = [r for r in catalog_rows() if r.structure in ("tree", "dynamic_tree") and row_is_evidence(r) is None][:60]
    assert len(rows) == 60
    for r in rows:
        fit = row_fit(r)
        if 0.0 < fit.a < 1.0:
            assert row_tau(r, fit.a - 2e-3, fit.r) <= r.accepted_length <= row_tau(r, fit.a + 2e-3, fit.r) + 1e-9


def test_no_row_predicts_itself():
    row = next(r for r in catalog_rows() if r.row_id == "vllm-issue26191-eagle3-k7-mtbench")
    p = predict_row(row)
    assert p["tier"] == "same-target" and "vllm-project/vllm#26191" not in p["evidence_sources"]
    est = estimate(("eagle3",), row.target, row.workload, exclude_sources=(row.source_id,))
    assert all(f.row.source_id != row.source_id for f in est.fits)


def test_catalog_names_are_consistent():
    assert set(KIND_METHODS) == set(PROPOSER_KINDS) and TIERS[0] == "same-target"
    assert set(USER_WORKLOADS) <= {r.workload for r in catalog_rows()}
