"""``sdsl validate bands``: the 80% bands sdsl puts on every predicted tokens/s, TPOT and speed-up, computed from
its own held-out residuals, and their coverage on held-out rows.

**Residuals.** A residual is r = log(measured / predicted) of a speed (tokens/s, a speed-up, 1/TPOT), so r > 0
means sdsl predicted slower than measured. Each comes from a validation that already holds its row out:

- step time with the measured accepted length as τ (an oracle input), ``sdsl validate published``: every
  priceable published row with the engine-profile terms fitted without the row's source
  (:func:`sdsl.validation.published_validation.validate_published`, its ``predicted``), and
  ``sdsl validate moe``: the mixture-of-experts rows and their dense comparisons, on which nothing is fitted
  (:func:`sdsl.validation.moe_validation.validate_moe`, tokens/s and the speculative/plain ratio);
- acceptance, ``sdsl validate acceptance``: each catalogued accepted length predicted from the other sources
  (:func:`sdsl.validation.acceptance_validation.loso_predictions`; its rule tier says same-target or transferred)
  and each k-sweep carried upwards from its smallest k with the decay ratio fitted without its source
  (:func:`~sdsl.validation.acceptance_validation.k_sweep_check`, ``leave_one_source_out``: a user's measurement
  carried to another k).

**Classes** (:data:`LATENCY_CLASSES`, :data:`ACCEPTANCE_CLASSES`): every step-time tokens/s (``all``), plain decode
(dense) and speculative (dense) pooled and by engine family, the MoE plain, speculative and speed-up rows, and
acceptance measured by the user, from the same target's catalog rows, or transferred. A class's own band needs
rows from :data:`MIN_SOURCES` sources: rows of one source share a bias (one engine build, one harness), so the unit
that is exchangeable with a new deployment is the source, and 9 units is the fewest whose 0.8 band below is finite
on both sides. A class with fewer sources (or under :data:`MIN_ROWS` rows) keeps its rows and adds its parent's,
then the grandparent's, up to the root (``moe_speculative`` → ``speculative`` → ``all``; ``speculative:vllm`` →
``speculative`` → ``all``; ``same-target`` → ``catalog``), and says so (``own`` False, ``from_class``).

**Band.** Split-conformal (Vovk et al. 2005; Lei et al. 2018, JASA 113:1094, §2.2) on the residuals of the class
(or of its pool), two-sided at level 0.8: with the n residuals sorted, low = r_(⌊0.1·(n+1)⌋) and high =
r_(⌈0.9·(n+1)⌉) (so an exchangeable new residual falls inside with probability ≥ 0.8; n ≥ 9 is needed), then widened
to hold 0 so the point estimate is always inside. The band is relative: r is a log ratio, and a prediction's band is
predicted·exp([low, high]) (a TPOT's is TPOT·exp([−high, −low])). The forms compared before this one was chosen
(a row count instead of a source count; each source weighted equally): :mod:`sdsl.validation.band_checks`.

**Coverage** (:func:`coverage`): cross-fitted by source — each source's rows of a class are checked against the
band built (with the same borrowing, counted on the remaining sources) from the other sources' rows only, so a
row's own residual, or its source's, never sets its band. Goal: between 0.70 and 0.90 per class for the 0.80 band.
More checks (:mod:`sdsl.validation.band_checks`): the rule for an engine profile without rows (each profile's rows
against the widest band built as if it had none), the combination of step-time and acceptance bands on rows where
both are predicted, and the coverage of each band form considered.

The shipped bands (``sdsl/data/bands.json``, read by :mod:`sdsl.speculation.bands`) are
:func:`sdsl.validation.band_checks.compute_bands`, written by ``sdsl validate bands --write``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Residual", "LATENCY_CLASSES", "ACCEPTANCE_CLASSES", "LEVEL", "MIN_ROWS", "MIN_SOURCES", "COVERAGE_GOAL", "coverage_percent",
           "conformal_band", "symmetric_band", "pooled_band", "class_bands", "coverage", "widest", "residuals",
           "BANDS_FILE"]

LEVEL = 0.8
MIN_ROWS = 9  # the fewest residuals whose split-conformal 0.8 band is finite on both sides
MIN_SOURCES = 9  # the fewest sources (the exchangeable units) a class's own band needs: the same rank arithmetic
COVERAGE_GOAL = (0.70, 0.90)
BANDS_FILE = "bands.json"


def coverage_percent(share: float) -> str:
    """A coverage as a whole percent, with one decimal where the whole percent would round onto an edge of
    :data:`COVERAGE_GOAL` from outside it (139 of 199 is "69.8%", not a "70%" that reads as met)."""
    whole = round(100 * share)
    outside = not COVERAGE_GOAL[0] <= share <= COVERAGE_GOAL[1]
    return f"{100 * share:.1f}%" if outside and whole in (round(100 * g) for g in COVERAGE_GOAL) else f"{whole:.0f}%"

#: class -> (parent whose rows it borrows when it has fewer than MIN_SOURCES sources, what it holds).
#: ``decode:<engine>`` and ``speculative:<engine>`` are made for every engine family with rows.
LATENCY_CLASSES = {
    "all": (None, "every step-time residual of a tokens/s: plain and speculative, dense and mixture-of-experts, "
                  "every engine"),
    "decode": ("all", "plain decoding of a dense target, every engine (published rows and the MoE set's dense "
                      "comparisons)"),
    "speculative": ("all", "speculative decoding of a dense target with the measured accepted length, every engine"),
    "moe_decode": ("decode", "plain decoding of a mixture-of-experts target"),
    "moe_speculative": ("speculative", "speculative tokens/s of a mixture-of-experts target, measured accepted length"),
    "moe_speedup": ("speculative", "speculative/plain ratio of a mixture-of-experts target, same source both sides"),
}
ACCEPTANCE_CLASSES = {
    "catalog": (None, "every catalogued accepted length predicted from the other sources' rows"),
    "same-target": ("catalog", "predicted from the same target's rows of other sources (rule tier same-target)"),
    "transferred": ("catalog", "predicted from other targets or workloads (rule tiers same-family, other-targets, "
                               "same-target-any-workload, any)"),
    "measured": (None, "a measured accepted length carried to another k (k-sweeps upward from the smallest k, the "
                       "decay ratio fitted without the sweep's source)"),
}


@dataclass(frozen=True)
class Residual:
    """One held-out residual r = log(measured / predicted) of a speed, with the classes it belongs to."""

    kind: str  # "latency" or "acceptance"
    classes: tuple
    r: float
    source: str
    row: str
    profile: str | None = None


def conformal_band(r, level: float = LEVEL) -> tuple[float, float] | None:
    """(low, high) split-conformal two-sided band of residuals ``r`` (module docstring), widened to hold 0; None when
    fewer than :data:`MIN_ROWS`-like residuals make either side infinite."""
    s = np.sort(np.asarray(list(r), dtype=float))
    n, tail = s.size, (1.0 - level) / 2.0
    lo_i, hi_i = math.floor(tail * (n + 1) + 1e-9), math.ceil((1.0 - tail) * (n + 1) - 1e-9)  # ranks, not ulps
    if n == 0 or lo_i < 1 or hi_i > n:
        return None
    return min(float(s[lo_i - 1]), 0.0), max(float(s[hi_i - 1]), 0.0)


def symmetric_band(r, level: float = LEVEL) -> tuple[float, float] | None:
    """(−d, d) with d the split-conformal quantile of |r|, r_(⌈level·(n+1)⌉) of the sorted absolute residuals (the
    absolute-residual score of Lei et al. 2018, Algorithm 2); None when that rank exceeds n. A form compared in
    :mod:`sdsl.validation.band_checks`, not the shipped one."""
    a = np.sort(np.abs(np.asarray(list(r), dtype=float)))
    i = math.ceil(level * (a.size + 1) - 1e-9)
    if a.size == 0 or i > a.size:
        return None
    return -float(a[i - 1]), float(a[i - 1])


def pooled_band(rows, level: float = LEVEL) -> tuple[float, float] | None:
    """(low, high) of residual rows (:class:`Residual`) with each source weighted equally (module docstring, "Band"):
    high is the smallest r whose pooled weight at or below it reaches the level's upper tail, low the mirror, both
    widened to hold 0; None without rows."""
    if not rows:
        return None
    r = np.array([x.r for x in rows], dtype=float)
    src = [x.source for x in rows]
    counts = {s: src.count(s) for s in set(src)}
    w = np.array([1.0 / (len(counts) * counts[s]) for s in src])
    p = 1.0 - (1.0 - level) / 2.0

    def upper(values):
        order = np.argsort(values, kind="stable")
        cum = np.cumsum(w[order])
        return float(values[order][min(int(np.searchsorted(cum, p - 1e-12)), values.size - 1)])

    return min(-upper(-r), 0.0), max(upper(r), 0.0)


def _all_classes(rows, kind: str) -> dict:
    base = LATENCY_CLASSES if kind == "latency" else ACCEPTANCE_CLASSES
    out = dict(base)
    for r in rows:
        for c in r.classes if r.kind == kind else ():
            if c not in out:
                parent = c.split(":")[0]
                out[c] = (parent, f"{base[parent][1]}: {c.split(':', 1)[1]} only")
    return out


def _pool(c: str, classes: dict, members: dict, min_sources: int) -> tuple[list, str]:
    """The rows behind class ``c``'s band and the last class they were borrowed from: its own rows, joined by its
    parent's, grandparent's, ... until they hold ``min_sources`` sources and :data:`MIN_ROWS` rows, or the root."""
    pool, used = list(members[c]), c
    while ((len({r.source for r in pool}) < min_sources or len(pool) < MIN_ROWS)
           and classes[used][0] is not None):
        used = classes[used][0]
        ids = {id(r) for r in pool}
        pool += [r for r in members[used] if id(r) not in ids]
    return pool, used


def class_bands(rows, kind: str, level: float = LEVEL, exclude_source=None, *, min_sources: int = MIN_SOURCES,
                weighted: bool = False, symmetric: bool = False) -> dict:
    """{class: band} for ``kind`` ("latency" or "acceptance") from ``rows`` (less those of ``exclude_source``, a
    source or a predicate on a Residual): each class's split-conformal band on its own rows where they span
    ``min_sources`` sources (``own``), else on its rows joined by its ancestors' (``from_class``: the last ancestor
    borrowed; ``pool_n``, ``pool_sources``: what the band was built on). ``min_sources=0`` is the rule that borrows
    only under :data:`MIN_ROWS` rows; ``weighted`` weights each source equally (:func:`pooled_band`); ``symmetric``
    takes the band of the absolute residuals (:func:`symmetric_band`); all are the forms compared in
    :func:`sdsl.validation.band_checks.form_comparison`."""
    classes = _all_classes(rows, kind)
    drop = exclude_source if callable(exclude_source) else (lambda r: r.source == exclude_source)
    sel = [r for r in rows if r.kind == kind and not drop(r)]
    members = {c: [r for r in sel if c in r.classes] for c in classes}
    out = {}
    for c, (parent, what) in classes.items():
        pool, used = _pool(c, classes, members, min_sources)
        if weighted:
            band = pooled_band(pool, level)
        else:
            band = (symmetric_band if symmetric else conformal_band)([r.r for r in pool], level)
        counts: dict = {}
        for r in members[c]:
            counts[r.source] = counts.get(r.source, 0) + 1
        out[c] = {"low": None if band is None else band[0], "high": None if band is None else band[1],
                  "own": used == c and band is not None, "from_class": used, "n": len(members[c]),
                  "n_sources": len(counts), "pool_n": len(pool), "pool_sources": len({r.source for r in pool}),
                  "sources": dict(sorted(counts.items())), "holds": what}
    return out


def _inside(band: dict, r: float):
    return None if band["low"] is None else bool(band["low"] <= r <= band["high"])


def _row_held_out(sel, kind, level, classes) -> dict:
    """Per class: whether each row lies inside its class's band built from the class's other rows (one row held out:
    the split-conformal guarantee when rows are exchangeable)."""
    hits = {c: [] for c in classes}
    for c in classes:
        mine = [r for r in sel if c in r.classes]
        if len(mine) - 1 >= MIN_ROWS:
            values = np.array([r.r for r in mine])
            for i in range(values.size):
                band = conformal_band(np.delete(values, i), level)
                hits[c].append(bool(band[0] <= values[i] <= band[1]))
    return {c: float(np.mean(h)) if h else None for c, h in hits.items()}


def coverage(rows, kind: str, level: float = LEVEL, **form) -> dict:
    """Per class: the share of its rows inside the band built without their own source, the same parent fall-back
    included (module docstring; the goal is judged where at least :data:`MIN_ROWS` rows are checked); the same share
    per source, averaged with each source counted once (``by_source``: what a new deployment, the exchangeable
    unit, can expect, so a source with many rows does not set it; judged where at least :data:`MIN_SOURCES` sources
    are checked, ``met_by_source``); and the share with only the row itself held out (``row_held_out``: what
    exchangeable rows would give)."""
    classes = _all_classes(rows, kind)
    sel = [r for r in rows if r.kind == kind]
    hits = {c: {} for c in classes}  # class -> source -> inside flags
    for src in sorted({r.source for r in sel}):
        bands = class_bands(sel, kind, level, exclude_source=src, **form)
        for r in sel:
            if r.source == src:
                for c in r.classes:
                    hits[c].setdefault(src, []).append(_inside(bands[c], r.r))
    by_row = _row_held_out(sel, kind, level, classes)
    within = lambda share: COVERAGE_GOAL[0] <= share <= COVERAGE_GOAL[1]  # noqa: E731
    out = {}
    for c in classes:
        per_source = {s: [x for x in v if x is not None] for s, v in hits[c].items()}
        per_source = {s: v for s, v in per_source.items() if v}
        h = [x for v in per_source.values() for x in v]
        share = float(np.mean(h)) if h else None
        by_source = float(np.mean([np.mean(v) for v in per_source.values()])) if per_source else None
        out[c] = {"n": sum(len(v) for v in hits[c].values()), "checked": len(h), "inside": int(sum(h)),
                  "coverage": share, "sources_checked": len(per_source), "by_source": by_source,
                  "row_held_out": by_row[c], "goal": list(COVERAGE_GOAL),
                  "met": within(share) if len(h) >= MIN_ROWS else None,
                  "met_by_source": within(by_source) if len(per_source) >= MIN_SOURCES else None}
    return out


def widest(bands: dict, kind: str) -> tuple | None:
    """The envelope (lowest low, highest high) of the bands of ``kind`` (``decode``, ``speculative``: the pooled
    class and every engine family's, own or borrowed) in ``bands`` (:func:`class_bands`): what a profile without rows
    gets."""
    own = [b for name, b in bands.items() if (name == kind or name.startswith(kind + ":")) and b["low"] is not None]
    return (min(b["low"] for b in own), max(b["high"] for b in own)) if own else None


# --- the residuals -------------------------------------------------------------------------------------------

def _log_ratio(error: float) -> float:
    """r = log(measured / predicted) from a validation's signed speed error predicted / measured − 1."""
    return -math.log1p(float(error))


def _family(profile: str) -> str:
    from sdsl.engine.profiles import engine_profiles

    base = profile.split("+")[0]
    prof = engine_profiles().get(base)
    return prof.engine if prof is not None else base


def _published(out: dict) -> list:
    rows = []
    for r in out["rows"]:
        fam = _family(r["profile"])
        kind = "speculative" if r["proposer"] else "decode"
        rows.append(Residual("latency", ("all", kind, f"{kind}:{fam}"), _log_ratio(r["error"]), r["source_key"],
                             f"published:{r['file']}#{r['row']}", r["profile"].split("+")[0]))
    return rows


def _moe(out: dict, specs) -> list:
    from sdsl.validation.moe_validation import row_engine

    rows = []
    for spec, r in zip(specs, out["rows"]):
        prof = row_engine(spec, "row").name
        fam, rid = _family(prof), f"moe:{r['file']}#{r['row']}"
        spec_row = r["proposer"] is not None
        if r["class"] == "moe":
            rows.append(Residual("latency", ("all", "moe_speculative" if spec_row else "moe_decode"),
                                 _log_ratio(r["error"]), r["source"], rid, prof))
            if spec_row:
                rows.append(Residual("latency", ("moe_speedup",), _log_ratio(r["ratio_error"]), r["source"],
                                     rid + ":ratio", prof))
        else:  # a dense comparison: a dense row like the published ones
            kind = "speculative" if spec_row else "decode"
            rows.append(Residual("latency", ("all", kind, f"{kind}:{fam}"), _log_ratio(r["error"]), r["source"], rid,
                                 prof))
    return rows


def _acceptance(done: list, sweeps: dict) -> list:
    rows = []
    for p in done:
        tier = "same-target" if p["tier"] == "same-target" else "transferred"
        rows.append(Residual("acceptance", ("catalog", tier), _log_ratio(p["error"]), p["source"],
                             f"catalog:{p['row_id']}"))
    for i, s in enumerate(x for x in sweeps["rows"] if x["model"] == "leave_one_source_out"):
        rows.append(Residual("acceptance", ("measured",), _log_ratio(s["error"]), s["source"],
                             f"k-sweep:{s['method']}:k{s['k_from']}->k{s['k']}#{i}"))
    return rows


def residuals() -> list:
    """Every held-out residual the bands are built from (module docstring), latency and acceptance."""
    from sdsl.validation.acceptance_validation import k_sweep_check, loso_predictions
    from sdsl.validation.moe_validation import moe_rows, validate_moe
    from sdsl.validation.published_validation import validate_published

    specs, _ = moe_rows()
    done, _ = loso_predictions()
    return (_published(validate_published()) + _moe(validate_moe(engine="row"), specs)
            + _acceptance(done, k_sweep_check()))
