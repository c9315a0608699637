"""What every fit check and validation shares: the published rows sdsl ships, one leave-one-group-out loop, and
one summary of signed relative errors (the median beside the pooled mean, the worst case and the signed bias: a
median alone hides a systematically optimistic model). In the base layer so that ``sdsl.fit`` and
``sdsl.validation`` both use it."""

from __future__ import annotations

import csv
from typing import Callable, Hashable, Iterable

import numpy as np

from sdsl._paths import data_path

__all__ = ["published_rows", "leave_one_group_out", "summarize_errors", "error_phrase", "monotone_floor"]


def published_rows(name: str, row_sets: tuple | None = None, path=None) -> list[dict]:
    """The rows of sdsl/data/published/<name>.csv (or ``path``) as dicts, those whose ``row_set`` (blank: ``dev``)
    is in ``row_sets`` (None: every row)."""
    with open(path or data_path("published", f"{name}.csv"), newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return rows if row_sets is None else [r for r in rows if (r.get("row_set") or "dev") in row_sets]


def leave_one_group_out(groups: Iterable[Hashable], evaluate: Callable[[Hashable], object]) -> dict:
    """{group: evaluate(group)} for each distinct group in first-seen order: ``evaluate`` fits without the group's
    rows and scores it on them (held out means held out: the caller's fit must not see the group)."""
    return {g: evaluate(g) for g in dict.fromkeys(groups)}


def summarize_errors(errors, keys: dict | None = None) -> dict:
    """Signed errors e = predicted/measured − 1 → n, median |e|, pooled (mean) |e|, median and mean signed
    e, the worst e (signed, at the largest |e|) and its size, and the share over-predicted (e > 0).

    ``keys`` ({report name: summary key}) returns ``n`` and just those figures under a report's own names."""
    e = np.asarray(list(errors), dtype=float)
    if e.size == 0:
        return {"n": 0}
    worst = e[np.argmax(np.abs(e))]
    s = {"n": int(e.size), "median_abs": float(np.median(np.abs(e))), "pooled_abs": float(np.mean(np.abs(e))),
         "median_signed": float(np.median(e)), "mean_signed": float(np.mean(e)), "worst": float(worst),
         "worst_abs": float(abs(worst)), "share_over": float(np.mean(e > 0))}
    return s if keys is None else {"n": s["n"], **{name: s[key] for name, key in keys.items()}}


def error_phrase(summary: dict, *fields: tuple) -> str:
    """The errors of ``summary`` as report text: "label 12.3%" for each (label, key) of ``fields``, "label +12.3%"
    for each (label, key, "+") (a signed error), joined by ", "."""
    return ", ".join(f"{f[0]} {100 * summary[f[1]]:{f[2] if len(f) > 2 else ''}.1f}%" for f in fields)


def monotone_floor(frame, series: list[str], along: str, time: str = "time_s") -> np.ndarray:
    """Per row of ``frame``, a lower bound on the worst |e| that any prediction non-decreasing in ``along`` (more
    tokens, a longer context: more work) can reach over the row's series (the rows equal in ``series``).

    Where a series measures t_i at a smaller ``along`` than t_j < t_i, predictions p_i <= p_j err by at least
    (t_i - t_j)/(t_i + t_j) on one of the two rows (equal at p_i = p_j = 2·t_i·t_j/(t_i + t_j)); the bound is the
    largest such pair of the series. It measures what the rows allow a monotone form (a roofline, a fixed cost plus
    bytes at a bandwidth), not any fit."""
    order = frame.sort_values(along, kind="stable")
    t = order[time].to_numpy(dtype=float)
    before = order.groupby(series, sort=False)[time].cummax().to_numpy(dtype=float)  # the largest time at less work
    pair = (before - t) / (before + t)
    bound = order.assign(_pair=pair).groupby(series, sort=False)["_pair"].transform("max")
    return bound.reindex(frame.index).to_numpy(dtype=float)
