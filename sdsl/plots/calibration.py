"""Evidence figures for the step-time model: predicted vs measured operator times."""

from __future__ import annotations

from sdsl.errors import InvalidInputError
from sdsl.plots._common import _axes, _figure, _pred_vs_meas, save_figure

__all__ = ["plot_calibration", "plot_latency_validation", "fig_latency_validation", "fig_cpu_calibration"]

def plot_calibration(result, ax=None):
    """Predicted vs measured operator times of a :class:`~sdsl.fit.calibration.CalibrationResult`
    (log-log, one colour per operator, dotted lines at ±10%)."""
    ax = _axes(ax)
    if result.points is None:
        raise InvalidInputError("This calibration result stores no per-point data to plot (fit with keep_points=True).")
    title = (f"{result.hardware} {result.dtype}: MAPE {100 * result.mape:.1f}% "
             f"(decode {100 * result.decode_mape:.1f}%)")
    return _pred_vs_meas(ax, result.points, title)


def _latency_validation_figure(held_out):
    """One predicted-vs-measured panel per GPU of leave-one-model-out predictions."""
    import numpy as np

    hws = sorted(held_out["hardware"].unique())
    fig, axes = _figure(1, len(hws), figsize=(5.0 * len(hws), 4.6))
    for ax, hw in zip(axes[0], hws):
        pts = held_out[held_out["hardware"] == hw]
        ape = np.abs(pts["predicted_s"] / pts["measured_s"] - 1)
        dec = pts["num_tokens"] <= 64
        _pred_vs_meas(ax, pts, f"{hw.upper()} leave-one-model-out, pooled MAPE {100 * ape.mean():.1f}% "
                               f"(decode {100 * ape[dec].mean():.1f}%)")
    return fig, axes[0]


def plot_latency_validation(held_out, path=None):
    """Leave-one-model-out predictions (``held_out``: DataFrame with hardware, model, op,
    measured_s, predicted_s) as one predicted-vs-measured panel per GPU; saves to ``path`` if given."""
    fig, axes = _latency_validation_figure(held_out)
    if path is not None:
        save_figure(fig, path, dpi=150, bbox_inches="tight")
    return axes


def fig_latency_validation(quick: bool = False):
    """Predicted vs measured operator times on Vidur's real H100 and A100 data, each model predicted
    by a calibration fitted on the other models (leave-one-model-out; ``quick``: H100 only)."""
    from sdsl._paths import data_path
    from sdsl.experiments.latency_validation import leave_one_model_out
    from sdsl.fit.profiles import read_vidur

    data = read_vidur(data_path("vidur"))
    if quick:
        data = data[data["hardware"] == "h100"]
    _, points, _ = leave_one_model_out(data)
    return _latency_validation_figure(points)[0]


def fig_cpu_calibration(quick: bool = False):
    """Predicted vs measured times of this machine's CPU profile (profiles/cpu.calib.json, fitted by
    ``sdsl calibrate profiles/cpu-*.csv --fit-layers --points``)."""
    from sdsl._paths import REPO_ROOT
    from sdsl.fit.calibration import CalibrationResult

    result = CalibrationResult.from_json(REPO_ROOT / "profiles" / "cpu.calib.json")
    fig, ((ax,),) = _figure(figsize=(5.2, 4.6))
    plot_calibration(result, ax=ax)
    return fig
