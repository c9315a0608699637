"""Published-measurement validation: predicted vs measured per row, and the k-sweeps (pure drawing)."""

from __future__ import annotations

from sdsl.plots._common import _finish

__all__ = ["published_figure"]

_COLORS = {"engine_decode": "tab:blue", "engine_speculative": "tab:red", "spec_bench": "tab:green",
           "hf_eager_decode": "tab:olive", "eager": "tab:gray"}


def published_figure(result: dict):
    """Left: predicted (engine terms fitted without the row's source) against measured speed of every priced row
    (tokens/s, 1000/TPOT, Spec-Bench speedups x100). Right: TPOT against k of the k-sweeps with at least three k:
    measured points, sdsl's leave-one-source-out curve (solid) and the roofline alone (dotted)."""
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10.5, 4.3))
    for cls, color in _COLORS.items():
        rows = [r for r in result["rows"] if r["class"] == cls]
        if not rows:
            continue

        def speed(r, key):
            v = r[key]
            return 1e3 / v if r["metric"] == "TPOT" else 100.0 * v if "speedup" in r["metric"] else v

        ax.scatter([speed(r, "measured") for r in rows], [speed(r, "predicted") for r in rows], s=18, color=color,
                   label=cls.replace("_", " "))
    lim = [10, 2000]
    ax.plot(lim, lim, color="k", lw=0.8)
    ax.plot(lim, [1.1 * v for v in lim], color="k", lw=0.5, ls=":")
    ax.plot(lim, [0.9 * v for v in lim], color="k", lw=0.5, ls=":")
    ax.set_yscale("log")
    _finish(ax, "measured speed", "predicted (leave-one-source-out)", "Published rows (±10% dotted)", xscale="log")
    for i, sw in enumerate(s for s in result["k_sweeps"] if len(s["k"]) >= 3 and s["metric"] == "TPOT"):
        c = f"C{i}"
        label = f"{sw['proposer']} ({sw['source'].split(':')[-1]})"
        bx.plot(sw["k"], sw["measured"], "o", color=c, label=f"{label} measured")
        bx.plot(sw["k"], sw["loso"]["predicted"], "-", color=c, label="sdsl")
        bx.plot(sw["k"], sw["ideal"]["predicted"], ":", color=c)
    _finish(bx, "k (num_speculative_tokens)", "TPOT (ms)", "k-sweeps: measured, sdsl (solid), roofline alone (dotted)")
    fig.tight_layout()
    return fig
