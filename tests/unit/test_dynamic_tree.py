"""Dynamic spine trees (EAGLE-2-style side leaves where the draft is unsure): parsing, shapes, greedy output
equal to the target's greedy output, and the limiting thresholds equal to the static chain / full spine."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_reference_tree import noisy_copy, prompts  # noqa: E402

from sdsl.errors import InvalidInputError  # noqa: E402
from sdsl.torch.decoder import DraftModel, PromptLookup, generate  # noqa: E402
from sdsl.torch.dynamic_tree import DynamicSpine, parse_tree  # noqa: E402
from sdsl.torch.head import DraftHead, HeadProposer  # noqa: E402
from sdsl.torch.tree import TokenTree  # noqa: E402

torch.set_num_threads(1)


def test_parse_and_shapes():
    tree = parse_tree("dspine4@0.6")
    assert tree == DynamicSpine(4, 0.6, "top1") and tree.describe() == "dspine4@0.6"
    assert parse_tree("vspine3@0.05") == DynamicSpine(3, 0.05, "value")
    assert parse_tree("spine2x1") == TokenTree.spine((2, 1)) and parse_tree("chain3") == TokenTree.chain(3)
    assert (tree.size, tree.max_depth, tree.is_chain, tree.drafts_chain) == (8, 4, False, True)
    assert tree.shape(()) == TokenTree.chain(4) and tree.shape(()).is_chain
    assert tree.shape((1, 3)) == TokenTree.spine((2, 1, 2, 1))
    assert tree.shape((1, 3)) is tree.shape((1, 3))  # built once, so its mask templates are reused
    for bad in ("dspine4", "dspine@0.5", "dspinex@0.5", "dspine4@1.5", "dspine0@0.5", "xspine4@0.5"):
        with pytest.raises(InvalidInputError):
            parse_tree(bad)


def test_rules_read_the_draft_distribution_only():
    q = torch.tensor([[0.5, 0.3, 0.2], [0.9, 0.05, 0.05]])
    cand = torch.tensor([[0, 1], [0, 1]])
    assert DynamicSpine(3, 0.6).wants_leaf(q[:1], cand[:1], torch.ones(1))        # top-1 0.5 < 0.6
    assert not DynamicSpine(3, 0.6).wants_leaf(q[1:], cand[1:], torch.ones(1))    # 0.9
    assert DynamicSpine(3, 0.6).wants_leaf(q, cand, torch.ones(2))                # any sequence of the batch
    value = DynamicSpine(3, 0.2, "value")  # leaf value = Π q(spine tokens above) · q(leaf)
    assert value.wants_leaf(q[:1], cand[:1], torch.tensor([0.7]))      # 0.7 · 0.3 = 0.21
    assert not value.wants_leaf(q[:1], cand[:1], torch.tensor([0.6]))  # 0.18


@pytest.mark.parametrize("batch", [1, 3])
def test_greedy_dynamic_decoding_equals_target_greedy(tiny_transformer, batch):
    target = tiny_transformer(10, layers=3)
    p = prompts(batch, seed=batch)
    ref = generate(target, p, 24).tokens
    for proposer in (DraftModel(noisy_copy(target, 1)), HeadProposer(DraftHead(target.shape), target)):
        # a random 256-byte model's top-1 probability is ~0.0055 (10th-90th percentile 0.0052-0.0058)
        for name in ("dspine3@0", "dspine3@0.0055", "dspine4@0.0057", "dspine3@1", "vspine4@0.0055", "vspine3@3e-5"):
            tree = parse_tree(name)
            assert generate(target, p, 24, proposer, tree=tree).tokens == ref, (name, proposer)
    mixed = parse_tree("dspine3@0.0056")  # the rule must have drafted both chains and trees
    generate(target, p[:1], 24, DraftModel(noisy_copy(target, 1)), tree=mixed)
    assert 0 < mixed.stats["tree_steps"] < mixed.stats["steps"]
    with pytest.raises(InvalidInputError):
        generate(target, p, 4, PromptLookup(), tree="dspine3@0.5")


def test_greedy_dynamic_decoding_equals_target_greedy_head(family_models, heldout_prompts):
    """The committed head on byte-d288 (the configuration the benchmarks time)."""
    from sdsl.torch.head import load_head

    target = family_models["byte-d288"]
    head = HeadProposer(load_head("byte-d288-head", target.shape)[0], target)
    for batch in (1, 2):
        p = heldout_prompts[:batch]
        ref = generate(target, p, 24).tokens
        for name in ("dspine6@0.5", "vspine6@0.05"):
            tree = parse_tree(name)
            assert generate(target, p, 24, head, tree=tree).tokens == ref, (name, batch)
            assert 0 < tree.stats["leaves"] < 6 * tree.stats["steps"], (name, batch, tree.stats)  # some depths only


@pytest.mark.parametrize("proposer_kind", ["draft", "head"])
def test_limiting_thresholds_are_the_static_chain_and_full_spine(tiny_transformer, proposer_kind):
    """Sampling with the same seed: threshold 0 drafts and decodes exactly the chain, threshold 1 the spine
    with a leaf at every depth (the spine draws are the chain's, the leaves the second draws)."""
    target = tiny_transformer(12, layers=2)
    torch.manual_seed(0)
    head = DraftHead(target.shape)
    make = (lambda: DraftModel(noisy_copy(target, 3))) if proposer_kind == "draft" else (lambda: HeadProposer(head, target))
    p = prompts(1, seed=5)
    for dynamic, static in (("dspine3@0", "chain3"), ("dspine3@1", "spine2x2x2")):
        a = generate(target, p, 30, make(), temperature=1.0, seed=7, tree=dynamic)
        b = generate(target, p, 30, make(), temperature=1.0, seed=7, tree=static)
        assert a.tokens == b.tokens and a.steps == b.steps and list(a.accept_counts) == list(b.accept_counts)
