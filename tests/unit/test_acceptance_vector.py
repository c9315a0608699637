import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdsl.acceptance import tau
from sdsl.acceptance import decay_tau, solve_decay
from sdsl.acceptance import (Acceptance, accepted_length_with_bonus, conditional_from_marginal,
                                         marginal_from_conditional)
from sdsl.errors import InvalidInputError

probs = st.floats(0.0, 1.0)
vectors = st.lists(probs, min_size=1, max_size=10)


@settings(max_examples=200, deadline=None)
@given(probs, st.integers(0, 30))
def test_constant_p_equals_leviathan_closed_form(p, k):
    # Leviathan et al. (2023) Eq. (1) for a constant conditional vector, and exactly for from_iid
    assert Acceptance.from_iid(p).tau(k) == tau(p, k)
    if k:
        assert Acceptance.from_conditional([p] * k).tau(k) == pytest.approx(tau(p, k), rel=1e-12, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(vectors, st.integers(0, 9), st.floats(1e-3, 0.5))
def test_tau_monotone_in_each_position(p, i, bump):
    i = i % len(p)
    q = list(p)
    q[i] = min(1.0, q[i] + bump)
    assert Acceptance.from_conditional(q).tau() >= Acceptance.from_conditional(p).tau() - 1e-12


@settings(max_examples=200, deadline=None)
@given(vectors)
def test_marginal_conditional_round_trip(p):
    m = marginal_from_conditional(p)
    back = Acceptance.from_marginal(m)
    # positions after a zero marginal are unidentifiable; everything observable round-trips
    np.testing.assert_allclose(back.marginal, m, atol=1e-12)
    assert back.tau() == pytest.approx(Acceptance.from_conditional(p).tau(), abs=1e-12)
    reached = np.concatenate([[1.0], m[:-1]]) > 1e-12
    np.testing.assert_allclose(np.asarray(p)[reached], back.conditional[reached], rtol=1e-9, atol=1e-12)


def test_marginal_known_values_vllm_convention():
    # vLLM logs marginal rates; mean acceptance length = 1 + sum (vllm/v1/spec_decode/metrics.py)
    acc = Acceptance.from_marginal([0.77, 0.45, 0.24])
    np.testing.assert_allclose(acc.conditional, [0.77, 0.45 / 0.77, 0.24 / 0.45])
    assert acc.tau(3) == pytest.approx(2.46)
    assert acc.accepted_length(3, bonus_included=False) == pytest.approx(1.46)
    assert acc.tau(1) == pytest.approx(1.77)


def test_accepted_length_off_by_one():
    # gpt-fast's "Mean Accepted" 1.46 (bonus excluded) is the same acceptance as vLLM's 2.46
    with_bonus = Acceptance.from_accepted_length(2.46, 3)
    without = Acceptance.from_accepted_length(1.46, 3, bonus_included=False)
    assert with_bonus == Acceptance.from_accepted_length(2.46, 3, source="accepted-length")
    assert without.tau(3) == pytest.approx(2.46, rel=1e-9)
    assert Acceptance.from_accepted_length(1.46, 3).tau(3) == pytest.approx(1.46, rel=1e-9)
    assert accepted_length_with_bonus(1.46, bonus_included=False) == pytest.approx(2.46)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), st.floats(0.0, 1.0), st.floats(0.3, 1.4))
def test_accepted_length_reproduced_exactly(k, frac, r):
    t = 1.0 + frac * k
    acc = Acceptance.from_accepted_length(t, k, decay=r)
    assert acc.tau(k) == pytest.approx(t, rel=1e-9, abs=1e-9)
    assert np.all(np.diff(acc.conditional_at(k)) <= 1e-12) or acc.tail_ratio >= 1.0


def test_decay_raises_r_when_a_is_capped():
    a, r = solve_decay(2.95, 2, 0.5)  # a = 1, r = 0.5 reaches only 2.5
    assert a == 1.0 and 0.5 < r < 1.0
    assert decay_tau(a, r, 2) == pytest.approx(2.95, rel=1e-9)


def test_iid_alpha_matches_tau_at_k():
    acc = Acceptance.from_marginal([0.8, 0.6, 0.4, 0.2])
    for k in range(1, 5):
        assert tau(acc.iid_alpha(k), k) == pytest.approx(acc.tau(k), rel=1e-9)
    assert acc.iid_alpha(0) == pytest.approx(0.8)


def test_tau_broadcasts_over_k():
    acc = Acceptance.from_accepted_length(3.0, 4)
    ks = np.array([[0, 1], [4, 8]])
    out = acc.tau(ks)
    assert out.shape == (2, 2)
    assert out[0, 0] == 1.0 and out[1, 0] == pytest.approx(3.0)
    assert out[1, 1] > out[1, 0]


def test_dict_round_trip_and_json(tmp_path):
    acc = Acceptance.from_accepted_length(3.1, 4)
    assert Acceptance.from_dict(acc.to_dict()) == acc
    path = tmp_path / "acc.json"
    acc.to_json(path, k=4)
    import json

    d = json.loads(path.read_text())
    assert d["tau"] == pytest.approx(3.1) and len(d["marginal"]) == 4
    assert Acceptance.from_dict({"marginal": d["marginal"]}).tau(4) == pytest.approx(3.1)


@pytest.mark.parametrize("bad", [
    lambda: Acceptance.from_conditional([0.5, 1.2]),
    lambda: Acceptance.from_conditional([-0.1]),
    lambda: Acceptance.from_conditional([]),
    lambda: Acceptance.from_marginal([0.5, 0.7]),  # a marginal rate cannot grow
    lambda: Acceptance.from_accepted_length(5.5, 4),  # above k + 1
    lambda: Acceptance.from_accepted_length(0.5, 4),
    lambda: Acceptance.from_accepted_length(4.5, 4, bonus_included=False),
    lambda: Acceptance.from_accepted_length(2.0, 0),
    lambda: Acceptance.from_marginal([0.8, 0.5]).tau(3),  # a measured vector does not extrapolate
    lambda: Acceptance.from_iid(float("nan")),
    lambda: Acceptance.from_dict({"alpha": 0.5}),
])
def test_bad_input_is_one_sentence(bad):
    with pytest.raises(InvalidInputError) as e:
        bad()
    msg = str(e.value)
    assert msg.endswith(".") and "\n" not in msg


def test_conditional_from_marginal_zero_tail():
    np.testing.assert_allclose(conditional_from_marginal([0.5, 0.0, 0.0]), [0.5, 0.0, 0.0])


def test_grid_prices_a_vector_with_its_own_tau_at_every_gamma():
    from sdsl.plan.search import evaluate_grid

    acc = Acceptance.from_accepted_length(3.1, 4)
    grid = evaluate_grid("llama-3.1-8b", "h100-sxm", drafts=["llama-3.2-1b"], gammas=range(0, 9), batch=[1, 8],
                         alpha=acc)
    taus = np.broadcast_to(grid.prediction.tau, grid.shape)[0, :, 0, 0]
    np.testing.assert_allclose(taus, acc.tau(np.arange(9)), rtol=1e-9)
    assert grid.alpha_source == "accepted-length"
