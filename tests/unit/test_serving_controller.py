"""Serving: controller, online α estimators, linear step-time fit, batch step model (fast, seeded)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdsl.acceptance import tau
from sdsl.errors import InvalidInputError
from sdsl.serving import (BatchStepModel, EMAEstimator, GoodputController, WindowEstimator, allocate_per_request,
                          choose_k, goodput, mixed_batch_time, trials_from_accepts)
from sdsl.acceptance import tau_unchecked
from sdsl.serving.k_table import best_k_by_batch, speedup_vs_batch
from sdsl.serving.linear_model import TURBOSPEC_PUBLISHED, LinearStepModel, fit_linear_step_model

TARGET = LinearStepModel(c_kv=5e-5, c_tok=0.02, c_b=0.01, c_0=7.0)  # ms; an 8B-like H100 target
DRAFT = LinearStepModel(c_kv=2e-6, c_tok=0.001, c_b=0.001, c_0=0.6)


def small_model(**kw) -> BatchStepModel:
    kw.setdefault("max_batch", 64)
    kw.setdefault("max_context", 4096)
    return BatchStepModel(TARGET.step_fn, DRAFT.step_fn, **kw)


def sample_accepts(rng, alpha, k, shape):
    u = 1.0 - rng.random(shape)
    return np.minimum(np.floor(np.log(u) / np.log(alpha)), k)


def test_tau_unchecked_matches_core():
    a = np.linspace(0.01, 0.99, 37)
    ks = np.arange(8.0)
    np.testing.assert_allclose(tau_unchecked(a[:, None], ks[None, :]), tau(a[:, None], ks[None, :]), rtol=1e-12)


def test_goodput_matches_definition():
    alpha = np.array([0.6, 0.8, 0.7])
    t = np.array([10.0, 11.0, 12.0, 13.0])
    gp = goodput(alpha, t, has_proposal=[True, True, False])
    expect = [(tau(0.6, k) + tau(0.8, k) + 1.0) / t[k] for k in range(4)]
    np.testing.assert_allclose(gp, expect)


def test_controller_picks_zero_when_speculation_cannot_pay():
    # Draft as slow as the target: no acceptance rate below 1 can pay for it at k >= 1 here.
    sm = BatchStepModel(TARGET.step_fn, TARGET.step_fn, max_batch=8, max_context=2048)
    ctrl = GoodputController(sm, max_k=7)
    assert ctrl.uniform_k(np.full(4, 0.6), 1000.0) == 0
    # A cheap draft but hopeless acceptance: k = 0 as well.
    ctrl = GoodputController(small_model(), max_k=7)
    assert ctrl.uniform_k(np.full(4, 0.02), 1000.0) == 0
    assert choose_k([0.02], [1.0, 1.2, 1.4]) == 0


def test_controller_prefers_longer_k_for_higher_alpha_and_matches_brute_force():
    sm = small_model()
    ctrl = GoodputController(sm, max_k=7)
    chosen = [ctrl.uniform_k(np.full(8, a), 1024.0) for a in (0.3, 0.5, 0.7, 0.9)]
    assert chosen == sorted(chosen) and chosen[-1] > chosen[0] >= 0
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(1, 64))
        alpha = rng.uniform(0.05, 0.95, n)
        ctx = float(rng.uniform(0, 4000))
        brute = max(range(8), key=lambda k: (sum(tau(a, k) for a in alpha) / sm.decode_time(n, k, ctx), -k))
        assert ctrl.uniform_k(alpha, ctx) == brute


def test_speculation_turns_into_a_loss_at_large_batch_with_a_costly_verifier():
    # c_tok large (compute-bound verification): speedup of k=5 falls below 1 as batch grows.
    tgt = LinearStepModel(c_kv=6.24e-5, c_tok=0.064, c_b=-0.040, c_0=18.35)
    sm = BatchStepModel(tgt.step_fn, DRAFT.step_fn, max_batch=256, max_context=2048)
    df = speedup_vs_batch(sm, [0.7], [1, 256], ks=(5,), context=512)
    k5 = df[df.policy == "k=5"].set_index("batch").speedup
    assert k5[1] > 1.0 > k5[256]
    ks = best_k_by_batch(sm, 0.7, context=512)[0]
    assert ks[0] > 0 and np.all(np.diff(ks) <= 0)


@pytest.mark.parametrize("rule", ["proportional", "greedy"])
def test_per_request_allocation_respects_budget(rule):
    alpha = np.array([0.9, 0.5, 0.7, 0.2])
    k = allocate_per_request(alpha, budget=12, max_k=7, rule=rule)
    assert k.sum() == 12 and k.max() <= 7 and k.min() >= 0
    assert k[0] >= k[2] >= k[1] >= k[3]
    assert allocate_per_request(alpha, 0, 7, rule).sum() == 0
    assert allocate_per_request(alpha, 100, 3, rule).tolist() == [3, 3, 3, 3]
    with pytest.raises(InvalidInputError):
        allocate_per_request(alpha, 4, 7, "nope")


def test_per_request_controller_spends_m_times_k_star():
    ctrl = GoodputController(small_model(), max_k=7, per_request=True)
    alpha = np.array([0.9, 0.8, 0.5, 0.6])
    k_star = GoodputController(small_model(), max_k=7).uniform_k(alpha, 500.0)
    k = ctrl.choose(alpha, 500.0)
    assert k.sum() == min(4 * k_star, 28)


def test_trials_count_the_first_rejection():
    assert trials_from_accepts(np.array([0, 2, 3]), 3).tolist() == [1, 3, 3]
    assert trials_from_accepts(np.array([0]), 0).tolist() == [0]


@pytest.mark.parametrize("make", [lambda: EMAEstimator(), lambda: WindowEstimator(window=16)])
@pytest.mark.parametrize("true_alpha", [0.4, 0.85])
def test_estimators_converge(make, true_alpha):
    rng = np.random.default_rng(0)
    est = make()
    est.add(400)
    k = 4
    for _ in range(40):
        a = sample_accepts(rng, true_alpha, k, (400, 3))
        est.update(a, trials_from_accepts(a, k))
    # per-request estimates: a ratio over ~7 effective steps, so a small-sample bias of a few 0.01
    assert abs(est.alpha.mean() - true_alpha) < 0.035
    assert abs(est.global_alpha - true_alpha) < 0.03


def test_estimator_blocks_equal_single_steps_and_k0_rows_do_not_move():
    rng = np.random.default_rng(1)
    a = sample_accepts(rng, 0.7, 3, (5, 6))
    tr = trials_from_accepts(a, 3)
    e1, e2 = EMAEstimator(), EMAEstimator()
    e1.add(5)
    e2.add(5)
    e1.update(a, tr)
    for s in range(6):
        e2.update(a[:, s:s + 1], tr[:, s:s + 1])
    np.testing.assert_allclose(e1.alpha, e2.alpha)
    np.testing.assert_allclose(e1.global_alpha, e2.global_alpha)
    before = e1.alpha.copy()
    e1.update(np.zeros((5, 3)), np.zeros((5, 3)))
    np.testing.assert_allclose(e1.alpha, before)


def test_ema_tracks_a_shift():
    rng = np.random.default_rng(2)
    est = EMAEstimator()
    est.add(200)
    for alpha in (0.8, 0.4):
        for _ in range(30):
            a = sample_accepts(rng, alpha, 5, (200, 1))
            est.update(a, trials_from_accepts(a, 5))
        assert abs(est.alpha.mean() - alpha) < 0.05


@settings(max_examples=30, deadline=None)
@given(c_kv=st.floats(1e-6, 1e-3), c_tok=st.floats(1e-3, 0.1), c_b=st.floats(-0.1, 0.1), c_0=st.floats(1.0, 30.0))
def test_linear_fit_recovers_coefficients(c_kv, c_tok, c_b, c_0):
    rng = np.random.default_rng(0)
    b = rng.integers(1, 128, 200)
    q = rng.integers(1, 9, 200)
    L = rng.integers(0, 4096, 200)
    truth = LinearStepModel(c_kv, c_tok, c_b, c_0)
    fit = fit_linear_step_model(b, q, L, truth.step_fn(b, q, L))
    np.testing.assert_allclose([fit.model.c_kv, fit.model.c_tok, fit.model.c_b, fit.model.c_0],
                               [c_kv, c_tok, c_b, c_0], rtol=1e-6, atol=1e-9)
    assert fit.r2_test > 0.999999


def test_linear_fit_reports_held_out_r2_with_noise():
    rng = np.random.default_rng(4)
    b, q, L = rng.integers(1, 128, 400), rng.integers(1, 9, 400), rng.integers(0, 4096, 400)
    t = TARGET.step_fn(b, q, L) * (1 + 0.02 * rng.standard_normal(400))
    fit = fit_linear_step_model(b, q, L, t, test_fraction=0.25, seed=1)
    assert fit.n_test == 100 and 0.9 < fit.r2_test <= 1.0
    assert "held-out" in fit.report() and '"r2_test"' in fit.to_json()
    with pytest.raises(InvalidInputError):
        fit_linear_step_model([1, 2], [1, 1], [0, 0], [1e-3, 2e-3])


def test_published_coefficients_carry_their_source():
    for m in TURBOSPEC_PUBLISHED.values():
        assert "2406.14066" in m.source and m.r2 is not None
    m = TURBOSPEC_PUBLISHED["llama-3.1-70b-tp4-h100"]
    # 1 request, q = 1, 1000 tokens of context: c_0 + c_kv*1000 + c_tok + c_b ms
    assert m.step_fn(1, 1, 1000) == pytest.approx((18.35 + 0.0624 + 0.064 - 0.040) * 1e-3)


def test_batch_step_model_matches_its_step_functions():
    sm = small_model(spec_overhead_frac=0.05)
    for n, k, L in [(1, 0, 0.0), (7, 3, 1000.0), (64, 7, 4096.0), (3, 2, 777.7)]:
        expect = k * DRAFT.step_fn(n, 1, L) + TARGET.step_fn(n, k + 1, L) * (1.05 if k else 1.0)
        assert sm.decode_time(n, k, L) == pytest.approx(expect, rel=1e-9)
    # per-request lengths: uniform k_r reproduces the uniform step time
    assert sm.decode_time_mixed(np.full(5, 3), 1000.0) == pytest.approx(sm.decode_time(5, 3, 1000.0))
    mixed = sm.decode_time_mixed(np.array([0, 2, 4]), 500.0)
    expect = (TARGET.step_fn(3, 3.0, 500) * 1.05 + DRAFT.step_fn(2, 1, 500) * 2 + DRAFT.step_fn(1, 1, 500) * 2)
    assert mixed == pytest.approx(expect, rel=1e-9)
    assert sm.prefill_time(2, 1000, True) == pytest.approx(TARGET.step_fn(2, 500, 0) + DRAFT.step_fn(2, 500, 0),
                                                           rel=1e-3)
    with pytest.raises(InvalidInputError):
        sm.decode_time(65, 1, 100.0)
    with pytest.raises(InvalidInputError):
        BatchStepModel(TARGET.step_fn, None, max_batch=4).decode_time_mixed([1, 1], 10.0)


def test_mixed_batch_time_is_linear_model_exact():
    ctx = [100, 300, 800]
    t = mixed_batch_time(TARGET.step_fn, ctx, k=2, prefill_tokens=[512], draft_fn=DRAFT.step_fn)
    n_tok = 3 * 3 + 512
    expect = TARGET.time_s(sum(ctx), n_tok, 4) + 2 * DRAFT.step_fn(3, 1, np.mean(ctx))
    assert t == pytest.approx(float(expect))
    with pytest.raises(InvalidInputError):
        mixed_batch_time(TARGET.step_fn, ctx, k=1)


def _allocate_by_rounds(alpha, budget, max_k):
    """The proportional rule one unit per round (largest deficit first), as a reference."""
    share = budget * alpha / alpha.sum()
    k = np.minimum(np.floor(share).astype(np.int64), max_k)
    left = budget - int(k.sum())
    while left > 0:
        open_ = k < max_k
        deficit = np.where(open_, share - k, -np.inf)
        order = np.argsort(-deficit, kind="stable")[: min(left, int(open_.sum()))]
        k[order] += 1
        left -= order.size
    return k


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 40), max_k=st.integers(1, 7))
def test_proportional_allocation_equals_the_round_by_round_rule(seed, n, max_k):
    rng = np.random.default_rng(seed)
    alpha = rng.uniform(0.05, 0.95, n)
    budget = int(rng.integers(1, n * max_k + 1))
    k = allocate_per_request(alpha, budget, max_k, "proportional")
    ref = _allocate_by_rounds(alpha, budget, max_k)
    assert k.sum() == ref.sum() == budget
    # equal up to ties between equal deficits: the sorted allocations and the shares they follow agree
    assert np.all(np.abs(k - budget * alpha / alpha.sum()) < 1.0 + 1e-9) or np.array_equal(np.sort(k), np.sort(ref))


def test_at_context_is_linear_interpolation_on_the_grid():
    sm = small_model(context_points=9)
    row = sm.decode[4, 3]
    ctx = np.array([0.0, 100.0, 511.9, 2048.0, 4095.0, 4096.0])
    np.testing.assert_allclose(sm.at_context(row, ctx), np.interp(ctx, sm.ctx_grid, row), rtol=1e-12)
    np.testing.assert_allclose(sm.at_context(sm.decode[4], 777.0), [np.interp(777.0, sm.ctx_grid, r) for r in sm.decode[4]])
    np.testing.assert_allclose(sm.decode_time(5, [0, 3], [777.0, 100.0]),
                               [np.interp(777.0, sm.ctx_grid, sm.decode[4, 0]), np.interp(100.0, sm.ctx_grid, row)])


def _linear_rows(rng, m, ks=range(8)):
    """Random uniform-k steps: their feature rows and the (N_kv, n, k) that made them."""
    from sdsl.serving.online_model import step_features

    rows, raw = [], []
    for _ in range(m):
        n, k, L = int(rng.integers(1, 64)), int(rng.choice(list(ks))), float(rng.uniform(64, 4000))
        rows.append(step_features(n * L, n, float(k * n), k)[0])
        raw.append((n * L, n, k))
    return np.array(rows), raw


def _observe_each(model, raw, times):
    for (kv, n, k), t in zip(raw, times):
        model.observe(np.array([kv]), n, float(k * n), k, np.array([t]))


def test_online_model_starts_at_its_prior_and_learns_exact_coefficients():
    from sdsl.serving.online_model import OnlineStepModel, prior_coefficients

    truth = prior_coefficients(TARGET, DRAFT)
    model = OnlineStepModel(truth * 2.0, max_k=7, window=400, prior_weight=1e-6)
    np.testing.assert_allclose(model.decode_time_all_k(4, 1000.0),
                               2.0 * np.array([k * DRAFT.step_fn(4, 1, 1000.0) + TARGET.step_fn(4, k + 1, 1000.0)
                                               for k in range(8)]), rtol=1e-9)
    x, raw = _linear_rows(np.random.default_rng(0), 300)
    _observe_each(model, raw, x @ truth)
    model.refit_if_due()
    for n, L in [(1, 100.0), (17, 2500.0)]:
        expect = [k * DRAFT.step_fn(n, 1, L) + TARGET.step_fn(n, k + 1, L) for k in range(8)]
        np.testing.assert_allclose(model.decode_time_all_k(n, L), expect, rtol=1e-4)


def test_online_model_keeps_the_prior_where_the_window_says_nothing():
    """Only k = 0 steps observed: the draft's coefficients stay at the prior, the target's are learnt."""
    from sdsl.serving.online_model import OnlineStepModel, prior_coefficients

    truth = prior_coefficients(TARGET, DRAFT)
    prior = truth * np.array([1.5, 1.5, 1.5, 1.5, 3.0, 3.0, 3.0])
    model = OnlineStepModel(prior, max_k=7, window=256)
    x, raw = _linear_rows(np.random.default_rng(1), 256, ks=[0])
    _observe_each(model, raw, x @ truth)
    coef = model.refit()
    np.testing.assert_allclose(coef[4:], prior[4:], rtol=1e-6)
    assert abs(x @ coef / (x @ truth) - 1.0).max() < 0.02
    with pytest.raises(InvalidInputError):
        OnlineStepModel(np.ones(3), max_k=7)


def test_controller_with_an_online_pricer_matches_the_table_when_the_fit_is_exact():
    from sdsl.serving.online_model import OnlineStepModel, prior_coefficients

    sm = small_model()
    pricer = OnlineStepModel(prior_coefficients(TARGET, DRAFT), max_k=7)
    table, online = GoodputController(sm, 7), GoodputController(pricer, 7)
    rng = np.random.default_rng(5)
    for _ in range(20):
        alpha = rng.uniform(0.1, 0.95, int(rng.integers(1, 64)))
        ctx = float(rng.uniform(64, 4000))
        assert online.uniform_k(alpha, ctx) == table.uniform_k(alpha, ctx)


def test_online_model_window_keeps_the_last_steps():
    """Blocks of steps wrap around the window; the fit equals a fit on the last ``window`` steps alone."""
    from sdsl.serving.online_model import OnlineStepModel, prior_coefficients

    truth = prior_coefficients(TARGET, DRAFT)
    rng = np.random.default_rng(2)
    times = None
    wrapped, direct = OnlineStepModel(truth, max_k=7, window=50), OnlineStepModel(truth, max_k=7, window=50)
    blocks = []
    for _ in range(40):  # 40 blocks of 1..12 steps of one batch composition each
        n, k, m = int(rng.integers(1, 64)), int(rng.integers(0, 8)), int(rng.integers(1, 13))
        kv = rng.uniform(64, 4000, m) * n
        times = kv * 1e-7 * (1.0 + 0.1 * rng.standard_normal(m)) + 1e-3 * (1 + k)  # not linear: the fit depends on rows
        wrapped.observe(kv, n, float(k * n), k, times)
        blocks += [(kv[i], n, k, times[i]) for i in range(m)]
    for kv, n, k, t in blocks[-50:]:
        direct.observe(np.array([kv]), n, float(k * n), k, np.array([t]))
    np.testing.assert_allclose(wrapped.refit(), direct.refit(), rtol=1e-9)
