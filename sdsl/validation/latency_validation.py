"""Evidence for the latency model on real GPU measurements (Vidur's H100/A100 operator profiles).

- :func:`leave_one_model_out`: for each GPU, fit :func:`sdsl.fit.calibration.fit_latency` on all
  models but one and predict the held-out model's operator times; MAPE per held-out model and
  operator, over all num_tokens and TP degrees and in the decode regime (num_tokens <= 64).
- :func:`pooled_metrics`: pooled MAPE over every held-out row, the worst model, signed bias by num_tokens.
- :func:`elementwise_leave_one_model_out`: the same for the norm/RoPE/activation/add kernels.
- :func:`allreduce_validation`: NCCL's all-reduce (two protocols and a measurement floor) fitted to
  Vidur's DGX file, checked with each TP degree (2/4/8) held out; the pairwise-NVLink node predicted.
- :func:`shipped_errors`: the shipped defaults' (``default_params``) own error on every row group.
- :func:`turbospec_comparison`: calibrated step times against TurboSpec's fitted step-time lines
  (Liu et al., arXiv 2406.14066; docs/model.md §3.4) for Llama-3.1-70B TP4 and Llama-3.1-8B on H100.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from sdsl._evidence import leave_one_group_out
from sdsl.fit.calibration import DECODE_MAX_TOKENS, fit_latency
from sdsl.fit.transfer import VIDUR_FOLDERS
from sdsl.errors import ProfileError
from sdsl.roofline.latency import LatencyParams
from sdsl.fit.calibration import GPU_M_TILE
from sdsl.serving.linear_model import TURBOSPEC_PUBLISHED

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["VIDUR_HARDWARE", "TURBOSPEC_LINES", "leave_one_model_out", "pooled_metrics",
           "elementwise_leave_one_model_out", "elementwise_scores", "allreduce_validation", "shipped_errors",
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


def leave_one_model_out(data: "pd.DataFrame", hardware=None, smoothness: str | float = "auto",
                        m_tile: int = GPU_M_TILE, kernel_terms: bool = True,
                        elementwise: "pd.DataFrame | None" = None) -> tuple["pd.DataFrame", "pd.DataFrame", dict]:
    """Leave-one-model-out over the models of each GPU in ``data`` (Vidur long format).

    Returns ``(table, points, fits)``: ``table`` one row per (hardware, held-out model, op) plus an
    ``op == "all"`` row per model, columns overall_mape, decode_mape, n; ``points`` every held-out
    prediction; ``fits`` {hardware: {held-out model: CalibrationResult}}. ``hardware``: one catalog
    name/file for every GPU folder, or a {folder: name/file} mapping (:func:`sdsl.fit.transfer.resolve_gpu_folders`).
    ``m_tile=0`` gives the form without GEMM row tiles, ``kernel_terms=False`` the form without the wave
    tail, size overhead and smallest row tile (the earlier forms of VALIDATION.md). ``elementwise``: Vidur
    elementwise rows; with the kernel terms, each fold's launch floor ``t_kernel`` is the fixed cost of the
    elementwise kernels fitted on the same training models (:func:`_launch_base`).
    """
    import pandas as pd

    from sdsl.catalog.hardware import get_hardware
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

        def held_out(held, d=d, hw=hw, hw_key=hw_key):  # fit without the model, price its rows
            base = _launch_base(elementwise, hw_key, held, hw) if kernel_terms and m_tile else None
            res = fit_latency(d[d["model"] != held], hw, dtype="fp16", smoothness=smoothness, keep_points=False,
                              m_tile=m_tile, kernel_terms=kernel_terms and m_tile > 0, base=base)
            return res, d[d["model"] == held]

        folds = leave_one_group_out(models, held_out)
        fits[hw_key] = {held: res for held, (res, _) in folds.items()}
        for held, (res, test) in folds.items():
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


def _launch_base(elementwise, gpu: str, held: str | None, hw) -> LatencyParams | None:
    """Parameters with the elementwise kernels fitted on ``gpu``'s rows of every model but ``held`` (None:
    all), whose fixed cost is the GEMM kernel terms' launch floor; None without elementwise rows."""
    if elementwise is None:
        return None
    from sdsl.roofline.latency import DEFAULT_PARAMS
    from sdsl.fit.elementwise import fit_elementwise

    rows = elementwise[(elementwise["hardware"] == gpu) & (elementwise["model"] != held)]
    return fit_elementwise(rows, hw, DEFAULT_PARAMS)[0] if len(rows) else None


BUCKETS = (0, 8, 64, 256, 1024, 4096)  #: num_tokens bucket edges of ``bias_by_tokens``


def pooled_metrics(points: "pd.DataFrame") -> dict[str, Any]:
    """Pooled MAPE over every held-out row, decode (num_tokens <= 64) MAPE, the worst held-out model's
    decode MAPE, and signed error (pred/meas − 1) median and mean by num_tokens bucket."""
    import pandas as pd

    rel = points["predicted_s"] / points["measured_s"] - 1.0
    dec = points["num_tokens"] <= DECODE_MAX_TOKENS
    by_model = rel[dec].abs().groupby(points.loc[dec, "model"]).mean()
    buckets = pd.cut(points["num_tokens"], BUCKETS)
    bias = {f"{int(k.left)}<n<={int(k.right)}": {"median": float(g.median()), "mean": float(g.mean()), "n": int(len(g))}
            for k, g in rel.groupby(buckets, observed=True)}
    return {"pooled_overall_mape": float(rel.abs().mean()), "pooled_decode_mape": float(rel[dec].abs().mean()),
            "worst_model_decode_mape": float(by_model.max()), "worst_model": str(by_model.idxmax()),
            "bias_by_tokens": bias}


def elementwise_leave_one_model_out(rows: "pd.DataFrame", hardware, base: LatencyParams) -> dict[str, Any]:
    """Leave-one-model-out on Vidur's elementwise kernels: per-kernel MAPE (pooled, decode, by kind) and
    the MAPE of each layer's elementwise sum (two adds counted twice, as a layer runs them)."""
    from sdsl.fit.elementwise import fit_elementwise, predict_elementwise_times

    def held_out(held):  # fit without the model, price its rows
        params, _ = fit_elementwise(rows[rows["model"] != held], hardware, base)
        test = rows[rows["model"] == held].reset_index(drop=True)
        return test.assign(pred=predict_elementwise_times(test, hardware, params))

    import pandas as pd

    parts = leave_one_group_out(sorted(rows["model"].unique()), held_out).values()
    return elementwise_scores(pd.concat(list(parts), ignore_index=True))


def elementwise_scores(p: "pd.DataFrame") -> dict[str, Any]:
    """Per-kernel and per-layer-sum MAPE of elementwise rows with a ``pred`` column (seconds)."""
    ape = (p["pred"] / p["time_s"] - 1.0).abs()
    kernels = p["kernels"].to_numpy(float) if "kernels" in p else 1.0
    weight = np.where(p["op"] == "add", 2.0 / kernels, 1.0)  # a layer runs two adds; phi-2's timer spans both
    layer = p.assign(pt=p["pred"] * weight, mt=p["time_s"] * weight).groupby(["model", "tp", "num_tokens"])[["pt", "mt"]].sum()
    layer_ape = (layer["pt"] / layer["mt"] - 1.0).abs()
    dec = p["num_tokens"] <= DECODE_MAX_TOKENS
    signed = p["pred"] / p["time_s"] - 1.0
    return {"elementwise_mape": float(ape.mean()), "elementwise_decode_mape": float(ape[dec].mean()),
            "elementwise_worst_model_mape": float(ape.groupby(p["model"]).mean().max()),
            "elementwise_bias": {"median": float(signed.median()), "mean": float(signed.mean())},
            "elementwise_mape_by_kind": {k: float(g.mean()) for k, g in ape.groupby(p["kind"])},
            "elementwise_layer_mape": float(layer_ape.mean()),
            "elementwise_worst_model_layer_mape": float(layer_ape.groupby(level=0).mean().max())}


def _leave_one_tp_out(rows: "pd.DataFrame", hardware, base: LatencyParams, ring_only: bool = False) -> "pd.DataFrame":
    """Every row of ``rows`` predicted by a fit on the other GPU counts only (column ``rel`` = pred/meas − 1)."""
    from sdsl.fit.allreduce import fit_allreduce, leave_one_tp_out, predict_allreduce

    def fit_predict(train, test):
        return predict_allreduce(test, hardware.interconnect_bandwidth, fit_allreduce(train, hardware, base, ring_only=ring_only)[0])

    return leave_one_tp_out(rows, fit_predict)


def allreduce_validation(network: Path, gpu: str, hardware, base: LatencyParams) -> tuple[LatencyParams, dict | None]:
    """The all-reduce (:func:`sdsl.roofline.kernels.allreduce_time`) fitted to ``gpu``'s DGX (NVSwitch)
    single-node rows, TP 2/4/8, and checked with each TP degree held out of the fit: MAPE and median
    signed error per TP, pooled over every held-out row, the worst TP. The pairwise-NVLink node's 2-GPU
    rows (GPUs bridged in pairs: another interconnect) are predicted by the DGX fit, never fitted
    (``pairwise_*``); ``heldout_tp_mape_with_pairwise`` repeats the previous protocol (both nodes pooled,
    one TP held out); ``ring_only_heldout_tp_mape`` the DGX protocol with the previous form (the Simple
    ring alone); ``limits`` what bounds the held-out error (:func:`sdsl.validation.allreduce_forms.allreduce_limits`).
    ``None`` and ``base`` unchanged when the GPU has no DGX file or no interconnect."""
    from sdsl.validation.allreduce_forms import allreduce_limits
    from sdsl.fit.allreduce import fit_allreduce, nvlink_rows, predict_allreduce, read_allreduce, switch_rows

    dgx, pair = network / f"{gpu}_dgx_all_reduce.csv", network / f"{gpu}_pairwise_nvlink_all_reduce.csv"
    if not dgx.exists() or not hardware.interconnect_bandwidth:
        return base, None
    rows = switch_rows([read_allreduce(dgx)])
    params, stats = fit_allreduce(rows, hardware, base)
    held = _leave_one_tp_out(rows, hardware, base)
    by_tp = held.groupby("n_gpu")["rel"]
    stats.update(heldout_tp_mape={int(n): float(g.abs().mean()) for n, g in by_tp},
                 heldout_tp_bias={int(n): float(g.median()) for n, g in by_tp},
                 heldout_pooled_mape=float(held["rel"].abs().mean()), heldout_pooled_bias=float(held["rel"].median()),
                 heldout_worst_tp_mape=float(by_tp.apply(lambda g: g.abs().mean()).max()), files=[dgx.name],
                 ring_only_heldout_tp_mape={int(n): float(g.abs().mean()) for n, g in
                                            _leave_one_tp_out(rows, hardware, base, ring_only=True).groupby("n_gpu")["rel"]},
                 limits=allreduce_limits(rows, hardware, base))
    if pair.exists():
        both = nvlink_rows([read_allreduce(pair), read_allreduce(dgx)])
        two = both[both["source"] == pair.name]
        rel = predict_allreduce(two, hardware.interconnect_bandwidth, params) / two["time_s"].to_numpy() - 1.0
        old = _leave_one_tp_out(both, hardware, base).groupby("n_gpu")["rel"]
        stats.update(pairwise_mape=float(np.abs(rel).mean()), pairwise_bias=float(np.median(rel)),
                     heldout_tp_mape_with_pairwise={int(n): float(g.abs().mean()) for n, g in old},
                     files=[dgx.name, pair.name])
    return params, stats


def turbospec_comparison(params: LatencyParams, *, hardware: str = "h100-sxm", context: int = 1024,
                         batches=None, dtype: str = "bf16") -> "pd.DataFrame":
    """Predicted plain-decoding step time vs TurboSpec's fitted line, batch 1..64, context 1k.

    TurboSpec: T = c_kv·N_kv + c_tok·N_tok + c_b·n + c_0 (ms) with n running requests, N_tok = n
    batched tokens (one per request) and N_kv = n·context tokens in the KV cache.
    """
    import pandas as pd

    from sdsl.catalog.models import get_model
    from sdsl.roofline.deployment import Deployment
    from sdsl.roofline.latency import step_time

    b = np.arange(1, 65) if batches is None else np.asarray(batches)
    rows = []
    for name, (tp, fit) in TURBOSPEC_LINES.items():
        dep = Deployment(hardware, tp=tp, dtype=dtype, context=context, params=params, engine="ideal")  # NCCL, as measured
        st = step_time(get_model(name), dep, batch=b, q=1)
        line = fit.step_fn(b, 1, context)
        rows.append(pd.DataFrame({"model": name, "tp": tp, "batch": b, "turbospec_s": line,
                                  "predicted_s": np.broadcast_to(st.total_s, b.shape),
                                  "rel_diff": np.broadcast_to(st.total_s, b.shape) / line - 1.0}))
    return pd.concat(rows, ignore_index=True)


def _gpu_report(gpu: str, hw, data, ew_rows, table, points, root: Path) -> tuple[dict[str, Any], LatencyParams]:
    """One GPU's block of :func:`validate_latency` and its all-model parameters (GEMM, elementwise, all-reduce)."""
    from sdsl.fit.gpu_form import fit_gpu_form
    from sdsl.fit.elementwise import fit_elementwise

    table = table[table["hardware"] == gpu]
    allrows, ops = table[table["op"] == "all"], table[table["op"] != "all"]
    ew = ew_rows[ew_rows["hardware"] == gpu]
    res = fit_gpu_form(data[data["hardware"] == gpu], hw, ew, sources=(f"vidur/{gpu}",))
    params, ew_fit = fit_elementwise(ew, hw, res.params)
    params, ar = allreduce_validation(root / "network", gpu, hw, params)
    out = {
        "overall_mape": float(np.median(allrows["overall_mape"])),
        "decode_mape": float(np.median(allrows["decode_mape"])),
        **pooled_metrics(points[points["hardware"] == gpu]),
        **elementwise_leave_one_model_out(ew_rows[ew_rows["hardware"] == gpu], hw, res.params),
        "allreduce": ar,
        "per_model": {r.model: {"overall_mape": float(r.overall_mape), "decode_mape": float(r.decode_mape)}
                      for r in allrows.itertuples()},
        "per_op": {op: {"overall_mape": float(np.median(g["overall_mape"])),
                        "decode_mape": float(np.median(g["decode_mape"]))} for op, g in ops.groupby("op", sort=True)},
        "fit_all_models": {k: v for k, v in params.to_dict().items() if k != "source"},
        "fit_all_models_mape": {"overall": res.mape, "decode": res.decode_mape, "elementwise": ew_fit["mape"]},
    }
    return out, params


def shipped_errors(gpu: str, hw, data: "pd.DataFrame", ew_rows: "pd.DataFrame", network: Path,
                   fitted: LatencyParams | None = None) -> dict[str, Any]:
    """The error of what a user gets, ``default_params(hw)`` (``sdsl/data/latency/<name>.json``, or the
    cross-GPU model's prediction for a GPU sdsl ships no calibration for), on every row of ``gpu``: GEMMs
    (pooled, decode, worst model, median over models, signed bias by num_tokens), elementwise kernels
    (per kernel and per layer sum) and, where Vidur measured it, the all-reduce (DGX rows per TP, the
    pairwise node's 2-GPU rows). In sample for a shipped calibration (it was fitted to these rows): the
    held-out errors of the same form are the rest of the block. ``max_rel_diff_to_fit``: the largest
    relative difference between the shipped parameters and ``fitted`` (this run's all-model fit), so a
    shipped file that is not the validated form shows."""
    from sdsl.roofline.latency import default_params
    from sdsl.fit.allreduce import predict_allreduce, read_allreduce, switch_rows
    from sdsl.fit.calibration import predict_op_times
    from sdsl.fit.elementwise import predict_elementwise_times

    params = default_params(hw)
    g = data[data["hardware"] == gpu]
    pred = predict_op_times(g, hw, params, dtype="fp16")
    pts = g.assign(measured_s=g["time_s"].to_numpy(), predicted_s=pred)
    ape = np.abs(pred / g["time_s"].to_numpy() - 1.0)
    dec = (g["num_tokens"] <= DECODE_MAX_TOKENS).to_numpy()
    models = sorted(g["model"].unique())
    per_model = {m: {"overall_mape": float(ape[(g["model"] == m).to_numpy()].mean()),
                     "decode_mape": float(ape[(g["model"] == m).to_numpy() & dec].mean())} for m in models}
    out: dict[str, Any] = {
        "source": params.source,
        "overall_mape": float(np.median([v["overall_mape"] for v in per_model.values()])),
        "decode_mape": float(np.median([v["decode_mape"] for v in per_model.values()])),
        **pooled_metrics(pts), "per_model": per_model}
    ew = ew_rows[ew_rows["hardware"] == gpu].reset_index(drop=True)
    if len(ew) and params.t_elementwise is not None:
        out.update(elementwise_scores(ew.assign(pred=predict_elementwise_times(ew, hw, params))))
    dgx, pair = network / f"{gpu}_dgx_all_reduce.csv", network / f"{gpu}_pairwise_nvlink_all_reduce.csv"
    ar = None
    if dgx.exists() and hw.interconnect_bandwidth:
        rows = switch_rows([read_allreduce(dgx)])
        rel = _rel(rows, predict_allreduce(rows, hw.interconnect_bandwidth, params))
        by_tp = rel.groupby(rows["n_gpu"].to_numpy())
        ar = {"tp_mape": {int(n): float(r.abs().mean()) for n, r in by_tp},
              "tp_bias": {int(n): float(r.median()) for n, r in by_tp},
              "pooled_mape": float(rel.abs().mean()), "pooled_bias": float(rel.median())}
        if pair.exists():
            two = read_allreduce(pair)
            two = two[(two["n_gpu"] == 2) & (two["per_node"] == 2)]
            r2 = _rel(two, predict_allreduce(two, hw.interconnect_bandwidth, params))
            ar.update(pairwise_mape=float(r2.abs().mean()), pairwise_bias=float(r2.median()))
    out["allreduce"] = ar
    if fitted is not None:
        a, b = params.to_dict(), fitted.to_dict()
        # the low-precision GEMM terms are laid over this fit from the operator tables (latency/opdb/), not refitted here
        diffs = [abs(a[k] - b[k]) / max(abs(b[k]), 1e-300) for k in a if not k.startswith(("fp8_", "fp4_"))
                 and isinstance(a[k], (int, float)) and isinstance(b.get(k), (int, float)) and (a[k] or b[k])]
        out["max_rel_diff_to_fit"] = float(max(diffs, default=0.0))
    return out


def _rel(rows: "pd.DataFrame", pred) -> "pd.Series":
    """pred/meas − 1 of ``rows`` (column time_s) as a Series aligned with them."""
    import pandas as pd

    return pd.Series(np.asarray(pred, dtype=float) / rows["time_s"].to_numpy(float) - 1.0)


def validate_latency(vidur_root: str | os.PathLike, figure: str | os.PathLike | None = None,
                     hardware=None) -> dict[str, Any]:
    """Everything ``sdsl validate latency`` reports, as a JSON-ready dict.

    One key per GPU (``h100``, ``a100``): GEMM leave-one-model-out (``overall_mape``/``decode_mape``
    medians over held-out models; ``pooled_overall_mape``, ``pooled_decode_mape`` over every held-out
    row; ``worst_model_decode_mape``; ``bias_by_tokens``), the elementwise kernels' leave-one-model-out
    (``elementwise_mape`` per kernel, ``elementwise_layer_mape`` per layer sum), the all-reduce across
    TP 2/4/8 (``allreduce``), per-model/per-op details and the all-model parameters (``fit_all_models``),
    and ``shipped``: the error of ``default_params`` for that GPU on every row (:func:`shipped_errors`);
    plus ``turbospec`` (H100 step times with those parameters against TurboSpec's fitted lines).
    ``hardware``: optional {folder: catalog name or file} (:func:`sdsl.fit.transfer.resolve_gpu_folders`).
    """
    from sdsl.fit.profiles import read_vidur, read_vidur_elementwise
    from sdsl.fit.transfer import resolve_gpu_folders

    root = Path(vidur_root)
    data = read_vidur(root)
    ew_rows = read_vidur_elementwise(root)
    resolved = resolve_gpu_folders(sorted(data["hardware"].unique()), hardware)
    table, points, _ = leave_one_model_out(data, hardware=resolved, elementwise=ew_rows)
    out: dict[str, Any] = {}
    full = {}
    for gpu in sorted(table["hardware"].unique()):
        out[gpu], full[gpu] = _gpu_report(gpu, resolved[gpu], data, ew_rows, table, points, root)
        out[gpu]["shipped"] = shipped_errors(gpu, resolved[gpu], data, ew_rows, root / "network", full[gpu])
    if "h100" in full:
        out["turbospec"] = _turbospec_block(turbospec_comparison(full["h100"]))
    if figure is not None:
        from sdsl.plots import plot_latency_validation

        Path(figure).parent.mkdir(parents=True, exist_ok=True)
        plot_latency_validation(points, path=figure)
    return out


def _turbospec_block(cmp: "pd.DataFrame") -> dict[str, Any]:
    out = {}
    for name, g in cmp.groupby("model", sort=True):
        out[name] = {
            "tp": int(g["tp"].iloc[0]),
            "mean_abs_rel_diff": float(np.mean(np.abs(g["rel_diff"]))),
            "max_abs_rel_diff": float(np.max(np.abs(g["rel_diff"]))),
            "batch1": {"predicted_ms": 1e3 * float(g["predicted_s"].iloc[0]), "turbospec_ms": 1e3 * float(g["turbospec_s"].iloc[0])},
            "batch64": {"predicted_ms": 1e3 * float(g["predicted_s"].iloc[-1]), "turbospec_ms": 1e3 * float(g["turbospec_s"].iloc[-1])},
        }
    return out
