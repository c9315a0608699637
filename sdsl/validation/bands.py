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

**Classes** (:data:`LATENCY_CLASSES`, :data:`ACCEPTANCE_CLASSES`): plain decode (dense) and speculative (dense)
pooled and by engine family, the MoE plain, speculative and speed-up rows, and acceptance measured by the user,
from the same target's catalog rows, or transferred. A class with fewer than :data:`MIN_ROWS` rows has no band of
its own and uses its parent's.

**Band.** Split-conformal (Vovk et al. 2005; Lei et al. 2018, JASA 113:1094, §2.2) on the class's residuals,
two-sided at level 0.8: with the n residuals sorted, low = r_(⌊0.1·(n+1)⌋) and high = r_(⌈0.9·(n+1)⌉) (so an
exchangeable new residual falls inside with probability ≥ 0.8; n ≥ 9 is needed), then widened to hold 0 so the
point estimate is always inside. The band of a prediction is predicted·exp([low, high]) (a TPOT's is
TPOT·exp([−high, −low])).

**Coverage** (:func:`coverage`): cross-fitted by source — each source's rows of a class are checked against the
band built (with the same parent fall-back) from the other sources' rows only, so a row's own residual, or its
source's, never sets its band. Goal: between 0.70 and 0.90 per class for the 0.80 band. Two more checks: the
rule for an engine profile without rows (:func:`profile_check`: each profile's rows against the widest band built
as if it had none), and the combination of step-time and acceptance bands on rows where both are predicted
(:func:`combined_check`).

The shipped bands (``sdsl/data/bands.json``, read by :mod:`sdsl.speculation.bands`) are :func:`compute_bands`
written by ``sdsl validate bands --write``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Residual", "LATENCY_CLASSES", "ACCEPTANCE_CLASSES", "LEVEL", "MIN_ROWS", "COVERAGE_GOAL",
           "conformal_band", "class_bands", "coverage", "combined_check", "profile_check", "widest", "residuals", "compute_bands", "validate_bands", "BANDS_FILE"]

LEVEL = 0.8
MIN_ROWS = 9  # the fewest residuals whose split-conformal 0.8 band is finite on both sides
COVERAGE_GOAL = (0.70, 0.90)
BANDS_FILE = "bands.json"

#: class -> (parent used when the class has fewer than MIN_ROWS rows, what it holds). ``decode:<engine>`` and
#: ``speculative:<engine>`` are made for every engine family with rows.
LATENCY_CLASSES = {
    "decode": (None, "plain decoding of a dense target, every engine (published rows and the MoE set's dense "
                     "comparisons)"),
    "speculative": (None, "speculative decoding of a dense target with the measured accepted length, every engine"),
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


def _all_classes(rows, kind: str) -> dict:
    base = LATENCY_CLASSES if kind == "latency" else ACCEPTANCE_CLASSES
    out = dict(base)
    for r in rows:
        for c in r.classes if r.kind == kind else ():
            if c not in out:
                parent = c.split(":")[0]
                out[c] = (parent, f"{base[parent][1]}: {c.split(':', 1)[1]} only")
    return out


def class_bands(rows, kind: str, level: float = LEVEL, exclude_source=None) -> dict:
    """{class: band} for ``kind`` ("latency" or "acceptance") from ``rows`` (less those of ``exclude_source``, a
    source or a predicate on a Residual): each class's own split-conformal band, or its parent's when it has too few
    rows (``own`` False), or None."""
    classes = _all_classes(rows, kind)
    drop = exclude_source if callable(exclude_source) else (lambda r: r.source == exclude_source)
    sel = [r for r in rows if r.kind == kind and not drop(r)]
    own = {}
    for c in classes:
        mine = [r for r in sel if c in r.classes]
        own[c] = (conformal_band([r.r for r in mine], level), mine)
    out = {}
    for c, (parent, what) in classes.items():
        band, mine = own[c]
        used, own_band = c, band is not None
        while band is None and classes[used][0] is not None:
            used = classes[used][0]
            band = own[used][0]
        counts: dict = {}
        for r in mine:
            counts[r.source] = counts.get(r.source, 0) + 1
        out[c] = {"low": None if band is None else band[0], "high": None if band is None else band[1],
                  "own": own_band, "from_class": used, "n": len(mine), "n_sources": len(counts),
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


def coverage(rows, kind: str, level: float = LEVEL) -> dict:
    """Per class: the share of its rows inside the band built without their own source, the same parent fall-back
    included (module docstring; the goal is judged where at least :data:`MIN_ROWS` rows are checked), and beside it
    the share with only the row itself held out (``row_held_out``: what exchangeable rows would give)."""
    classes = _all_classes(rows, kind)
    sel = [r for r in rows if r.kind == kind]
    hits = {c: [] for c in classes}
    for src in sorted({r.source for r in sel}):
        bands = class_bands(sel, kind, level, exclude_source=src)
        for r in sel:
            if r.source == src:
                for c in r.classes:
                    hits[c].append(_inside(bands[c], r.r))
    by_row = _row_held_out(sel, kind, level, classes)
    out = {}
    for c in classes:
        h = [x for x in hits[c] if x is not None]
        share = float(np.mean(h)) if h else None
        judged = len(h) >= MIN_ROWS
        out[c] = {"n": len(hits[c]), "checked": len(h), "inside": int(sum(h)), "coverage": share,
                  "row_held_out": by_row[c], "goal": list(COVERAGE_GOAL),
                  "met": (COVERAGE_GOAL[0] <= share <= COVERAGE_GOAL[1]) if judged else None}
    return out


def widest(bands: dict, kind: str) -> tuple | None:
    """The envelope (lowest low, highest high) of the own bands of ``kind`` (``decode``, ``speculative``: the pooled
    class and every engine family's) in ``bands`` (:func:`class_bands`): what a profile without rows gets."""
    own = [b for name, b in bands.items() if (name == kind or name.startswith(kind + ":")) and b["own"]]
    return (min(b["low"] for b in own), max(b["high"] for b in own)) if own else None


def profile_check(rows, level: float = LEVEL) -> dict:
    """The rule for an engine profile without validation rows, checked: each profile's dense rows against the widest
    band of their class built without any row of that profile or of its rows' sources (as if the profile had none),
    per class (``decode``, ``speculative``)."""
    out = {}
    for kind in ("decode", "speculative"):
        mine = [r for r in rows if r.kind == "latency" and kind in r.classes and r.profile]
        hits, by_profile = [], {}
        for prof in sorted({r.profile for r in mine}):
            held = [r for r in mine if r.profile == prof]
            sources = {r.source for r in held}
            bands = class_bands(rows, "latency", level,
                                exclude_source=lambda r, p=prof, s=sources: r.profile == p or r.source in s)
            band = widest(bands, kind)
            inside = [bool(band[0] <= r.r <= band[1]) for r in held] if band else []
            hits += inside
            by_profile[prof] = {"n": len(held), "inside": int(sum(inside)), "low": band and band[0],
                                "high": band and band[1]}
        share = float(np.mean(hits)) if hits else None
        out[kind] = {"n": len(hits), "inside": int(sum(hits)), "coverage": share, "by_profile": by_profile,
                     "goal": list(COVERAGE_GOAL),
                     "met": share is not None and len(hits) >= MIN_ROWS and COVERAGE_GOAL[0] <= share <= COVERAGE_GOAL[1]}
    return out


def combined_check(level: float = LEVEL, rows=None) -> dict:
    """The bands combined as a prediction combines them, on rows where both acceptance and step time are predicted:
    Spec-Bench's speedups priced with the Hugging Face eager profile and the accepted length predicted from the other
    sources (:func:`sdsl.validation.acceptance_validation.specbench_ranking`). Each row's band is the speculative
    step-time band of ``hf-eager`` combined (root-sum-square per side) with the acceptance band of its rule tier,
    both built without any Spec-Bench row."""
    from sdsl.speculation.bands import combine
    from sdsl.validation.acceptance_validation import loso_predictions, specbench_ranking

    rows = residuals() if rows is None else rows
    done, _ = loso_predictions()
    ranking = specbench_ranking({p["row_id"]: p for p in done}, engine="hf-eager")
    spec_bench = lambda r: "spec-bench" in r.source.lower()  # noqa: E731  (both labels of the one source)
    lat = class_bands(rows, "latency", level, exclude_source=spec_bench)["speculative:hf-eager"]
    acc = class_bands(rows, "acceptance", level, exclude_source=spec_bench)
    tiers = {p["row_id"]: p["tier"] for p in done}
    out = []
    for g in ranking["groups"]:
        for m in g["methods"]:
            if m["speedup_with_predicted_tau"] is None:
                continue
            a_cls = "same-target" if tiers[m["row_id"]] == "same-target" else "transferred"
            low, high = combine((lat["low"], lat["high"]), (acc[a_cls]["low"], acc[a_cls]["high"]))
            r = math.log(m["measured_speedup"] / m["speedup_with_predicted_tau"])
            out.append({"row_id": m["row_id"], "target": g["target"], "hardware": g["hardware"], "method": m["method"],
                        "measured": m["measured_speedup"], "predicted": m["speedup_with_predicted_tau"], "r": r,
                        "acceptance_class": a_cls, "low": low, "high": high, "inside": bool(low <= r <= high)})
    share = float(np.mean([x["inside"] for x in out])) if out else None
    return {"rows": out, "n": len(out), "coverage": share, "goal": list(COVERAGE_GOAL),
            "latency_band_from": lat["from_class"],
            "met": share is not None and len(out) >= MIN_ROWS and COVERAGE_GOAL[0] <= share <= COVERAGE_GOAL[1]}


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
        rows.append(Residual("latency", (kind, f"{kind}:{fam}"), _log_ratio(r["error"]), r["source_key"],
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
            rows.append(Residual("latency", ("moe_speculative" if spec_row else "moe_decode",),
                                 _log_ratio(r["error"]), r["source"], rid, prof))
            if spec_row:
                rows.append(Residual("latency", ("moe_speedup",), _log_ratio(r["ratio_error"]), r["source"],
                                     rid + ":ratio", prof))
        else:  # a dense comparison: a dense row like the published ones
            kind = "speculative" if spec_row else "decode"
            rows.append(Residual("latency", (kind, f"{kind}:{fam}"), _log_ratio(r["error"]), r["source"], rid, prof))
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


def compute_bands(rows=None, level: float = LEVEL) -> dict:
    """What ``sdsl/data/bands.json`` holds: the bands per class with their provenance, the engine profiles that
    priced validation rows (a profile without any gets its class's widest band), and the coverage check."""
    rows = residuals() if rows is None else rows
    profiles: dict = {}
    for r in rows:
        if r.profile:
            profiles[r.profile] = profiles.get(r.profile, 0) + 1
    return {"format": "sdsl-bands", "format_version": 1, "level": level,
            "residual": "r = log(measured / predicted) of a speed (tokens/s, speed-up, 1/TPOT); r > 0: sdsl predicted "
                        "slower than measured",
            "method": f"split-conformal two-sided band at level {level}: sorted residuals r_(floor(0.1(n+1))) and "
                      f"r_(ceil(0.9(n+1))), widened to hold 0; a class under {MIN_ROWS} rows uses its parent's",
            "held_out": "step-time residuals: engine-profile terms fitted without the row's source (sdsl validate "
                        "published) or nothing fitted on the rows (sdsl validate moe), the measured accepted length as "
                        "tau; acceptance residuals: each row predicted from the other sources' rows, decay ratios and "
                        "tree model refitted without its source (sdsl validate acceptance)",
            "combine": "speculative figures: the latency band and the acceptance band added in log space, root-sum-"
                       "square per side (independent errors): low = -sqrt(low_l^2 + low_a^2), high = sqrt(high_l^2 + "
                       "high_a^2)",
            "command": "sdsl validate bands --write",
            "latency": class_bands(rows, "latency", level), "acceptance": class_bands(rows, "acceptance", level),
            "profiles_with_rows": dict(sorted(profiles.items())),
            "coverage": {"latency": coverage(rows, "latency", level), "acceptance": coverage(rows, "acceptance", level),
                         "combined": combined_check(level, rows), "profile_without_rows": profile_check(rows, level)}}


def _rounded(value):
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def validate_bands(*, write: bool = False) -> dict:
    """:func:`compute_bands`, and whether the shipped ``sdsl/data/bands.json`` is what it gives (``up_to_date``);
    ``write`` replaces the shipped file (atomically) with it."""
    import json

    from sdsl._io import atomic_write_text
    from sdsl._paths import data_path

    out = _rounded(compute_bands())
    path = data_path(BANDS_FILE)
    text = json.dumps(out, indent=1, sort_keys=False) + "\n"
    if write:
        atomic_write_text(path, text)
    shipped = json.loads(path.read_text()) if path.exists() else None
    return {**out, "up_to_date": shipped == json.loads(text), "path": str(path)}
