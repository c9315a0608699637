"""The result of a latency calibration: fitted parameters, residuals, MAPE, report, plot, JSON.

:class:`CalibrationResult` is what :func:`sdsl.fit.calibration.fit_latency` returns (lmfit's result
object: ``report()``, ``plot()``, ``to_json()``/``from_json()``); :func:`load_latency_params` reads
the parameters back for ``sdsl optimize/predict --calibration FILE``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from sdsl._io import load_json
from sdsl._result import Result
from sdsl.errors import ConfigError
from sdsl.roofline.latency import LatencyParams

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["CalibrationResult", "load_latency_params", "DECODE_MAX_TOKENS", "FORMAT"]

DECODE_MAX_TOKENS = 64  #: num_tokens at or below which an operator counts as "decode regime"
FORMAT = "sdsl-calibration"


@dataclass(frozen=True, eq=False)
class CalibrationResult(Result):
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
        lines += self._extra_terms()
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

    def _extra_terms(self) -> list[str]:
        """Report lines for the GEMM row tile, the elementwise kernels and the all-reduce, when set."""
        p, out = self.params, []
        if p.m_tile:
            out.append(f"    m_tile       = {p.m_tile} GEMM rows per tile (fixed)"
                       + (f", at least {p.m_tile_min} (the tensor cores' MMA rows)" if p.m_tile_min else ""))
        if p.tail_waves or p.t_kernel_size:
            se = self.stderr
            out.append(f"    tail_waves   = {p.tail_waves:.4g} +/- {se.get('tail_waves', 0):.2g} waves of output tiles; "
                       f"size overhead {1e6 * p.t_kernel_size:.3g} +/- {1e6 * se.get('t_kernel_size', 0):.2g} us "
                       f"x (1 - exp(-bytes / {p.kernel_size_bytes / 1e6:.3g} MB))")
        if p.t_elementwise is not None:
            out.append(f"    elementwise: t_ew {1e6 * p.t_elementwise:.3g} us; eta norm/rope/act/add "
                       f"{p.eta_norm:.3f}/{p.eta_rope:.3f}/{p.eta_act:.3f}/{p.eta_add:.3f}; row ns/element "
                       f"norm/rope/act {1e9 * p.row_norm:.3g}/{1e9 * p.row_rope:.3g}/{1e9 * p.row_act:.3g}")
        if "all-reduce fitted" in p.source:
            out.append(f"    all-reduce: latency {1e6 * p.allreduce_latency:.3g} us + {1e6 * p.allreduce_step_latency:.3g} us "
                       f"per ring step, eta_interconnect {p.eta_interconnect:.3f} of the per-direction link; LL "
                       f"{1e6 * p.allreduce_ll_latency:.3g} us, {p.allreduce_ll_efficiency:.3f} of the link; floor "
                       f"{1e6 * p.allreduce_floor:.3g} us (p {p.allreduce_floor_smoothness:.2f})")
        return out

    def plot(self, ax=None):
        """Predicted vs measured, log-log, one colour per operator (matplotlib imported here)."""
        from sdsl.plots.calibration import plot_calibration

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
        return Result.to_json(self, path, include_points=include_points)

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


def load_latency_params(path: str | os.PathLike, hardware=None) -> LatencyParams:
    """LatencyParams from a calibration file written by ``sdsl calibrate`` (or a bare params mapping); with
    ``hardware`` (a Hardware) a file that names another GPU is a ConfigError.

    This is what ``sdsl optimize/predict --calibration FILE`` use.
    """
    data = load_json(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object.")
    if hardware is not None and data.get("hardware") and not _same_hardware(data["hardware"], hardware):
        raise ConfigError(f"{path} was calibrated on {data['hardware']}, not on {hardware.name}: pass "
                          f"--hardware {data['hardware']} or a calibration of {hardware.name}.")
    if data.get("format") == FORMAT:
        return CalibrationResult.from_dict(data, where=str(path)).params
    params = data.get("params", data)
    if not isinstance(params, dict) or not params:
        raise ConfigError(f"{path} holds no latency parameters (write one with `sdsl calibrate`).")
    return LatencyParams.from_dict(params)


def _same_hardware(name: str, hardware) -> bool:
    """Whether the catalog name ``name`` is ``hardware`` (a name the catalog does not know is not)."""
    from sdsl.catalog.hardware import get_hardware
    from sdsl.errors import UnknownNameError

    try:
        return get_hardware(name).key == hardware.key
    except UnknownNameError:
        return False
