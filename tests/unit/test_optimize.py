import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdsl.errors import InvalidInputError
from sdsl.core.optimize import (best_integer_gamma, best_speedup, fit_draft_law, gamma_star, lambert_w_minus1,
                           lambert_w_minus1_from_log, optimal_draft_size)
from sdsl.core.throughput import speedup


def test_lambert_w_against_mpmath():
    mp.mp.dps = 40
    for ell in [-1 - 1e-12, -1 - 1e-9, -1 - 1e-6, -1.001, -1.5, -2.6, -3, -10, -29.9, -30.1, -200, -5000]:
        ref = float(mp.lambertw(-mp.exp(mp.mpf(ell)), -1).real)
        assert lambert_w_minus1_from_log(ell) == pytest.approx(ref, rel=1e-10)
    assert lambert_w_minus1(-0.2) == pytest.approx(float(mp.lambertw(-0.2, -1).real), rel=1e-12)
    with pytest.raises(InvalidInputError):
        lambert_w_minus1(0.1)


def brute_force(a, c):
    """Numerical maximiser without Lambert W: grid search, then brentq on dS/dγ in the bracket."""
    from scipy.optimize import brentq

    g = np.linspace(0, 400, 40_001)
    i = int(np.argmax(speedup(a, g, c)))
    if i == 0:
        return 0.0
    if i == g.size - 1:
        return np.inf
    L = np.log(a)

    def dS(x):  # derivative of (1 - a^(x+1)) / ((1 - a)(1 + c x))
        num = -(a ** (x + 1)) * L * (1 + c * x) - c * (1 - a ** (x + 1))
        return num / ((1 - a) * (1 + c * x) ** 2)

    return brentq(dS, g[i - 1], g[i + 1], xtol=1e-13, rtol=1e-15)


@pytest.mark.parametrize("a", [0.05, 0.2, 0.5, 0.8, 0.95, 0.99])
@pytest.mark.parametrize("c", [1e-4, 1e-3, 0.01, 0.1, 0.5])
def test_gamma_star_matches_brute_force(a, c):
    g_bf = brute_force(a, c)
    g = gamma_star(a, c)
    if g_bf < 1e-3:  # speculation does not pay: closed form says 0
        assert g == 0
        return
    if g_bf > 399:  # optimum beyond the brute-force range
        assert g > 399
        return
    assert g == pytest.approx(g_bf, abs=1e-6)
    assert best_speedup(a, c) == pytest.approx(float(speedup(a, g, c)), rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(st.floats(0.05, 0.99), st.floats(1e-4, 0.5))
def test_best_integer_gamma_is_best(a, c):
    g = best_integer_gamma(a, c)
    s = speedup(a, g, c)
    for other in range(0, int(np.ceil(gamma_star(a, c))) + 3):
        assert s >= speedup(a, other, c) - 1e-12


def test_no_speculation_when_draft_too_slow():
    assert gamma_star(0.5, 1.2) == 0
    assert best_speedup(0.5, 1.2) == 1.0


def test_sdsl_law_within_15_percent():
    law = fit_draft_law()
    assert law.mu == pytest.approx(2.71e-3, rel=0.15)
    assert law.m0 == pytest.approx(8.71e7, rel=0.15)
    assert len(law.targets) == 13
    assert law.mu_ci[0] < law.mu < law.mu_ci[1]
    assert "mu =" in law.report()


def test_draft_size_grows_with_target_and_is_interior():
    n, s, a, g = optimal_draft_size([1e10, 1e11])
    assert n[0] < n[1]
    assert 1e7 < n[0] < 5e9 and np.all(s > 1) and np.all((a > 0) & (a < 1))
