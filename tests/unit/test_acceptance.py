import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdsl.acceptance import (
    alpha_from_accept_histogram, alpha_from_mean_accepted, alpha_from_spec_bench, alpha_from_tau, alpha_from_vllm,
    positional_acceptance, tau, tau_from_conditional,
)
from sdsl.errors import InvalidInputError, SDSLError

alphas = st.floats(0.0, 1.0)
gammas = st.integers(0, 40)


def test_tau_limits():
    assert tau(1.0, 7) == 8.0
    assert tau(0.0, 7) == 1.0
    assert tau(0.3, 0) == 1.0
    assert tau(0.6, 2) == pytest.approx(1.96)


def test_tau_stable_near_one():
    # naive (1 - a^(g+1))/(1 - a) loses ~all digits at a = 1 - 1e-15; the stable form stays close to g + 1
    for eps in [1e-6, 1e-10, 1e-14, 1e-16]:
        a = 1.0 - eps
        exact = sum(a**i for i in range(6))
        assert tau(a, 5) == pytest.approx(exact, rel=1e-12)


@settings(max_examples=300, deadline=None)
@given(alphas, gammas)
def test_tau_bounds(a, g):
    t = tau(a, g)
    assert 1.0 - 1e-12 <= t <= g + 1 + 1e-12


@settings(max_examples=200, deadline=None)
@given(st.floats(0.0, 0.999), st.floats(1e-4, 0.3), gammas)
def test_tau_increasing(a, da, g):
    assert tau(min(a + da, 1.0), g) >= tau(a, g) - 1e-12
    assert tau(a, g + 1) >= tau(a, g)


@settings(max_examples=200, deadline=None)
@given(st.floats(0.01, 0.99), st.integers(1, 20))
def test_alpha_from_tau_inverts(a, g):
    assert alpha_from_tau(tau(a, g), g) == pytest.approx(a, abs=1e-9)


def test_converters_agree():
    a, g = 0.73, 5
    t = tau(a, g)
    assert alpha_from_mean_accepted(t - 1, g) == pytest.approx(a)
    assert alpha_from_spec_bench(t, g) == pytest.approx(a)
    assert alpha_from_vllm(g, mean_acceptance_length=t) == pytest.approx(a)
    assert alpha_from_vllm(g, draft_acceptance_rate=(t - 1) / g) == pytest.approx(a)


def test_histogram_mle_recovers_alpha():
    rng = np.random.default_rng(0)
    a, g = 0.7, 4
    accepted = np.minimum(rng.geometric(1 - a, size=200_000) - 1, g)
    counts = np.bincount(accepted, minlength=g + 1)
    assert alpha_from_accept_histogram(counts) == pytest.approx(a, abs=0.005)
    np.testing.assert_allclose(positional_acceptance(counts), a, atol=0.01)
    assert tau_from_conditional(np.full(g, a)) == pytest.approx(tau(a, g))


def test_bad_inputs():
    for bad in [lambda: tau(1.2, 3), lambda: tau(0.5, -1), lambda: alpha_from_tau(0.5, 3),
                lambda: alpha_from_tau(6.0, 3), lambda: alpha_from_accept_histogram([0, 0]),
                lambda: alpha_from_vllm(3), lambda: tau(np.nan, 2)]:
        with pytest.raises(InvalidInputError):
            bad()
    assert issubclass(InvalidInputError, SDSLError)
