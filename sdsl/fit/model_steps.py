"""Whole-forward-pass timings ("model steps") for the calibration, and their leave-one-model-out check.

A model-steps file is a CSV with one row per measured forward pass — ``model, batch, q, context,
time_s`` (seconds; other columns are kept and ignored) — next to an optional JSON sidecar of the
same name (``format: "sdsl-model-steps"``, ``models``: each model's ``ModelSpec.to_dict()``,
``hardware``, ``dtype``, clock and provenance). Models the sidecar does not describe are looked up
in sdsl's catalog. ``profiles/make_cpu_forwards.py`` writes one for the reference decoder on CPU.

Each row is priced by :func:`sdsl.roofline.latency.step_time` (docs/model.md §3.3: the per-kernel roofline plus
``t_kernel``, ``t_layer`` and the per-forward ``t_step``); :func:`sdsl.fit.calibration.fit_latency`
fits them jointly with operator and decoder-layer rows (``steps=``, ``sdsl calibrate --steps``).
:func:`sdsl.validation.forward_holdout.forwards_leave_one_model_out` refits without each model's forwards
in turn and predicts them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from sdsl._io import load_json
from sdsl.errors import ProfileError, UnknownNameError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["FORMAT", "read_model_steps", "step_sources"]

FORMAT = "sdsl-model-steps"
_REQUIRED = ("model", "batch", "q", "context", "time_s")


def read_model_steps(path: str | os.PathLike) -> tuple[list[tuple["pd.DataFrame", Any]], dict]:
    """``([(rows, ModelSpec), ...], meta)`` from a model-steps CSV (and its ``.json`` sidecar if present).

    Raises :class:`ProfileError` naming the file (and the line) for a missing column, a bad value
    or a model that neither the sidecar nor the catalog describes.
    """
    import pandas as pd

    from sdsl.catalog.models import ModelSpec, get_model

    p = Path(path)
    csv = p if p.suffix == ".csv" else p.with_suffix(".csv")
    side = csv.with_suffix(".json")
    meta: dict = {}
    if side.exists():
        meta = load_json(side)
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ProfileError(f"{side}: not an {FORMAT} sidecar (missing \"format\": \"{FORMAT}\").")
    if not csv.exists():
        raise ProfileError(f"Model-steps file not found: {csv}.")
    try:
        df = pd.read_csv(csv)
    except (ValueError, pd.errors.ParserError) as exc:
        raise ProfileError(f"{csv}: unreadable CSV ({exc}).") from None
    missing = [c for c in _REQUIRED if c not in df.columns]
    if missing:
        raise ProfileError(f"{csv}: missing column {missing[0]!r} (need {', '.join(_REQUIRED)}).")
    if len(df) == 0:
        raise ProfileError(f"{csv}: no rows.")
    num = df[["batch", "q", "context", "time_s"]].apply(pd.to_numeric, errors="coerce")
    bad = ~np.isfinite(num.to_numpy(dtype=float)).all(axis=1) | (num["time_s"] <= 0).to_numpy() \
        | (num["batch"] <= 0).to_numpy() | (num["q"] < 1).to_numpy() | (num["context"] < 0).to_numpy()
    if bad.any():
        raise ProfileError(f"{csv}, line {int(np.argmax(bad)) + 2}: batch, q, context and time_s must be "
                           "positive numbers (context may be 0).")
    df = df.assign(**{c: num[c] for c in num.columns})
    specs = meta.get("models", {}) or {}
    out = []
    for name, rows in df.groupby("model", sort=False):
        if name in specs:
            spec = ModelSpec.from_dict(specs[name])
        else:
            try:
                spec = get_model(str(name))
            except UnknownNameError:
                raise ProfileError(f"{csv}: model {name!r} is neither in the sidecar {side.name} nor in the catalog.") from None
        out.append((rows.reset_index(drop=True), spec))
    return out, meta


def step_sources(paths: Iterable[str | os.PathLike]) -> list[str]:
    """Short names of model-steps files for a calibration's ``sources``."""
    return [f"{Path(p).with_suffix('.csv').name} (forwards)" for p in paths]
