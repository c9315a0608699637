"""Helpers shared by the figure modules (matplotlib imported inside functions only)."""

from __future__ import annotations

_OP_COLORS = {"attn_pre_proj": "tab:blue", "attn_post_proj": "tab:orange",
              "mlp_up_proj": "tab:green", "mlp_down_proj": "tab:red"}


def _finish(ax, xlabel=None, ylabel=None, title=None, *, xscale=None, base=None, legend=7, title_size=9):
    """Label an Axes, optionally log-scale x (``base`` for powers of 2), add a legend (font size
    ``legend``; None for none) and a light grid: the tail every line plot here shares."""
    if xscale:
        ax.set_xscale(xscale, **({"base": base} if base else {}))
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=title_size)
    if legend:
        ax.legend(fontsize=legend)
    ax.grid(alpha=0.3)
    return ax


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


def _figure(nrows=1, ncols=1, figsize=(6.0, 4.0), **kw):
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=False, **kw)


def save_figure(fig, path, dpi: int = 150, **kw):
    """Save ``fig`` to ``path`` atomically, in the format its suffix names (PNG when it has none)."""
    import io
    from pathlib import Path

    from sdsl._io import atomic_write_bytes
    from sdsl.errors import InvalidInputError

    path = Path(path)
    if not path.suffix:
        path = path.with_name(path.name + ".png")
    fmt = path.suffix[1:].lower()
    supported = fig.canvas.get_supported_filetypes()
    if fmt not in supported:
        raise InvalidInputError(f"Cannot save a figure as {path.name}; use one of .{', .'.join(sorted(supported))}.")
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi, **kw)
    return atomic_write_bytes(path, buf.getvalue())
