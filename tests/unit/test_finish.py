"""sdsl.speculation.finish: steps to emit n tokens per sequence (overshoot and the batch tail)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdsl.acceptance import tau
from sdsl.speculation.finish import effective_tau, steps_to_finish
from sdsl.errors import InvalidInputError


def _simulate(alpha, gamma, n, batch, trials, seed=0):
    """Monte Carlo E[max over the batch of the steps to reach n tokens], X = 1 + min(Geometric, γ)."""
    rng = np.random.default_rng(seed)
    gained = 1 + np.minimum(rng.geometric(1 - alpha, size=(trials, batch, n)) - 1, gamma)
    steps = (np.cumsum(gained, axis=-1) < n).sum(-1) + 1
    return steps.max(-1).mean(), steps.max(-1).std() / np.sqrt(trials)


@pytest.mark.parametrize("alpha,gamma,n,batch", [(0.75, 4, 64, 8), (0.6, 2, 32, 1), (0.9, 8, 64, 8), (0.3, 1, 16, 3)])
def test_matches_monte_carlo(alpha, gamma, n, batch):
    mc, se = _simulate(alpha, gamma, n, batch, 20000)
    assert steps_to_finish(alpha, gamma, n, batch) == pytest.approx(mc, abs=4 * se + 1e-9)


def test_exact_limits():
    assert steps_to_finish(0.7, 0, 64, 8) == pytest.approx(64)  # plain decoding: one token per step
    assert steps_to_finish(0.0, 5, 40, 4) == pytest.approx(40)  # nothing accepted
    assert steps_to_finish(1.0, 3, 10, 8) == pytest.approx(3)  # every step emits γ + 1 = 4: ceil(10 / 4)
    # one sequence, γ = 1, n = 2: one step with prob α (2 tokens), else two
    assert steps_to_finish(0.4, 1, 2, 1) == pytest.approx(0.4 * 1 + 0.6 * 2)


def test_batch_tail_is_large_where_the_validation_runs():
    """At the validation's operating point the tail costs far more than overshoot alone."""
    ideal = 64 / tau(0.75, 4)
    assert steps_to_finish(0.75, 4, 64, 1) / ideal == pytest.approx(1.0225, abs=2e-3)
    assert steps_to_finish(0.75, 4, 64, 8) / ideal == pytest.approx(1.1945, abs=2e-3)


@settings(max_examples=40, deadline=None)
@given(st.floats(0.0, 0.99), st.integers(0, 8), st.integers(1, 80), st.integers(1, 16))
def test_effective_tau_bounds(alpha, gamma, n, batch):
    eff = float(effective_tau(alpha, gamma, n, batch))
    assert 1 - 1e-9 <= eff <= min(float(tau(alpha, gamma)), n) * (1 + 1e-9)  # Wald: τ·E[K] = E[tokens] >= n
    assert float(steps_to_finish(alpha, gamma, n, batch + 1)) >= float(steps_to_finish(alpha, gamma, n, batch)) - 1e-9


def test_broadcasts_and_rejects_bad_input():
    out = steps_to_finish(np.array([0.5, 0.8])[:, None], np.arange(1, 4), 32, 8)
    assert out.shape == (2, 3) and np.all(np.diff(out, axis=1) < 0) and np.all(out[1] < out[0])
    for bad in (dict(n_tokens=0), dict(n_tokens=2.5), dict(batch=0)):
        with pytest.raises(InvalidInputError):
            steps_to_finish(0.5, 2, **({"n_tokens": 8} | bad))
