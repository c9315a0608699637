"""Fit the tensor-parallel all-reduce term to Vidur's NCCL all-reduce timings.

Model: :func:`sdsl.roofline.kernels.allreduce_time` — NCCL's Simple ring, latency + 2(t−1)·step latency
+ 2(t−1)/t · bytes/(η · per-direction link bandwidth), or its low-latency protocol when faster (NCCL's
cost model, ``src/graph/tuning.cc``), above a fitted measurement floor.
Vidur's files (``sdsl/data/vidur/network``) hold sizes in bytes and times in ms (Vidur's profiler,
``vidur/profiling/collectives/collectives_wrapper.py``, writes ``"size": self._size * 2,  # bytes`` for
its fp16 buffer of ``_size`` elements, and its predictor divides ``size`` by 2·embedding_dim to get
tokens; the smallest size, 2048, is its first grid point of 1024 elements), for a
pairwise-NVLink node (``*_pairwise_nvlink_*``: GPUs linked in pairs, so 4-GPU all-reduces cross
PCIe) and a DGX node (``*_dgx_*``: NVSwitch, all GPUs linked; the A100 file also has multi-node
rows). :func:`nvlink_rows` keeps the all-reduces whose GPUs all share NVLink in one node — the
2-GPU rows of the pairwise file and the single-node rows of the DGX file; :func:`switch_rows` keeps
the DGX node's only (TP 2/4/8 on one fabric: what the validation fits and checks).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from sdsl._evidence import leave_one_group_out
from sdsl.roofline.kernels import allreduce_time, allreduce_time_with, smooth_max
from sdsl.roofline.latency import LatencyParams
from sdsl.errors import ProfileError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["read_allreduce", "nvlink_rows", "switch_rows", "fit_allreduce", "predict_allreduce", "best_least_squares",
           "smooth_min_log", "PROTOCOL_BLEND", "leave_one_tp_out"]


def read_allreduce(path: str | os.PathLike) -> "pd.DataFrame":
    """One all-reduce CSV in Vidur's network format as columns ``source, n_gpu, per_node, bytes, time_s``
    (``size`` is the message in bytes, as Vidur and ``sdsl profile --tp`` write it). A file without
    ``devices_per_node`` (``sdsl profile --tp``) is one node."""
    import pandas as pd

    path = Path(path)
    try:
        df = pd.read_csv(path)
        out = pd.DataFrame({"source": path.name, "n_gpu": df["num_workers"].astype(int),
                            "per_node": df.get("devices_per_node", df["num_workers"]).astype(int),
                            "bytes": df["size"].to_numpy(dtype=float),
                            "time_s": df["time_stats.all_reduce.median"].to_numpy(dtype=float) * 1e-3})
    except (OSError, KeyError, ValueError, pd.errors.ParserError) as exc:
        raise ProfileError(f"{path}: not a Vidur all-reduce file ({exc}).") from None
    return out[np.isfinite(out["time_s"]) & (out["time_s"] > 0)].reset_index(drop=True)


def nvlink_rows(frames: Iterable["pd.DataFrame"]) -> "pd.DataFrame":
    """Rows whose GPUs all share NVLink in one node: pairwise files' 2-GPU rows, DGX files' single-node rows."""
    import pandas as pd

    keep = []
    for df in frames:
        pairwise = df["source"].str.contains("pairwise")
        keep.append(df[(df["per_node"] == df["n_gpu"]) & (~pairwise | (df["n_gpu"] == 2))])
    out = pd.concat(keep, ignore_index=True)
    if len(out) == 0:
        raise ProfileError("No single-node NVLink all-reduce rows.")
    return out


def switch_rows(frames: Iterable["pd.DataFrame"]) -> "pd.DataFrame":
    """Single-node rows of the DGX (NVSwitch) files only: the node where TP 2, 4 and 8 all run over
    the same NVLink fabric, which the catalog's SXM entries (``interconnect_gbs``) describe."""
    rows = nvlink_rows(frames)
    out = rows[~rows["source"].str.contains("pairwise")].reset_index(drop=True)
    if len(out) == 0:
        raise ProfileError("No single-node DGX (NVSwitch) all-reduce rows.")
    return out


def predict_allreduce(rows: "pd.DataFrame", bandwidth: float, params: LatencyParams) -> np.ndarray:
    """Predicted time (s) of each row (columns n_gpu, bytes) with ``params``' all-reduce terms."""
    return allreduce_time_with(rows["bytes"].to_numpy(float), rows["n_gpu"].to_numpy(float), bandwidth, params)


def best_least_squares(residual, starts, lo, hi) -> np.ndarray:
    """The lowest-cost :func:`scipy.optimize.least_squares` solution over ``starts`` (each scaled by its
    start values), within the bounds ``lo``, ``hi``."""
    from scipy.optimize import least_squares

    sols = [least_squares(residual, x0, bounds=(lo, hi), x_scale=[abs(v) for v in x0]) for x0 in starts]
    return min(sols, key=lambda s: s.cost).x


def leave_one_tp_out(rows: "pd.DataFrame", fit_predict) -> "pd.DataFrame":
    """Every row of ``rows`` predicted with its GPU count held out: ``fit_predict(train, test)`` returns
    the test rows' predicted seconds from a fit on the train rows (column ``rel`` = pred/meas − 1)."""
    import pandas as pd

    def held_out(n):
        test = rows[rows["n_gpu"] == n]
        pred = np.asarray(fit_predict(rows[rows["n_gpu"] != n], test), dtype=float)
        return test.assign(rel=pred / test["time_s"].to_numpy(float) - 1.0)

    return pd.concat(list(leave_one_group_out(sorted(rows["n_gpu"].unique()), held_out).values()), ignore_index=True)


#: Fitted fields, their start values (three starts: the fit has two regimes and a floor) and bounds. Scale
#: parameters (times, efficiencies, the floor's power) are fitted as logarithms: they span decades and are
#: positive; the step latency, which may be 0, in µs.
_FIELDS = ("allreduce_floor", "allreduce_floor_smoothness", "allreduce_ll_latency", "allreduce_ll_efficiency",
           "allreduce_latency", "eta_interconnect", "allreduce_step_latency")
#: η and η_LL lie in (0, 1]: a ring moves 2(t−1)/t of the message per GPU over one direction of its
#: links, so it cannot beat the link rate (in-switch reduction, NVLS, which could, is a separate form:
#: :func:`sdsl.validation.allreduce_forms.nvls_heldout`, not adopted).
_STARTS = ([3e-5, 4.0, 1e-5, 0.3, 3e-5, 0.75, 1e-6], [3e-5, 8.0, 1e-6, 0.5, 5e-5, 0.75, 1e-6],
           [2e-5, 4.0, 5e-6, 0.8, 1e-5, 0.6, 3e-7])
#: Times are bounded below by 1 µs, Vidur's timing resolution: below it a latency is not measured, and a fit
#: whose low-latency protocol serves only the smallest messages would otherwise drift along the valley
#: ll_latency → 0 without end.
#: η_LL ≥ 1/4: NCCL's own tuning prices ring LL at 1/4–1/2 of the bus bandwidth (``src/graph/tuning.cc``); below
#: it the low-latency "protocol" is a fit artefact serving a few of the smallest messages at under 3% of the link,
#: a valley along which the fit does not converge.
_LO = [1e-6, 1.0, 1e-6, 0.25, 1e-6, 5e-4, 0.0]
_HI = [1e-3, 50.0, 1e-3, 1.0, 1e-3, 1.0, 1e-4]
_LOG = (True, True, True, True, True, True, False)
_STEP_UNIT = 1e-6  # the step latency is fitted in µs


def _encode(values, idx) -> np.ndarray:
    return np.array([np.log(values[i]) if _LOG[i] else values[i] / _STEP_UNIT for i in idx])


def _decode(x, idx) -> dict[str, float]:
    return {_FIELDS[i]: float(np.exp(v) if _LOG[i] else v * _STEP_UNIT) for i, v in zip(idx, x)}


#: Width (in log-time) over which the fit blends the two protocols' times (:func:`smooth_min_log`). NCCL
#: switches protocol at one size, so the cost of the hard minimum kinks wherever a row changes side: a
#: least-squares fit of it stops on whichever kink rounding reaches first (0.1% apart in the parameters under
#: two BLAS kernels). Blended over 2% (two of Vidur's size steps), the cost is smooth and has one minimum per
#: basin, the same to 1e-5 under every kernel; the priced model keeps the hard switch, whose cost at that
#: point is within 0.1% of the best any hard-minimum fit reaches (BENCHMARKS.md, "Fits under every BLAS").
PROTOCOL_BLEND = 0.02
#: Tolerances the conditioning supports: the smooth problem's parameters agree to 1e-5 across kernels there.
_TOL = {"xtol": 1e-14, "ftol": 1e-15, "gtol": 1e-14}


def smooth_min_log(log_a, log_b, width: float):
    """log of the soft minimum of two times given as logs, −w·log(e^(−a/w) + e^(−b/w)), and the weight of
    ``a`` in it (its derivative in ``log_a``)."""
    lo = np.minimum(log_a, log_b)
    ea, eb = np.exp(-(log_a - lo) / width), np.exp(-(log_b - lo) / width)
    return lo - width * np.log(ea + eb), ea / (ea + eb)


class _AllReduceProblem:
    """Log-time residuals of :func:`sdsl.roofline.kernels.allreduce_time` on ``rows``, the protocols blended over
    :data:`PROTOCOL_BLEND`, and their analytic Jacobian in the fitted coordinates (:func:`_encode`)."""

    def __init__(self, rows, bandwidth, use, fixed):
        self.b, self.t = rows["bytes"].to_numpy(float), rows["n_gpu"].to_numpy(float)
        self.logt, self.bw, self.use, self.fixed = np.log(rows["time_s"].to_numpy(float)), bandwidth, use, fixed
        self.wire = 2.0 * (self.t - 1.0) / self.t * self.b / bandwidth

    def values(self, x) -> dict[str, float]:
        return {**self.fixed, **_decode(x, self.use)}

    def _terms(self, x):
        v = self.values(x)
        simple = allreduce_time(self.b, self.t, self.bw, v["allreduce_latency"], v["eta_interconnect"],
                                v["allreduce_step_latency"])
        if v["allreduce_ll_efficiency"] > 0:
            ll = allreduce_time(self.b, self.t, self.bw, v["allreduce_ll_latency"], v["allreduce_ll_efficiency"])
            log_p, w_simple = smooth_min_log(np.log(simple), np.log(ll), PROTOCOL_BLEND)
        else:
            ll, log_p, w_simple = None, np.log(simple), np.ones_like(simple)
        f, p = v["allreduce_floor"], v["allreduce_floor_smoothness"]
        if f > 0:
            y = np.log(smooth_max(f, np.exp(log_p), p))
            with np.errstate(over="ignore"):
                u = 1.0 / (1.0 + np.exp(p * (log_p - np.log(f))))  # the floor's share, d y / d log f
        else:
            y, u = log_p, np.zeros_like(log_p)
        return v, simple, ll, log_p, w_simple, y, u

    def residual(self, x) -> np.ndarray:
        return self._terms(x)[5] - self.logt

    def jac(self, x) -> np.ndarray:
        """y = log smax_p(f, P) = log(f^p + P^p)/p: dy/dlog f = u = f^p/(f^p + P^p), dy/dlog P = 1 − u,
        dy/dlog p = u·log f + (1 − u)·log P − y; log P blends log S and log L with weights w, 1 − w."""
        v, simple, ll, log_p, w, y, u = self._terms(x)
        f = v["allreduce_floor"]
        ds = (1.0 - u) * w / simple
        dl = (1.0 - u) * (1.0 - w) / ll if ll is not None else np.zeros_like(ds)
        cols = {"allreduce_floor": u, "allreduce_floor_smoothness": u * np.log(f if f > 0 else 1.0) + (1.0 - u) * log_p - y,
                "allreduce_ll_latency": dl * v["allreduce_ll_latency"],
                "allreduce_ll_efficiency": -dl * self.wire / max(v["allreduce_ll_efficiency"], 1e-300),
                "allreduce_latency": ds * v["allreduce_latency"],
                "eta_interconnect": -ds * self.wire / v["eta_interconnect"],
                "allreduce_step_latency": ds * 2.0 * (self.t - 1.0) * _STEP_UNIT}
        return np.stack([cols[_FIELDS[i]] for i in self.use], axis=1)


def fit_allreduce(rows: "pd.DataFrame", hardware, base: LatencyParams | None = None, *,
                  ring_only: bool = False) -> tuple[LatencyParams, dict[str, Any]]:
    """Fit the all-reduce terms of :func:`sdsl.roofline.kernels.allreduce_time` on log-time: the floor and
    its smoothness, the LL protocol's latency and bandwidth fraction, the Simple protocol's latency,
    η and per-step latency (best of three starts, the protocols blended over :data:`PROTOCOL_BLEND` so that
    every BLAS gives the same answer; scale parameters as logarithms; analytic Jacobian). ``ring_only``: the previous form, the Simple ring alone (no LL protocol, no
    floor: VALIDATION.md's "before" rows).

    ``hardware`` (catalog name or Hardware) gives the per-direction link bandwidth. With one GPU
    count only, the step latency cannot be told from the fixed one and stays 0. Returns the
    updated params and stats (fitted values, cost = ½Σ log-residual², MAPE overall and per GPU count, n)."""
    from scipy.optimize import least_squares

    from sdsl.catalog.hardware import get_hardware

    hw = hardware if hasattr(hardware, "kind") else get_hardware(hardware)
    bw = hw.interconnect_bandwidth
    if not bw:
        raise ProfileError(f"{hw.name} has no interconnect_gbs to fit an all-reduce against; give --hardware a "
                           "catalog entry or file that has one.")
    base = base or LatencyParams()
    several = rows["n_gpu"].nunique() > 1
    use = [i for i in range(len(_FIELDS)) if (several or i < len(_FIELDS) - 1) and (not ring_only or i >= 4)]
    fixed = {f: 0.0 for i, f in enumerate(_FIELDS) if i not in use}
    if "allreduce_floor_smoothness" in fixed:
        fixed["allreduce_floor_smoothness"] = base.allreduce_floor_smoothness
    pb = _AllReduceProblem(rows, bw, use, fixed)
    lo, hi = _encode(_LO, use), _encode(_HI, use)
    sols = [least_squares(pb.residual, np.clip(_encode(x0, use), lo, hi), jac=pb.jac, bounds=(lo, hi), x_scale=1.0,
                          max_nfev=20000, **_TOL) for x0 in _STARTS[:1 if ring_only else None]]
    x = min(sols, key=lambda sol: sol.cost).x  # on a tie (starts in one basin) the first
    params = base.replace(**pb.values(x))
    ape = np.abs(predict_allreduce(rows, bw, params) / rows["time_s"].to_numpy(float) - 1.0)
    by_gpu = {int(n): float(ape[(rows["n_gpu"] == n).to_numpy()].mean()) for n in sorted(rows["n_gpu"].unique())}
    r = np.log(predict_allreduce(rows, bw, params)) - pb.logt
    return params, {**{f: getattr(params, f) for f in _FIELDS}, "cost": 0.5 * float(np.sum(r * r)), "mape": float(ape.mean()),
                    "mape_by_gpus": by_gpu, "n": int(len(rows))}
