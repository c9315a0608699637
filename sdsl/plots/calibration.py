"""Drawing for the step-time model's evidence: predicted vs measured operator times (data in, Figure out)."""

from __future__ import annotations

from sdsl.errors import InvalidInputError
from sdsl.plots._common import _axes, _figure, _pred_vs_meas, save_figure

__all__ = ["plot_calibration", "plot_latency_validation", "latency_validation_figure"]

def plot_calibration(result, ax=None):
    """Predicted vs measured operator times of a :class:`~sdsl.fit.calibration.CalibrationResult`
    (log-log, one colour per operator, dotted lines at ±10%)."""
    ax = _axes(ax)
    if result.points is None:
        raise InvalidInputError("This calibration result stores no per-point data to plot (fit with keep_points=True).")
    title = (f"{result.hardware} {result.dtype}: MAPE {100 * result.mape:.1f}% "
             f"(decode {100 * result.decode_mape:.1f}%)")
    return _pred_vs_meas(ax, result.points, title)


def latency_validation_figure(held_out, label: str = "leave-one-model-out"):
    """One predicted-vs-measured panel per GPU of held-out predictions (``label`` says how they were held out)."""
    import numpy as np

    hws = sorted(held_out["hardware"].unique())
    fig, axes = _figure(1, len(hws), figsize=(5.0 * len(hws), 4.6))
    for ax, hw in zip(axes[0], hws):
        pts = held_out[held_out["hardware"] == hw]
        ape = np.abs(pts["predicted_s"] / pts["measured_s"] - 1)
        dec = pts["num_tokens"] <= 64
        _pred_vs_meas(ax, pts, f"{hw.upper()} {label}, pooled MAPE {100 * ape.mean():.1f}% "
                               f"(decode {100 * ape[dec].mean():.1f}%)")
    return fig, axes[0]


def plot_latency_validation(held_out, path=None, label: str = "leave-one-model-out"):
    """Held-out predictions (``held_out``: DataFrame with hardware, model, op, measured_s,
    predicted_s) as one predicted-vs-measured panel per GPU; saves to ``path`` if given."""
    fig, axes = latency_validation_figure(held_out, label)
    if path is not None:
        save_figure(fig, path, dpi=150, bbox_inches="tight")
    return axes
