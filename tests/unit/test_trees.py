import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdsl.acceptance import tau
from sdsl.acceptance import Acceptance
from sdsl.plan.tree_search import best_tree, sglang_grid
from sdsl.acceptance.trees import (TokenTree, check_rank_acceptance, rank_acceptance, sglang_pool, sglang_tree_tau_stack,
                                  tree_matrices)
from sdsl.errors import InvalidInputError

probs = st.floats(0.0, 1.0)


@st.composite
def trees(draw, max_nodes=24):
    n = draw(st.integers(0, max_nodes))
    return TokenTree(tuple(draw(st.integers(-1, i - 1)) for i in range(n)))


@st.composite
def rank_matrices(draw, depth=24, width=24):
    p = np.array(draw(st.lists(probs, min_size=depth, max_size=depth)))
    s = draw(st.floats(0.0, 1.0))
    return rank_acceptance(p, width, s)


@settings(max_examples=200, deadline=None)
@given(st.lists(probs, min_size=1, max_size=12))
def test_chain_tree_reproduces_chain_formula_exactly(p):
    k = len(p)
    P = rank_acceptance(p, 1)
    assert TokenTree.chain(k).tau(P) == Acceptance.from_conditional(p).tau(k)


@settings(max_examples=100, deadline=None)
@given(probs, st.integers(0, 20))
def test_constant_chain_equals_leviathan(p, k):
    assert TokenTree.chain(k).tau(rank_acceptance([p] * max(k, 1), 1)) == pytest.approx(tau(p, k), rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(trees(), rank_matrices())
def test_tree_at_least_its_longest_chain(tree, P):
    if tree.size == 0:
        assert tree.tau(P) == 1.0
        return
    prob = tree.path_probabilities(P)
    deepest = int(np.argmax(tree.depths))
    path, v = [], deepest
    while v >= 0:
        path.append(v)
        v = tree.parents[v]
    chain_tau = 1.0 + prob[path].sum()  # the same nodes as a chain
    assert tree.tau(P) >= chain_tau - 1e-12


@settings(max_examples=200, deadline=None)
@given(trees(), rank_matrices(), st.integers(0, 23), st.integers(0, 23), st.floats(0.0, 0.3))
def test_tree_tau_monotone_in_each_probability(tree, P, d, r, bump):
    Q = P.copy()
    Q[d, r] = min(Q[d, r] + bump, Q[d, r] + 1.0 - Q[d].sum())
    assert tree.tau(Q) >= tree.tau(P) - 1e-12


@settings(max_examples=50, deadline=None)
@given(rank_matrices(depth=6, width=4), st.integers(1, 12), st.integers(1, 6))
def test_dp_beats_every_small_tree(P, n, depth):
    best = best_tree(P, n, depth)
    assert best.tree.size <= n and best.tree.depth <= depth
    assert best.tau == pytest.approx(best.tau_by_size[n], abs=1e-12)
    assert np.all(np.diff(best.tau_by_size) >= -1e-12)
    # the chain and the full binary tree of this budget are feasible, so the optimum is at least as good
    chain = TokenTree.chain(min(n, depth))
    assert best.tau >= chain.tau(P) - 1e-12
    if n >= 2 and depth >= 1 and P.shape[1] >= 2:
        assert best.tau >= TokenTree.from_branching([2]).tau(P) - 1e-12


def test_dp_small_exhaustive():
    # n = 3, depth 2, ranks (0.6, 0.3): candidates are the chain of 2 + a sibling, or 3 siblings (not allowed:
    # 2 ranks). Best: root children r0, r1 and r0's child: 0.6 + 0.3 + 0.36 = 1.26 vs chain 0.6+0.36+0.216 (depth 3)
    best = best_tree([0.6, 0.3], 3, 2)
    assert best.tau == pytest.approx(1 + 0.6 + 0.3 + 0.36)
    assert sorted(best.tree.parents) == [-1, -1, 0]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.integers(1, 4), st.data(), st.sampled_from(("draft", "acceptance")), st.floats(0.0, 1.0),
       st.floats(0.5, 6.0))
def test_stacked_sglang_tau_is_the_explicit_trees(steps, topk, data, selection, rank_ratio, temperature):
    """Each row of the vectorised SGLang τ is the explicit tree's: TokenTree.sglang on that row's matrices, then
    TokenTree.tau, bit for bit (one selection, one sum); a top-1 tree is the chain's τ exactly."""
    pool = topk + (steps - 1) * topk * topk
    tokens = data.draw(st.integers(1, pool + 1))
    cond = np.array(data.draw(st.lists(st.lists(probs, min_size=steps, max_size=steps), min_size=1, max_size=4)))
    stacked = sglang_tree_tau_stack(cond, steps, topk, tokens, rank_ratio, selection=selection,
                                    draft_temperature=temperature)
    for row, tau_row in zip(cond, stacked):
        P, S = tree_matrices(row, topk, rank_ratio, selection, temperature)
        assert tau_row == TokenTree.sglang(steps, topk, tokens, P, S).tau(P)
        if topk == 1 and tokens == steps + 1:
            assert tau_row == Acceptance.from_conditional(row).tau(steps)


def test_sglang_triples():
    p = Acceptance.from_accepted_length(3.1, 4).conditional_at(8)
    P = rank_acceptance(p, 8)
    prob, parent, depth = sglang_pool(3, 2, P)
    assert prob.size == 2 + 2 * 4 and depth.max() == 3
    chain = TokenTree.sglang(4, 1, 5, P)
    assert chain.parents == TokenTree.chain(4).parents
    tree = TokenTree.sglang(8, 8, 64, P)
    assert tree.verify_tokens == 64 and tree.depth <= 8 and tree.width <= 8
    grid = sglang_grid(P, steps=range(1, 9), topks=(1, 4, 8), max_tokens=64)
    row = (grid.steps == 8) & (grid.topk == 8) & (grid.num_draft_tokens == 64)
    assert grid.tau[row][0] == pytest.approx(tree.tau(P), rel=1e-12)
    chain_rows = grid.topk == 1
    assert np.all(grid.num_draft_tokens[chain_rows] == grid.steps[chain_rows] + 1)
    assert best_tree(P, 63, 8).tau >= tree.tau(P) - 1e-12


def test_tree_work():
    t = TokenTree.from_branching([2, 2])
    assert (t.size, t.depth, t.width, t.verify_tokens) == (6, 2, 2, 7)
    assert t.draft_tokens_per_pass.tolist() == [1, 2]
    assert t.mask_density == pytest.approx((1 + 2 * 2 + 4 * 3) / 49)
    c = TokenTree.chain(4)
    assert c.mask_density == pytest.approx(6 / 10)  # causal: (n + 2) / (2(n + 1))


@pytest.mark.parametrize("bad", [
    lambda: TokenTree((0,)),  # a node cannot be its own parent
    lambda: TokenTree((-1, 2, 0)),  # parent listed after the child
    lambda: TokenTree((-2,)),
    lambda: TokenTree.chain(-1),
    lambda: TokenTree.from_branching([2, 0]),
    lambda: check_rank_acceptance([0.7, 0.5], 2),  # ranks are exclusive: sum <= 1
    lambda: check_rank_acceptance([1.2], 2),
    lambda: TokenTree.from_branching([3]).tau([0.5, 0.2]),  # 3 siblings, 2 ranks
    lambda: TokenTree.sglang(2, 2, 9, rank_acceptance([0.8, 0.7], 2)),  # pool holds 6 + root
    lambda: sglang_pool(0, 2, [0.5, 0.2]),
    lambda: best_tree([0.5], -1),
    lambda: rank_acceptance([0.5], 0),
])
def test_impossible_trees_raise(bad):
    with pytest.raises(InvalidInputError) as e:
        bad()
    assert str(e.value).endswith(".") and "\n" not in str(e.value)


def test_readme_acceptance_numbers():
    # README.md "Acceptance: per-position vectors, engine conventions, token trees"
    acc = Acceptance.from_marginal([0.77, 0.45, 0.24])
    np.testing.assert_allclose(acc.conditional, [0.77, 0.584, 0.533], atol=6e-4)
    assert acc.tau(3) == pytest.approx(2.46, rel=1e-9)
    fit = Acceptance.from_accepted_length(3.1, 4)
    assert fit.tau(4) == pytest.approx(3.1, rel=1e-9) and fit.tau(6) == pytest.approx(3.326, rel=1e-3)
    P = rank_acceptance(fit.conditional_at(8), 8)
    assert TokenTree.sglang(8, 8, 64, P).tau(P) == pytest.approx(4.296, rel=1e-3)
    P2, S = tree_matrices(fit.conditional_at(8), 8)
    assert np.array_equal(P2, P) and TokenTree.sglang(8, 8, 64, P, S).tau(P) == pytest.approx(3.994, rel=1e-3)
    assert best_tree(P, 63, 8).tau == pytest.approx(4.296, rel=1e-3)
    assert Acceptance.from_iid(0.7).tau(4) == pytest.approx(2.7731, rel=1e-4)
