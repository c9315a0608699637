"""Published-measurement validation: predicted vs measured per row, and the vLLM EAGLE k-sweep (pure drawing)."""

from __future__ import annotations

from sdsl.plots._common import _finish

__all__ = ["published_figure"]

_COLORS = {"engine_decode": "tab:blue", "engine_speculative": "tab:red", "spec_bench": "tab:green", "eager": "tab:gray"}


def published_figure(result: dict):
    """Left: predicted vs measured value of every priced row (tokens/s; Spec-Bench speedups x100).
    Right: tokens/s vs k for vLLM EAGLE-1 on Llama-3.1-8B (H100): measured points, sdsl's curves."""
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10.5, 4.3))
    for group, color in _COLORS.items():
        rows = [r for r in result["rows"] if r["group"] == group]
        scale = 100.0 if group == "spec_bench" else 1.0
        ax.scatter([scale * r["measured"] for r in rows], [scale * r["predicted"] for r in rows], s=18, color=color,
                   label=group.replace("_", " ") + (" (speedup x100)" if scale != 1 else ""))
    lim = [10, 700]
    ax.plot(lim, lim, color="k", lw=0.8)
    ax.plot(lim, [1.1 * v for v in lim], color="k", lw=0.5, ls=":")
    ax.plot(lim, [0.9 * v for v in lim], color="k", lw=0.5, ls=":")
    ax.set_yscale("log")
    _finish(ax, "measured", "predicted (shipped calibration)", "Published rows: predicted vs measured (±10% dotted)",
            xscale="log")
    ks = result["k_sweep"]
    meas = ks["measured"]
    bx.plot(list(meas), list(meas.values()), "ko", label="measured (vLLM PR #16937)")
    bx.plot(ks["k"], ks["shipped"]["tokens_per_s"], "-", color="tab:red", label="sdsl, shipped calibration")
    bx.plot(ks["k"], ks["loso_overhead"]["tokens_per_s"], "--", color="tab:purple",
            label="sdsl + per-pass overhead (fitted without #16937)")
    if "sourced_host" in ks:
        bx.plot(ks["k"], ks["sourced_host"]["tokens_per_s"], "-.", color="tab:green",
                label=f"sdsl + sourced vLLM host/step ({1e3 * ks['sourced_host_s']:.2f} ms, PR #25872)")
    _finish(bx, "k (num_speculative_tokens)", "tokens/s (batch 1)", "EAGLE-1, Llama-3.1-8B, H100")
    fig.tight_layout()
    return fig
