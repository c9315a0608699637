"""Fit the roofline's latency parameters to measured operator times (lmfit-shaped: fit → result).

The model is :func:`sdsl.roofline.latency.op_time`, the same formula the step-time predictions use
(docs/model.md §3.3; roofline of Williams, Waterman & Patterson, CACM 2009):

    t = smax_p( FLOPs / (η_c · peak),  bytes / (η_m · bandwidth) ) + t_kernel

with FLOPs and bytes of each GEMM from its shape (:func:`sdsl.roofline.latency.gemm_flops_bytes`).
:func:`fit_latency` minimises the squared error of ``log t`` (relative errors weigh alike at 5 µs
and 5 ms) with :func:`scipy.optimize.least_squares` inside bounds (η ∈ (0, 1], t_kernel ∈ [0, 1 ms],
p ∈ [1, 64]). ``smoothness="auto"`` fits both the hard maximum (p = ∞) and a free p, and keeps p
only when the data ask for it (Akaike's criterion lower by more than 2).

:class:`CalibrationResult` (in :mod:`sdsl.fit.calibration_result`, re-exported here) holds the fitted :class:`~sdsl.roofline.latency.LatencyParams`, per-point
residuals, MAPE (all points and the decode regime ``num_tokens <= 64``), ``report()``, ``plot()``
and ``to_json()``/``from_json()``. :func:`load_latency_params` is what ``--calibration FILE`` uses.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from sdsl.errors import ConfigError, InvalidInputError, ProfileError
from sdsl.catalog.models import dtype_bytes
from sdsl.fit.calibration_result import DECODE_MAX_TOKENS, CalibrationResult, load_latency_params
from sdsl.roofline.kernels import gemm_waves, min_row_tile
from sdsl.roofline.latency import DEFAULT_PARAMS, LatencyParams, compute_peak, gemm_flops_bytes, op_time

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from sdsl.catalog.hardware import Hardware

__all__ = ["CalibrationResult", "fit_latency", "predict_op_times", "predict_layer_times", "predict_step_times",
           "load_latency_params", "DECODE_MAX_TOKENS", "calibrate_profiles", "GPU_M_TILE", "KERNEL_TERMS"]

_BOUNDS = {"eta_compute": (1e-6, 1.0), "eta_memory": (1e-6, 1.0), "t_kernel": (0.0, 1e-3), "t_layer": (0.0, 1e-2),
           "t_step": (0.0, 1.0), "smoothness": (1.0, 64.0), "tail_waves": (0.0, 10.0), "t_kernel_size": (0.0, 1e-3),
           "kernel_size_bytes": (1e5, 1e10)}
_SCALE = {"eta_compute": 0.1, "eta_memory": 0.1, "t_kernel": 1e-6, "t_layer": 1e-5, "t_step": 1e-4, "smoothness": 1.0,
          "tail_waves": 0.1, "t_kernel_size": 1e-6, "kernel_size_bytes": 1e6}
#: The GEMM kernel terms ``kernel_terms=True`` fits (wave tail, size overhead; VALIDATION.md).
KERNEL_TERMS = ("tail_waves", "t_kernel_size", "kernel_size_bytes")
_REQUIRED = ("num_tokens", "in_features", "out_features", "time_s")
GPU_M_TILE = 128
"""GEMM row tile of GPU kernel libraries (Vidur's H100/A100 times step every 128 tokens; VALIDATION.md)."""


def _arrays(data: "pd.DataFrame", dtype: str | None, params: LatencyParams, sm_count=None):
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
    tokens, n_out = data["num_tokens"].to_numpy(), data["out_features"].to_numpy()
    flops, nbytes = gemm_flops_bytes(tokens, data["in_features"].to_numpy(), n_out, dtype_bytes(dtype),
                                     params.m_tile, params.m_tile_min)
    return data, dtype, flops, nbytes, y, gemm_waves(tokens, n_out, params.m_tile, sm_count)


def predict_op_times(data: "pd.DataFrame", hardware: "Hardware", params: LatencyParams,
                     dtype: str | None = None) -> np.ndarray:
    """Predicted time (s) of each per-operator row of ``data`` with ``params`` on ``hardware``: the roofline
    op time of :func:`sdsl.roofline.latency.op_time` (Williams, Waterman & Patterson 2009; docs/model.md §3.3)."""
    data, dtype, flops, nbytes, _, waves = _arrays(data, dtype, params, getattr(hardware, "sm_count", None))
    return op_time(flops, nbytes, compute_peak(hardware, dtype), hardware.mem_bandwidth, params, waves=waves)


def predict_layer_times(layers: "pd.DataFrame", spec, hardware: "Hardware", params: LatencyParams,
                        dtype: str) -> np.ndarray:
    """Predicted time (s) of one decoder layer for each row (batch, q, context) of ``layers``.

    One layer's share of :func:`sdsl.roofline.latency.step_time` is taken as the difference between the
    model with two layers and with one (the LM head and per-step costs cancel), so the layer is
    priced by exactly the formula that prices whole forward passes.
    """
    from dataclasses import replace

    from sdsl.roofline.deployment import Deployment
    from sdsl.roofline.latency import step_time

    b, q, L = (layers[c].to_numpy(dtype=float) for c in ("batch", "q", "context"))
    dep = Deployment(hardware, dtype=dtype, params=params)
    one = step_time(replace(spec, n_layer=1), dep, batch=b, q=q, context=L).total_s
    two = step_time(replace(spec, n_layer=2), dep, batch=b, q=q, context=L).total_s
    return np.asarray(two - one, dtype=float)


def predict_step_times(steps: "pd.DataFrame", spec, hardware: "Hardware", params: LatencyParams,
                       dtype: str) -> np.ndarray:
    """Predicted time (s) of one whole forward pass (:func:`sdsl.roofline.latency.step_time`) for each row
    (batch, q, context) of ``steps``: embedding, every layer, the LM head and ``t_step``."""
    from sdsl.roofline.deployment import Deployment
    from sdsl.roofline.latency import step_time

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


def _stderr(sol, n: int, names) -> np.ndarray:
    """Standard errors from the Jacobian, inverted in the solver's scaled units (parameters differ by ~1e13)."""
    dof = max(n - len(sol.x), 1)
    s2 = 2.0 * sol.cost / dof
    scale = np.array([_SCALE[k] for k in names])
    try:
        jac = sol.jac * scale
        cov = np.linalg.pinv(jac.T @ jac) * s2
        return np.sqrt(np.clip(np.diag(cov), 0, None)) * scale
    except np.linalg.LinAlgError:  # pragma: no cover
        return np.full(len(sol.x), np.nan)


@dataclass(frozen=True)
class _Problem:
    """What one fit sees: operator arrays, optional layer/forward rows, the hardware peaks and ``base``."""

    data: Any
    dtype: str
    flops: np.ndarray
    nbytes: np.ndarray
    y: np.ndarray
    hardware: Any
    peak: float
    bw: float
    base: LatencyParams
    layers: list
    steps: list
    step_weight: float
    waves: Any = None
    kernel_terms: bool = False

    @property
    def layer_meas(self) -> np.ndarray:
        return np.concatenate([ly["time_s"].to_numpy(dtype=float) for ly, _ in self.layers]) if self.layers else np.empty(0)

    @property
    def step_meas(self) -> np.ndarray:
        return np.concatenate([st["time_s"].to_numpy(dtype=float) for st, _ in self.steps]) if self.steps else np.empty(0)

    @property
    def n_rows(self) -> int:
        return len(self.y) + len(self.layer_meas) + len(self.step_meas)

    def layer_pred(self, params: LatencyParams) -> np.ndarray:
        return np.concatenate([predict_layer_times(ly, spec, self.hardware, params, self.dtype) for ly, spec in self.layers])

    def step_pred(self, params: LatencyParams) -> np.ndarray:
        return np.concatenate([predict_step_times(st, spec, self.hardware, params, self.dtype) for st, spec in self.steps])

    def op_pred(self, params: LatencyParams) -> np.ndarray:
        return op_time(self.flops, self.nbytes, self.peak, self.bw, params, waves=self.waves)


def _problem(data, hardware, dtype, base, m_tile, layers, steps, step_weight, kernel_terms=False) -> _Problem:
    base = base or DEFAULT_PARAMS
    if m_tile is not None:
        base = base.replace(m_tile=int(m_tile))
    if kernel_terms:  # the launch floor every kernel pays: the elementwise kernels' fixed cost, when fitted
        base = base.replace(m_tile_min=min_row_tile(hardware),
                            t_kernel=base.t_kernel if base.t_elementwise is None else base.t_elementwise)
    data, dtype, flops, nbytes, y, waves = _arrays(data, dtype, base, getattr(hardware, "sm_count", None))
    if kernel_terms and waves is None:
        raise InvalidInputError("The GEMM kernel terms need row tiles (m_tile > 0) and the hardware's SM count.")
    return _Problem(data, dtype, flops, nbytes, y, hardware, compute_peak(hardware, dtype), hardware.mem_bandwidth,
                    base, list(layers), list(steps), step_weight, waves, kernel_terms)


def _free_names(pb: _Problem, fit_kernel: bool, fit_layer_overhead: bool, fit_step_overhead: bool) -> list[str]:
    """Fitted fields: η_c, η_m (t_kernel, unless the kernel terms take it from the elementwise fit); the kernel
    terms; t_layer when layer or forward rows constrain it; t_step with forwards."""
    fit_kernel = fit_kernel and not (pb.kernel_terms and pb.base.t_elementwise is not None)
    names = ["eta_compute", "eta_memory"] + (["t_kernel"] if fit_kernel else []) + list(KERNEL_TERMS * pb.kernel_terms)
    if (pb.layers or pb.steps) and fit_layer_overhead:
        names.append("t_layer")
    if pb.steps and fit_step_overhead:
        names.append("t_step")
    return names


def _start(pb: _Problem) -> dict[str, float]:
    """Starting point: the largest achieved fractions of the datasheet peaks, a few µs of launch cost."""
    return {"eta_compute": min(1.0, float(np.max(pb.flops / pb.y)) / pb.peak),
            "eta_memory": min(1.0, float(np.max(pb.nbytes / pb.y)) / pb.bw),
            "t_kernel": min(float(np.min(pb.y)) * 0.5, 1e-4), "t_layer": 1e-5, "t_step": 1e-4, "smoothness": 2.0,
            "tail_waves": 0.5, "t_kernel_size": 3e-6, "kernel_size_bytes": 2e7}


def _residuals(pb: _Problem, params: LatencyParams) -> np.ndarray:
    """log(pred) − log(meas) over operator rows, then layer rows, then (weighted) forward rows."""
    r = [np.log(pb.op_pred(params)) - np.log(pb.y)]
    if pb.layers:
        r.append(np.log(np.maximum(pb.layer_pred(params), 1e-12)) - np.log(pb.layer_meas))
    if pb.steps:
        r.append(math.sqrt(pb.step_weight) * (np.log(np.maximum(pb.step_pred(params), 1e-12)) - np.log(pb.step_meas)))
    return np.concatenate(r)


def _run(pb: _Problem, names: list[str], fixed_p: float | None):
    """Least-squares fit of ``names`` (smoothness fixed at ``fixed_p`` unless it is among them)."""
    def params_of(x):
        kw = dict(zip(names, x))
        if fixed_p is not None:
            kw["smoothness"] = fixed_p
        return pb.base.replace(**kw)

    x0 = _start(pb)
    sol = _solve(names, [x0[k] for k in names], lambda x: _residuals(pb, params_of(x)))
    return sol, params_of(sol.x)


def _aic(pb: _Problem, sol, k: int) -> float:
    m = pb.n_rows
    return m * math.log(max(2.0 * sol.cost / m, 1e-300)) + 2 * k


def _choose_model(pb: _Problem, core: list[str], smoothness):
    """``(sol, params, names, choice)``: the hard max, a free p, or a fixed p (``"auto"``: AIC decides)."""
    if smoothness == "auto":
        s_hard, p_hard = _run(pb, core, math.inf)
        s_soft, p_soft = _run(pb, core + ["smoothness"], None)
        a_hard, a_soft = _aic(pb, s_hard, len(core)), _aic(pb, s_soft, len(core) + 1)
        if a_soft < a_hard - 2.0:
            return s_soft, p_soft, core + ["smoothness"], f"smooth maximum kept: AIC {a_soft:.1f} vs {a_hard:.1f} with the hard max"
        return s_hard, p_hard, core, f"hard max kept: a free smoothness does not lower AIC by > 2 ({a_soft:.1f} vs {a_hard:.1f})"
    if smoothness == "fit":
        sol, params = _run(pb, core + ["smoothness"], None)
        return sol, params, core + ["smoothness"], "smoothness fitted"
    p = float(smoothness)
    sol, params = _run(pb, core, p)
    return sol, params, core, f"smoothness fixed at {p:g}"


def _result(pb: _Problem, sol, params: LatencyParams, names, choice, sources, keep_points) -> CalibrationResult:
    """Assemble the CalibrationResult: source line, per-point table, MAPEs, standard errors."""
    pred, y, n = pb.op_pred(params), pb.y, len(pb.y)
    decode = pb.data["num_tokens"].to_numpy() <= DECODE_MAX_TOKENS
    src = tuple(sources)
    lm, sm = pb.layer_meas, pb.step_meas
    extra = "".join(f", {k} {w}" for k, w in ((len(lm), "decoder-layer steps"), (len(sm), "whole forward passes")) if k)
    params = params.replace(source=f"fitted by sdsl.fit.calibration to {n} operator timings{extra} on {pb.hardware.name}"
                            + (f" ({', '.join(src)})" if src else ""))
    points = None
    if keep_points:
        cols = [c for c in ("model", "op", "tp", "num_tokens", "in_features", "out_features") if c in pb.data.columns]
        points = pb.data[cols].reset_index(drop=True).assign(measured_s=y, predicted_s=pred, rel_error=pred / y - 1.0)
    return CalibrationResult(
        params=params, hardware=getattr(pb.hardware, "key", pb.hardware.name.lower()), dtype=pb.dtype,
        varied=tuple(names), stderr=dict(zip(names, map(float, _stderr(sol, pb.n_rows, names)))), n_points=n,
        mape=_mape(pred, y), decode_mape=_mape(pred[decode], y[decode]),
        rms_log_error=float(np.sqrt(np.mean((np.log(pred) - np.log(y)) ** 2))),
        smoothness_choice=choice, sources=src, points=points,
        layer_mape=_mape(pb.layer_pred(params), lm) if pb.layers else None, layer_points=len(lm),
        layers_fitted=bool(pb.layers), step_mape=_mape(pb.step_pred(params), sm) if pb.steps else None,
        step_points=len(sm), steps_fitted=bool(pb.steps))


def fit_latency(data: "pd.DataFrame", hardware: "Hardware", *, dtype: str | None = None,
                smoothness: str | float = "auto", fit_kernel: bool = True,
                base: LatencyParams | None = None, sources: Iterable[str] = (),
                keep_points: bool = True, layers: Iterable[tuple["pd.DataFrame", Any]] = (),
                fit_layer_overhead: bool = True, steps: Iterable[tuple["pd.DataFrame", Any]] = (),
                fit_step_overhead: bool = True, step_weight: float = 1.0,
                m_tile: int | None = None, kernel_terms: bool = False) -> CalibrationResult:
    """Fit η_c, η_m, t_kernel (and p) to per-operator rows ``num_tokens, in_features, out_features, time_s``.

    ``smoothness``: ``"auto"`` (free p only if AIC improves by > 2), ``"fit"`` (always free),
    or a number (fixed; ``math.inf`` = hard max). ``base`` supplies the fields not fitted
    (t_step, all-reduce and elementwise terms). ``m_tile``: GEMM row tile the compute is padded
    to (:func:`sdsl.roofline.latency.padded_tokens`; default ``base.m_tile``). Profile ``kind == "layer"``
    rows in ``data`` are ignored.

    ``layers``: optional ``(layer_rows, ModelSpec)`` pairs (whole decoder-layer steps), fitted jointly,
    each priced by :func:`predict_layer_times`; with ``fit_layer_overhead`` the per-layer cost
    ``t_layer`` is fitted too (only layer rows constrain it). ``steps``: ``(step_rows, ModelSpec)``
    pairs of whole forward passes priced by :func:`predict_step_times`; with ``fit_step_overhead``
    ``t_step`` is fitted too. ``layer_mape`` / ``step_mape`` report those fits.

    ``kernel_terms`` (GPUs, with ``m_tile``): also fit the GEMM kernel terms :data:`KERNEL_TERMS` (the
    last wave's tail and the size overhead, :func:`sdsl.roofline.latency.op_time`), with the smallest row
    tile of the hardware's tensor cores (:func:`sdsl.roofline.kernels.min_row_tile`); when ``base`` has the
    elementwise kernels fitted, ``t_kernel`` is their launch cost ``t_elementwise`` (not fitted).
    """
    pb = _problem(data, hardware, dtype, base, m_tile, layers, steps, step_weight, kernel_terms)
    core = _free_names(pb, fit_kernel, fit_layer_overhead, fit_step_overhead)
    sol, params, names, choice = _choose_model(pb, core, smoothness)
    return _result(pb, sol, params, names, choice, sources, keep_points)


def _read_steps(steps, names: list, dtypes: set, hw_names: set) -> list:
    """(step rows, ModelSpec) pairs of model-steps files; adds their sources, dtypes and hardware in place."""
    if not steps:
        return []
    from sdsl.fit.model_steps import read_model_steps, step_sources
    from sdsl.fit.profiles import hardware_ref

    pairs = []
    for sp in steps:
        got, meta = read_model_steps(sp)
        pairs += got
        if meta.get("dtype"):
            dtypes.add(meta["dtype"])
        if meta.get("hardware"):
            hw_names.add(hardware_ref(meta["hardware"]))
    names += step_sources(steps)
    return pairs


def calibrate_profiles(paths: Iterable[str | os.PathLike], hardware: str | None = None,
                       smoothness: str | float = "auto", fit_layers: bool = False,
                       steps: Iterable[str | os.PathLike] = (), kernel_terms: bool = True) -> CalibrationResult:
    """Fit to one or more profile files (sdsl profiles, or Vidur ``mlp.csv`` files / folders).

    ``hardware`` is a catalog name or file; without it the profiles' sidecars must name one
    (``device.hardware``) and agree. Decoder-layer rows are predicted and reported
    (``layer_mape``); with ``fit_layers`` they are also fitted, jointly with the operators.
    ``steps``: model-steps files (:mod:`sdsl.fit.model_steps`) of whole forward passes, fitted jointly
    (with ``t_step`` and ``t_layer``). ``kernel_terms``: on a GPU with an SM count, fit the GEMM kernel terms.
    """
    import pandas as pd

    from sdsl.catalog.hardware import get_hardware
    from sdsl.fit.profiles import read_calibration_inputs

    frames, names, hw_names, dtypes, layer_sets, vidur_dirs = read_calibration_inputs(paths)
    if not frames:
        raise InvalidInputError("Give at least one profile to calibrate.")
    step_pairs = _read_steps(list(steps), names, dtypes, hw_names)
    if len(dtypes) > 1:
        raise ProfileError(f"Profiles mix dtypes {sorted(dtypes)}; calibrate one dtype at a time.")
    if hardware is None:
        if len(hw_names) != 1:
            raise ConfigError("Name the hardware (--hardware): the profiles do not name exactly one.")
        hardware = hw_names.pop()
    hw = get_hardware(hardware)
    data = pd.concat(frames, ignore_index=True)
    dtype = dtypes.pop()
    from sdsl.catalog.models import ModelSpec

    pairs = [(layers, ModelSpec.from_dict(model)) for layers, model in layer_sets]
    m_tile = GPU_M_TILE if getattr(hw, "kind", "gpu") == "gpu" else 0
    ew = None
    if vidur_dirs:  # elementwise first: their fixed cost is the launch floor of the GEMM kernel terms
        from sdsl.fit.elementwise import vidur_elementwise_params, with_elementwise

        ew = vidur_elementwise_params(vidur_dirs, hw, DEFAULT_PARAMS)
    res = fit_latency(data, hw, dtype=dtype, smoothness=smoothness, sources=names, base=ew and ew[0],
                      layers=pairs if fit_layers else (), steps=step_pairs, m_tile=m_tile,
                      kernel_terms=kernel_terms and m_tile > 0 and bool(getattr(hw, "sm_count", None)))
    if vidur_dirs:
        res = with_elementwise(res, vidur_dirs, hw, ew)
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
