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

from sdsl.roofline.kernels import allreduce_time_with
from sdsl.roofline.latency import LatencyParams
from sdsl.errors import ProfileError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["read_allreduce", "nvlink_rows", "switch_rows", "fit_allreduce", "predict_allreduce", "best_least_squares",
           "leave_one_tp_out"]


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

    parts = []
    for n in sorted(rows["n_gpu"].unique()):
        test = rows[rows["n_gpu"] == n]
        pred = np.asarray(fit_predict(rows[rows["n_gpu"] != n], test), dtype=float)
        parts.append(test.assign(rel=pred / test["time_s"].to_numpy(float) - 1.0))
    return pd.concat(parts, ignore_index=True)


#: Fitted fields, their start values (three starts: the fit has two regimes and a floor), bounds and scales.
_FIELDS = ("allreduce_floor", "allreduce_floor_smoothness", "allreduce_ll_latency", "allreduce_ll_efficiency",
           "allreduce_latency", "eta_interconnect", "allreduce_step_latency")
#: η and η_LL lie in (0, 1]: a ring moves 2(t−1)/t of the message per GPU over one direction of its
#: links, so it cannot beat the link rate (in-switch reduction, NVLS, which could, is a separate form:
#: :func:`sdsl.validation.allreduce_forms.nvls_heldout`, not adopted).
_STARTS = ([3e-5, 4.0, 1e-5, 0.25, 3e-5, 0.75, 1e-6], [3e-5, 8.0, 1e-6, 0.5, 5e-5, 0.75, 1e-6],
           [2e-5, 4.0, 5e-6, 0.15, 1e-5, 0.6, 3e-7])
_LO = [0.0, 1.0, 0.0, 5e-4, 0.0, 5e-4, 0.0]
_HI = [1e-3, 50.0, 1e-3, 1.0, 1e-3, 1.0, 1e-4]


def fit_allreduce(rows: "pd.DataFrame", hardware, base: LatencyParams | None = None, *,
                  ring_only: bool = False) -> tuple[LatencyParams, dict[str, Any]]:
    """Fit the all-reduce terms of :func:`sdsl.roofline.kernels.allreduce_time` on log-time: the floor and
    its smoothness, the LL protocol's latency and bandwidth fraction, the Simple protocol's latency,
    η and per-step latency (best of three starts). ``ring_only``: the previous form, the Simple ring
    alone (no LL protocol, no floor: VALIDATION.md's "before" rows).

    ``hardware`` (catalog name or Hardware) gives the per-direction link bandwidth. With one GPU
    count only, the step latency cannot be told from the fixed one and stays 0. Returns the
    updated params and stats (fitted values, MAPE overall and per GPU count, n)."""
    from sdsl.catalog.hardware import get_hardware

    hw = hardware if hasattr(hardware, "kind") else get_hardware(hardware)
    bw = hw.interconnect_bandwidth
    if not bw:
        raise ProfileError(f"{hw.name} has no interconnect_gbs to fit an all-reduce against; give --hardware a "
                           "catalog entry or file that has one.")
    base = base or LatencyParams()
    several = rows["n_gpu"].nunique() > 1
    use = [i for i in range(len(_FIELDS)) if (several or i < len(_FIELDS) - 1) and (not ring_only or i >= 4)]
    fixed = {f: 0.0 for i, f in enumerate(_FIELDS) if i not in use and f != "allreduce_floor_smoothness"}
    logt = np.log(rows["time_s"].to_numpy(float))

    def params_of(x):
        return base.replace(**dict(zip([_FIELDS[i] for i in use], map(float, x))), **fixed)

    params = params_of(best_least_squares(lambda x: np.log(predict_allreduce(rows, bw, params_of(x))) - logt,
                                          [[x0[i] for i in use] for x0 in _STARTS[:1 if ring_only else None]],
                                          [_LO[i] for i in use], [_HI[i] for i in use]))
    ape = np.abs(predict_allreduce(rows, bw, params) / rows["time_s"].to_numpy(float) - 1.0)
    by_gpu = {int(n): float(ape[(rows["n_gpu"] == n).to_numpy()].mean()) for n in sorted(rows["n_gpu"].unique())}
    return params, {**{f: getattr(params, f) for f in _FIELDS}, "mape": float(ape.mean()), "mape_by_gpus": by_gpu,
                    "n": int(len(rows))}
