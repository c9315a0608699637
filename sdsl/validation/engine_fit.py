"""The engine profiles' fitted terms (sdsl/data/engines/profiles.json, ``"fit": "published"``): least squares on the
published rows each profile prices, and the same fit leaving out one source at a time.

Every published row sdsl can price is priced once with its profile (:func:`sdsl.validation.published_rows.row_engine`;
the measured accepted length is τ) and kept as its :class:`~sdsl.engine.profiles.StepPieces`; varying a profile's time
terms then costs one :func:`sdsl.engine.profiles.host_seconds` call per row, not a new pricing. A profile's free terms
minimise Σ log(predicted / measured)² over its rows (bounded below by zero). A term its rows cannot pin — no row
moves it, or every row it moves moves in proportion to another term of a profile with more rows (a per-step host
time and a per-speculative-step one, where no row tells them apart) — takes the fallback below and the rest are
refitted with it held.

Leave-one-source-out (:func:`loso`): for each source (a PR, an issue, a README, a leaderboard), every profile is
refitted without that source's rows and the held-out rows are priced with the result. A profile left without rows (or
with a term its remaining rows cannot pin) takes the term from the same engine's other profiles fitted in that fold
(the nearest by date), else the median of the term over every profile fitted in that fold or measured outright
(the custom all-reduce latencies measured in NVIDIA's operator tables, ``"fit": "measured"``), else zero. Inherited
terms (``"inherit"``: a later build that keeps an earlier build's fitted value, times a sourced ``"scale"``) follow
their parent in every fold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdsl._evidence import leave_one_group_out
from sdsl.engine.profiles import FREE_TERMS, EngineProfile, engine_profiles
from sdsl.validation.published_rows import ENGINE_SETS
from sdsl.fit.engine_calibration import TERM_BOUNDS as BOUNDS

__all__ = ["Point", "published_points", "free_terms", "fit_profiles", "loso", "predict_point"]


@dataclass
class Point:
    """One published row priced with its profile: the row, the profile's catalog name, the step and its pieces."""

    spec: object  # sdsl.validation.published_rows.RowSpec
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


def published_points(row_sets=ENGINE_SETS) -> tuple[list[Point], list[dict]]:
    """(every published row sdsl can price, priced with its profile; the rows it cannot price with the reason)."""
    from sdsl.roofline.deployment import Deployment
    from sdsl.speculation.step import price_step
    from sdsl.validation.published_rows import (Unpriceable, interpret_decode, interpret_speculative, load_rows,
                                                 row_engine, source_key)

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
            dep = Deployment(spec.hardware, tp=spec.tp, dtype="bf16", weight_dtype=spec.weight_dtype,
                             kv_dtype=spec.kv_dtype, context=spec.context, engine=profile)
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
    """Groups of free parameters fitted together: a profile's own free terms, joined with every profile linked to it
    by an inherited term in either direction (their rows inform the shared terms; the links are joined transitively,
    so two builds that inherit different terms from each other form one group)."""
    parent = {name: name for name in catalog}

    def find(name):
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for name, prof in catalog.items():
        for _, (par, _scale) in _inherits(prof).items():
            if par in catalog:
                parent[find(name)] = find(par)
    groups: dict = {}
    for key in keys:
        groups.setdefault(find(key[0]), []).append(key)
    members: dict = {}
    for name in catalog:
        members.setdefault(find(name), []).append(name)
    return [(groups[root], members[root]) for root in groups]


def _identifiable(residuals, x, hi) -> list:
    """Indices of the parameters the rows can pin: a column of the Jacobian that is not zero, and not proportional
    to the column of a parameter kept before it (parameters are ordered by how many rows their profile has)."""
    base = residuals(x)
    cols = []
    for j in range(len(x)):
        probe = x.copy()
        probe[j] = x[j] + 0.01 * hi[j]
        cols.append((residuals(probe) - base) / (0.01 * hi[j]))
    keep, units = [], []
    for j, c in enumerate(cols):
        norm = np.linalg.norm(c)
        if norm < 1e-6:
            continue
        u = c / norm
        if any(abs(float(u @ v)) > 1 - 1e-6 for v in units):
            continue
        keep.append(j)
        units.append(u)
    return keep


def _fit_component(catalog, group, stacks, members, fixed: dict):
    """(pinned parameters {key: value}, keys the rows cannot pin) of one component, with ``fixed`` parameters held."""
    from scipy.optimize import least_squares

    hi_all = np.array([BOUNDS[t] for _, t in group])

    zeros = {k: 0.0 for k in group}  # a parameter neither fitted nor fixed is 0, never the value the file holds

    def residuals_for(free):
        def residuals(x):
            values = _resolve(catalog, {**zeros, **fixed, **dict(zip(free, x))}, only=members)
            return np.concatenate([np.log(st.predict(values[st.points[0].base]) / st.measured) for st in stacks])
        return residuals

    keep = [group[j] for j in _identifiable(residuals_for(group), hi_all / 100.0, hi_all)]
    if not keep:
        return {}, list(group)
    hi = np.array([BOUNDS[t] for _, t in keep])
    x = least_squares(residuals_for(keep), hi / 100.0, bounds=(np.zeros(len(keep)), hi), x_scale=hi / 100.0).x
    return {key: float(v) for key, v in zip(keep, x)}, [k for k in group if k not in keep]


def _fallbacks(catalog, keys, params, pinned) -> dict:
    """The value of every free parameter its fold could not pin: the same engine's nearest profile (by date) that
    pinned it, else the median over the profiles that pinned it, else zero."""
    out = {}
    for name, term in keys:
        if term in pinned.get(name, []):
            continue
        prof = catalog[name]
        same = [(abs(_days(catalog[o].date) - _days(prof.date)), o) for o in catalog
                if o != name and catalog[o].engine == prof.engine and term in pinned.get(o, [])]
        pooled = [params[(o, t)] for o, ts in pinned.items() for t in ts if t == term]
        pooled += [getattr(catalog[o], term) for o in catalog  # and the terms measured outright (an engine's all-reduce)
                   if o != name and (catalog[o].sources.get(term) or {}).get("fit") == "measured"]
        out[(name, term)] = params[(min(same)[1], term)] if same else float(np.median(pooled)) if pooled else 0.0
    return out


def fit_profiles(points: list[Point], held_out: str | None = None) -> dict:
    """{profile name: {term: value}} of every catalog profile, its free terms (``"fit": "published"``) fitted on
    ``points`` (without the source ``held_out``) by least squares in log, inherited terms following their parent (so a
    later build's rows inform the terms it shares; such profiles are fitted together), with the module docstring's
    fallbacks for a parameter the remaining rows cannot pin (no row moves it, or it moves them only in proportion to
    a parameter of a profile with more rows); ``"_fitted"`` lists, per profile, the free terms its rows pinned."""
    catalog = {k: v for k, v in engine_profiles().items() if k != "ideal"}
    keys = [(name, t) for name, prof in catalog.items() for t in free_terms(prof)]
    use = [p for p in points if p.source != held_out]
    counts = {name: sum(p.base == name for p in use) for name in catalog}
    params, components = {}, []
    for group, members in _components(catalog, keys):
        rows = [p for p in use if p.base in members]
        if not rows:
            continue
        group = sorted(group, key=lambda k: -counts[k[0]])
        stacks = _stacks(rows)
        got, dropped = _fit_component(catalog, group, stacks, members, {})
        params.update(got)
        components.append((group, stacks, members, dropped))
    pinned = {}
    for name, term in params:
        pinned.setdefault(name, []).append(term)
    fallback = {}
    for _ in range(3):  # fallbacks from this fold's fits, then a refit of what the rows pin with them held (twice)
        fallback = _fallbacks(catalog, keys, params, pinned)
        for group, stacks, members, dropped in components:
            if dropped:
                fixed = {k: fallback[k] for k in dropped}
                got, _ = _fit_component(catalog, [k for k in group if k not in dropped], stacks, members, fixed)
                params.update(got)
    params.update(fallback)
    values = _resolve(catalog, {**{k: 0.0 for k in keys}, **params})
    values["_fitted"] = {name: pinned.get(name, []) for name in catalog}
    return values


def _days(date: str) -> float:
    import datetime

    return datetime.date.fromisoformat(date).toordinal() if date else 0.0


def loso(points: list[Point]) -> dict:
    """{source: {"values": fitted values without it, "rows": [(index into points, predicted)]}} (module docstring)."""
    def held_out(src):
        values = fit_profiles(points, held_out=src)
        return {"values": values, "rows": [(i, predict_point(p, values[p.base])) for i, p in enumerate(points)
                                           if p.source == src]}

    return leave_one_group_out((p.source for p in points), held_out)
