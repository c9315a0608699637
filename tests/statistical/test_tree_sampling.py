"""Tree speculative sampling is lossless: chi-square of tree-decoded samples against the target's exact
distribution (draft model and draft head, several tree shapes), and a broken tree rule that the same test catches."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_decoder_sampling import V, chi2_pvalue, exact_three_token_dist  # noqa: E402

from sdsl.torch.decoder import DraftModel, broken_tree_verify, generate  # noqa: E402
from sdsl.torch.head import DraftHead, HeadProposer  # noqa: E402

import numpy as np  # noqa: E402

torch.set_num_threads(1)
N_SAMPLES = 12000
PROMPT = [[1, 3, 0, 2]]


def tree_three_token_counts(target, proposer, tree, temperature, top_p, seed=0, **kw):
    prompt = torch.tensor(PROMPT).expand(N_SAMPLES, -1)
    toks = np.asarray(generate(target, prompt, 3, proposer, temperature=temperature, top_p=top_p, seed=seed,
                               tree=tree, **kw).tokens)
    return np.bincount(toks[:, 0] * V * V + toks[:, 1] * V + toks[:, 2], minlength=V ** 3)


@pytest.fixture(scope="module")
def models(tiny_transformer):
    target = tiny_transformer(30, vocab=V, scale=8.0)
    torch.manual_seed(0)  # the head's init must not depend on the RNG state earlier tests leave behind
    head = DraftHead(target.shape)
    return target, tiny_transformer(31, vocab=V, layers=1, scale=8.0), head


@pytest.mark.parametrize("tree,temperature,top_p", [("2x2", 1.0, 1.0), ("3x1x1", 0.8, 0.9), ("2x1", 1.0, 0.8),
                                                              ("spine3x2x1", 1.0, 1.0)])
def test_tree_sampling_is_lossless(models, tree, temperature, top_p):
    target, draft, head = models
    probs = exact_three_token_dist(target, torch.tensor(PROMPT), temperature, top_p)
    counts = tree_three_token_counts(target, DraftModel(draft), tree, temperature, top_p)
    assert chi2_pvalue(counts, probs) > 1e-3
    counts = tree_three_token_counts(target, HeadProposer(head, target), tree, temperature, top_p, seed=1)
    assert chi2_pvalue(counts, probs) > 1e-3


def test_broken_tree_rule_fails_the_same_test(models):
    target, draft, _ = models
    probs = exact_three_token_dist(target, torch.tensor(PROMPT), 1.0, 1.0)
    counts = tree_three_token_counts(target, DraftModel(draft), "3x1", 1.0, 1.0, tree_verify_fn=broken_tree_verify)
    assert chi2_pvalue(counts, probs) < 1e-3


def test_dynamic_spine_sampling_is_lossless(models):
    """A dynamic spine (side leaf where the draft's top-1 probability < 0.4, about half the depths here):
    batch 1, one sequence per call, so that each sequence's shape follows its own draft; and the EAGLE-2
    value rule at batch N_SAMPLES (one shape per step, a leaf where any sequence asks)."""
    from sdsl.torch.dynamic_tree import parse_tree

    target, draft, head = models
    probs = exact_three_token_dist(target, torch.tensor(PROMPT), 1.0, 1.0)
    tree, proposer = parse_tree("dspine2@0.4"), DraftModel(draft)
    # one generate call per sequence (its own shape): half the samples keep ~48 per cell of the 125-cell test
    toks = np.array([generate(target, torch.tensor(PROMPT), 3, proposer, temperature=1.0, seed=i, tree=tree).tokens[0]
                     for i in range(N_SAMPLES // 2)])
    counts = np.bincount(toks[:, 0] * V * V + toks[:, 1] * V + toks[:, 2], minlength=V ** 3)
    assert 0.1 < tree.stats["leaves"] / (2 * tree.stats["steps"]) < 0.9, tree.stats  # both shapes were drafted
    assert chi2_pvalue(counts, probs) > 1e-3
    counts = tree_three_token_counts(target, HeadProposer(head, target), parse_tree("vspine2@0.1"), 1.0, 1.0, seed=2)
    assert chi2_pvalue(counts, probs) > 1e-3
