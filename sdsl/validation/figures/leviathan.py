"""Leviathan et al. (ICML 2023) figures: Table 1 reproduced, speedup vs γ."""

from __future__ import annotations

from sdsl.plots._common import _figure

__all__ = ["LEVIATHAN_TABLE1", "LEVIATHAN_T5", "fig_leviathan_table1", "fig_leviathan_speedup_vs_gamma"]

# Leviathan et al. (ICML 2023) Table 1 (c = ĉ = 0): (α, γ, speed, ops) — docs/model.md §3.1.
LEVIATHAN_TABLE1 = ((0.6, 2, 1.96, 1.53), (0.7, 3, 2.53, 1.58), (0.8, 2, 2.44, 1.23),
                    (0.8, 5, 3.69, 1.63), (0.9, 2, 2.71, 1.11), (0.9, 10, 6.86, 1.60))
# Leviathan et al. §4, T5-XXL (11B) target with T5-small draft on En→De, argmax sampling: α = 0.75,
# c ≈ 0.02, γ = 7; the paper predicts ≈3.2× and measures 3.4×.
LEVIATHAN_T5 = {"alpha": 0.75, "c": 0.02, "gamma": 7, "paper_predicted": 3.2, "paper_measured": 3.4}


def fig_leviathan_table1(quick: bool = False):
    """Leviathan et al. Table 1 (c = ĉ = 0) reproduced: paper vs sdsl speed and ops factors, plus
    the T5-XXL / T5-small check."""
    from sdsl.speculation.throughput import speedup, work_factor

    rows = [[f"{a}", f"{g}", f"{sp:.2f}×", f"{float(speedup(a, g, 0)):.2f}×", f"{op:.2f}×",
             f"{float(work_factor(a, g, 0)):.2f}×"] for a, g, sp, op in LEVIATHAN_TABLE1]
    t5 = LEVIATHAN_T5
    s_t5 = float(speedup(t5["alpha"], t5["gamma"], t5["c"]))
    rows.append([f"{t5['alpha']}", f"{t5['gamma']}", f"{t5['paper_predicted']}× pred.\n{t5['paper_measured']}× meas.",
                 f"{s_t5:.2f}×", "—", "—"])
    fig, ((ax,),) = _figure(figsize=(7.0, 3.4))
    ax.axis("off")
    cols = ["α", "γ", "speed (paper)", "speed (sdsl)", "ops (paper)", "ops (sdsl)"]
    table = ax.table(cellText=rows, colLabels=cols, loc="center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    table.scale(1.0, 1.45)
    for j in range(len(cols)):
        table[(0, j)].set_facecolor("#dde6f0")
    for j in range(len(cols)):
        table[(len(rows), j)].set_facecolor("#f3efe0")
        table[(len(rows), j)].set_height(table[(len(rows), j)].get_height() * 1.5)
    ax.set_title("Leviathan et al. Table 1 (c = ĉ = 0); last row: T5-XXL/T5-small, c = 0.02", fontsize=9)
    return fig


def fig_leviathan_speedup_vs_gamma(quick: bool = False):
    """Leviathan speedup vs integer γ for α ∈ {0.5, …, 0.9}, c ∈ {0, 0.05, 0.1}; stars: best γ."""
    import numpy as np

    from sdsl.speculation.throughput import speedup

    g = np.arange(0, 16)
    alphas = (0.5, 0.6, 0.7, 0.8, 0.9)
    fig, axes = _figure(1, 3, figsize=(12.0, 3.8), sharey=True)
    for ax, c in zip(axes[0], (0.0, 0.05, 0.1)):
        for a, col in zip(alphas, ("C0", "C1", "C2", "C3", "C4")):
            s = speedup(a, g, c)
            ax.plot(g, s, "o-", color=col, ms=3, label=f"α = {a}")
            if c > 0:
                k = int(np.argmax(s))
                ax.plot([g[k]], [s[k]], "*", color=col, ms=11, markeredgecolor="k", markeredgewidth=0.4)
        ax.set_title(f"c = {c}" + (" (limit 1/(1 − α))" if c == 0 else ""), fontsize=10)
        ax.set_xlabel("γ")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("speedup")
    axes[0][0].legend(fontsize=8)
    return fig
