"""Figure functions. matplotlib is imported inside each function only (never at ``import sdsl``).

Each function draws on ``ax`` (a new figure when None) and returns the Axes.
"""

from __future__ import annotations

__all__ = ["plot_calibration", "plot_latency_validation"]

_OP_COLORS = {"attn_pre_proj": "tab:blue", "attn_post_proj": "tab:orange",
              "mlp_up_proj": "tab:green", "mlp_down_proj": "tab:red"}


def _axes(ax, figsize=(5.0, 4.5)):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def _pred_vs_meas(ax, points, title: str):
    import numpy as np

    meas = points["measured_s"].to_numpy() * 1e6
    pred = points["predicted_s"].to_numpy() * 1e6
    for op, color in _OP_COLORS.items():
        m = (points["op"] == op).to_numpy()
        if m.any():
            ax.scatter(meas[m], pred[m], s=4, alpha=0.5, color=color, label=op, linewidths=0)
    lo, hi = float(np.min([meas.min(), pred.min()])) * 0.8, float(np.max([meas.max(), pred.max()])) * 1.25
    ax.plot([lo, hi], [lo, hi], color="k", lw=0.8)
    ax.plot([lo, hi], [lo * 1.1, hi * 1.1], color="k", lw=0.5, ls=":")
    ax.plot([lo, hi], [lo / 1.1, hi / 1.1], color="k", lw=0.5, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured time (µs)")
    ax.set_ylabel("predicted time (µs)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, markerscale=3, loc="upper left")
    return ax


def plot_calibration(result, ax=None):
    """Predicted vs measured operator times of a :class:`~sdsl.calibration.CalibrationResult`
    (log-log, one colour per operator, dotted lines at ±10%)."""
    ax = _axes(ax)
    if result.points is None:
        raise ValueError("This calibration result stores no per-point data to plot.")
    title = (f"{result.hardware} {result.dtype}: MAPE {100 * result.mape:.1f}% "
             f"(decode {100 * result.decode_mape:.1f}%)")
    return _pred_vs_meas(ax, result.points, title)


def plot_latency_validation(held_out, path=None):
    """Leave-one-model-out predictions (``held_out``: DataFrame with hardware, model, op,
    measured_s, predicted_s) as one predicted-vs-measured panel per GPU; saves to ``path`` if given."""
    import matplotlib

    if path is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    hws = sorted(held_out["hardware"].unique())
    fig, axes = plt.subplots(1, len(hws), figsize=(5.0 * len(hws), 4.6), squeeze=False)
    for ax, hw in zip(axes[0], hws):
        pts = held_out[held_out["hardware"] == hw]
        ape = np.abs(pts["predicted_s"] / pts["measured_s"] - 1)
        dec = pts["num_tokens"] <= 64
        _pred_vs_meas(ax, pts, f"{hw.upper()} leave-one-model-out, pooled MAPE {100 * ape.mean():.1f}% "
                               f"(decode {100 * ape[dec].mean():.1f}%)")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=150, bbox_inches="tight")
    return axes[0]
