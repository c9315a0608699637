import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdsl.errors import InvalidInputError
from sdsl.speculation.optimum import (best_integer_gamma, best_speedup, fit_draft_law, gamma_star, lambert_w_minus1,
                           lambert_w_minus1_from_log, optimal_draft_size)
from sdsl.speculation.throughput import speedup


def test_lambert_w_against_mpmath():
    # VALIDATION.md "Analytic core", W₋₁ row: "rel. error < 1e-10" from the branch point to z = −e^{−5000}
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
    # README.md "How accurate is it" and VALIDATION.md "Analytic core": closed-form γ* "within 1e-6 over
    # α ∈ [0.05, 0.99], c ∈ [1e-4, 0.5]" (these 30 points) against a maximiser that never uses Lambert W
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


# The law's reproduced values (D = D′ = 1e12), pinned: README.md "How accurate is it" and VALIDATION.md
# "Analytic core": "μ = 2.721e-3 (+0.4%), M₀ = 8.03e7 (−7.8%), R² = 0.988".
LAW_MU, LAW_M0, LAW_R2 = 2.7210319e-3, 8.0268540e7, 0.988411


def test_sdsl_law_reproduced():
    law = fit_draft_law()
    assert len(law.targets) == 13
    assert law.mu == pytest.approx(LAW_MU, rel=1e-3)
    assert law.m0 == pytest.approx(LAW_M0, rel=1e-3)
    assert law.r2 == pytest.approx(LAW_R2, abs=2e-4)
    # against the paper's line (SDSL_PAPER_LAW, quoted from arXiv 2603.11053): +0.4% and −7.8%
    assert round(100 * (law.mu / 2.71e-3 - 1), 1) == 0.4
    assert round(100 * (law.m0 / 8.71e7 - 1), 1) == -7.8
    assert "mu =" in law.report()


def test_sdsl_law_ci_is_the_t_interval():
    # paper_figures/README.md sdsl_draft_law.png: "μ = 2.721e-3 (95% CI 2.53–2.92e-3), M₀ = 8.03e7 (6.91–9.14e7)".
    # Recomputed by hand from the 13 (M, N*) points: OLS, σ² = SSR/(n − 2), t_{0.975, 11} from a table.
    law = fit_draft_law()
    m = np.array([t["params"] for t in law.targets])
    n = np.array([t["n_star"] for t in law.targets])
    k = m.size
    sxx = np.sum((m - m.mean()) ** 2)
    slope = np.sum((m - m.mean()) * (n - n.mean())) / sxx
    intercept = n.mean() - slope * m.mean()
    sigma2 = np.sum((n - intercept - slope * m) ** 2) / (k - 2)
    t = 2.200985  # Student t, 97.5th percentile, 11 degrees of freedom
    se_mu = np.sqrt(sigma2 / sxx)
    se_m0 = np.sqrt(sigma2 * (1 / k + m.mean() ** 2 / sxx))
    assert law.mu_ci == pytest.approx((slope - t * se_mu, slope + t * se_mu), rel=1e-5)
    assert law.m0_ci == pytest.approx((intercept - t * se_m0, intercept + t * se_m0), rel=1e-5)
    assert law.mu_ci == pytest.approx((2.525504e-3, 2.916559e-3), rel=1e-3)
    assert law.m0_ci == pytest.approx((6.914500e7, 9.139208e7), rel=1e-3)


@pytest.mark.parametrize("name, n_star, alpha, g_star, s_star", [
    # paper_figures/README.md sdsl_draft_law.png: "N* = 103M for OPT-13B (α = 0.646, γ* = 8.3, S* = 2.60)
    # up to 364M for Qwen1.5-110B (α = 0.661, γ* = 10.8, S* = 2.83)"
    ("opt-13b", 1.032e8, 0.64610, 8.337, 2.6035),
    ("qwen1.5-110b", 3.644e8, 0.66083, 10.783, 2.8257),
])
def test_sdsl_law_per_target_optima(name, n_star, alpha, g_star, s_star):
    row = next(t for t in fit_draft_law().targets if t["name"] == name)
    assert row["n_star"] == pytest.approx(n_star, rel=1e-3)
    assert (row["alpha"], row["gamma_star"], row["speedup"]) == pytest.approx((alpha, g_star, s_star), rel=1e-3)


def test_sdsl_law_draft_to_target_ratios():
    # paper_figures/README.md sdsl_draft_law.png: "drafts 125× (OPT-13B) to 305× (Qwen1.5-110B) smaller"
    ratio = {t["name"]: t["params"] / t["n_star"] for t in fit_draft_law().targets}
    assert min(ratio, key=ratio.get) == "opt-13b" and max(ratio, key=ratio.get) == "qwen1.5-110b"
    assert (ratio["opt-13b"], ratio["qwen1.5-110b"]) == pytest.approx((124.6, 305.2), rel=1e-3)


def test_sdsl_law_at_3e11_tokens():
    # VALIDATION.md "Analytic core": "same with D = D′ = 3e11 | μ = 2.88e-3, M₀ = 8.45e7"
    law = fit_draft_law(draft_tokens=3e11, target_tokens=3e11)
    assert law.mu == pytest.approx(2.876967e-3, rel=1e-3)
    assert law.m0 == pytest.approx(8.448830e7, rel=1e-3)


def test_draft_size_grows_with_target_and_is_interior():
    n, s, a, g = optimal_draft_size([1e10, 1e11])
    # interior of the default grid [1e7, 5e9]: a maximum, not a grid edge
    assert 1e7 < n[0] < n[1] < 5e9
    np.testing.assert_allclose(n, [8.974742e7, 3.415920e8], rtol=1e-3)
    np.testing.assert_allclose(a, [0.643854, 0.660207], rtol=1e-3)
    np.testing.assert_allclose(s, [2.569941, 2.817146], rtol=1e-3)
    np.testing.assert_allclose(g, gamma_star(a, n / np.array([1e10, 1e11])), rtol=1e-12)
    # a maximum: S* at N* beats S* at N* × 1.05 and N* / 1.05 (same α source, the plane)
    from sdsl.acceptance.plane import acceptance_from_sizes

    for f in (1.05, 1 / 1.05):
        nn = n * f
        assert np.all(best_speedup(acceptance_from_sizes(nn, np.array([1e10, 1e11])), nn / np.array([1e10, 1e11])) < s)


def test_scipy_lambertw_loses_digits_near_the_branch_point():
    # VALIDATION.md "Analytic core", W₋₁ row: scipy's `lambertw` keeps only ~4–5 significant digits at 1e-9
    # from the branch point (relative error ~4e-5), which is why sdsl works in log space.
    from scipy.special import lambertw

    mp.mp.dps = 40
    ell = -1 - 1e-9
    ref = float(mp.lambertw(-mp.exp(mp.mpf(ell)), -1).real)
    assert abs(float(lambertw(-np.exp(ell), -1).real) / ref - 1) > 1e-7
    assert lambert_w_minus1_from_log(ell) == pytest.approx(ref, rel=1e-10)
