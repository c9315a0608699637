"""Refit the engine profiles' published-fitted terms and write them into sdsl/data/engines/profiles.json.

Each term marked ``"fit": "published"`` gets its value fitted on every published row its profile prices
(sdsl.validation.engine_fit.fit_profiles), the sources of those rows, and beside it the value fitted without each
source ("loso"); each inherited term (``"inherit"``) its parent's value times its ``"scale"``; each profile with
fitted terms the leave-one-source-out errors of its rows. Everything else in the file is left as it is.

    python tools/fit_engine_profiles.py          # rewrite the file
    python tools/fit_engine_profiles.py --check  # exit 1 when the committed values differ from a refit
"""

from __future__ import annotations

import json
import sys

import numpy as np

from sdsl._io import atomic_write_text
from sdsl._paths import data_path


def refit() -> dict:
    from sdsl.engine import profiles as engine
    from sdsl.validation.engine_fit import fit_profiles, free_terms, loso, published_points
    from sdsl.validation.published_rows import ENGINE_SETS
    from sdsl.validation.published_validation import speed_error, summarize

    path = data_path("engines", "profiles.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    points, _ = published_points(row_sets=ENGINE_SETS)
    full = fit_profiles(points)
    folds = loso(points)
    catalog = engine.engine_profiles()
    for entry in data["profiles"]:
        name = entry["name"]
        prof = catalog[name]
        rows = [p for p in points if p.base == name]
        for term in free_terms(prof):
            sources = sorted({p.source for p in rows})
            entry[term] = {**entry[term], "value": round(full[name][term], 9), "rows": sources,
                           "pinned": term in full["_fitted"][name],
                           "loso": {src: round(folds[src]["values"][name][term], 9) for src in folds}}
        for term in engine.FREE_TERMS:
            src = entry.get(term)
            if isinstance(src, dict) and "inherit" in src:
                entry[term] = {**src, "value": round(full[name][term], 9)}
        held = [(i, v) for fold in folds.values() for i, v in fold["rows"] if points[i].base == name]
        if free_terms(prof) or any(isinstance(entry.get(t), dict) and "inherit" in entry[t] for t in engine.FREE_TERMS):
            errs = [speed_error(v, points[i].spec.measured, points[i].spec.metric) for i, v in held]
            entry["loso_error"] = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in summarize(errs).items()} \
                if errs else {"n": 0}
    return data


def main(argv: list[str]) -> int:
    data = refit()
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    path = data_path("engines", "profiles.json")
    if "--check" in argv:
        old = json.loads(path.read_text(encoding="utf-8"))
        same = json.dumps(old, sort_keys=True) == json.dumps(json.loads(text), sort_keys=True)
        print("profiles.json is up to date" if same else "profiles.json differs from a refit")
        return 0 if same else 1
    atomic_write_text(path, text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main(sys.argv[1:]))
