"""Seeded Monte-Carlo router against the distinct-expert formula E·(1 − (1 − k/E)^n) (docs/model.md §3.8).

Each token picks k distinct experts uniformly (Floyd's sampling); the experts touched by the first n tokens
are counted for every n in 1..4096. The formula must match the simulated mean within 1% at every n, the
simulation must resolve 1% (its standard error stays below 0.25%), and two plausible wrong formulas must miss
by more than 1%: no overlap (min(E, n·k), wherever k < E) and picks with replacement (E·(1 − (1 − 1/E)^(n·k)),
wherever a token's k picks collide often enough: k = 8, or 8 experts). A router whose consecutive positions of a
sequence keep a share of each other's experts checks the routing-locality form (:func:`sdsl.catalog.moe.locality_tokens`).
"""

import numpy as np
import pytest

from sdsl.catalog.moe import expected_distinct_experts

N_MAX = 4096
TRIALS = {8: 20_000, 64: 4_000, 128: 2_000, 256: 1_000}


def _k_subsets(rng, n_experts, k, shape):
    """Uniform k-subsets of range(n_experts), one per entry of ``shape`` (Floyd's algorithm, vectorised)."""
    chosen = np.empty(shape + (k,), dtype=np.int64)
    for idx, j in enumerate(range(n_experts - k, n_experts)):
        r = rng.integers(0, j + 1, size=shape)
        dup = (chosen[..., :idx] == r[..., None]).any(-1)
        chosen[..., idx] = np.where(dup, j, r)
    return chosen


def _simulated_distinct(n_experts, k, trials, seed, chunk=64):
    """Mean and standard error over trials of the distinct experts after n = 1..N_MAX tokens."""
    rng = np.random.default_rng(seed)
    never = N_MAX + 1
    first = np.full((trials, n_experts), never, dtype=np.int64)  # token index that first touched each expert
    rows = np.arange(trials)[:, None, None]
    for start in range(0, N_MAX, chunk):
        picks = _k_subsets(rng, n_experts, k, (trials, chunk))
        hit = np.zeros((trials, chunk, n_experts), dtype=bool)
        hit[rows, np.arange(chunk)[None, :, None], picks] = True
        touched = hit.any(axis=1)
        first = np.where(touched & (first == never), start + np.argmax(hit, axis=1), first)
        if (first < never).all():
            break  # every trial has touched every expert: later tokens change nothing
    n_stop = int(min(N_MAX, first.max() + 1))  # beyond it every trial has touched all it ever will
    counts = np.zeros((trials, n_stop + 1))
    np.add.at(counts, (np.repeat(np.arange(trials), n_experts), np.minimum(first, n_stop).ravel()), 1.0)
    distinct = np.cumsum(counts, axis=1)[:, :n_stop]  # column n-1: experts first touched by a token index < n
    mean = np.concatenate([distinct.mean(axis=0), np.full(N_MAX - n_stop, distinct[:, -1].mean())])
    se = np.concatenate([distinct.std(axis=0, ddof=1), np.full(N_MAX - n_stop, distinct[:, -1].std(ddof=1))])
    return mean, se / np.sqrt(trials)


@pytest.mark.parametrize("n_experts", sorted(TRIALS))
@pytest.mark.parametrize("k", [1, 2, 8])
def test_distinct_experts_match_a_monte_carlo_router(n_experts, k):
    mean, se = _simulated_distinct(n_experts, k, TRIALS[n_experts], seed=1000 * n_experts + k)
    n = np.arange(1, N_MAX + 1)
    formula = expected_distinct_experts(n_experts, k, n)
    assert np.max(se / mean) < 0.0025  # the simulation resolves a 1% error
    assert np.max(np.abs(formula / mean - 1.0)) < 0.01
    assert formula[0] == pytest.approx(k) and mean[0] == k  # one token: exactly k experts
    no_overlap = np.minimum(n_experts, n * k)
    with_replacement = n_experts * (1.0 - (1.0 - 1.0 / n_experts) ** (n * k))
    if k < n_experts:  # with k = E every formula gives E
        assert np.max(np.abs(no_overlap / mean - 1.0)) > 0.01
    if k == 8 or (k > 1 and n_experts == 8):  # at k = 2 of 64+ experts a token's two picks rarely collide
        assert np.max(np.abs(with_replacement / mean - 1.0)) > 0.01


# ---- a sequence's consecutive positions share experts (routing locality) ------------------------------------------

def _copy_router(rng, n_experts, k, keep, sequences, positions, trials):
    """(mean overlap share of consecutive positions, distinct experts per trial) of a router in which every position of
    a sequence keeps each of its predecessor's k experts with probability ``keep`` and fills its other slots uniformly
    from the experts it did not keep; sequences route independently."""
    touched = np.zeros((trials, n_experts), dtype=bool)
    shared = []
    for _ in range(sequences):
        prev = None
        for _ in range(positions):
            keys = rng.random((trials, n_experts))
            if prev is not None:
                keys[prev & (rng.random((trials, n_experts)) < keep)] = -1.0  # kept experts sort first
            cur = np.zeros((trials, n_experts), dtype=bool)
            np.put_along_axis(cur, np.argpartition(keys, k - 1, axis=1)[:, :k], True, axis=1)
            if prev is not None:
                shared.append((cur & prev).sum(axis=1) / k)
            touched |= cur
            prev = cur
    return float(np.mean(shared)), touched.sum(axis=1)


@pytest.mark.parametrize(("n_experts", "k"), [(16, 1), (64, 4), (128, 8), (256, 8)])
@pytest.mark.parametrize("keep", [0.2, 0.5])
def test_locality_tokens_match_a_router_that_keeps_its_predecessors_experts(n_experts, k, keep):
    """b sequences of q positions touch the experts of b·(1 + (q − 1)(1 − ρ)) independent tokens, ρ solved from the
    consecutive positions' overlap alone: within 1% of the simulated mean, where independent routing misses by far more."""
    from sdsl.catalog.moe import locality_from_overlap, locality_tokens

    rng = np.random.default_rng(7919 * n_experts + int(100 * keep) + k)
    worst, worst_independent = 0.0, 0.0
    for b, q in [(1, 2), (1, 4), (1, 8), (8, 4), (4, 8)]:
        share, distinct = _copy_router(rng, n_experts, k, keep, b, q, trials=max(3000, 400_000 // n_experts))
        mean, se = distinct.mean(), distinct.std(ddof=1) / np.sqrt(distinct.size)
        assert se / mean < 0.0025  # the simulation resolves a 1% error
        rho = locality_from_overlap(share, n_experts, k)
        formula = expected_distinct_experts(n_experts, k, locality_tokens(b * q, b, rho))
        worst = max(worst, abs(float(formula) / mean - 1.0))
        worst_independent = max(worst_independent, abs(float(expected_distinct_experts(n_experts, k, b * q)) / mean - 1.0))
    assert worst < 0.01
    assert worst_independent > (0.05 if keep == 0.2 else 0.2)


def test_the_locality_form_and_its_edges():
    from sdsl.catalog.moe import locality_from_overlap, locality_tokens
    from sdsl.errors import InvalidInputError

    assert float(locality_tokens(8, 8, 0.5)) == 8.0  # one position per sequence: nothing to share
    assert float(locality_tokens(32, 8, 0.0)) == 32.0 and float(locality_tokens(32, None, 0.5)) == 32.0
    assert float(locality_tokens(32, 8, 0.25)) == pytest.approx(8 * (1 + 3 * 0.75))
    assert locality_from_overlap(4 / 64, 64, 4) == pytest.approx(0.0, abs=1e-12)  # chance overlap: independent
    two = expected_distinct_experts(64, 4, locality_tokens(2, 1, locality_from_overlap(0.257, 64, 4)))
    assert float(two) == pytest.approx(4 * (2 - 0.257), rel=1e-12)  # two positions touch k·(2 − s) experts
    for bad in (0.01, 1.0, float("nan")):
        with pytest.raises(InvalidInputError):
            locality_from_overlap(bad, 64, 4)
    with pytest.raises(InvalidInputError):
        locality_tokens(32, 8, 1.0)
