"""Fit the elementwise-kernel terms of the latency model to Vidur's measured norm, RoPE, activation
and residual-add kernels (:func:`sdsl.fit.profiles.read_vidur_elementwise`).

The model is :func:`sdsl.roofline.latency.elementwise_time` (the same function that prices a step):
t = t_ew + max(r_kind · row, T · moved · dtype / (η_kind · bandwidth)), one-thread-block-per-token
kernels limited by one block's row at few tokens and by bandwidth at many (roofline, Williams,
Waterman & Patterson 2009). Fitted on log-time with bounded least squares: t_ew, η for each kind
(norm, rope, act, add) and r for the row-limited kinds (norm, rope, gated act).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sdsl.roofline.latency import ELEMENTWISE_KINDS, LatencyParams, elementwise_time
from sdsl.errors import ProfileError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["ELEMENTWISE_FIELDS", "predict_elementwise_times", "fit_elementwise", "with_elementwise"]

ELEMENTWISE_FIELDS = ("t_elementwise",) + tuple(f"eta_{k}" for k in ELEMENTWISE_KINDS) + ("row_norm", "row_rope", "row_act")
_LO = {"t_elementwise": 0.0, "row_norm": 0.0, "row_rope": 0.0, "row_act": 0.0}
_HI = {"t_elementwise": 1e-4, "row_norm": 1e-7, "row_rope": 1e-7, "row_act": 1e-7}
_X0 = {"t_elementwise": 2e-6, "row_norm": 5e-10, "row_rope": 5e-10, "row_act": 5e-10}
_SCALE = {"t_elementwise": 1e-6, "row_norm": 1e-10, "row_rope": 1e-10, "row_act": 1e-10}


def predict_elementwise_times(rows: "pd.DataFrame", hardware, params: LatencyParams) -> np.ndarray:
    """Predicted time (s) of each elementwise row (columns kind, num_tokens, row_elements, moved_elements,
    row_limited; optional ``kernels``: kernels the row's timer spans, each priced alike)."""
    out = np.empty(len(rows))
    for kind, g in rows.groupby("kind", sort=False):
        idx = rows.index.get_indexer(g.index)
        out[idx] = elementwise_time(kind, g["num_tokens"].to_numpy(float), g["row_elements"].to_numpy(float),
                                    g["moved_elements"].to_numpy(float), 2, hardware.mem_bandwidth, params,
                                    row_limited=g["row_limited"].to_numpy(bool))
    return out * rows["kernels"].to_numpy(float) if "kernels" in rows else out


def fit_elementwise(rows: "pd.DataFrame", hardware, base: LatencyParams) -> tuple[LatencyParams, dict]:
    """``(params, stats)``: ``base`` with the elementwise fields fitted to ``rows``; stats holds the
    in-sample MAPE overall and per kind and the row count."""
    from scipy.optimize import least_squares

    if len(rows) == 0:
        raise ProfileError("No elementwise rows to fit.")
    rows = rows.reset_index(drop=True)
    names = list(ELEMENTWISE_FIELDS)
    logy = np.log(rows["time_s"].to_numpy(float))

    def params_of(x):
        return base.replace(**dict(zip(names, map(float, x))))

    x0 = [_X0.get(n, 0.5) for n in names]
    sol = least_squares(lambda x: np.log(predict_elementwise_times(rows, hardware, params_of(x))) - logy, x0,
                        bounds=([_LO.get(n, 1e-3) for n in names], [_HI.get(n, 1.0) for n in names]),
                        x_scale=[_SCALE.get(n, 0.1) for n in names], max_nfev=2000)
    params = params_of(sol.x)
    ape = np.abs(predict_elementwise_times(rows, hardware, params) / rows["time_s"].to_numpy(float) - 1.0)
    by_kind = {k: float(ape[(rows["kind"] == k).to_numpy()].mean()) for k in sorted(rows["kind"].unique())}
    return params, {"mape": float(ape.mean()), "mape_by_kind": by_kind, "n": int(len(rows))}


def vidur_elementwise_params(vidur_dirs, hw, base: LatencyParams) -> tuple[LatencyParams, dict]:
    """:func:`fit_elementwise` on the elementwise rows of the Vidur folders ``vidur_dirs``."""
    import pandas as pd

    from sdsl.fit.vidur import read_vidur_elementwise

    rows = pd.concat([_vidur_elementwise(p, read_vidur_elementwise) for p in vidur_dirs], ignore_index=True)
    return fit_elementwise(rows, hw, base)


def with_elementwise(res, vidur_dirs, hw, fitted: tuple[LatencyParams, dict] | None = None):
    """A CalibrationResult ``res`` (GEMMs) with the elementwise kernels of the Vidur folders ``vidur_dirs``
    fitted too (``fitted``: that fit's ``(params, stats)`` when already done)."""
    from dataclasses import replace

    ew, stats = fitted or vidur_elementwise_params(vidur_dirs, hw, res.params)
    params = res.params.replace(**{k: getattr(ew, k) for k in ELEMENTWISE_FIELDS})
    source = params.source + f"; elementwise kernels fitted to {stats['n']} Vidur timings (MAPE {100 * stats['mape']:.1f}%)"
    return replace(res, params=params.replace(source=source), varied=res.varied + tuple(
        k for k in ("t_elementwise", "eta_norm", "eta_rope", "eta_act", "eta_add", "row_norm", "row_rope", "row_act")))


def _vidur_elementwise(path: Path, reader):
    """Elementwise rows of a Vidur root (``<gpu>/<org>/<model>``) or one GPU's folder (``<org>/<model>``)."""
    if any(path.glob("*/*/*/mlp.csv")):
        return reader(path)
    return reader(path.parent, hardware=path.name)
