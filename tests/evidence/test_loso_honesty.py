"""Held out means held out: for `sdsl validate published`, `validate acceptance` and `validate moe`, scaling a held-out
source's own measurements leaves its held-out predictions unchanged, and setting the shipped fitted values wrong leaves
every held-out prediction unchanged (a leak of either into the fold that prices the source would move them). Each
check refits one fold, the largest source's, so the test stays cheap."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

SCALE = 2.7  # far outside any noise: a leak of the held-out rows or of the shipped values shows at once


@pytest.fixture(scope="module")
def published():
    from sdsl.validation.engine_fit import published_points

    points, _ = published_points()
    source = Counter(p.source for p in points).most_common(1)[0][0]
    return points, source


def _held_out_predictions(points, source):
    from sdsl.validation.engine_fit import fit_profiles, predict_point

    values = fit_profiles(points, held_out=source)
    return np.array([predict_point(p, values[p.base]) for p in points if p.source == source])


def test_published_fold_ignores_the_held_out_measurements(published):
    points, source = published
    base = _held_out_predictions(points, source)
    scaled = [dataclasses.replace(p, spec=dataclasses.replace(p.spec, measured=p.spec.measured * SCALE))
              if p.source == source else p for p in points]
    assert len(base) >= 5
    np.testing.assert_allclose(_held_out_predictions(scaled, source), base, rtol=1e-12)


def test_published_fold_ignores_the_shipped_terms(published, monkeypatch):
    """The catalog's shipped free terms (fitted on every source) are wrong by 2.7x: the fold refits them without the
    held-out source, so its predictions do not move (fallbacks come from the fold's own fits)."""
    import sdsl.validation.engine_fit as engine_fit
    from sdsl.engine.profiles import engine_profiles
    from sdsl.validation.engine_fit import free_terms

    points, source = published
    base = _held_out_predictions(points, source)
    wrong = {name: p.replace(**{t: getattr(p, t) * SCALE for t in free_terms(p)}) if name != "ideal" else p
             for name, p in engine_profiles().items()}
    monkeypatch.setattr(engine_fit, "engine_profiles", lambda: wrong)
    np.testing.assert_allclose(_held_out_predictions(points, source), base, rtol=1e-6)


@pytest.fixture(scope="module")
def acceptance_source():
    from sdsl.acceptance.catalog import catalog_rows

    rows = [r for r in catalog_rows() if r.accepted_length is not None]
    return Counter(r.source_id for r in rows).most_common(1)[0][0]


def _acceptance_fold(source):
    """Predictions of ``source``'s rows from the models fitted without it (sdsl validate acceptance, part 1)."""
    from sdsl.acceptance.rules import TreeModel, predict_row
    from sdsl.acceptance.catalog import catalog_rows
    from sdsl.fit.acceptance_fit import fit_decay_groups, fit_draft_temperature

    rows = catalog_rows()
    ratios = fit_decay_groups(exclude_sources=(source,), rows=rows)
    fit = fit_draft_temperature(exclude_sources=(source,), rows=rows)
    tree = TreeModel(draft_temperature=fit and fit["temperature"], draft_scores=fit is not None)
    held = [r for r in rows if r.source_id == source and r.accepted_length is not None]
    return np.array([p.get("predicted", np.nan) for p in (predict_row(r, ratios=ratios, tree=tree) for r in held)])


def _clear_caches():
    import sdsl.acceptance.rules as rules
    import sdsl.validation.acceptance_validation as av
    import sdsl.fit.acceptance_fit as af

    for mod in (rules, av, af):
        for obj in vars(mod).values():
            if hasattr(obj, "cache_clear"):
                obj.cache_clear()



def _assert_fold_unchanged(source, base, monkeypatch):
    """The source's held-out fold, recomputed under the patches in force, equals ``base``; the patches are undone."""
    _clear_caches()
    try:
        np.testing.assert_allclose(_acceptance_fold(source), base, rtol=1e-9)
    finally:
        monkeypatch.undo()
        _clear_caches()

def test_acceptance_fold_ignores_the_held_out_measurements(acceptance_source, monkeypatch):
    import sdsl.acceptance.catalog as cat

    _clear_caches()
    base = _acceptance_fold(acceptance_source)
    assert np.isfinite(base).sum() >= 5
    rows = cat.catalog_rows()
    def shrunk(r):  # every accepted token of the row scaled by 1/2.7: τ − 1 and each per-position rate
        return dataclasses.replace(r, tau=None if r.tau is None else 1.0 + (r.tau - 1.0) / SCALE, tau_upper=None,
                                   marginal=tuple(m / SCALE for m in r.marginal))

    scaled = tuple(shrunk(r) if r.source_id == acceptance_source else r for r in rows)
    assert [r.accepted_length for r in scaled if r.source_id == acceptance_source] != [
        r.accepted_length for r in rows if r.source_id == acceptance_source]
    monkeypatch.setattr(cat, "catalog_rows", lambda: scaled)
    _assert_fold_unchanged(acceptance_source, base, monkeypatch)


def test_acceptance_fold_ignores_the_shipped_decay_ratios(acceptance_source, monkeypatch):
    from sdsl.acceptance import decay

    _clear_caches()
    base = _acceptance_fold(acceptance_source)
    for group in list(decay.GROUP_DECAY):
        monkeypatch.setitem(decay.GROUP_DECAY, group, decay.GROUP_DECAY[group] / SCALE)
    _assert_fold_unchanged(acceptance_source, base, monkeypatch)


def test_moe_rows_are_priced_without_their_measurements():
    """Nothing is fitted to the MoE rows: scaling what a row measured leaves its price unchanged, and no MoE row is
    among the published rows the engine terms are fitted to."""
    from sdsl.validation.engine_fit import published_points
    from sdsl.validation.moe_validation import moe_rows, price_moe_row, row_deployment

    specs, _ = moe_rows()
    picked = [s for s in specs if s.proposer is not None][:3] + [s for s in specs if s.proposer is None][:2]
    assert len(picked) == 5
    for s in picked:
        wrong = dataclasses.replace(s, measured=s.measured * SCALE, **(
            {"plain_measured": s.plain_measured * SCALE} if s.plain_measured is not None else {}))
        a, b = price_moe_row(s, row_deployment(s)), price_moe_row(wrong, row_deployment(wrong))
        np.testing.assert_allclose(np.asarray(b.tokens_per_s), np.asarray(a.tokens_per_s), rtol=1e-12)
    points, _ = published_points()
    key = lambda r: (r.source, r.target.name, r.file, r.index)  # noqa: E731
    assert not {key(p.spec) for p in points} & {key(s) for s in specs}
