"""Chinchilla loss law, perplexity and SDSL's acceptance plane (sdsl.acceptance.plane)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sdsl.acceptance.plane import (CHINCHILLA, SDSL_PLANE, AcceptancePlane, AlphaClippedWarning, LossLaw,
                               acceptance_from_sizes, perplexity)
from sdsl.errors import InvalidInputError

sizes = st.floats(1e6, 1e12, allow_nan=False)
tokens = st.floats(1e8, 1e14, allow_nan=False)


def test_chinchilla_loss_by_hand():
    # Hoffmann et al. 2022, Eq. 2 with E=1.69, A=406.4, B=410.7, a=0.34, b=0.28 at N = 7e10, D = 1.4e12
    expected = 1.69 + 406.4 / 7e10**0.34 + 410.7 / 1.4e12**0.28
    assert CHINCHILLA.loss(7e10, 1.4e12) == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(1.9367, abs=5e-4)  # Chinchilla-70B's predicted loss


@given(sizes, sizes, tokens)
def test_loss_decreases_with_size_and_never_below_the_entropy(n1, n2, d):
    lo, hi = sorted((n1, n2))
    assert CHINCHILLA.loss(hi, d) <= CHINCHILLA.loss(lo, d)
    assert CHINCHILLA.loss(hi, d) > CHINCHILLA.E


@given(sizes, tokens)
def test_perplexity_is_exp_loss(n, d):
    assert perplexity(n, d) == pytest.approx(math.exp(CHINCHILLA.loss(n, d)), rel=1e-12)


def test_loss_broadcasts_and_rejects_non_positive():
    out = CHINCHILLA.loss(np.array([[1e8], [1e9]]), np.array([1e11, 1e12, 1e13]))
    assert out.shape == (2, 3) and np.all(np.diff(out, axis=0) < 0) and np.all(np.diff(out, axis=1) < 0)
    with pytest.raises(InvalidInputError):
        CHINCHILLA.loss(0, 1e12)
    with pytest.raises(InvalidInputError):
        CHINCHILLA.loss(1e9, np.nan)


def test_custom_law_is_used():
    flat = LossLaw(E=2.0, A=0.0, B=0.0)
    assert perplexity(1e9, 1e12, flat) == pytest.approx(math.exp(2.0))


def test_plane_formula_and_range_handling():
    assert SDSL_PLANE.raw(10.0, 8.0) == pytest.approx(-0.0067 * 10 + 0.01297 * 8 + 0.642)
    x, y = np.array([10.0, 200.0]), np.array([8.0, 8.0])  # the second gives alpha < 0
    with pytest.warns(AlphaClippedWarning, match="1 alpha"):
        clipped = SDSL_PLANE.alpha(x, y)
    assert clipped[1] == pytest.approx(1e-6) and clipped[0] == pytest.approx(SDSL_PLANE.raw(10.0, 8.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nan = SDSL_PLANE.alpha(x, y, out_of_range="nan")
    assert np.isnan(nan[1]) and np.isfinite(nan[0])
    with pytest.raises(InvalidInputError, match="outside"):
        SDSL_PLANE.alpha(x, y, out_of_range="raise")
    with pytest.raises(InvalidInputError):
        SDSL_PLANE.alpha(x, y, out_of_range="ignore")


def test_acceptance_from_sizes_composes_law_and_plane():
    plane = AcceptancePlane(A=-0.01, B=0.02, C=0.5)
    got = acceptance_from_sizes(1e8, 7e10, 1e12, 2e12, plane=plane)
    want = plane.raw(perplexity(1e8, 1e12), perplexity(7e10, 2e12))
    assert got == pytest.approx(want, rel=1e-12)


@given(st.floats(3e7, 3e9), st.floats(3e7, 3e9))
def test_bigger_draft_is_accepted_more_often(n1, n2):
    lo, hi = sorted((n1, n2))
    a = acceptance_from_sizes(np.array([lo, hi]), 7e10, out_of_range="nan")
    assert a[1] >= a[0]
