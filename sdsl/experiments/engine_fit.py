"""The engine profiles' fitted terms (sdsl/data/engines/profiles.json, ``"fit": "published"``): least squares on the
published rows each profile prices, and the same fit leaving out one source at a time.

Every published row sdsl can price is priced once with its profile (:func:`sdsl.experiments.published_rows.row_engine`;
the measured accepted length is τ) and kept as its :class:`~sdsl.core.engine.StepPieces`; varying a profile's time
terms then costs one :func:`sdsl.core.engine.host_seconds` call per row, not a new pricing. A profile's free terms
minimise Σ log(predicted / measured)² over its rows (bounded below by zero). A term no row moves keeps its fallback.

Leave-one-source-out (:func:`loso`): for each source (a PR, an issue, a README, a leaderboard), every profile is
refitted without that source's rows and the held-out rows are priced with the result. A profile left without rows (or
with a term its remaining rows cannot move) takes the term from the same engine's other profiles fitted in that fold
(the nearest by date), else the median of the term over every profile fitted in that fold, else zero. Inherited
terms (``"inherit"``: a later build that keeps an earlier build's fitted value, times a sourced ``"scale"``) follow
their parent in every fold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdsl.core.engine import FREE_TERMS, EngineProfile, engine_profiles
from sdsl.fit.engine_calibration import TERM_BOUNDS as BOUNDS

__all__ = ["Point", "published_points", "free_terms", "fit_profiles", "loso", "predict_point"]


@dataclass
class Point:
    """One published row priced with its profile: the row, the profile's catalog name, the step and its pieces."""

    spec: object  # sdsl.experiments.published_rows.RowSpec
    profile: EngineProfile  # the row's own profile (graphs switched off where the source ran without them)
    base: str  # the catalog profile whose terms it uses
    step: object  # PricedStep
    source: str  # the publication (source key)

    @property
    def plain(self) -> bool:
        return self.spec.proposer is None

    @property
    def batch(self) -> float:
        return float(self.spec.batch)

    @property
    def measured(self) -> float:
        return float(self.spec.measured)

    @property
    def metric(self) -> str:
        """The row's metric as the engine calibration names it (tpot_ms, tokens_per_s, speedup)."""
        return {"TPOT": "tpot_ms", "speedup_vs_autoregressive": "speedup"}.get(self.spec.metric, "tokens_per_s")


def _stacks(points: list[Point]) -> list:
    from sdsl.fit.engine_calibration import StackedPoints

    groups: dict = {}
    for p in points:
        groups.setdefault(p.profile.name, []).append(p)
    return [StackedPoints(g) for g in groups.values()]


def predict_point(point: Point, terms: dict | None = None) -> float:
    """The row's metric with ``terms`` (the profile's time terms overridden): tokens/s, TPOT (ms) or speedup."""
    from sdsl.fit.engine_calibration import StackedPoints

    return float(StackedPoints([point]).predict(terms)[0])


def published_points(row_sets=None) -> tuple[list[Point], list[dict]]:
    """(every published row sdsl can price, priced with its profile; the rows it cannot price with the reason)."""
    from sdsl.core.deployment import Deployment
    from sdsl.core.speculation import price_step
    from sdsl.experiments.published_rows import (Unpriceable, interpret_decode, interpret_speculative, load_rows,
                                                 row_engine)
    from sdsl.experiments.published_validation import source_key

    points, unpriced = [], []
    for name, interpret in (("decode", interpret_decode), ("speculative", interpret_speculative)):
        for i, row in enumerate(load_rows(name, row_sets)):
            try:
                spec = interpret(row, i)
                profile = row_engine(spec)
            except Unpriceable as exc:
                unpriced.append({"file": name, "row": i, "source": row["source"], "row_set": row.get("row_set", ""),
                                 "reason": str(exc)})
                continue
            dep = Deployment(spec.hardware, tp=spec.tp, dtype="bf16", context=spec.context, engine=profile)
            step = price_step(spec.target, spec.proposer or "ngram", dep,
                              tau=spec.accepted_length if spec.proposer else 1.0,
                              gamma=None if spec.tree else (spec.gamma if spec.proposer else 0), tree=spec.tree,
                              batch=spec.batch)
            points.append(Point(spec, profile, profile.name.split("+")[0], step, source_key(spec.source)))
    return points, unpriced


def free_terms(profile: EngineProfile) -> tuple:
    """The terms of ``profile`` fitted on published rows (``"fit": "published"`` in profiles.json)."""
    return tuple(t for t in FREE_TERMS if (profile.sources.get(t) or {}).get("fit") == "published")


def _inherits(profile: EngineProfile) -> dict:
    """{term: (parent profile, scale)} of the terms ``profile`` inherits."""
    out = {}
    for t in FREE_TERMS:
        src = profile.sources.get(t) or {}
        if "inherit" in src:
            out[t] = (src["inherit"], float(src.get("scale", 1.0)))
    return out


def _resolve(catalog: dict, params: dict, only=None) -> dict:
    """{profile: {term: value}} from the free parameters ``params`` {(profile, term): value}: a free term is its
    parameter, an inherited term its parent's value times the scale, any other term the profile's own value."""
    out = {}

    def value(name, term, depth=0):
        prof = catalog[name]
        if (name, term) in params:
            return params[(name, term)]
        parent = _inherits(prof).get(term)
        if parent is not None and depth < 8:
            return value(parent[0], term, depth + 1) * parent[1]
        return getattr(prof, term)

    for name in (catalog if only is None else only):
        out[name] = {t: float(value(name, t)) for t in FREE_TERMS}
    return out


def _components(catalog: dict, keys: list) -> list:
    """Groups of free parameters fitted together: a profile's own free terms, joined with the profiles whose terms
    inherit from it (their rows inform the shared terms)."""
    owner = {}
    for name, prof in catalog.items():
        root, seen = name, 0
        while seen < 8:
            parents = [par for t, (par, _) in _inherits(catalog[root]).items() if par in catalog]
            if not parents:
                break
            root, seen = parents[0], seen + 1
        owner[name] = root
    groups: dict = {}
    for key in keys:
        groups.setdefault(owner[key[0]], []).append(key)
    members = {}
    for name, root in owner.items():
        members.setdefault(root, []).append(name)
    return [(groups[root], members[root]) for root in groups]


def fit_profiles(points: list[Point], held_out: str | None = None) -> dict:
    """{profile name: {term: value}} of every catalog profile, its free terms (``"fit": "published"``) fitted on
    ``points`` (without the source ``held_out``) by least squares in log, inherited terms following their parent (so a
    later build's rows inform the terms it shares; such profiles are fitted together), with the module docstring's
    fallbacks for a parameter no remaining row moves; ``"_fitted"`` lists, per profile, the free terms its rows
    pinned."""
    from scipy.optimize import least_squares

    catalog = {k: v for k, v in engine_profiles().items() if k != "ideal"}
    keys = [(name, t) for name, prof in catalog.items() for t in free_terms(prof)]
    use = [p for p in points if p.source != held_out]
    params, pinned = {}, {}
    for group, members in _components(catalog, keys):
        rows = [p for p in use if p.base in members]
        if not rows:
            continue
        stacks = _stacks(rows)
        hi = np.array([BOUNDS[t] for _, t in group])

        def residuals(x, group=group, stacks=stacks, members=members):
            values = _resolve({m: catalog[m] for m in catalog}, dict(zip(group, x)), only=members)
            return np.concatenate([np.log(st.predict(values[st.points[0].base]) / st.measured) for st in stacks])

        x0 = hi / 100.0  # a fixed start: the fit does not depend on the values the file holds
        x = least_squares(residuals, x0, bounds=(np.zeros(len(group)), hi), x_scale=hi / 100.0).x
        base = residuals(x)
        for j, key in enumerate(group):  # a parameter no row moves: < 1e-6 in any log-prediction over 10% of its bound
            probe = x.copy()
            probe[j] = min(hi[j], x[j] + 0.1 * hi[j])
            if np.abs(residuals(probe) - base).max() >= 1e-6:
                pinned.setdefault(key[0], []).append(key[1])
                params[key] = float(x[j])
    for name, term in keys:  # fallbacks for parameters this fold could not pin
        if (name, term) in params:
            continue
        prof = catalog[name]
        same = [(abs(_days(catalog[o].date) - _days(prof.date)), o) for o in catalog
                if o != name and catalog[o].engine == prof.engine and term in pinned.get(o, [])]
        pooled = [params[(o, t)] for o, ts in pinned.items() for t in ts if t == term]
        params[(name, term)] = (params[(min(same)[1], term)] if same else float(np.median(pooled)) if pooled else 0.0)
    values = _resolve(catalog, params)
    values["_fitted"] = {name: pinned.get(name, []) for name in catalog}
    return values


def _days(date: str) -> float:
    import datetime

    return datetime.date.fromisoformat(date).toordinal() if date else 0.0


def loso(points: list[Point]) -> dict:
    """{source: {"values": fitted values without it, "rows": [(index into points, predicted)]}} (module docstring)."""
    out = {}
    for src in dict.fromkeys(p.source for p in points):
        values = fit_profiles(points, held_out=src)
        held = [(i, p) for i, p in enumerate(points) if p.source == src]
        rows = [(i, predict_point(p, values[p.base])) for i, p in held]
        out[src] = {"values": values, "rows": rows}
    return out
