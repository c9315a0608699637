"""Evidence figure for the reference speculative decoder: predicted vs measured speedup on CPU."""

from __future__ import annotations

from sdsl.plots._common import _figure

__all__ = ["fig_decoder_speedup"]


def fig_decoder_speedup(quick: bool = False):
    """Measured vs predicted speedup of the reference decoder on the byte-level family (CPU, batch 1
    and 8, γ 1–8; predictions from measured α and the calibrated CPU latency model), from the
    committed results of ``sdsl validate decoder`` (benchmarks/results/validate_decoder.json)."""
    import json

    import numpy as np

    from sdsl._paths import REPO_ROOT

    data = json.loads((REPO_ROOT / "benchmarks" / "results" / "validate_decoder.json").read_text())
    rows = data["rows"]
    fig, ((ax, ax2),) = _figure(1, 2, figsize=(11.0, 4.4))
    for batch, marker in ((1, "o"), (8, "s")):
        sel = [r for r in rows if r["batch"] == batch]
        ax.scatter([r["speedup"] for r in sel], [r["pred_speedup"] for r in sel], marker=marker, s=14,
                   alpha=0.7, label=f"batch {batch}")
    allv = np.array([[r["speedup"], r["pred_speedup"]] for r in rows])
    lo, hi = float(allv.min()) * 0.9, float(allv.max()) * 1.1
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax.plot([lo, hi], [lo * 1.1, hi * 1.1], "k:", lw=0.5)
    ax.plot([lo, hi], [lo / 1.1, hi / 1.1], "k:", lw=0.5)
    ax.set_xlabel("measured speedup over plain decoding")
    ax.set_ylabel("sdsl predicted speedup")
    ax.set_title(f"{len(rows)} configurations; median |error| {100 * data['median_speedup_error']:.1f}%", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    best = data["best_config"]
    sel = sorted((r for r in rows if r["target"] == best["target"] and r["draft"] == best["draft"]
                  and r["batch"] == best["batch"]), key=lambda r: r["gamma"])
    g = [r["gamma"] for r in sel]
    ax2.plot(g, [r["speedup"] for r in sel], "o-", label="measured")
    ax2.plot(g, [r["pred_speedup"] for r in sel], "s--", label="predicted")
    ax2.axhline(1.0, color="grey", lw=0.8)
    ax2.set_xlabel("γ (draft tokens per step)")
    ax2.set_ylabel("speedup")
    ax2.set_title(f"{best['target']} + {best['draft']}, batch {best['batch']} (best measured: "
                  f"{data['best_speedup']:.2f}×)", fontsize=9)
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3)
    return fig
