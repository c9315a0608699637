"""Fit the roofline's latency parameters to measured operator times (lmfit-shaped: fit → result).

The model is :func:`sdsl.latency.op_time`, the same formula the step-time predictions use
(DESIGN.md §3.3; roofline of Williams, Waterman & Patterson, CACM 2009):

    t = smax_p( FLOPs / (η_c · peak),  bytes / (η_m · bandwidth) ) + t_kernel

with FLOPs and bytes of each GEMM from its shape (:func:`sdsl.latency.gemm_flops_bytes`).
:func:`fit_latency` minimises the squared error of ``log t`` (relative errors weigh alike at 5 µs
and 5 ms) with :func:`scipy.optimize.least_squares` inside bounds (η ∈ (0, 1], t_kernel ∈ [0, 1 ms],
p ∈ [1, 64]). ``smoothness="auto"`` fits both the hard maximum (p = ∞) and a free p, and keeps p
only when the data ask for it (Akaike's criterion lower by more than 2).

:class:`CalibrationResult` holds the fitted :class:`~sdsl.latency.LatencyParams`, per-point
residuals, MAPE (all points and the decode regime ``num_tokens <= 64``), ``report()``, ``plot()``
and ``to_json()``/``from_json()``. :func:`load_latency_params` is what ``--calibration FILE`` uses.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import numpy as np

from ._io import atomic_write_text, load_json
from .errors import ConfigError, InvalidInputError, ProfileError
from .latency import DEFAULT_PARAMS, LatencyParams, gemm_flops_bytes, op_time

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .hardware import Hardware

__all__ = ["CalibrationResult", "fit_latency", "predict_op_times", "predict_layer_times", "predict_step_times",
           "load_latency_params", "DECODE_MAX_TOKENS", "calibrate_profiles"]

DECODE_MAX_TOKENS = 64  #: num_tokens at or below which an operator counts as "decode regime"
FORMAT = "sdsl-calibration"
_BOUNDS = {"eta_compute": (1e-6, 1.0), "eta_memory": (1e-6, 1.0), "t_kernel": (0.0, 1e-3), "t_layer": (0.0, 1e-2),
           "t_step": (0.0, 1.0), "smoothness": (1.0, 64.0)}
_SCALE = {"eta_compute": 0.1, "eta_memory": 0.1, "t_kernel": 1e-6, "t_layer": 1e-5, "t_step": 1e-4, "smoothness": 1.0}
_REQUIRED = ("num_tokens", "in_features", "out_features", "time_s")


def _dtype_bytes(dtype: str) -> int:
    from .architecture import dtype_bytes

    return dtype_bytes(dtype)


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
                                     data["out_features"].to_numpy(), _dtype_bytes(dtype))
    return data, dtype, flops, nbytes, y


def predict_op_times(data: "pd.DataFrame", hardware: "Hardware", params: LatencyParams,
                     dtype: str | None = None) -> np.ndarray:
    """Predicted time (s) of each per-operator row of ``data`` with ``params`` on ``hardware``."""
    data, dtype, flops, nbytes, _ = _arrays(data, dtype)
    return op_time(flops, nbytes, hardware.peak_flops_for(dtype), hardware.mem_bandwidth, params)


def predict_layer_times(layers: "pd.DataFrame", spec, hardware: "Hardware", params: LatencyParams,
                        dtype: str) -> np.ndarray:
    """Predicted time (s) of one decoder layer for each row (batch, q, context) of ``layers``.

    One layer's share of :func:`sdsl.latency.step_time` is taken as the difference between the
    model with two layers and with one (the LM head and per-step costs cancel), so the layer is
    priced by exactly the formula that prices whole forward passes.
    """
    from dataclasses import replace

    from .latency import step_time

    b, q, L = (layers[c].to_numpy(dtype=float) for c in ("batch", "q", "context"))
    one = step_time(replace(spec, n_layer=1), hardware, b, q, L, dtype=dtype, params=params).total_s
    two = step_time(replace(spec, n_layer=2), hardware, b, q, L, dtype=dtype, params=params).total_s
    return np.asarray(two - one, dtype=float)


def predict_step_times(steps: "pd.DataFrame", spec, hardware: "Hardware", params: LatencyParams,
                       dtype: str) -> np.ndarray:
    """Predicted time (s) of one whole forward pass (:func:`sdsl.latency.step_time`) for each row
    (batch, q, context) of ``steps``: embedding, every layer, the LM head and ``t_step``."""
    from .latency import step_time

    b, q, L = (steps[c].to_numpy(dtype=float) for c in ("batch", "q", "context"))
    return np.asarray(step_time(spec, hardware, b, q, L, dtype=dtype, params=params).total_s, dtype=float)


def _mape(pred: np.ndarray, meas: np.ndarray) -> float:
    return float(np.mean(np.abs(pred / meas - 1.0))) if len(meas) else float("nan")


@dataclass(frozen=True, eq=False)
class CalibrationResult:
    """Outcome of :func:`fit_latency` (fitted attributes in the lmfit/scikit-learn spirit).

    params: the fitted LatencyParams (unfitted fields keep the base values).
    hardware: catalog name whose datasheet peaks the efficiencies refer to; dtype: of the data.
    varied: names of the fitted fields; stderr: their 1-σ errors from the Jacobian.
    mape / decode_mape: mean |pred/meas − 1| over all rows / rows with num_tokens <= 64.
    points: per-row table (inputs, measured_s, predicted_s, rel_error) or None when not stored.
    """

    params: LatencyParams
    hardware: str
    dtype: str
    varied: tuple[str, ...]
    stderr: dict[str, float]
    n_points: int
    mape: float
    decode_mape: float
    rms_log_error: float
    smoothness_choice: str = ""
    sources: tuple[str, ...] = ()
    points: Any = field(default=None, repr=False)
    layer_mape: float | None = None
    layer_points: int = 0
    layers_fitted: bool = False
    step_mape: float | None = None
    step_points: int = 0
    steps_fitted: bool = False

    @property
    def residuals(self) -> np.ndarray:
        """log(predicted) − log(measured) per point (None-safe: empty when points were not stored)."""
        if self.points is None:
            return np.empty(0)
        return np.log(self.points["predicted_s"].to_numpy() / self.points["measured_s"].to_numpy())

    def per_op_mape(self) -> "pd.DataFrame":
        """MAPE by operator: columns op, overall_mape, decode_mape, n."""
        import pandas as pd

        if self.points is None:
            return pd.DataFrame(columns=["op", "overall_mape", "decode_mape", "n"])
        p = self.points.assign(ape=np.abs(self.points["rel_error"]))
        rows = []
        for op, g in p.groupby("op", sort=True):
            dec = g[g["num_tokens"] <= DECODE_MAX_TOKENS]
            rows.append({"op": op, "overall_mape": g["ape"].mean(),
                         "decode_mape": dec["ape"].mean() if len(dec) else float("nan"), "n": len(g)})
        return pd.DataFrame(rows)

    def report(self) -> str:
        """A plain-text fit report."""
        p = self.params
        lines = [f"[[Calibration]] {self.hardware}, {self.dtype}, {self.n_points} operator timings",
                 f"    sources: {', '.join(self.sources) or '-'}", "[[Parameters]]"]
        units = {"eta_compute": ("", 1.0), "eta_memory": ("", 1.0), "t_kernel": (" us", 1e6), "t_layer": (" us", 1e6),
                 "t_step": (" us", 1e6), "smoothness": ("", 1.0)}
        for name in ("eta_compute", "eta_memory", "t_kernel", "t_layer", "t_step", "smoothness"):
            if name in ("t_layer", "t_step") and name not in self.varied and not getattr(p, name):
                continue
            unit, k = units[name]
            v = getattr(p, name)
            if name in self.varied:
                err = self.stderr.get(name, float("nan"))
                lines.append(f"    {name:<12} = {v * k:.4g}{unit} +/- {err * k:.2g}{unit}")
            else:
                lines.append(f"    {name:<12} = {v * k:.4g}{unit} (fixed)")
        if self.smoothness_choice:
            lines.append(f"    ({self.smoothness_choice})")
        lines += ["[[Fit statistics]]", f"    MAPE (all)           = {100 * self.mape:.2f} %",
                  f"    MAPE (num_tokens<={DECODE_MAX_TOKENS}) = {100 * self.decode_mape:.2f} %",
                  f"    rms log error        = {self.rms_log_error:.4f}"]
        if self.layer_mape is not None:
            how = "fitted jointly" if self.layers_fitted else "not fitted, predicted"
            lines.append(f"    whole decoder-layer steps ({how}): MAPE {100 * self.layer_mape:.2f} % "
                         f"over {self.layer_points} steps")
        if self.step_mape is not None:
            how = "fitted jointly" if self.steps_fitted else "not fitted, predicted"
            lines.append(f"    whole forward passes ({how}): MAPE {100 * self.step_mape:.2f} % "
                         f"over {self.step_points} forwards")
        per_op = self.per_op_mape()
        if len(per_op):
            lines.append("[[MAPE by operator]]  all / decode")
            for r in per_op.itertuples():
                lines.append(f"    {r.op:<16} {100 * r.overall_mape:6.2f} % / {100 * r.decode_mape:6.2f} %   (n={r.n})")
        return "\n".join(lines)

    def plot(self, ax=None):
        """Predicted vs measured, log-log, one colour per operator (matplotlib imported here)."""
        from .plots import plot_calibration

        return plot_calibration(self, ax=ax)

    def to_dict(self, include_points: bool | None = None) -> dict[str, Any]:
        """JSON-ready dict; points are kept when ``include_points`` (default: at most 5000 rows)."""
        if include_points is None:
            include_points = self.points is not None and len(self.points) <= 5000
        d = {
            "format": FORMAT, "format_version": 1, "hardware": self.hardware, "dtype": self.dtype,
            "params": self.params.to_dict(), "varied": list(self.varied),
            "stderr": {k: float(v) for k, v in self.stderr.items()}, "n_points": self.n_points,
            "mape": self.mape, "decode_mape": self.decode_mape, "rms_log_error": self.rms_log_error,
            "smoothness_choice": self.smoothness_choice, "sources": list(self.sources),
            "layer_mape": self.layer_mape, "layer_points": self.layer_points,
            "layers_fitted": self.layers_fitted,
        }
        if self.step_mape is not None or self.steps_fitted:
            d.update(step_mape=self.step_mape, step_points=self.step_points, steps_fitted=self.steps_fitted)
        if include_points and self.points is not None:
            d["points"] = {c: self.points[c].tolist() for c in self.points.columns}
        return d

    def to_json(self, path: str | os.PathLike | None = None, include_points: bool | None = None) -> str:
        """Serialise (and write atomically to ``path`` if given); returns the JSON text."""
        text = json.dumps(self.to_dict(include_points), indent=2, allow_nan=True) + "\n"
        if path is not None:
            atomic_write_text(path, text)
        return text

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "calibration") -> "CalibrationResult":
        if d.get("format") != FORMAT:
            raise ConfigError(f"{where}: not an {FORMAT} file (missing \"format\": \"{FORMAT}\").")
        try:
            points = None
            if d.get("points"):
                import pandas as pd

                points = pd.DataFrame(d["points"])
            return cls(params=LatencyParams.from_dict(d["params"]), hardware=d["hardware"], dtype=d["dtype"],
                       varied=tuple(d["varied"]), stderr=dict(d["stderr"]), n_points=int(d["n_points"]),
                       mape=float(d["mape"]), decode_mape=float(d["decode_mape"]),
                       rms_log_error=float(d["rms_log_error"]), smoothness_choice=d.get("smoothness_choice", ""),
                       sources=tuple(d.get("sources", ())), points=points,
                       layer_mape=d.get("layer_mape"), layer_points=int(d.get("layer_points", 0)),
                       layers_fitted=bool(d.get("layers_fitted", False)), step_mape=d.get("step_mape"),
                       step_points=int(d.get("step_points", 0)), steps_fitted=bool(d.get("steps_fitted", False)))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: malformed calibration ({exc!r}).") from None

    @classmethod
    def from_json(cls, path_or_text: str | os.PathLike) -> "CalibrationResult":
        """Load from a file path (or a JSON string starting with ``{``)."""
        if isinstance(path_or_text, str) and path_or_text.lstrip().startswith("{"):
            return cls.from_dict(json.loads(path_or_text))
        return cls.from_dict(load_json(path_or_text), where=str(path_or_text))


def load_latency_params(path: str | os.PathLike) -> LatencyParams:
    """LatencyParams from a calibration file written by ``sdsl calibrate`` (or a bare params mapping).

    This is what ``sdsl optimize/predict --calibration FILE`` use.
    """
    data = load_json(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object.")
    if data.get("format") == FORMAT:
        return CalibrationResult.from_dict(data, where=str(path)).params
    return LatencyParams.from_dict(data.get("params", data))


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
    context, time_s), each priced by :func:`predict_step_times` (= :func:`sdsl.latency.step_time`)
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
    params = params.replace(source=f"fitted by sdsl.calibration to {n} operator timings{extra} on {hardware.name}"
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


def calibrate_profiles(paths: Iterable[str | os.PathLike], hardware: str | None = None,
                       smoothness: str | float = "auto", fit_layers: bool = False,
                       steps: Iterable[str | os.PathLike] = ()) -> CalibrationResult:
    """Fit to one or more profile files (sdsl profiles, or Vidur ``mlp.csv`` files / folders).

    ``hardware`` is a catalog name or file; without it the profiles' sidecars must name one
    (``device.hardware``) and agree. Decoder-layer rows are predicted and reported
    (``layer_mape``); with ``fit_layers`` they are also fitted, jointly with the operators.
    ``steps``: model-steps files (:mod:`sdsl.model_steps`) of whole forward passes, fitted jointly
    (with ``t_step`` and ``t_layer``).
    """
    import pandas as pd

    from .hardware import get_hardware
    from .profiles import profile_paths, read_profile, read_vidur, read_vidur_file

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
                hw_names.add(str(prof.meta["device"]["hardware"]).lower())
        frames.append(df)
        names.append(f"vidur/{p.name}" if p.is_dir() else
                     f"{p.parent.parent.name}/{p.parent.name}" if p.name == "mlp.csv" else p.name)
    if not frames:
        raise InvalidInputError("Give at least one profile to calibrate.")
    step_pairs = []
    steps = list(steps)
    if steps:
        from .model_steps import read_model_steps, step_sources

        for sp in steps:
            pairs_, meta = read_model_steps(sp)
            step_pairs += pairs_
            if meta.get("dtype"):
                dtypes.add(meta["dtype"])
            if meta.get("hardware"):
                hw_names.add(str(meta["hardware"]).lower())
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
    from .architecture import ModelSpec

    pairs = [(layers, ModelSpec.from_dict(model)) for layers, model in layer_sets]
    res = fit_latency(data, hw, dtype=dtype, smoothness=smoothness, sources=names,
                      layers=pairs if fit_layers else (), steps=step_pairs)
    if pairs and not fit_layers:
        from dataclasses import replace

        pred = np.concatenate([predict_layer_times(ly, spec, hw, res.params, dtype) for ly, spec in pairs])
        meas = np.concatenate([ly["time_s"].to_numpy(dtype=float) for ly, _ in pairs])
        res = replace(res, layer_mape=_mape(pred, meas), layer_points=len(meas))
    return res
