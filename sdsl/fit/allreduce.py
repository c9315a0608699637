"""Fit the tensor-parallel all-reduce term to Vidur's NCCL all-reduce timings.

Model: :func:`sdsl.core.latency.allreduce_time`, a ring all-reduce (Patarasuk & Yuan, JPDC 2009):
t = latency + 2(t−1)·step_latency + 2(t−1)/t · bytes / (η · per-direction link bandwidth).
Vidur's files (``sdsl/data/vidur/network``) hold sizes in fp16 elements and times in ms, for a
pairwise-NVLink node (``*_pairwise_nvlink_*``: GPUs linked in pairs, so 4-GPU all-reduces cross
PCIe) and a DGX node (``*_dgx_*``: NVSwitch, all GPUs linked; the A100 file also has multi-node
rows). :func:`nvlink_rows` keeps the all-reduces whose GPUs all share NVLink in one node — the
2-GPU rows of the pairwise file and the single-node rows of the DGX file — which is what
tensor parallelism inside one server runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from sdsl.core.latency import LatencyParams, allreduce_time
from sdsl.errors import ProfileError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["read_allreduce", "nvlink_rows", "fit_allreduce", "predict_allreduce"]


def read_allreduce(path: str | os.PathLike, dtype_bytes: int = 2) -> "pd.DataFrame":
    """One Vidur all-reduce CSV as columns ``source, n_gpu, per_node, bytes, time_s`` (sizes are elements
    of ``dtype_bytes`` bytes: fp16 in Vidur's files). A file without ``devices_per_node`` (``sdsl profile
    --tp``) is one node."""
    import pandas as pd

    path = Path(path)
    try:
        df = pd.read_csv(path)
        out = pd.DataFrame({"source": path.name, "n_gpu": df["num_workers"].astype(int),
                            "per_node": df.get("devices_per_node", df["num_workers"]).astype(int),
                            "bytes": float(dtype_bytes) * df["size"].to_numpy(dtype=float),
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


def predict_allreduce(rows: "pd.DataFrame", bandwidth: float, params: LatencyParams) -> np.ndarray:
    """Predicted time (s) of each row (columns n_gpu, bytes) with ``params``' all-reduce terms."""
    return allreduce_time(rows["bytes"].to_numpy(float), rows["n_gpu"].to_numpy(float), bandwidth,
                          params.allreduce_latency, params.eta_interconnect, params.allreduce_step_latency)


def fit_allreduce(rows: "pd.DataFrame", hardware, base: LatencyParams | None = None) -> tuple[LatencyParams, dict[str, Any]]:
    """Fit ``allreduce_latency``, ``allreduce_step_latency`` and ``eta_interconnect`` on log-time.

    ``hardware`` (catalog name or Hardware) gives the per-direction link bandwidth. With one GPU
    count only, the step latency cannot be told from the fixed one and stays 0. Returns the
    updated params and stats (fitted values, MAPE overall and per GPU count, n)."""
    from scipy.optimize import least_squares

    from sdsl.core.hardware import get_hardware

    hw = hardware if hasattr(hardware, "kind") else get_hardware(hardware)
    bw = hw.interconnect_bandwidth
    if not bw:
        raise ProfileError(f"{hw.name} has no interconnect_gbs to fit an all-reduce against; give --hardware a "
                           "catalog entry or file that has one.")
    base = base or LatencyParams()
    several = rows["n_gpu"].nunique() > 1
    logt = np.log(rows["time_s"].to_numpy(float))

    def params_of(x):
        return base.replace(allreduce_latency=float(x[0]), eta_interconnect=float(x[1]),
                            allreduce_step_latency=float(x[2]) if several else 0.0)

    x0, lo, hi = [1e-5, 0.5, 2e-6], [0.0, 1e-4, 0.0], [1e-3, 2.0, 1e-4]
    k = 3 if several else 2
    sol = least_squares(lambda x: np.log(predict_allreduce(rows, bw, params_of(x))) - logt, x0[:k],
                        bounds=(lo[:k], hi[:k]), x_scale=[1e-5, 0.1, 1e-6][:k])
    params = params_of(sol.x)
    ape = np.abs(predict_allreduce(rows, bw, params) / rows["time_s"].to_numpy(float) - 1.0)
    by_gpu = {int(n): float(ape[(rows["n_gpu"] == n).to_numpy()].mean()) for n in sorted(rows["n_gpu"].unique())}
    return params, {"allreduce_latency_s": params.allreduce_latency, "allreduce_step_latency_s": params.allreduce_step_latency,
                    "eta_interconnect": params.eta_interconnect, "mape": float(ape.mean()), "mape_by_gpus": by_gpu,
                    "n": int(len(rows))}
