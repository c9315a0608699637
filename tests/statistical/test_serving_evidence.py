"""Every serving number in README.md and VALIDATION.md, recomputed.

Deterministic runs that take seconds (analytic speedups, the linear fits, the closed-loop table,
the headline trace at QPS 1) are recomputed in full and pinned at 1e-3 relative; the long trace
sweeps are recomputed as reduced seeded runs that check the stated claims at tolerances a wrong
controller would fail. The full tables: ``python -m sdsl.validation.serving_evidence``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sdsl.validation import serving_evidence as ev

FIXED = ["k=1", "k=3", "k=5", "k=7"]

# (deployment, alpha, batch) -> speedup of k = 1, 3, 5, 7 and of the goodput-optimal k (VALIDATION.md)
ANALYTIC = {('7b', 0.5, 1): (1.3961, 1.5326, 1.4346, 1.3096, 1.5326), ('7b', 0.5, 64): (1.3387, 1.3483, 1.1671, 1.0005, 1.3483), ('7b', 0.7, 1): (1.5822, 2.0705, 2.1432, 2.0649, 2.1432), ('7b', 0.7, 64): (1.5172, 1.8215, 1.7436, 1.5775, 1.8215), ('7b', 0.9, 1): (1.7683, 2.8111, 3.4144, 3.7439, 3.7439), ('7b', 0.9, 64): (1.6957, 2.473, 2.7777, 2.8602, 2.8602), ('70b', 0.5, 1): (1.3995, 1.5426, 1.4485, 1.3256, 1.5426), ('70b', 0.5, 64): (1.2405, 1.1129, 0.88737, 0.71887, 1.2405), ('70b', 0.7, 1): (1.5861, 2.0839, 2.1639, 2.0901, 2.1639), ('70b', 0.7, 64): (1.4059, 1.5034, 1.3257, 1.1335, 1.5034), ('70b', 0.9, 1): (1.7727, 2.8293, 3.4474, 3.7896, 3.7896), ('70b', 0.9, 64): (1.5713, 2.0412, 2.1119, 2.0551, 2.1119)}  # noqa: E501

# model -> c_kv, c_tok, c_b, c_0 (ms), held-out R², held-out MAPE, published R² vs roofline, published/roofline
LINEAR = {'llama-2-7b': (0.00015657, 0.020925, -0.0033866, 4.6359, 0.99976, 0.018558, math.nan, math.nan), 'llama-3.1-8b': (3.9338e-05, 0.023391, -0.0041872, 5.0915, 0.9982, 0.031367, 0.90342, 0.90751), 'llama-3.1-70b': (2.498e-05, 0.066451, -0.011527, 16.746, 0.99719, 0.033974, 0.91574, 1.1023)}  # noqa: E501

# (alpha, batch) -> (adaptive speedup, best fixed-k speedup), closed loop, online α and step fit
CLOSED = {
    "7b": {(0.5, 1): (1.4569, 1.4759), (0.5, 4): (1.4471, 1.4455), (0.5, 16): (1.311, 1.3074), (0.5, 64): (1.1532, 1.2025), (0.7, 1): (2.0259, 1.993), (0.7, 4): (1.9284, 1.9195), (0.7, 16): (1.6021, 1.6925), (0.7, 64): (1.4909, 1.5167), (0.9, 1): (3.4651, 3.482), (0.9, 4): (3.2894, 3.2934), (0.9, 16): (2.5833, 2.5863), (0.9, 64): (2.0781, 2.0821)},  # noqa: E501
    "70b": {(0.5, 1): (1.4669, 1.4858), (0.5, 4): (1.4465, 1.4453), (0.5, 16): (1.257, 1.2466), (0.5, 64): (1.0604, 1.0625), (0.7, 1): (2.0429, 2.0131), (0.7, 4): (1.9269, 1.9191), (0.7, 16): (1.5765, 1.6031), (0.7, 64): (1.1716, 1.1999), (0.9, 1): (3.5085, 3.5265), (0.9, 4): (3.289, 3.2919), (0.9, 16): (2.3861, 2.3858), (0.9, 64): (1.4834, 1.5311)},  # noqa: E501
}

# (alpha, batch) -> mean k the adaptive policy ran in the closed loop
MEAN_K = {
    "7b": {(0.5, 1): 2.4246, (0.5, 4): 2.7496, (0.5, 16): 2.5577, (0.5, 64): 2.6607, (0.7, 1): 4.2204, (0.7, 4): 4.5891, (0.7, 16): 4.5219, (0.7, 64): 3.2565, (0.9, 1): 6.4314, (0.9, 4): 6.9477, (0.9, 16): 6.9224, (0.9, 64): 6.8576},  # noqa: E501
    "70b": {(0.5, 1): 2.4643, (0.5, 4): 2.7493, (0.5, 16): 2.4489, (0.5, 64): 1.0293, (0.7, 1): 4.2827, (0.7, 4): 4.5927, (0.7, 16): 3.493, (0.7, 64): 2.6282, (0.9, 1): 6.4571, (0.9, 4): 6.9529, (0.9, 16): 6.9237, (0.9, 64): 5.1304},  # noqa: E501
}


def test_analytic_speedup_table():
    an = ev.analytic_speedup(batches=[1, 64])
    for (dep, alpha, batch), expect in ANALYTIC.items():
        got = an[(an.deployment == dep) & (an.alpha == alpha) & (an.batch == batch)].set_index("policy").speedup
        np.testing.assert_allclose([got[p] for p in FIXED + ["adaptive"]], expect, rtol=1e-3)


def test_analytic_loss_onset_on_70b():
    """70b, α = 0.5: k = 7 first falls below 1× at batch 32; k = 5 is at 1.092× at batch 32 and below 1× by 64."""
    an = ev.analytic_speedup(alphas=(0.5,), batches=[1, 2, 4, 8, 16, 32, 64])
    an = an[an.deployment == "70b"].pivot_table(index="batch", columns="policy", values="speedup")
    assert an.index[an["k=7"] < 1.0].min() == 32 and an.index[an["k=5"] < 1.0].min() == 64
    assert an.loc[32, "k=5"] == pytest.approx(1.0916, rel=1e-3)


def test_linear_form_vs_roofline_table():
    lin = ev.linear_vs_roofline().set_index("model")
    cols = ["c_kv", "c_tok", "c_b", "c_0", "r2_test", "mape_test", "published_r2_vs_roofline",
            "published_over_roofline_median"]
    for model, expect in LINEAR.items():
        np.testing.assert_allclose(lin.loc[model, cols].to_numpy(float), expect, rtol=1e-3, atol=1e-9)


@pytest.mark.parametrize("dep", ["7b", "70b"])
def test_closed_loop_table(dep):
    cl = ev.closed_loop_speedup(dep)
    p = cl.pivot_table(index=["alpha", "batch"], columns="policy", values="speedup")
    got = {k: (p.loc[k, "adaptive"], p.loc[k, FIXED].max()) for k in p.index}
    assert set(got) == set(CLOSED[dep])
    for key, expect in CLOSED[dep].items():
        np.testing.assert_allclose(got[key], expect, rtol=1e-3)
    # the claim (missed since the GEMM row tiles shipped): adaptive up to 5.3% (7b) / 3.1% (70b) below the best
    # fixed k — its online linear fit cannot follow the tile steps — and above it in 9 of 24 cells
    assert min(a / b - 1.0 for a, b in got.values()) == pytest.approx({"7b": -0.05341, "70b": -0.03115}[dep], abs=2e-4)
    assert sum(a > b for a, b in got.values()) == {"7b": 4, "70b": 5}[dep]
    if dep == "70b":  # fixed k at b = 64 and α = 0.5 (k = 3, 5, 7) and α = 0.7 (k = 7)
        np.testing.assert_allclose([p.loc[(0.5, 64), "k=3"], p.loc[(0.5, 64), "k=5"], p.loc[(0.5, 64), "k=7"],
                                    p.loc[(0.7, 64), "k=7"]], [0.9292, 0.7766, 0.6603, 0.9613], atol=6e-4)
    mean_k = cl[cl.policy == "adaptive"].set_index(["alpha", "batch"]).mean_k
    for key, expect in MEAN_K[dep].items():
        assert mean_k[key] == pytest.approx(expect, rel=1e-3)
    # the k it ran stays within 1.6 of the table controller's k at that batch size (known α, context 1024)
    from sdsl.serving.k_table import best_k_by_batch

    table = best_k_by_batch(ev.deployment(dep).step_model, [0.5, 0.7, 0.9], context=1024.0)
    worst = max(abs(mean_k[(a, b)] - table[i, b - 1]) for i, a in enumerate((0.5, 0.7, 0.9)) for b in (1, 4, 16, 64))
    assert worst == pytest.approx({"7b": 1.5219, "70b": 0.71732}[dep], rel=1e-3)


def test_goodput_optimal_k_by_batch():
    """VALIDATION's k-vs-batch table (first batch size of each k), controller on the step table, context 1024.
    With 128-row GEMM tiles the verification's cost steps where batch·(k + 1) crosses a tile, so the best k
    moves back and forth with the batch instead of falling once."""
    from sdsl.serving.k_table import best_k_by_batch

    expect = {
        ('7b', 0.5): [(1, 3), (17, 2), (22, 3), (33, 2), (43, 1), (48, 3), (65, 2), (86, 3), (97, 2), (171, 1), (193, 2)],
        ('7b', 0.7): [(1, 5), (11, 4), (13, 3), (17, 5), (22, 4), (26, 3), (33, 5), (43, 4), (52, 3), (65, 4), (77, 3), (97, 4), (103, 3), (161, 2), (171, 3), (193, 4), (205, 3), (225, 4), (231, 3)],
        ('7b', 0.9): [(1, 7), (9, 6), (10, 7), (17, 6), (19, 5), (22, 7), (33, 6), (37, 7), (49, 6), (55, 7), (65, 6), (74, 7), (81, 5), (85, 6), (92, 7), (97, 6), (110, 7), (145, 6), (147, 5), (150, 7), (161, 6), (165, 7), (177, 6), (183, 7), (193, 6), (202, 7), (209, 6), (220, 7), (225, 6), (228, 7)],
        ('70b', 0.5): [(1, 3), (13, 2), (31, 1), (33, 2), (43, 1), (65, 2), (86, 1), (193, 0)],
        ('70b', 0.7): [(1, 5), (10, 4), (13, 3), (17, 4), (26, 3), (33, 2), (43, 4), (52, 3), (65, 2), (86, 3), (97, 2), (104, 1), (129, 2), (171, 1), (193, 2), (214, 1)],
        ('70b', 0.9): [(1, 7), (9, 6), (10, 7), (17, 6), (19, 5), (22, 7), (33, 6), (37, 5), (43, 7), (49, 4), (52, 6), (55, 5), (65, 6), (74, 4), (77, 5), (86, 3), (97, 4), (103, 5), (107, 6), (110, 3), (129, 4), (154, 3), (161, 2), (171, 4), (180, 3), (193, 2), (214, 3), (225, 4), (231, 2)],
    }
    for name in ("7b", "70b"):
        ks = best_k_by_batch(ev.deployment(name).step_model, [0.5, 0.7, 0.9], context=1024.0)
        for alpha, row in zip((0.5, 0.7, 0.9), ks):
            starts = [0] + list(np.nonzero(np.diff(row))[0] + 1)
            assert [(int(i) + 1, int(row[i])) for i in starts] == expect[(name, alpha)]


# headline: conv trace, 2000 requests, 7b, α ~ Beta(0.7, 20), α̂ prior 0.5; QPS -> policy -> (mean, p99) seconds
HEADLINE = {
    1.0: {"none": (1.73100, 4.11174), "k=1": (1.08480, 2.51714), "k=3": (0.83012, 2.07216), "k=5": (0.80286, 2.20554), "k=7": (0.83216, 2.36609), "adaptive": (0.80117, 2.16248), "per-request": (0.81178, 2.16881)},  # noqa: E501
    12.0: {"none": (21.20994, 46.6994), "k=1": (6.2044, 16.38727), "k=3": (3.26908, 10.57383), "k=5": (3.51311, 12.23523), "k=7": (4.54743, 14.92709), "adaptive": (3.26718, 10.8952), "per-request": (3.38243, 11.42508)},  # noqa: E501
}


@pytest.mark.parametrize("qps", sorted(HEADLINE))
def test_headline_latency_rows(qps):
    """The QPS 1 and 12 rows of the headline table, recomputed in full (2000 requests, seed 0)."""
    lq = ev.latency_vs_qps(qps=(qps,)).set_index("policy")
    for policy, (mean, p99) in HEADLINE[qps].items():
        assert lq.loc[policy, "mean_latency_s"] == pytest.approx(mean, rel=1e-3)
        assert lq.loc[policy, "p99_latency_s"] == pytest.approx(p99, rel=1e-3)


# controller_cost, 7b headline: (QPS, controller) -> (mean, p99) seconds, and the final fit's error
COST = {(1.0, 'oracle'): (0.792374, 2.147054), (1.0, 'estimated α from the right prior, exact table'): (0.799118, 2.161075), (1.0, 'estimated α, exact table'): (0.801204, 2.165075), (1.0, 'TurboSpec (estimated α, online fit)'): (0.801174, 2.162478), (12.0, 'oracle'): (3.084143, 10.364055), (12.0, 'estimated α from the right prior, exact table'): (3.094742, 10.479724), (12.0, 'estimated α, exact table'): (3.090876, 10.420813), (12.0, 'TurboSpec (estimated α, online fit)'): (3.267176, 10.895203)}  # noqa: E501


@pytest.mark.parametrize("qps", [1.0, 12.0])
def test_controller_cost_rows(qps):
    """What estimating α from the wrong prior and fitting the step model online cost against the
    oracle controller: the QPS 1 and 12 rows, recomputed in full."""
    cc = ev.controller_cost(qps=(qps,)).set_index("controller")
    for (q, controller), (mean, p99) in COST.items():
        if q == qps:
            assert cc.loc[controller, "mean_latency_s"] == pytest.approx(mean, rel=1e-3)
            assert cc.loc[controller, "p99_latency_s"] == pytest.approx(p99, rel=1e-3)
    fit = cc.loc["TurboSpec (estimated α, online fit)", "fit_error"]
    assert fit == pytest.approx({1.0: 0.058184, 12.0: 0.028663}[qps], abs=5e-5)


def test_controller_cost_on_a_reduced_trace():
    """Reduced (600 requests, QPS 4 and 8): TurboSpec's controller within 2.5% of the oracle in mean latency; its
    online linear fit ends 2.6–4.3% off the exact step table, whose GEMM row tiles a line cannot follow."""
    cc = ev.controller_cost(qps=(4, 8), n_requests=600)
    turbo = cc[cc.controller == "TurboSpec (estimated α, online fit)"]
    assert np.all(np.abs(turbo.cost_mean) < 0.025) and np.all((turbo.fit_error > 0.02) & (turbo.fit_error < 0.05))


def test_headline_claims_on_a_reduced_trace():
    """Reduced headline (first 600 requests, QPS 4 and 8): adaptive within 1% of the best fixed k in
    mean latency and 5% in p99, per-request adaptive behind uniform adaptive, none far behind."""
    lq = ev.latency_vs_qps(qps=(4, 8), n_requests=600)
    for qps, g in lq.groupby("qps"):
        g = g.set_index("policy")
        best_mean = g.loc[FIXED, "mean_latency_s"].min()
        best_p99 = g.loc[FIXED, "p99_latency_s"].min()
        assert g.loc["adaptive", "mean_latency_s"] < 1.01 * best_mean
        assert g.loc["adaptive", "p99_latency_s"] < 1.05 * best_p99
        assert g.loc["per-request", "mean_latency_s"] > g.loc["adaptive", "mean_latency_s"]
        assert g.loc["adaptive", "mean_latency_s"] < 0.6 * g.loc["none", "mean_latency_s"]


def test_alpha_shift_numbers():
    """α drops 0.8 -> 0.4 at mid-run (conv trace, 4 QPS, 2000 requests): recomputed in full."""
    sh = ev.alpha_shift()
    g = sh.groupby(["policy", "after_shift"])
    mean, p99, k = g.latency_s.mean(), g.latency_s.quantile(0.99), g.mean_k.mean()
    expect = {("none", True): (2.6350, 6.1851), ("k=5", True): (2.1965, 5.5637), ("adaptive", True): (1.8486, 4.5622),
              ("adaptive", False): (0.71737, 2.1071), ("k=5", False): (0.72827, 2.0804)}
    for key, (m, p) in expect.items():
        assert mean[key] == pytest.approx(m, rel=1e-3) and p99[key] == pytest.approx(p, rel=1e-3)
    assert k[("adaptive", False)] == pytest.approx(6.1718, rel=1e-3)
    assert k[("adaptive", True)] == pytest.approx(2.2743, rel=1e-3)


def test_linear_coefficients_against_turbospec_published():
    """VALIDATION's comparison with TurboSpec's published lines: c_tok within 4% (70B) and 22% (8B),
    c_0 within 9–15%, c_kv within 16% (8B) and 43% of theirs (70B)."""
    from sdsl.serving.linear_model import TURBOSPEC_PUBLISHED

    lin = ev.linear_vs_roofline().set_index("model")
    pub = {"llama-3.1-8b": TURBOSPEC_PUBLISHED["llama-3.1-8b-h100"],
           "llama-3.1-70b": TURBOSPEC_PUBLISHED["llama-3.1-70b-tp4-h100"]}
    ratio = {(m, c): lin.loc[m, c] / getattr(p, c) for m, p in pub.items() for c in ("c_kv", "c_tok", "c_0")}
    assert ratio[("llama-3.1-70b", "c_tok")] == pytest.approx(1.0386, abs=0.001)
    assert ratio[("llama-3.1-8b", "c_tok")] == pytest.approx(1.2712, abs=0.001)
    assert ratio[("llama-3.1-8b", "c_0")] == pytest.approx(0.73365, abs=0.001)
    assert ratio[("llama-3.1-70b", "c_0")] == pytest.approx(0.91177, abs=0.001)
    assert ratio[("llama-3.1-8b", "c_kv")] == pytest.approx(0.80943, abs=0.001)
    assert ratio[("llama-3.1-70b", "c_kv")] == pytest.approx(0.40028, abs=0.001)


# 70b, α ~ Beta(0.6, 20): (QPS, policy) -> (mean latency s, mean k)
LATENCY_70B = {(1.0, 'none'): (6.01842, 0.0), (1.0, 'k=1'): (4.12104, 1.0), (1.0, 'k=3'): (3.48776, 3.0), (1.0, 'k=5'): (3.5821, 5.0), (1.0, 'k=7'): (3.85682, 7.0), (1.0, 'adaptive'): (3.4881, 3.58185), (1.0, 'per-request'): (3.66665, 3.5067), (8.0, 'none'): (33.7252, 0.0), (8.0, 'k=1'): (33.5473, 1.0), (8.0, 'k=3'): (41.9399, 3.0), (8.0, 'k=5'): (55.6357, 5.0), (8.0, 'k=7'): (71.6414, 7.0), (8.0, 'adaptive'): (34.564, 0.365845), (8.0, 'per-request'): (36.3099, 0.106893)}  # noqa: E501
COST_70B = {(8.0, 'oracle'): (33.4331, 1.05299), (8.0, 'estimated α from the right prior, exact table'): (33.502, 1.07652), (8.0, 'estimated α, exact table'): (33.9397, 0.502451), (8.0, 'TurboSpec (estimated α, online fit)'): (34.564, 0.365845), (16.0, 'oracle'): (81.4588, 1.02911), (16.0, 'estimated α from the right prior, exact table'): (81.4479, 1.03654), (16.0, 'estimated α, exact table'): (83.3091, 0.0733454), (16.0, 'TurboSpec (estimated α, online fit)'): (83.2371, 0.199434)}  # noqa: E501


def test_70b_latency_rows():
    """70b rows at QPS 1 (speculation wins) and 8 (past capacity: k = 1 0.5% ahead of none, adaptive at mean k 0.37
    2.5% behind it; the draft's weights and KV on one GPU bind the per-GPU KV budget)."""
    lq = ev.latency_vs_qps("70b", qps=(1, 8), alpha=0.6)
    got = {(float(r.qps), r.policy): (r.mean_latency_s, r.mean_k) for r in lq.itertuples()}
    for key, expect in LATENCY_70B.items():
        np.testing.assert_allclose(got[key], expect, rtol=1e-3, atol=1e-4)


def test_70b_controller_cost_past_capacity():
    """At 8 and 16 QPS the online fit costs 3.4% and 2.2% against the oracle (k = 0 on most steps); at 16 QPS the
    wrong prior with the exact table locks speculation out (mean k 0.07); the right prior stays at the oracle."""
    cc = ev.controller_cost("70b", qps=(8, 16), alpha=0.6)
    got = {(float(r.qps), r.controller): (r.mean_latency_s, r.mean_k) for r in cc.itertuples()}
    for key, expect in COST_70B.items():
        np.testing.assert_allclose(got[key], expect, rtol=1e-3, atol=1e-4)
    fit = cc[cc.controller == "TurboSpec (estimated α, online fit)"].fit_error
    assert np.all((fit > 0.03) & (fit < 0.07))
