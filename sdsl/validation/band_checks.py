"""The checks of the 80% bands beyond each class's own coverage (:mod:`sdsl.validation.bands`): the rule for an
engine profile without rows, the step-time and acceptance bands combined as a prediction combines them, and the
coverage of the band forms considered (:data:`FORMS`), each with every source held out in turn.

**Forms** (:func:`form_comparison`). ``rows``: a class borrows its parent's band only when it has fewer than
:data:`~sdsl.validation.bands.MIN_ROWS` rows (sdsl's rule before the source count). ``sources`` (the shipped
rule): a class borrows its ancestors' rows until they span :data:`~sdsl.validation.bands.MIN_SOURCES` sources,
since rows of one source share a bias and the exchangeable unit for a new deployment is the source. ``sources, weighted``:
the same, each source weighted equally in the pooled distribution (CDF pooling, Dunn, Wasserman & Ramdas 2023, JASA
118:2491, an asymptotic rule), considered and not shipped (VALIDATION.md "Uncertainty bands"). ``sources, symmetric``:
the shipped borrowing with the band ±d of the absolute residuals (Lei et al. 2018's split-conformal score,
:func:`~sdsl.validation.bands.symmetric_band`) instead of the two signed quantiles; it cannot follow a class's
systematic sign and covers a source whose errors run the other way from the rest; considered and not shipped.
"""

from __future__ import annotations

import math

import numpy as np

from sdsl.validation.bands import (BANDS_FILE, COVERAGE_GOAL, LEVEL, MIN_ROWS, MIN_SOURCES, class_bands, coverage,
                                   coverage_percent, residuals, widest)

__all__ = ["FORMS", "form_comparison", "profile_check", "combined_check", "compute_bands", "validate_bands",
           "markdown_table"]

#: name -> class_bands options of each band form compared (module docstring); ``sources`` is the shipped one.
FORMS = {"rows": {"min_sources": 0}, "sources": {}, "sources, weighted": {"weighted": True},
         "sources, symmetric": {"symmetric": True}}


def form_comparison(rows, level: float = LEVEL) -> dict:
    """{form: {kind: {class: {coverage, inside, checked, from_class}}}}: each form's coverage with each source held
    out (:func:`sdsl.validation.bands.coverage`) and, for the band built on every row, the class it was taken from."""
    out = {}
    for name, form in FORMS.items():
        out[name] = {}
        for kind in ("latency", "acceptance"):
            bands, cov = class_bands(rows, kind, level, **form), coverage(rows, kind, level, **form)
            out[name][kind] = {c: {"coverage": v["coverage"], "inside": v["inside"], "checked": v["checked"],
                                   "from_class": bands[c]["from_class"]} for c, v in cov.items()}
    return out


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


def _verdict(share: float) -> str:
    lo, hi = COVERAGE_GOAL
    return "met" if lo <= share <= hi else "**not met** (over)" if share > hi else "**not met**"


def markdown_table(bands: dict) -> str:
    """VALIDATION.md's per-class band table from a bands file (:func:`compute_bands`): each
    class with at least :data:`~sdsl.validation.bands.MIN_ROWS` rows checked, its band and where it was built, its
    coverage with each source held out under every form of :data:`FORMS`, and the shipped rule's coverage with each
    source counted once (judged where at least :data:`~sdsl.validation.bands.MIN_SOURCES` sources are checked;
    ``tools/bands_table.py`` writes it)."""
    pct = lambda x: f"{100 * (math.exp(x) - 1):+.1f}%".replace("-", "−")  # noqa: E731
    share = lambda c: "–" if c["coverage"] is None else f"{coverage_percent(c['coverage'])} ({c['inside']}/{c['checked']})"  # noqa: E731
    lines = ["| kind | class | rows / sources | band built on (rows / sources) | 80% band | source held out: "
             "row rule (before) | source rule (shipped) | sources weighted (not shipped) | absolute residuals (not shipped) | "
             "shipped, each source once (sources) | row held out | goal: rows | goal: each source once |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for kind, label in (("latency", "step time"), ("acceptance", "acceptance")):
        for name, e in bands[kind].items():
            c, forms = bands["coverage"][kind][name], [bands["coverage_by_form"][f][kind][name] for f in FORMS]
            if c["checked"] < MIN_ROWS:
                continue
            built = "own rows" if e["own"] else f"+ `{e['from_class']}`"
            row = "–" if c["row_held_out"] is None else f"{100 * c['row_held_out']:.0f}%"
            per_source = f"{coverage_percent(c['by_source'])} ({c['sources_checked']})"
            judged = _verdict(c["by_source"]) if c["sources_checked"] >= MIN_SOURCES else "too few sources"
            lines.append(f"| {label} | `{name}` | {e['n']} / {e['n_sources']} | {built} ({e['pool_n']} / "
                         f"{e['pool_sources']}) | {pct(e['low'])} … {pct(e['high'])} | "
                         + " | ".join(share(f) for f in forms)
                         + f" | {per_source} | {row} | {_verdict(c['coverage'])} | {judged} |")
    return "\n".join(lines)


def compute_bands(rows=None, level: float = LEVEL) -> dict:
    """What ``sdsl/data/bands.json`` holds: the bands per class with their provenance, the engine profiles that
    priced validation rows (a profile without any gets its class's widest band), and the coverage check."""
    rows = residuals() if rows is None else rows
    profiles: dict = {}
    for r in rows:
        if r.profile:
            profiles[r.profile] = profiles.get(r.profile, 0) + 1
    return {"format": "sdsl-bands", "format_version": 2, "level": level,
            "residual": "r = log(measured / predicted) of a speed (tokens/s, speed-up, 1/TPOT); r > 0: sdsl predicted "
                        "slower than measured",
            "method": f"split-conformal two-sided band at level {level}: sorted residuals r_(floor(0.1(n+1))) and "
                      f"r_(ceil(0.9(n+1))), widened to hold 0; a class whose rows come from fewer than {MIN_SOURCES} "
                      f"sources (or number under {MIN_ROWS}) adds its parent's rows, then the grandparent's, up to the "
                      "root, and says so (own false, from_class)",
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
                         "combined": combined_check(level, rows), "profile_without_rows": profile_check(rows, level)},
            "coverage_by_form": form_comparison(rows, level)}


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
