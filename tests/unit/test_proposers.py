"""Proposers on the target's roofline and the one speculative-step pricing (chains, trees)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdsl.acceptance import tau
from sdsl.acceptance import Acceptance
from sdsl.catalog.models import get_model
from sdsl.roofline.deployment import Deployment
from sdsl.roofline.latency import step_time
from sdsl.speculation.proposers import DraftModel, Eagle3Head, EagleHead, MedusaHeads, NGramLookup, make_proposer
from sdsl.plan.ranking import k_table, rank_proposers
from sdsl.speculation.step import TreeShape, parse_tree, price_speculation
from sdsl.speculation.throughput import predict
from sdsl.errors import InvalidInputError, UnknownNameError

TARGET = get_model("llama-3.1-8b")
DEP = Deployment("h100-sxm", context=1024, engine="ideal")  # the proposers' roofline terms, no engine host time


def test_draft_model_chain_is_predict():
    d = get_model("llama-3.2-1b")
    old = predict(TARGET, d, DEP, gamma=np.arange(0, 6), alpha=0.7, batch=4)
    new = price_speculation(TARGET, DraftModel(d), DEP, tau_value=tau(0.7, np.arange(0, 6)), gamma=np.arange(0, 6), batch=4)
    np.testing.assert_allclose(old.tokens_per_s, new["tokens_per_s"], rtol=1e-12)
    np.testing.assert_allclose(new["t_propose_s"], np.arange(0, 6) * new["t_draft_s"], rtol=1e-12)


def test_eagle_head_is_one_layer_plus_fc_and_lm_head():
    head = EagleHead()
    one_layer = step_time(head.shapes(TARGET, 1), DEP, batch=1, q=1, context=1024).total_s
    full = step_time(TARGET, DEP, batch=1, q=1, context=1024).total_s
    t = head.step_time(TARGET, DEP, batch=1, context=1024)
    assert one_layer < t < 0.15 * full  # one of 32 layers + LM head + the 2d->d FC
    assert head.shapes(TARGET, 1).lm_out == TARGET.vocab_size


def test_eagle3_reduced_vocab_is_cheaper_and_reads_wider_qkv():
    e1, e3 = EagleHead(), Eagle3Head()
    assert e3.shapes(TARGET, 1).lm_out == 32000
    assert e3.shapes(TARGET, 1).gemm_in["attn_pre_proj"] == 2 * TARGET.d_model
    assert e3.step_time(TARGET, DEP, batch=1, context=1024) < e1.step_time(TARGET, DEP, batch=1, context=1024)
    assert Eagle3Head(vocab=TARGET.vocab_size).step_time(TARGET, DEP, batch=1, context=1024) > \
        e3.step_time(TARGET, DEP, batch=1, context=1024)


def test_medusa_drafts_in_one_pass_and_ngram_costs_its_cpu_time():
    m = MedusaHeads(heads=4)
    one = m.draft_time(TARGET, DEP, batch=1, steps=1, context=1024)
    assert m.draft_time(TARGET, DEP, batch=1, steps=4, context=1024) == pytest.approx(float(one))
    assert float(NGramLookup(cpu_s=2e-4).draft_time(TARGET, DEP, batch=8, steps=3, context=1024)) == 2e-4
    with pytest.raises(InvalidInputError):
        price_speculation(TARGET, m, DEP, tau_value=2.0, gamma=5)


def test_tree_verify_prices_the_mask_and_chain_tree_equals_chain():
    chain = price_speculation(TARGET, "eagle", DEP, tau_value=3.0, gamma=4)
    as_tree = price_speculation(TARGET, "eagle", DEP, tau_value=3.0, tree=TreeShape(4, 1, 5))
    np.testing.assert_allclose(chain["t_step_s"], as_tree["t_step_s"], rtol=1e-12)
    tree = price_speculation(TARGET, "eagle", DEP, tau_value=3.0, tree="8,8,64")
    causal = step_time(TARGET, DEP, batch=1, q=64, context=1024).total_s
    assert tree["t_verify_s"] > causal and tree["verify_tokens"] == 64


@pytest.mark.parametrize("text", ["8,8", "0,1,2", "2,1,9", "3,2,40", "a,b,c"])
def test_impossible_trees_are_one_line_errors(text):
    with pytest.raises(InvalidInputError) as exc:
        parse_tree(text)
    assert "\n" not in str(exc.value)


def test_unknown_proposer():
    with pytest.raises(UnknownNameError):
        make_proposer("hydra")
    with pytest.raises(InvalidInputError):
        make_proposer("draft:")


@settings(max_examples=40, deadline=None)
@given(st.floats(0.05, 0.95), st.integers(1, 8), st.sampled_from([1, 8, 64]))
def test_tpot_is_step_over_tau_and_speedup_is_ratio(alpha, k, batch):
    out = price_speculation(TARGET, "eagle3", DEP, tau_value=tau(alpha, k), gamma=k, batch=batch)
    assert float(out["tpot_s"]) == pytest.approx(float(out["t_step_s"] / out["tau"]))
    assert float(out["speedup"]) == pytest.approx(float(out["tokens_per_s"] / out["plain_tokens_per_s"]))


def test_ranking_vectorised_and_break_even():
    r = rank_proposers(TARGET, ["eagle", "medusa", "draft:llama-3.2-1b"], DEP, acceptance=np.array([0.3, 0.8]),
                       gammas=range(0, 9), batches=[1, 16, 256])
    assert r.tokens_per_s.shape == (3, 9, 3, 2)
    assert np.all(np.isneginf(r.tokens_per_s[1, 6:]))  # Medusa's 5 heads: no k > 5
    best = r.best()
    assert best["gamma"][0, 1] > 0 and best["speedup"][0, 1] > 1
    assert best["speedup"][0, 1] > best["speedup"][0, 0]  # higher acceptance pays more
    table = k_table(r, 0, 1)
    assert table[0]["batch_min"] == 1 and table[-1]["batch_max"] == 256
    stop = r.break_even_batch()
    assert np.isnan(stop[1]) or stop[1] > 1


def test_ranking_takes_acceptance_vectors():
    from sdsl.acceptance import Acceptance

    acc = Acceptance.from_accepted_length(3.1, 4)
    r = rank_proposers(TARGET, ["eagle3"], DEP, acceptance=[acc], gammas=range(0, 7), batches=[1])
    np.testing.assert_allclose(r.taus[0][:, 0, 0], acc.tau(np.arange(7)))
    direct = price_speculation(TARGET, "eagle3", DEP, tau_value=float(acc.tau(4)), gamma=4)
    assert r.tokens_per_s[0, 4, 0, 0] == pytest.approx(float(direct["tokens_per_s"]))


def test_rank_trees_matches_pointwise_pricing():
    from sdsl.acceptance import Acceptance
    from sdsl.plan.tree_ranking import rank_trees
    from sdsl.acceptance.trees import TokenTree, tree_matrices

    acc = Acceptance.from_accepted_length(3.1, 4)
    r = rank_trees(TARGET, ["eagle3", "medusa"], DEP, acceptance=acc, batches=[1, 32], steps=range(1, 7))
    j = int(np.flatnonzero((r.steps == 6) & (r.topk == 4) & (r.tokens == 16))[0])
    P, S = tree_matrices(acc.conditional_at(6), 8)  # SGLang keeps the nodes the draft scores highest
    tau_tree = float(TokenTree.sglang(6, 4, 16, P[:, :4], S[:, :4]).tau(P[:, :4]))
    assert r.tau[0, j] == pytest.approx(tau_tree, rel=1e-9)
    direct = price_speculation(TARGET, "eagle3", DEP, tau_value=tau_tree, tree="6,4,16", batch=32)
    assert r.tokens_per_s[0, j, 1] == pytest.approx(float(direct["tokens_per_s"]), rel=1e-9)
    assert np.isneginf(r.tokens_per_s[1, r.steps > 5]).all()  # Medusa: 5 heads, no 6-deep tree
    best = r.records(top=1, batches=[1])[0]
    assert best["tokens_per_s"] == pytest.approx(float(np.max(r.tokens_per_s[:, :, 0])))


def test_engine_host_per_speculative_step_reaches_the_rankings():
    """rank_proposers/rank_trees price with the deployment's engine: its host time per speculative step is charged to
    every speculative step, and never to k = 0, which the ranking prices as plain decoding whatever the proposer (an
    EAGLE head's step at k = 0 would still run its draft extend: the drafter tax of a speculative worker with
    nothing drafted, which a user who turns speculation off does not pay)."""
    from sdsl.engine.profiles import IDEAL
    from sdsl.plan.tree_ranking import rank_trees

    host = 1.1e-3
    slow_dep = DEP.replace(engine=IDEAL.replace(name="host", spec_step_s=host))
    args = dict(acceptance=np.array([0.7]), gammas=range(0, 6), batches=[1, 64])
    base = rank_proposers(TARGET, ["eagle", "draft:llama-3.2-1b"], DEP, **args)
    slow = rank_proposers(TARGET, ["eagle", "draft:llama-3.2-1b"], slow_dep, **args)
    for p in (0, 1):  # k = 0 is plain decoding for both proposers
        np.testing.assert_array_equal(slow.tokens_per_s[p, 0], base.tokens_per_s[p, 0])
        np.testing.assert_array_equal(base.tokens_per_s[p, 0, :, 0], base.plain_tokens_per_s)
    b = np.array([1.0, 64.0])
    for p, ks in ((0, slice(1, None)), (1, slice(1, None))):
        tau_k = base.taus[p][ks, 0, 0]
        step = b[None, :] * tau_k[:, None] / base.tokens_per_s[p, ks, :, 0]
        np.testing.assert_allclose(slow.tokens_per_s[p, ks, :, 0], b[None, :] * tau_k[:, None] / (step + host),
                                   rtol=1e-12)
    acc = Acceptance.from_accepted_length(3.1, 4)
    t0 = rank_trees(TARGET, ["eagle3"], DEP, acceptance=acc, batches=[1], steps=range(1, 4))
    t1 = rank_trees(TARGET, ["eagle3"], slow_dep, acceptance=acc, batches=[1], steps=range(1, 4))
    np.testing.assert_allclose(1 / t1.tokens_per_s[0, :, 0] - 1 / t0.tokens_per_s[0, :, 0], host / t0.tau[0], rtol=1e-9)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 64), st.integers(1, 8), st.floats(0.0, 2e-3), st.sampled_from([1, 16]))
def test_tree_mask_and_overhead_only_slow_a_step(tokens, steps, overhead, batch):
    topk = 8
    tokens = min(tokens, 1 + topk + (steps - 1) * topk * topk)
    tree = price_speculation(TARGET, "eagle", DEP, tau_value=1.0, tree=TreeShape(steps, topk, tokens), batch=batch,
                             overhead_s=overhead)
    causal = step_time(TARGET, DEP, batch=batch, q=tokens, context=1024).total_s
    assert float(tree["t_verify_s"]) >= float(causal)  # the mask's full block costs at least the causal half
    base = price_speculation(TARGET, "eagle", DEP, tau_value=1.0, tree=TreeShape(steps, topk, tokens), batch=batch)
    assert float(tree["tokens_per_s"]) <= float(base["tokens_per_s"])
    assert float(tree["t_step_s"]) == pytest.approx(float(base["t_step_s"]) + overhead)


def test_rankings_follow_the_result_protocol(tmp_path):
    import json

    from sdsl.acceptance import Acceptance
    from sdsl.plan.tree_ranking import rank_trees

    r = rank_proposers(TARGET, ["eagle", "ngram"], DEP, acceptance=np.array([0.6]), gammas=range(0, 5), batches=[1, 64])
    d = json.loads(r.to_json(tmp_path / "r.json"))
    assert d == json.loads((tmp_path / "r.json").read_text()) and d["configs"][0]["batch"] == 1
    assert "tokens/s" in r.report() and len(r.report().splitlines()) == 1 + 2 * 2 + 1  # each proposer at its table k; bands
    t = rank_trees(TARGET, ["eagle3"], DEP, acceptance=Acceptance.from_iid(0.7), batches=[1, 8], steps=range(1, 4))
    assert json.loads(t.to_json())["configs"][0]["tree"] and "tokens/s" in t.report()
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    assert r.plot() is not None and t.plot() is not None


def test_eagle_worker_is_draft_extend_plus_selection_plus_verify_bookkeeping():
    """EAGLE's per-step engine work: one head pass over the τ accepted tokens, softmax + top-k per depth over the
    draft vocabulary, and the tree build/verify kernels over the n − 1 extra logit rows (docs/model.md §3.5)."""
    from sdsl.speculation.proposers import SELECT_KERNELS, VERIFY_KERNELS, _read_time

    head = Eagle3Head()
    out = price_speculation(TARGET, head, DEP, tau_value=5.39, tree="8,8,64", batch=1)
    extend = head.step_time(TARGET, DEP, batch=1, q=5.39, context=DEP.context)
    select = 8 * SELECT_KERNELS * _read_time(8 * 32000 * 4.0, DEP)
    verify = _read_time(63 * TARGET.vocab_size * 4.0, DEP) + (VERIFY_KERNELS - 1) * DEP.params.t_kernel
    np.testing.assert_allclose(out["t_worker_s"], extend + select + verify, rtol=1e-12)
    np.testing.assert_allclose(out["t_step_s"], out["t_propose_s"] + out["t_verify_s"] + out["t_worker_s"], rtol=1e-12)
    assert float(extend) > float(out["t_draft_s"])  # τ tokens cost more than one
    # the draft-extend forward is a separate pass: it pays the per-pass overhead (1 verify + 7 depths + 1 extend;
    # depth 1 comes out of the extend pass, SGLang draft_forward)
    with_pass = price_speculation(TARGET, head, DEP, tau_value=5.39, tree="8,8,64", batch=1, pass_overhead_s=1e-4)
    np.testing.assert_allclose(with_pass["t_overhead_s"], 9e-4, rtol=1e-12)


def test_eagle_extend_pass_drafts_depth_one_so_drafting_runs_steps_minus_one_passes():
    """SGLang ``EAGLEWorker.draft_forward`` ("we get 1 token from draft prefill and (#spec steps - 1) tokens
    here"), vLLM ``EagleProposer.propose`` (the pass over the verified tokens, then k − 1) and the reference
    decoder (benchmarks/results/head_step_accounting.json: k head passes and k LM heads per chain step of k,
    the first over k + 1 slots per sequence) all draft depth 1 from the draft-extend pass."""
    head = EagleHead()
    for steps, topk in ((1, 1), (4, 1), (8, 8)):
        later = head.step_time(TARGET, DEP, batch=2, q=topk, context=1024)
        np.testing.assert_allclose(head.draft_time(TARGET, DEP, batch=2, steps=steps, topk=topk, context=1024),
                                   (steps - 1) * later, rtol=1e-12)
    no_extend = EagleHead(draft_extend=False)  # the ablation: every depth is its own pass, the first at q = 1
    first = no_extend.step_time(TARGET, DEP, batch=2, q=1, context=1024)
    np.testing.assert_allclose(no_extend.draft_time(TARGET, DEP, batch=2, steps=4, context=1024), 4 * first, rtol=1e-12)
    np.testing.assert_array_equal(head.passes(np.array([1, 4])), [0, 3])
    np.testing.assert_array_equal(no_extend.passes(np.array([1, 4])), [1, 4])
    # chain of 4 at k + 1 = 5 verified slots: the padded extend ("verified") costs more than τ = 2.5 tokens
    kw = dict(batch=2, steps=4, topk=1, tau=2.5, verify_tokens=5, context=1024)
    padded = EagleHead(extend_tokens="verified")
    assert float(padded.worker_time(TARGET, DEP, **kw)) > float(head.worker_time(TARGET, DEP, **kw))
    np.testing.assert_allclose(padded.extend_rows(2.5, 4), 5.0)
    np.testing.assert_allclose(head.extend_rows(2.5, 4), 2.5)
    with pytest.raises(InvalidInputError):
        EagleHead(extend_tokens="some")


def test_worker_term_is_eagle_only_and_grows_with_tau():
    d = DraftModel(get_model("llama-3.2-1b"))
    out = price_speculation(TARGET, d, DEP, tau_value=[1.0, 3.0], gamma=4, batch=2)
    np.testing.assert_array_equal(out["t_worker_s"], 0.0)
    for kind in ("medusa", "ngram"):
        assert float(price_speculation(TARGET, kind, DEP, tau_value=2.0, gamma=3)["t_worker_s"]) == 0.0
    eagle = price_speculation(TARGET, "eagle", DEP, tau_value=np.array([1.0, 2.0, 5.0]), gamma=4, batch=8)
    assert np.all(np.diff(eagle["t_worker_s"]) > 0)
