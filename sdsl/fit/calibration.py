"""Fit the roofline's latency parameters to measured operator times (lmfit-shaped: fit → result).

The model is :func:`sdsl.core.latency.op_time`, the same formula the step-time predictions use
(docs/model.md §3.3; roofline of Williams, Waterman & Patterson, CACM 2009):

    t = smax_p( FLOPs / (η_c · peak),  bytes / (η_m · bandwidth) ) + t_kernel

with FLOPs and bytes of each GEMM from its shape (:func:`sdsl.core.latency.gemm_flops_bytes`).
:func:`fit_latency` minimises the squared error of ``log t`` (relative errors weigh alike at 5 µs
and 5 ms) with :func:`scipy.optimize.least_squares` inside bounds (η ∈ (0, 1], t_kernel ∈ [0, 1 ms],
p ∈ [1, 64]). ``smoothness="auto"`` fits both the hard maximum (p = ∞) and a free p, and keeps p
only when the data ask for it (Akaike's criterion lower by more than 2).

:class:`CalibrationResult` (in :mod:`sdsl.fit.calibration_result`, re-exported here) holds the fitted :class:`~sdsl.core.latency.LatencyParams`, per-point
residuals, MAPE (all points and the decode regime ``num_tokens <= 64``), ``report()``, ``plot()``
and ``to_json()``/``from_json()``. :func:`load_latency_params` is what ``--calibration FILE`` uses.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from sdsl.errors import ConfigError, InvalidInputError, ProfileError
from sdsl.core.architecture import dtype_bytes
from sdsl.fit.calibration_result import DECODE_MAX_TOKENS, CalibrationResult, load_latency_params
from sdsl.core.latency import DEFAULT_PARAMS, LatencyParams, gemm_flops_bytes, op_time

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from sdsl.core.hardware import Hardware

__all__ = ["CalibrationResult", "fit_latency", "predict_op_times", "predict_layer_times", "predict_step_times",
           "load_latency_params", "DECODE_MAX_TOKENS", "calibrate_profiles"]

_BOUNDS = {"eta_compute": (1e-6, 1.0), "eta_memory": (1e-6, 1.0), "t_kernel": (0.0, 1e-3), "t_layer": (0.0, 1e-2),
           "t_step": (0.0, 1.0), "smoothness": (1.0, 64.0)}
_SCALE = {"eta_compute": 0.1, "eta_memory": 0.1, "t_kernel": 1e-6, "t_layer": 1e-5, "t_step": 1e-4, "smoothness": 1.0}
_REQUIRED = ("num_tokens", "in_features", "out_features", "time_s")


def _arrays(data: "pd.DataFrame", dtype: str | None):
    missing = [c for c in _REQUIRED if c not in data.columns]
    if missing:
        raise ProfileError(f"Calibration data lacks column {missing[0]!r} (need {', '.join(_REQUIRED)}).")
    if "kind" in data.columns:
        data = data[data["kind"] == "op"]
    if len(data) == 0:
        raise ProfileError("Calibration data holds no per-operator rows.")
    if dtype is None:
        dtypes = set(data["dtype"]) if "dtype" in data.columns else set()
        if len(dtypes) != 1:
            raise InvalidInputError("Give dtype= (the data has no single 'dtype' column value).")
        dtype = dtypes.pop()
    y = data["time_s"].to_numpy(dtype=float)
    if not np.all(np.isfinite(y) & (y > 0)):
        raise ProfileError("Calibration data: every time_s must be positive and finite.")
    flops, nbytes = gemm_flops_bytes(data["num_tokens"].to_numpy(), data["in_features"].to_numpy(),
                                     data["out_features"].to_numpy(), dtype_bytes(dtype))
    return data, dtype, flops, nbytes, y


def predict_op_times(data: "pd.DataFrame", hardware: "Hardware", params: LatencyParams,
                     dtype: str | None = None) -> np.ndarray:
    """Predicted time (s) of each per-operator row of ``data`` with ``params`` on ``hardware``: the roofline
    op time of :func:`sdsl.core.latency.op_time` (Williams, Waterman & Patterson 2009; docs/model.md §3.3)."""
    data, dtype, flops, nbytes, _ = _arrays(data, dtype)
    return op_time(flops, nbytes, hardware.peak_flops_for(dtype), hardware.mem_bandwidth, params)


def predict_layer_times(layers: "pd.DataFrame", spec, hardware: "Hardware", params: LatencyParams,
                        dtype: str) -> np.ndarray:
    """Predicted time (s) of one decoder layer for each row (batch, q, context) of ``layers``.

    One layer's share of :func:`sdsl.core.latency.step_time` is taken as the difference between the
    model with two layers and with one (the LM head and per-step costs cancel), so the layer is
    priced by exactly the formula that prices whole forward passes.
    """
    from dataclasses import replace

    from sdsl.core.deployment import Deployment
    from sdsl.core.latency import step_time

    b, q, L = (layers[c].to_numpy(dtype=float) for c in ("batch", "q", "context"))
    dep = Deployment(hardware, dtype=dtype, params=params)
    one = step_time(replace(spec, n_layer=1), dep, batch=b, q=q, context=L).total_s
    two = step_time(replace(spec, n_layer=2), dep, batch=b, q=q, context=L).total_s
    return np.asarray(two - one, dtype=float)


def predict_step_times(steps: "pd.DataFrame", spec, hardware: "Hardware", params: LatencyParams,
                       dtype: str) -> np.ndarray:
    """Predicted time (s) of one whole forward pass (:func:`sdsl.core.latency.step_time`) for each row
    (batch, q, context) of ``steps``: embedding, every layer, the LM head and ``t_step``."""
    from sdsl.core.deployment import Deployment
    from sdsl.core.latency import step_time

    b, q, L = (steps[c].to_numpy(dtype=float) for c in ("batch", "q", "context"))
    dep = Deployment(hardware, dtype=dtype, params=params)
    return np.asarray(step_time(spec, dep, batch=b, q=q, context=L).total_s, dtype=float)


def _mape(pred: np.ndarray, meas: np.ndarray) -> float:
    return float(np.mean(np.abs(pred / meas - 1.0))) if len(meas) else float("nan")


def _solve(names, x0, resid_fn):
    from scipy.optimize import least_squares

    lo = [_BOUNDS[n][0] for n in names]
    hi = [_BOUNDS[n][1] for n in names]
    x0 = np.clip(np.asarray(x0, dtype=float), np.add(lo, 1e-12), np.subtract(hi, 1e-12))
    return least_squares(resid_fn, x0, bounds=(lo, hi), x_scale=[_SCALE[n] for n in names],
                         xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=2000)


def _stderr(sol, n: int) -> np.ndarray:
    dof = max(n - len(sol.x), 1)
    s2 = 2.0 * sol.cost / dof
    try:
        cov = np.linalg.pinv(sol.jac.T @ sol.jac) * s2
        return np.sqrt(np.clip(np.diag(cov), 0, None))
    except np.linalg.LinAlgError:  # pragma: no cover
        return np.full(len(sol.x), np.nan)


def fit_latency(data: "pd.DataFrame", hardware: "Hardware", *, dtype: str | None = None,
                smoothness: str | float = "auto", fit_kernel: bool = True,
                base: LatencyParams | None = None, sources: Iterable[str] = (),
                keep_points: bool = True, layers: Iterable[tuple["pd.DataFrame", Any]] = (),
                fit_layer_overhead: bool = True, steps: Iterable[tuple["pd.DataFrame", Any]] = (),
                fit_step_overhead: bool = True, step_weight: float = 1.0) -> CalibrationResult:
    """Fit η_c, η_m, t_kernel (and p) to per-operator rows ``num_tokens, in_features, out_features, time_s``.

    ``smoothness``: ``"auto"`` (free p only if AIC improves by > 2), ``"fit"`` (always free),
    or a number (fixed; ``math.inf`` = hard max). ``base`` supplies the fields not fitted
    (t_step, all-reduce terms). Profile ``kind == "layer"`` rows in ``data`` are ignored.

    ``layers``: optional ``(layer_rows, ModelSpec)`` pairs (whole decoder-layer steps from the
    harness). When given they are fitted jointly with the operators, each step priced by
    :func:`predict_layer_times` — useful where per-kernel overheads outside the GEMMs dominate
    (eager PyTorch on a CPU); ``layer_mape`` then reports their fit. With layers (and
    ``fit_layer_overhead``, the default) the fixed per-layer cost ``t_layer`` is fitted too: only
    the layer rows constrain it (operator rows are single kernels).

    ``steps``: optional ``(step_rows, ModelSpec)`` pairs of whole forward passes (columns batch, q,
    context, time_s), each priced by :func:`predict_step_times` (= :func:`sdsl.core.latency.step_time`)
    and fitted jointly; with ``fit_step_overhead`` (default) the fixed per-forward cost ``t_step``
    is fitted too (only step rows constrain it). ``step_mape`` then reports their fit.
    """
    data, dtype, flops, nbytes, y = _arrays(data, dtype)
    base = base or DEFAULT_PARAMS
    peak, bw = hardware.peak_flops_for(dtype), hardware.mem_bandwidth
    logy = np.log(y)
    n = len(y)
    core = ["eta_compute", "eta_memory"] + (["t_kernel"] if fit_kernel else [])
    # starting point: the largest achieved fractions of the datasheet peaks, a few µs of launch cost
    x0 = {"eta_compute": min(1.0, float(np.max(flops / y)) / peak),
          "eta_memory": min(1.0, float(np.max(nbytes / y)) / bw),
          "t_kernel": min(float(np.min(y)) * 0.5, 1e-4), "t_layer": 1e-5, "smoothness": 2.0}

    layers = list(layers)
    steps = list(steps)
    if (layers or steps) and fit_layer_overhead:
        core.append("t_layer")
    if steps and fit_step_overhead:
        core.append("t_step")
        x0["t_step"] = 1e-4
    layer_meas = np.concatenate([ly["time_s"].to_numpy(dtype=float) for ly, _ in layers]) if layers else np.empty(0)
    step_meas = np.concatenate([st["time_s"].to_numpy(dtype=float) for st, _ in steps]) if steps else np.empty(0)

    def layer_pred(params):
        return np.concatenate([predict_layer_times(ly, spec, hardware, params, dtype) for ly, spec in layers])

    def step_pred(params):
        return np.concatenate([predict_step_times(st, spec, hardware, params, dtype) for st, spec in steps])

    def run(names, fixed_p):
        def params_of(x):
            kw = dict(zip(names, x))
            if fixed_p is not None:
                kw["smoothness"] = fixed_p
            return base.replace(**kw)

        def resid(x):
            prm = params_of(x)
            r = np.log(op_time(flops, nbytes, peak, bw, prm)) - logy
            if layers:
                r = np.concatenate([r, np.log(np.maximum(layer_pred(prm), 1e-12)) - np.log(layer_meas)])
            if steps:
                r = np.concatenate([r, math.sqrt(step_weight) * (np.log(np.maximum(step_pred(prm), 1e-12))
                                                                 - np.log(step_meas))])
            return r

        sol = _solve(names, [x0[k] for k in names], resid)
        return sol, params_of(sol.x)

    def aic(sol, k):
        m = n + len(layer_meas) + len(step_meas)
        return m * math.log(max(2.0 * sol.cost / m, 1e-300)) + 2 * k

    if smoothness == "auto":
        s_hard, p_hard = run(core, math.inf)
        s_soft, p_soft = run(core + ["smoothness"], None)
        a_hard, a_soft = aic(s_hard, len(core)), aic(s_soft, len(core) + 1)
        if a_soft < a_hard - 2.0:
            sol, params, names = s_soft, p_soft, core + ["smoothness"]
            choice = f"smooth maximum kept: AIC {a_soft:.1f} vs {a_hard:.1f} with the hard max"
        else:
            sol, params, names = s_hard, p_hard, core
            choice = f"hard max kept: a free smoothness does not lower AIC by > 2 ({a_soft:.1f} vs {a_hard:.1f})"
    elif smoothness == "fit":
        names = core + ["smoothness"]
        sol, params = run(names, None)
        choice = "smoothness fitted"
    else:
        p = float(smoothness)
        names = core
        sol, params = run(names, p)
        choice = f"smoothness fixed at {p:g}"
    pred = op_time(flops, nbytes, peak, bw, params)
    rel = pred / y - 1.0
    decode = data["num_tokens"].to_numpy() <= DECODE_MAX_TOKENS
    err = _stderr(sol, n + len(layer_meas) + len(step_meas))
    src = tuple(sources)
    extra = "".join(f", {k} {w}" for k, w in ((len(layer_meas), "decoder-layer steps"),
                                                 (len(step_meas), "whole forward passes")) if k)
    params = params.replace(source=f"fitted by sdsl.fit.calibration to {n} operator timings{extra} on {hardware.name}"
                            + (f" ({', '.join(src)})" if src else ""))
    points = None
    if keep_points:
        cols = [c for c in ("model", "op", "tp", "num_tokens", "in_features", "out_features") if c in data.columns]
        points = data[cols].reset_index(drop=True).assign(measured_s=y, predicted_s=pred, rel_error=rel)
    return CalibrationResult(
        params=params, hardware=getattr(hardware, "key", hardware.name.lower()), dtype=dtype,
        varied=tuple(names), stderr=dict(zip(names, map(float, err))), n_points=n,
        mape=_mape(pred, y), decode_mape=_mape(pred[decode], y[decode]),
        rms_log_error=float(np.sqrt(np.mean((np.log(pred) - logy) ** 2))),
        smoothness_choice=choice, sources=src, points=points,
        layer_mape=_mape(layer_pred(params), layer_meas) if layers else None, layer_points=len(layer_meas),
        layers_fitted=bool(layers), step_mape=_mape(step_pred(params), step_meas) if steps else None,
        step_points=len(step_meas), steps_fitted=bool(steps))


def _hardware_ref(value) -> str:
    """A sidecar's hardware: catalog names compare case-insensitively, file paths stay as written."""
    text = str(value)
    return text if ("/" in text or "\\" in text or text.lower().endswith((".toml", ".json"))) else text.lower()


def calibrate_profiles(paths: Iterable[str | os.PathLike], hardware: str | None = None,
                       smoothness: str | float = "auto", fit_layers: bool = False,
                       steps: Iterable[str | os.PathLike] = ()) -> CalibrationResult:
    """Fit to one or more profile files (sdsl profiles, or Vidur ``mlp.csv`` files / folders).

    ``hardware`` is a catalog name or file; without it the profiles' sidecars must name one
    (``device.hardware``) and agree. Decoder-layer rows are predicted and reported
    (``layer_mape``); with ``fit_layers`` they are also fitted, jointly with the operators.
    ``steps``: model-steps files (:mod:`sdsl.fit.model_steps`) of whole forward passes, fitted jointly
    (with ``t_step`` and ``t_layer``).
    """
    import pandas as pd

    from sdsl.core.hardware import get_hardware
    from sdsl.fit.profiles import profile_paths, read_profile, read_vidur, read_vidur_file

    frames, names, hw_names, dtypes, layer_sets = [], [], set(), set(), []
    for p in map(Path, paths):
        if p.is_dir():
            df = read_vidur(p)
            dtypes.add("fp16")
        elif p.name == "mlp.csv" or (p.suffix == ".csv" and not profile_paths(p)[1].exists()):
            df = read_vidur_file(p)
            dtypes.add("fp16")
        else:
            prof = read_profile(p)
            df = prof.ops.assign(dtype=prof.meta["dtype"])
            dtypes.add(prof.meta["dtype"])
            if len(prof.layers):
                layer_sets.append((prof.layers, prof.meta["model"]))
            if prof.meta["device"].get("hardware"):
                hw_names.add(_hardware_ref(prof.meta["device"]["hardware"]))
        frames.append(df)
        names.append(f"vidur/{p.name}" if p.is_dir() else
                     f"{p.parent.parent.name}/{p.parent.name}" if p.name == "mlp.csv" else p.name)
    if not frames:
        raise InvalidInputError("Give at least one profile to calibrate.")
    step_pairs = []
    steps = list(steps)
    if steps:
        from sdsl.fit.model_steps import read_model_steps, step_sources

        for sp in steps:
            pairs_, meta = read_model_steps(sp)
            step_pairs += pairs_
            if meta.get("dtype"):
                dtypes.add(meta["dtype"])
            if meta.get("hardware"):
                hw_names.add(_hardware_ref(meta["hardware"]))
        names += step_sources(steps)
    if len(dtypes) > 1:
        raise ProfileError(f"Profiles mix dtypes {sorted(dtypes)}; calibrate one dtype at a time.")
    if hardware is None:
        if len(hw_names) != 1:
            raise ConfigError("Name the hardware (--hardware): the profiles do not name exactly one.")
        hardware = hw_names.pop()
    hw = get_hardware(hardware)
    data = pd.concat(frames, ignore_index=True)
    dtype = dtypes.pop()
    from sdsl.core.architecture import ModelSpec

    pairs = [(layers, ModelSpec.from_dict(model)) for layers, model in layer_sets]
    res = fit_latency(data, hw, dtype=dtype, smoothness=smoothness, sources=names,
                      layers=pairs if fit_layers else (), steps=step_pairs)
    if pairs and not fit_layers:
        from dataclasses import replace

        pred = np.concatenate([predict_layer_times(ly, spec, hw, res.params, dtype) for ly, spec in pairs])
        meas = np.concatenate([ly["time_s"].to_numpy(dtype=float) for ly, _ in pairs])
        res = replace(res, layer_mape=_mape(pred, meas), layer_points=len(meas))
    return _keep_file_reference(res, hardware)


def _keep_file_reference(res: CalibrationResult, hardware) -> CalibrationResult:
    """A fit against a hardware *file* records the file, so that later steps (all-reduce fit, hold-out) find it."""
    from dataclasses import replace

    text = str(hardware)
    if "/" in text or "\\" in text or text.lower().endswith((".toml", ".json")):
        return replace(res, hardware=text)
    return res
