"""Token trees: mask, KV-cache path commit, greedy tree decoding equals the target's greedy output."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sdsl.errors import InvalidInputError  # noqa: E402
from sdsl.torch.decoder import DraftModel, PromptLookup, generate  # noqa: E402
from sdsl.torch.head import DraftHead, HeadProposer  # noqa: E402
from sdsl.torch.tree import TreeLayout, commit_path, tree_mask  # noqa: E402

torch.set_num_threads(1)
TREES = ["chain3", "2x2x1", "3x1x1", "1x3", "4", "2x1x2x1", "spine3x2x1", "spine1x3x1"]


def noisy_copy(model, seed: int, scale: float = 0.5):
    """A draft that agrees with ``model`` often but not always (every acceptance path is exercised)."""
    draft = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale * p.std().clamp_min(1e-3))
    return draft


def prompts(batch: int, length: int = 10, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 256, (batch, length), generator=torch.Generator().manual_seed(seed))


def test_tree_shapes_and_mask():
    tree = TreeLayout.parse("2x2")
    assert tree.parents == (-1, 0, 0, 1, 1, 2, 2) and tree.ranks == (0, 0, 1, 0, 1, 0, 1)
    assert tree.size == 6 and tree.max_depth == 2 and not tree.is_chain and TreeLayout.chain(3).is_chain
    assert tree.children[0].tolist() == [1, 2] and tree.describe() == "tree(2+4)"
    spine = TreeLayout.parse("spine3x2x1")  # the rank-0 chain first, then the leaves
    assert spine.parents == (-1, 0, 1, 2, 0, 0, 1) and spine.ranks == (0, 0, 0, 0, 1, 2, 1)
    assert spine.describe() == "tree(3+2+1)" and spine.draft_slots.tolist() == [0, 1, 2, -1, -1, -1, -1]
    assert spine.drafts_chain and not tree.drafts_chain
    mask = tree_mask(tree, torch.tensor([3]), torch.arange(7), tree.level_slots, 10)[0]
    assert mask[:, :3].all()                       # everyone sees the committed prefix
    assert mask[5, 3:].tolist() == [True, False, True, False, False, True, False]  # root, node 2, itself
    for bad in ("0x2", "2xa", ""):
        with pytest.raises(InvalidInputError):
            TreeLayout.parse(bad)


def test_commit_path_moves_accepted_entries_into_place(tiny_transformer):
    m = tiny_transformer(5)
    cache = m.new_cache(2, 32)
    cache.set_lengths(4)
    cache.k[:, :, :, 4:11] = torch.arange(7.0)[None, None, None, :, None]  # slot 4 + node i holds value i
    path = torch.tensor([[0, 2, 5], [0, 1, 3]])
    commit_path(cache, path, torch.tensor([2, 1]), torch.tensor([4, 4]), torch.arange(7))
    assert cache.k[0, 0, 0, 4:7, 0].tolist() == [0, 2, 5] and cache.k[0, 1, 0, 4:6, 0].tolist() == [0, 1]
    assert cache.lengths.tolist() == [7, 6]


def test_commit_path_of_one_sequence_equals_the_batch_rule(tiny_transformer):
    m = tiny_transformer(5)
    tree = TreeLayout.parse("spine3x2x1")
    for path, accepted in (([0, 1, 2, 3], 3), ([0, 4, 0, 0], 1), ([0, 1, 6, 0], 2), ([0, 0, 0, 0], 0)):
        caches = []
        for rows in (1, 2):  # batch 1 takes the Python path; a batch of two copies the vectorised one
            cache = m.new_cache(rows, 32)
            cache.k[:, :, :, 4:11] = torch.arange(7.0)[None, None, None, :, None]
            commit_path(cache, torch.tensor([path] * rows), torch.tensor([accepted] * rows), torch.tensor([4] * rows),
                        tree.target_slots)
            caches.append(cache)
        assert torch.equal(caches[0].k[:, 0], caches[1].k[:, 1]) and caches[0].lengths[0] == caches[1].lengths[1]
        assert caches[0].k[0, 0, 0, 4:5 + accepted, 0].tolist() == path[:accepted + 1]


@pytest.mark.parametrize("shape", ["2x2x1", "spine3x2x1", "3x1"])
@pytest.mark.parametrize("greedy", [False, True])
def test_tree_walk_of_one_sequence_equals_the_batch_walk(shape, greedy):
    """Batch 1 walks the tree in Python (tree._walk_one): same rule, same draws, same result as the masks."""
    from sdsl.torch.tree import _walk_batch, _walk_one

    tree = TreeLayout.parse(shape)
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(1, tree.size + 1, 16, generator=g) * 2
    q = torch.softmax(logits, -1)
    p = torch.softmax(logits + torch.randn(logits.shape, generator=g), -1)
    tokens = torch.zeros(1, tree.size + 1, dtype=torch.long)
    for depth in range(1, tree.max_depth + 1):
        nodes, parents, slot, ranks, _, width = tree.level_plan(depth)
        tokens[:, nodes] = q[:, parents].topk(width, -1).indices[:, slot, ranks]
    depths = set()
    for seed in range(200):
        one = _walk_one(tree, p, q, tokens, greedy, torch.Generator().manual_seed(seed), False)
        batch = _walk_batch(tree, p, q, tokens, greedy, torch.Generator().manual_seed(seed), False)
        assert all(torch.equal(a, b) for a, b in zip(one, batch)), seed
        depths.add(int(one[1]))
    assert greedy or len(depths) >= 2  # rejections and acceptances were both exercised


@pytest.mark.parametrize("batch", [1, 3])
def test_greedy_tree_decoding_equals_target_greedy_random_models(tiny_transformer, batch):
    target = tiny_transformer(10, layers=3)
    draft = noisy_copy(target, 1)
    p = prompts(batch, seed=batch)
    ref = generate(target, p, 24).tokens
    accepted_deeper = 0
    for tree in TREES:
        for proposer in (DraftModel(draft), HeadProposer(DraftHead(target.shape), target)):
            out = generate(target, p, 24, proposer, tree=tree)
            assert out.tokens == ref, (tree, proposer)
            accepted_deeper += int(out.accept_counts[1:].sum())
    assert accepted_deeper > 0
    assert generate(target, p, 24, PromptLookup(), tree="chain4").tokens == ref
    with pytest.raises(InvalidInputError):
        generate(target, p, 4, PromptLookup(), tree="2x2")


def test_greedy_tree_decoding_equals_target_greedy_family(family_models, heldout_prompts):
    """Every committed family target, with the smallest member as the draft, several tree shapes, batch 1 and 3."""
    draft = family_models["byte-d64"]
    for name, target in family_models.items():
        for batch in (1, 3):
            p = heldout_prompts[:batch]
            ref = generate(target, p, 8).tokens
            for tree in ("3x2x1", "2x2x2", "4x1x1x1"):
                assert generate(target, p, 8, DraftModel(draft), tree=tree).tokens == ref, (name, tree, batch)


def test_forced_acceptance_follows_the_per_position_vector(tiny_transformer):
    target = tiny_transformer(12)
    rates = [0.9, 0.6, 0.3]
    r = generate(target, prompts(32), 60, DraftModel(noisy_copy(target, 2)), tree="2x1x1", acceptance=rates, seed=3)
    c = r.accept_counts
    reach = c[::-1].cumsum()[::-1]
    np.testing.assert_allclose(reach[1:] / reach[:-1], rates, atol=0.08)
    assert all(len(t) == 60 for t in r.tokens)
