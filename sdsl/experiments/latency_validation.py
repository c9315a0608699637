"""Evidence for the latency model on real GPU measurements (Vidur's H100/A100 operator profiles).

- :func:`leave_one_model_out`: for each GPU, fit :func:`sdsl.fit.calibration.fit_latency` on all
  models but one and predict the held-out model's operator times; MAPE per held-out model and
  operator, over all num_tokens and TP degrees and in the decode regime (num_tokens <= 64).
- :func:`fit_allreduce`: the all-reduce latency and interconnect efficiency of
  :func:`sdsl.core.latency.step_time`'s ring term, fitted to Vidur's H100 NVLink all-reduce timings.
- :func:`turbospec_comparison`: calibrated step times against TurboSpec's fitted step-time lines
  (Liu et al., arXiv 2406.14066; docs/model.md §3.4) for Llama-3.1-70B TP4 and Llama-3.1-8B on H100.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from sdsl.fit.calibration import DECODE_MAX_TOKENS, fit_latency
from sdsl.fit.transfer import VIDUR_FOLDERS
from sdsl.errors import ProfileError
from sdsl.core.latency import LatencyParams, allreduce_time
from sdsl.serving.linear_model import TURBOSPEC_PUBLISHED

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["VIDUR_HARDWARE", "TURBOSPEC_LINES", "leave_one_model_out", "fit_allreduce",
           "turbospec_comparison", "validate_latency"]

#: Vidur folder -> sdsl hardware catalog entry (kept once, in sdsl.fit.transfer).
VIDUR_HARDWARE = VIDUR_FOLDERS

#: Catalog model -> (tensor-parallel degree, TurboSpec's fitted step-time line on H100; docs/model.md §3.4).
TURBOSPEC_LINES = {
    "llama-3.1-70b": (4, TURBOSPEC_PUBLISHED["llama-3.1-70b-tp4-h100"]),
    "llama-3.1-8b": (1, TURBOSPEC_PUBLISHED["llama-3.1-8b-h100"]),
}

def _ape(pred, meas):
    return np.abs(np.asarray(pred) / np.asarray(meas) - 1.0)


def leave_one_model_out(data: "pd.DataFrame", hardware=None,
                        smoothness: str | float = "auto") -> tuple["pd.DataFrame", "pd.DataFrame", dict]:
    """Leave-one-model-out over the models of each GPU in ``data`` (Vidur long format).

    Returns ``(table, points, fits)``: ``table`` one row per (hardware, held-out model, op) plus an
    ``op == "all"`` row per model, columns overall_mape, decode_mape, n; ``points`` every held-out
    prediction; ``fits`` {hardware: {held-out model: CalibrationResult}}. ``hardware``: one catalog
    name/file for every GPU folder, or a {folder: name/file} mapping (:func:`sdsl.fit.transfer.resolve_gpu_folders`).
    """
    import pandas as pd

    from sdsl.core.hardware import get_hardware
    from sdsl.fit.transfer import resolve_gpu_folders

    folders = sorted(data["hardware"].unique())
    resolved = (resolve_gpu_folders(folders, hardware) if hardware is None or isinstance(hardware, Mapping)
                else {f: get_hardware(hardware) for f in folders})
    tables, points, fits = [], [], {}
    for hw_key, d in data.groupby("hardware", sort=True):
        hw = resolved[hw_key]
        models = sorted(d["model"].unique())
        if len(models) < 2:
            raise ProfileError(f"Leave-one-model-out on {hw_key} needs at least two models, found {models}.")
        fits[hw_key] = {}
        for held in models:
            train, test = d[d["model"] != held], d[d["model"] == held]
            res = fit_latency(train, hw, dtype="fp16", smoothness=smoothness, keep_points=False)
            fits[hw_key][held] = res
            from sdsl.fit.calibration import predict_op_times

            pred = predict_op_times(test, hw, res.params, dtype="fp16")
            pts = test.assign(measured_s=test["time_s"].to_numpy(), predicted_s=pred,
                              ape=_ape(pred, test["time_s"].to_numpy()))
            points.append(pts)
            for op, g in [("all", pts)] + list(pts.groupby("op", sort=True)):
                dec = g[g["num_tokens"] <= DECODE_MAX_TOKENS]
                tables.append({"hardware": hw_key, "model": held, "op": op, "overall_mape": g["ape"].mean(),
                               "decode_mape": dec["ape"].mean() if len(dec) else math.nan, "n": len(g)})
    return pd.DataFrame(tables), pd.concat(points, ignore_index=True), fits


def fit_allreduce(path: str | os.PathLike, hardware: str = "h100-sxm", dtype_bytes: int = 2,
                  base: LatencyParams | None = None, workers: int | None = 2) -> tuple[LatencyParams, dict[str, Any]]:
    """Fit ``allreduce_latency`` and ``eta_interconnect`` of the ring model used by step_time,
    t = latency + 2(t−1)/t · bytes / (η_ic · interconnect), to Vidur's all-reduce file (sizes in
    fp16 elements, times in ms), on log-time. Returns the updated params and fit statistics.

    ``workers`` keeps only rows of that many GPUs (None: all). The default 2 keeps the NVLink pair:
    Vidur's file is from a *pairwise*-NVLink node, whose 4-GPU all-reduces cross PCIe and run about
    6× slower than an NVSwitch H100-SXM node's would."""
    import pandas as pd
    from scipy.optimize import least_squares

    from sdsl.core.hardware import get_hardware

    path = Path(path)
    try:
        df = pd.read_csv(path)
        size = df["size"].to_numpy(dtype=float)
        n_gpu = df["num_workers"].to_numpy(dtype=float)
        t = df["time_stats.all_reduce.median"].to_numpy(dtype=float) * 1e-3
    except (OSError, KeyError, ValueError, pd.errors.ParserError) as exc:
        raise ProfileError(f"{path}: not a Vidur all-reduce file ({exc}).") from None
    ok = np.isfinite(t) & (t > 0)
    if workers is not None:
        ok &= n_gpu == workers
    if not ok.any():
        raise ProfileError(f"{path}: no usable all-reduce rows" + (f" for {workers} GPUs." if workers else "."))
    size, n_gpu, t = size[ok], n_gpu[ok], t[ok]
    hw = get_hardware(hardware)
    ic = hw.interconnect_bandwidth
    if not ic:
        raise ProfileError(f"{hw.name} has no interconnect_gbs to fit an all-reduce against; give --hardware a "
                           "catalog entry or file that has one.")
    message = size * dtype_bytes

    def resid(x):
        return np.log(allreduce_time(message, n_gpu, ic, x[0], x[1])) - np.log(t)

    sol = least_squares(resid, [1e-5, 0.5], bounds=([0.0, 1e-4], [1e-3, 1.0]), x_scale=[1e-5, 0.1])
    base = base or LatencyParams()
    params = base.replace(allreduce_latency=float(sol.x[0]), eta_interconnect=float(sol.x[1]))
    pred = allreduce_time(message, n_gpu, ic, sol.x[0], sol.x[1])
    return params, {"allreduce_latency_s": float(sol.x[0]), "eta_interconnect": float(sol.x[1]),
                    "mape": float(np.mean(_ape(pred, t))), "n": int(len(t))}


def turbospec_comparison(params: LatencyParams, *, hardware: str = "h100-sxm", context: int = 1024,
                         batches=None, dtype: str = "bf16") -> "pd.DataFrame":
    """Predicted plain-decoding step time vs TurboSpec's fitted line, batch 1..64, context 1k.

    TurboSpec: T = c_kv·N_kv + c_tok·N_tok + c_b·n + c_0 (ms) with n running requests, N_tok = n
    batched tokens (one per request) and N_kv = n·context tokens in the KV cache.
    """
    import pandas as pd

    from sdsl.core.architecture import get_model
    from sdsl.core.deployment import Deployment
    from sdsl.core.latency import step_time

    b = np.arange(1, 65) if batches is None else np.asarray(batches)
    rows = []
    for name, (tp, fit) in TURBOSPEC_LINES.items():
        dep = Deployment(hardware, tp=tp, dtype=dtype, context=context, params=params)
        st = step_time(get_model(name), dep, batch=b, q=1)
        line = fit.step_fn(b, 1, context)
        rows.append(pd.DataFrame({"model": name, "tp": tp, "batch": b, "turbospec_s": line,
                                  "predicted_s": np.broadcast_to(st.total_s, b.shape),
                                  "rel_diff": np.broadcast_to(st.total_s, b.shape) / line - 1.0}))
    return pd.concat(rows, ignore_index=True)


def validate_latency(vidur_root: str | os.PathLike, figure: str | os.PathLike | None = None,
                     hardware=None) -> dict[str, Any]:
    """Everything ``sdsl validate latency`` reports, as a JSON-ready dict.

    Top level: one key per GPU (``h100``, ``a100``) with ``overall_mape`` and ``decode_mape``
    (medians over held-out models, fractions), ``per_model`` and ``per_op`` details and the
    parameters fitted on all that GPU's models; plus ``turbospec`` (H100 comparison). ``hardware``:
    optional {folder: catalog name or file} (:func:`sdsl.fit.transfer.resolve_gpu_folders`).
    """
    from sdsl.fit.profiles import read_vidur
    from sdsl.fit.transfer import resolve_gpu_folders

    root = Path(vidur_root)
    data = read_vidur(root)
    resolved = resolve_gpu_folders(sorted(data["hardware"].unique()), hardware)
    table, points, _ = leave_one_model_out(data, hardware=resolved)
    out: dict[str, Any] = {}
    full_fits = {}
    for hw_key, t in table.groupby("hardware", sort=True):
        allrows = t[t["op"] == "all"]
        ops = t[t["op"] != "all"]
        res = fit_latency(data[data["hardware"] == hw_key], resolved[hw_key],
                          dtype="fp16", keep_points=False, sources=(f"vidur/{hw_key}",))
        full_fits[hw_key] = res
        out[hw_key] = {
            "overall_mape": float(np.median(allrows["overall_mape"])),
            "decode_mape": float(np.median(allrows["decode_mape"])),
            "per_model": {r.model: {"overall_mape": float(r.overall_mape), "decode_mape": float(r.decode_mape)}
                          for r in allrows.itertuples()},
            "per_op": {op: {"overall_mape": float(np.median(g["overall_mape"])),
                            "decode_mape": float(np.median(g["decode_mape"]))}
                       for op, g in ops.groupby("op", sort=True)},
            "fit_all_models": {k: v for k, v in res.params.to_dict().items() if k != "source"},
            "fit_all_models_mape": {"overall": res.mape, "decode": res.decode_mape},
        }
    ar_file = root / "network" / "h100_pairwise_nvlink_all_reduce.csv"
    if "h100" in full_fits:
        params = full_fits["h100"].params
        ar = None
        if ar_file.exists():
            params, ar = fit_allreduce(ar_file, base=params)
        cmp = turbospec_comparison(params)
        out["turbospec"] = {"allreduce_fit": ar}
        for name, g in cmp.groupby("model", sort=True):
            out["turbospec"][name] = {
                "tp": int(g["tp"].iloc[0]),
                "mean_abs_rel_diff": float(np.mean(np.abs(g["rel_diff"]))),
                "max_abs_rel_diff": float(np.max(np.abs(g["rel_diff"]))),
                "batch1": {"predicted_ms": 1e3 * float(g["predicted_s"].iloc[0]),
                           "turbospec_ms": 1e3 * float(g["turbospec_s"].iloc[0])},
                "batch64": {"predicted_ms": 1e3 * float(g["predicted_s"].iloc[-1]),
                            "turbospec_ms": 1e3 * float(g["turbospec_s"].iloc[-1])},
            }
    if figure is not None:
        from sdsl.plots import plot_latency_validation

        Path(figure).parent.mkdir(parents=True, exist_ok=True)
        plot_latency_validation(points, path=figure)
    return out
