"""SDSL figures: acceptance plane, speedup vs γ, the draft-size law, and the hardware-aware N*."""

from __future__ import annotations

from sdsl.speculation.optimum import SDSL_PAPER_LAW
from sdsl.plots._common import _figure, _finish

__all__ = ["fig_sdsl_acceptance_plane", "fig_sdsl_speedup_vs_gamma", "fig_sdsl_draft_law", "fig_sdsl_nstar_vs_tokens", "fig_hardware_draft_size"]

def fig_sdsl_acceptance_plane(quick: bool = False):
    """SDSL's acceptance plane α = A·ppl_draft + B·ppl_target + C, with the paper's same-family
    (draft, target) pairs placed by Chinchilla perplexities (D = D′ = 1e12); right: α along the draft
    size for three target sizes."""
    import numpy as np

    from sdsl.catalog.models import get_model
    from sdsl.speculation.optimum import SDSL_TARGETS
    from sdsl.acceptance.plane import SDSL_PLANE, acceptance_from_sizes, perplexity

    n = 60 if quick else 240
    x, y = np.meshgrid(np.linspace(5, 40, n), np.linspace(4, 16, n))
    a = SDSL_PLANE.raw(x, y)
    fig, ((ax, ax2),) = _figure(1, 2, figsize=(10.0, 4.0))
    cs = ax.contourf(x, y, np.clip(a, 0, 1), levels=np.linspace(0, 1, 21), cmap="viridis")
    ax.contour(x, y, a, levels=[0.2, 0.4, 0.6, 0.8], colors="w", linewidths=0.6)
    fig.colorbar(cs, ax=ax, label="α (clipped to [0, 1])")
    drafts = {"opt": ["opt-125m", "opt-350m", "opt-1.3b", "opt-2.7b"],
              "qwen2": ["qwen1.5-0.5b", "qwen1.5-1.8b", "qwen1.5-4b", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b"]}
    for fam, marker in (("opt", "o"), ("qwen2", "s")):
        ds = [get_model(d).total_params for d in drafts[fam]]
        ts = [get_model(t).total_params for t in SDSL_TARGETS if get_model(t).family == fam]
        px, py = np.meshgrid(perplexity(ds, 1e12), perplexity(ts, 1e12))
        ax.scatter(px, py, marker=marker, s=14, c="w", edgecolors="k", linewidths=0.5,
                   label=f"{fam.upper()} drafts × targets")
    ax.set_xlabel("draft perplexity x")
    ax.set_ylabel("target perplexity y")
    ax.set_title(f"α = {SDSL_PLANE.A}·x + {SDSL_PLANE.B}·y + {SDSL_PLANE.C}  (R² = {SDSL_PLANE.r2})", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    nd = np.logspace(7, 10, 40 if quick else 200)
    for m in (1.3e10, 7.0e10, 1.1e11):
        ax2.plot(nd, acceptance_from_sizes(nd, m), label=f"M = {m / 1e9:.0f}B")
    _finish(ax2, "draft parameters N", "α from the plane (D = D′ = 1e12)", "α along the draft size (Chinchilla perplexities)",
            xscale="log", legend=8)
    return fig


def fig_sdsl_speedup_vs_gamma(quick: bool = False):
    """Leviathan speedup S(α, γ, c) over continuous γ, with the Lambert-W optimum (γ*, S*) marked."""
    import numpy as np

    from sdsl.speculation.optimum import best_speedup, gamma_star
    from sdsl.speculation.throughput import speedup

    g = np.linspace(0, 30, 80 if quick else 400)
    cs = (0.01, 0.05, 0.2)
    fig, axes = _figure(1, 3, figsize=(12.0, 3.8), sharey=True)
    for ax, c in zip(axes[0], cs):
        for alpha, col in zip((0.6, 0.7, 0.8, 0.9), ("C0", "C1", "C2", "C3")):
            gs, ss = float(gamma_star(alpha, c)), float(best_speedup(alpha, c))
            ax.plot(g, speedup(alpha, g, c), color=col, label=f"α = {alpha}: γ* = {gs:.1f}, S* = {ss:.2f}")
            ax.plot([gs], [ss], "o", color=col, ms=5)
            ax.axvline(gs, color=col, lw=0.6, ls=":")
        ax.set_title(f"c = {c}", fontsize=10)
        ax.set_xlabel("speculation length γ (continuous)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right" if c < 0.02 else "upper right")
    axes[0][0].set_ylabel("speedup S = τ(α, γ) / (1 + γc)")
    fig.suptitle("Speedup vs γ; dots: Lambert-W optimum γ* = −(1 + W₋₁(z))/ln(1/α) − 1/c", fontsize=10)
    return fig


def fig_sdsl_draft_law(quick: bool = False):
    """N* vs target size M for SDSL's 13 targets, the line fitted by sdsl and the paper's line."""
    import numpy as np

    from sdsl.speculation.optimum import fit_draft_law

    law = fit_draft_law()
    m = np.array([t["params"] for t in law.targets])
    n = np.array([t["n_star"] for t in law.targets])
    fig, ((ax,),) = _figure(figsize=(7.0, 4.6))
    ax.scatter(m / 1e9, n / 1e6, s=22, color="C0", zorder=3, label="N* per target (sdsl)")
    for t in law.targets:
        ax.annotate(t["name"], (t["params"] / 1e9, t["n_star"] / 1e6), fontsize=6, xytext=(3, -3),
                    textcoords="offset points")
    mm = np.linspace(0, m.max() * 1.05, 50)
    p = law.paper
    ax.plot(mm / 1e9, (law.mu * mm + law.m0) / 1e6, color="C0",
            label=f"sdsl fit: μ = {law.mu:.3e}, M₀ = {law.m0:.3g} (R² = {law.r2:.3f})")
    ax.plot(mm / 1e9, (p["mu"] * mm + p["m0"]) / 1e6, color="k", ls="--",
            label=f"paper: μ = {p['mu']:.3e}, M₀ = {p['m0']:.3g}")
    ax.set_xlabel("target parameters M (billions)")
    ax.set_ylabel("throughput-optimal draft size N* (millions)")
    ax.set_title("SDSL draft-size law N* = μ·M + M₀ (D = D′ = 1e12, Chinchilla loss, acceptance plane)",
                 fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    return fig


def fig_sdsl_nstar_vs_tokens(quick: bool = False):
    """N*/M vs pre-training tokens: D = D′ varied together (solid) and D alone with D′ = 1e12 (dashed)."""
    import numpy as np

    from sdsl.catalog.models import get_model
    from sdsl.speculation.optimum import optimal_draft_size

    targets = ("opt-13b", "llama-3.1-70b", "qwen1.5-110b")
    m = np.array([get_model(t).total_params for t in targets], dtype=float)
    ds = np.logspace(10, 13.5, 6 if quick else 15)
    pts = 401 if quick else 2001
    both = np.array([optimal_draft_size(m, d, d, points=pts)[0] for d in ds])  # (D, target)
    alone = np.array([optimal_draft_size(m, d, 1e12, points=pts)[0] for d in ds])
    fig, ((ax,),) = _figure(figsize=(7.0, 4.4))
    for j, (name, col) in enumerate(zip(targets, ("C0", "C1", "C2"))):
        ax.plot(ds, both[:, j] / m[j], "o-", color=col, ms=3, label=f"{name}: D = D′")
        ax.plot(ds, alone[:, j] / m[j], "--", color=col, label=f"{name}: D varied, D′ = 1e12")
        ax.axhline((SDSL_PAPER_LAW["mu"] * m[j] + SDSL_PAPER_LAW["m0"]) / m[j], color=col, lw=0.7, ls=":")
    _finish(ax, "pre-training tokens D", "N* / M", "Optimal draft fraction vs pre-training tokens (dotted: paper law μ + M₀/M)",
            xscale="log")
    return fig


def fig_hardware_draft_size(quick: bool = False):
    """sdsl's extension: speedup vs draft size for a continuous Llama-shaped draft family, priced on
    the H100 roofline at batch 1, 8, 32 (best integer γ) next to SDSL's FLOP model S*(α, N/M)."""
    import numpy as np

    from sdsl.roofline.deployment import Deployment
    from sdsl.plan.families import draft_size_sweep, llama_family
    from sdsl.catalog.hardware import get_hardware
    from sdsl.roofline.latency import default_params

    hw = get_hardware("h100-sxm")
    params = default_params(hw)
    d_models = np.arange(128, 4097, 512 if quick else 128)
    fig, axes = _figure(1, 2, figsize=(11.0, 4.2), sharey=False)
    for ax, (target, tp) in zip(axes[0], (("llama-3.1-8b", 1), ("llama-3.1-70b", 4))):
        from sdsl.catalog.models import get_model

        spec = get_model(target)
        sweep = draft_size_sweep(spec, Deployment(hw, tp=tp, params=params, engine="ideal"),
                                 drafts=llama_family(spec.vocab_size, d_models), batch=(1, 8, 32))
        first = sweep[sweep["batch"] == 1]
        ax.plot(first["draft_params"], first["flop_speedup"], color="k", lw=1.6, label="FLOP model S*(α, c = N/M)")
        i = first["flop_speedup"].idxmax()
        ax.plot([first.loc[i, "draft_params"]], [first.loc[i, "flop_speedup"]], "k*", ms=10)
        for b, col in zip((1, 8, 32), ("C0", "C1", "C3")):
            s = sweep[sweep["batch"] == b]
            ax.plot(s["draft_params"], s["speedup"], color=col, label=f"H100 roofline, batch {b}")
            j = s["speedup"].idxmax()
            ax.plot([s.loc[j, "draft_params"]], [s.loc[j, "speedup"]], "*", color=col, ms=10)
        ax.axvline(SDSL_PAPER_LAW["mu"] * spec.total_params + SDSL_PAPER_LAW["m0"], color="grey", ls="--", lw=0.8, label="paper law μM + M₀")
        ax.set_xscale("log")
        ax.set_xlabel("draft parameters N (Llama-3-shaped family)")
        ax.set_ylabel("speedup over plain decoding")
        ax.set_title(f"{spec.name} (tp={tp}) on {hw.name}; stars: N* per model", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return fig
