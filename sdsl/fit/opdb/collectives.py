"""The all-reduce terms fitted on NVIDIA's measured operator database (:mod:`sdsl.fit.opdb`), per GPU: the
engine's custom one-shot kernel, a + (t−1)·M/(η·B) (every GPU reads the other t−1 GPUs' messages over NVLink), and
NCCL's ring, a + 2(t−1)/t·M/(η·B) (Patarasuk & Yuan, JPDC 2009), each fitted on its own rows (graph replay and
eager launch apart), with :mod:`sdsl.fit.opdb.kernels`' loss (log time, soft-L1 at 5%). Times in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sdsl.roofline.latency_params import LatencyParams

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["ALLREDUCE_MAX_BYTES", "NCCL_TERMS", "AllreduceFit", "allreduce_rows", "predict_allreduce", "fit_allreduce",
           "predict_nccl", "fit_nccl"]


def allreduce_rows(gpu: str | None = None, engine: str = "vllm", version: str | None = None, *,
                   source="subset") -> "pd.DataFrame":
    """All-reduce rows: ``engine``'s custom kernel (``kernel_source`` graph / eager; ``version`` None = the newest),
    or, with ``engine="nccl"``, NCCL's all_reduce (half precision) of the newest NCCL version; ``mode`` says
    graph, eager or nccl."""
    from sdsl.fit.opdb import read_opdb

    if engine == "nccl":
        # the NCCL collector's own rows (B300's table also holds NCCL timed inside TensorRT-LLM's image)
        df = read_opdb("nccl", gpu=gpu, engine="nccl", version=version, latest=version is None, source=source)
        df = df[(df["op"] == "all_reduce") & (df["dtype"] == "half")]
        return df.assign(mode="nccl").reset_index(drop=True)
    df = read_opdb("custom_allreduce", gpu=gpu, engine=engine, version=version, latest=version is None, source=source)
    mode = np.where(df["kernel_source"].str.contains("eager", case=False), "eager", "graph")
    return df.assign(mode=mode).reset_index(drop=True)


@dataclass(frozen=True)
class AllreduceFit:
    """One all-reduce path on one GPU; B the catalog's per-direction NVLink bandwidth. ``custom``: the engine's
    kernel, the faster of one-shot a + (t−1)·M/(η·B) and two-shot 2a + 2(t−1)/t·M/(η·B) (the form
    :func:`sdsl.engine.allreduce.custom_allreduce_time` prices); ``ring``: NCCL, a + 2(t−1)/t·M/(η·B)."""

    latency: float
    eta: float
    kind: str  # "custom" or "ring"

    def to_dict(self) -> dict:
        return {"latency": self.latency, "eta": self.eta, "kind": self.kind}


def predict_allreduce(rows: "pd.DataFrame", hardware, fit: AllreduceFit) -> np.ndarray:
    m, t = rows["message_size"].to_numpy(dtype=float), rows["num_gpus"].to_numpy(dtype=float)
    bw = fit.eta * hardware.interconnect_bandwidth
    ring = 2.0 * (t - 1.0) / t * m / bw
    if fit.kind == "ring":
        return fit.latency + ring
    return np.minimum(fit.latency + (t - 1.0) * m / bw, 2.0 * fit.latency + ring)


#: Messages the all-reduce fits cover: a decode step's hidden states, up to 512 tokens x 16384 x 2 bytes (16 MiB).
ALLREDUCE_MAX_BYTES = 16 * 2 ** 20


#: NCCL's terms in LatencyParams (:func:`sdsl.roofline.kernels.allreduce_time`): the ring's latency, its per-step
#: latency and its bandwidth fraction. The low-latency protocol stays off: the tables' small-message times grow
#: with the GPU count (H200: 6.0, 9.5, 16.0 us at 2, 4, 8 GPUs), which a per-step latency prices and sdsl's LL
#: form (no per-step term) cannot.
NCCL_TERMS = ("allreduce_latency", "allreduce_step_latency", "eta_interconnect")
_NCCL_BOUNDS = {"allreduce_latency": (0.0, 1e-4, 1e-6), "allreduce_step_latency": (0.0, 2e-5, 1e-7),
                "eta_interconnect": (1e-3, 1.0, 0.1)}


def predict_nccl(rows: "pd.DataFrame", hardware, params: LatencyParams) -> np.ndarray:
    """NCCL all-reduce seconds of each row with the all-reduce terms of ``params`` (the step pricing's form)."""
    from sdsl.roofline.kernels import allreduce_time_with

    return allreduce_time_with(rows["message_size"].to_numpy(dtype=float), rows["num_gpus"].to_numpy(dtype=float),
                               hardware.interconnect_bandwidth, params)


def fit_nccl(rows: "pd.DataFrame", hardware, base: LatencyParams | None = None) -> LatencyParams:
    """Fit LatencyParams' NCCL all-reduce terms (:data:`NCCL_TERMS`, no floor: the tables time graph-free NCCL
    calls back to back) on NCCL all_reduce rows up to :data:`ALLREDUCE_MAX_BYTES`."""
    from sdsl.fit.opdb.lsq import robust_fit

    rows = rows[rows["message_size"] <= ALLREDUCE_MAX_BYTES]
    base = (base or LatencyParams()).replace(allreduce_floor=0.0, allreduce_ll_efficiency=0.0, allreduce_ll_latency=0.0)
    y = np.log(rows["time_s"].to_numpy(dtype=float))
    start = {"allreduce_latency": 1e-5, "allreduce_step_latency": 5e-7, "eta_interconnect": 0.7}
    x = robust_fit(lambda x: np.log(predict_nccl(rows, hardware, base.replace(**x))) - y, NCCL_TERMS, _NCCL_BOUNDS,
                   start)
    return base.replace(**x)


def fit_allreduce(rows: "pd.DataFrame", hardware, kind: str) -> AllreduceFit:
    """Fit :class:`AllreduceFit` (``kind`` "custom" for an engine's own kernel, "ring" for NCCL) on rows of one
    GPU and mode with messages up to :data:`ALLREDUCE_MAX_BYTES`."""
    from sdsl.fit.opdb.lsq import robust_fit

    rows = rows[rows["message_size"] <= ALLREDUCE_MAX_BYTES]
    y = np.log(rows["time_s"].to_numpy(dtype=float))
    bounds = {"latency": (0.0, 1e-4, 1e-6), "eta": (1e-3, 1.0, 0.1)}
    x = robust_fit(lambda x: np.log(predict_allreduce(rows, hardware, AllreduceFit(x["latency"], x["eta"], kind))) - y,
                   ("latency", "eta"), bounds, {"latency": 5e-6, "eta": 0.5})
    return AllreduceFit(x["latency"], x["eta"], kind)
