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


# ---- paper figures: SDSL, Leviathan, TurboSpec-style roofline (issue 6) --------------------------
# Each fig_* function takes ``quick`` (coarser grids, for tests) and returns a matplotlib Figure built
# without pyplot (no global state, no display backend needed); sdsl.figures saves it as PNG.

__all__ += [
    "fig_sdsl_acceptance_plane", "fig_sdsl_speedup_vs_gamma", "fig_sdsl_draft_law", "fig_sdsl_nstar_vs_tokens",
    "fig_hardware_draft_size", "fig_leviathan_table1", "fig_leviathan_speedup_vs_gamma",
    "fig_turbospec_step_latency", "fig_turbospec_speedup_vs_batch", "LEVIATHAN_TABLE1", "LEVIATHAN_T5",
]

# Leviathan et al. (ICML 2023) Table 1 (c = ĉ = 0): (α, γ, speed, ops) — DESIGN.md §3.1.
LEVIATHAN_TABLE1 = ((0.6, 2, 1.96, 1.53), (0.7, 3, 2.53, 1.58), (0.8, 2, 2.44, 1.23),
                    (0.8, 5, 3.69, 1.63), (0.9, 2, 2.71, 1.11), (0.9, 10, 6.86, 1.60))
# Leviathan et al. §4, T5-XXL (11B) target with T5-small draft on En→De, argmax sampling: α = 0.75,
# c ≈ 0.02, γ = 7; the paper predicts ≈3.2× and measures 3.4×.
LEVIATHAN_T5 = {"alpha": 0.75, "c": 0.02, "gamma": 7, "paper_predicted": 3.2, "paper_measured": 3.4}


def _figure(nrows=1, ncols=1, figsize=(6.0, 4.0), **kw):
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=False, **kw)


def fig_sdsl_acceptance_plane(quick: bool = False):
    """SDSL's acceptance plane α = A·ppl_draft + B·ppl_target + C, with the paper's same-family
    (draft, target) pairs placed by Chinchilla perplexities (D = D′ = 1e12); right: α along the draft
    size for three target sizes."""
    import numpy as np

    from .architecture import get_model
    from .optimize import SDSL_TARGETS
    from .scaling import SDSL_PLANE, acceptance_from_sizes, perplexity

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
    ax2.set_xscale("log")
    ax2.set_xlabel("draft parameters N")
    ax2.set_ylabel("α from the plane (D = D′ = 1e12)")
    ax2.set_title("α along the draft size (Chinchilla perplexities)", fontsize=9)
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3)
    return fig


def fig_sdsl_speedup_vs_gamma(quick: bool = False):
    """Leviathan speedup S(α, γ, c) over continuous γ, with the Lambert-W optimum (γ*, S*) marked."""
    import numpy as np

    from .optimize import best_speedup, gamma_star
    from .throughput import speedup

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

    from .optimize import fit_draft_law

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

    from .architecture import get_model
    from .optimize import optimal_draft_size

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
        ax.axhline((2.71e-3 * m[j] + 8.71e7) / m[j], color=col, lw=0.7, ls=":")
    ax.set_xscale("log")
    ax.set_xlabel("pre-training tokens D")
    ax.set_ylabel("N* / M")
    ax.set_title("Optimal draft fraction vs pre-training tokens (dotted: paper law μ + M₀/M)", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


def fig_hardware_draft_size(quick: bool = False):
    """sdsl's extension: speedup vs draft size for a continuous Llama-shaped draft family, priced on
    the H100 roofline at batch 1, 8, 32 (best integer γ) next to SDSL's FLOP model S*(α, N/M)."""
    import numpy as np

    from .families import draft_size_sweep, llama_family
    from .hardware import get_hardware
    from .latency import default_params

    hw = get_hardware("h100-sxm")
    params = default_params(hw)
    d_models = np.arange(128, 4097, 512 if quick else 128)
    fig, axes = _figure(1, 2, figsize=(11.0, 4.2), sharey=False)
    for ax, (target, tp) in zip(axes[0], (("llama-3.1-8b", 1), ("llama-3.1-70b", 4))):
        from .architecture import get_model

        spec = get_model(target)
        sweep = draft_size_sweep(spec, hw, llama_family(spec.vocab_size, d_models), batch=(1, 8, 32), tp=tp,
                                 params=params)
        first = sweep[sweep["batch"] == 1]
        ax.plot(first["draft_params"], first["flop_speedup"], color="k", lw=1.6, label="FLOP model S*(α, c = N/M)")
        i = first["flop_speedup"].idxmax()
        ax.plot([first.loc[i, "draft_params"]], [first.loc[i, "flop_speedup"]], "k*", ms=10)
        for b, col in zip((1, 8, 32), ("C0", "C1", "C3")):
            s = sweep[sweep["batch"] == b]
            ax.plot(s["draft_params"], s["speedup"], color=col, label=f"H100 roofline, batch {b}")
            j = s["speedup"].idxmax()
            ax.plot([s.loc[j, "draft_params"]], [s.loc[j, "speedup"]], "*", color=col, ms=10)
        ax.axvline(2.71e-3 * spec.total_params + 8.71e7, color="grey", ls="--", lw=0.8, label="paper law μM + M₀")
        ax.set_xscale("log")
        ax.set_xlabel("draft parameters N (Llama-3-shaped family)")
        ax.set_ylabel("speedup over plain decoding")
        ax.set_title(f"{spec.name} (tp={tp}) on {hw.name}; stars: N* per model", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return fig


def fig_leviathan_table1(quick: bool = False):
    """Leviathan et al. Table 1 (c = ĉ = 0) reproduced: paper vs sdsl speed and ops factors, plus
    the T5-XXL / T5-small check."""
    from .throughput import speedup, work_factor

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

    from .throughput import speedup

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


def _turbospec_setup():
    from .architecture import get_model
    from .hardware import get_hardware
    from .latency import default_params

    hw = get_hardware("h100-sxm")
    return get_model("llama-2-7b"), get_model("llama-160m"), hw, default_params(hw)


def fig_turbospec_step_latency(quick: bool = False):
    """Predicted time of one speculative step (k draft steps + one verification of k+1 tokens) vs
    batch size for k = 0…5, Llama-2-7B + Llama-160M on H100-SXM, context 512."""
    import numpy as np

    from .latency import memory_per_gpu, step_time_s

    target, draft, hw, params = _turbospec_setup()
    b = np.unique(np.round(np.logspace(0, 8, 17 if quick else 65, base=2)))
    fig, ((ax,),) = _figure(figsize=(6.4, 4.3))
    t_d = step_time_s(draft, hw, b, 1, 512, params=params)
    for k in range(6):
        t = k * t_d + step_time_s(target, hw, b, k + 1, 512, params=params)
        ax.plot(b, t * 1e3, "o-", ms=2.5, label=f"k = {k}" + (" (no speculation)" if k == 0 else ""))
    over = memory_per_gpu(target, b, 512) + memory_per_gpu(draft, b, 512) > hw.mem_capacity
    if np.any(over):
        ax.axvspan(b[over].min(), b.max(), color="grey", alpha=0.15, label="KV cache exceeds 80 GB")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size (sequences)")
    ax.set_ylabel("step latency (ms)")
    src = params.source if len(params.source) <= 48 else params.source[:47] + "…"
    ax.set_title(f"{target.name} + {draft.name} on {hw.name}, context 512\nlatency params: {src}", fontsize=8)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


def fig_turbospec_speedup_vs_batch(quick: bool = False):
    """Left: predicted speedup vs batch size at α = 0.5 for k = 1…5 and the best k. Right: the
    goodput-optimal k vs batch size for α = 0.5, 0.7, 0.9 (Llama-2-7B + Llama-160M, H100-SXM)."""
    import numpy as np

    from .throughput import predict

    target, draft, hw, params = _turbospec_setup()
    b = np.unique(np.round(np.logspace(0, 8, 17 if quick else 65, base=2)))
    k = np.arange(0, 9)
    fig, ((ax, ax2),) = _figure(1, 2, figsize=(11.0, 4.0))
    s = predict(target, draft, k[:, None], 0.5, hw, b[None, :], 512, params=params).speedup
    for i in range(1, 6):
        ax.plot(b, s[i], label=f"k = {i}")
    ax.plot(b, s.max(axis=0), "k--", lw=1.2, label="best k ∈ 0…8")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size")
    ax.set_ylabel("speedup over plain decoding")
    ax.set_title("α = 0.5", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    for a, col in zip((0.5, 0.7, 0.9), ("C0", "C1", "C2")):
        sa = predict(target, draft, k[:, None], a, hw, b[None, :], 512, params=params).speedup
        ax2.step(b, k[np.argmax(sa, axis=0)], where="mid", color=col, label=f"α = {a}")
    ax2.set_xscale("log", base=2)
    ax2.set_xlabel("batch size")
    ax2.set_ylabel("throughput-optimal k")
    ax2.set_title("proposed length vs batch size", fontsize=9)
    ax2.legend(fontsize=7)
    ax2.grid(alpha=0.3)
    fig.suptitle(f"{target.name} + {draft.name} on {hw.name}, context 512", fontsize=9)
    return fig


# ---- serving simulator: TurboSpec goodput-adaptive speculation (issue 5) ---------------------------
# Data from sdsl.serving.evidence (roofline step times with the shipped H100 parameters + the
# discrete-event simulator). Deployments: "7b" = Llama-2-7B + Llama-160M (TP1), "70b" =
# Llama-3.1-70B (TP4) + Llama-3.2-1B, both on H100-SXM.

__all__ += ["fig_serving_speedup_vs_batch", "fig_serving_k_vs_batch", "fig_serving_latency_vs_qps",
            "fig_serving_alpha_shift"]

_SERVING_TITLES = {"7b": "Llama-2-7B + Llama-160M, H100, TP1", "70b": "Llama-3.1-70B (TP4) + Llama-3.2-1B, H100"}
_POLICY_STYLE = {"none": ("k", ":"), "k=1": ("C0", "-"), "k=3": ("C1", "-"), "k=5": ("C2", "-"),
                 "k=7": ("C3", "-"), "adaptive": ("C4", "--"), "per-request": ("C5", "-.")}


def _kv_feasible_batch(name: str, context: float) -> float:
    from .serving.evidence import deployment

    return deployment(name).kv_budget_tokens(True) / context


def fig_serving_speedup_vs_batch(quick: bool = False):
    """Speedup over plain decoding vs batch size for k = 1, 3, 5, 7 and the goodput-adaptive k at
    α = 0.5, 0.7, 0.9 — lines: analytic (known α, context 1024); markers: closed-loop simulation
    (online α, per-request α ~ Beta(α, 20)). Rows: the two deployments."""
    import numpy as np

    from .serving.evidence import analytic_speedup, closed_loop_speedup

    alphas = (0.5, 0.7, 0.9)
    batches = np.unique(np.round(np.logspace(0, 8, 17 if quick else 49, base=2))).astype(int)
    an = analytic_speedup(alphas, batches=batches, max_batch=256)
    sim_b = (1, 16) if quick else (1, 4, 16, 64, 128)
    fig, axes = _figure(2, 3, figsize=(13.0, 7.0), sharey="row")
    for i, name in enumerate(("7b", "70b")):
        cl = closed_loop_speedup(name, alphas, sim_b, min_requests=16 if quick else 64,
                                 output_tokens=128 if quick else 512,
                                 policies=("none", "k=1", "k=3", "k=5", "k=7", "adaptive"))
        limit = _kv_feasible_batch(name, 1024.0)
        for j, a in enumerate(alphas):
            ax = axes[i][j]
            for pol in ("k=1", "k=3", "k=5", "k=7", "adaptive"):
                color, ls = _POLICY_STYLE[pol]
                d = an[(an.deployment == name) & (an.alpha == a) & (an.policy == pol)]
                ax.plot(d.batch, d.speedup, ls, color=color, lw=2.0 if pol == "adaptive" else 1.2, label=pol)
                s = cl[(cl.alpha == a) & (cl.policy == pol)]
                ax.plot(s.batch, s.speedup, "o" if pol == "adaptive" else "x", color=color, ms=5)
            ax.axhline(1.0, color="grey", lw=0.8)
            if limit < batches.max():
                ax.axvspan(limit, batches.max(), color="grey", alpha=0.15, lw=0)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{_SERVING_TITLES[name]}, α = {a}", fontsize=8)
            ax.grid(alpha=0.3)
            if i == 1:
                ax.set_xlabel("batch size (concurrent requests)")
        axes[i][0].set_ylabel("speedup over no speculation")
    axes[0][0].legend(fontsize=7, title="lines: analytic; o/x: simulated", title_fontsize=7)
    fig.suptitle("Speculation vs batch size (grey: KV cache of 1024-token sequences does not fit)", fontsize=9)
    return fig


def fig_serving_k_vs_batch(quick: bool = False):
    """Goodput-optimal k vs batch size for α = 0.5, 0.7, 0.9 (steps: controller on the step-time
    table, context 1024) and the mean k the adaptive policy actually ran in closed-loop simulation
    (markers)."""
    import numpy as np

    from .serving.evidence import closed_loop_speedup, deployment
    from .serving.k_table import best_k_by_batch

    fig, axes = _figure(1, 2, figsize=(11.0, 4.0), sharey=True)
    b = np.arange(1, 257)
    sim_b = (1, 16) if quick else (1, 4, 16, 64, 128)
    for ax, name in zip(axes[0], ("7b", "70b")):
        ks = best_k_by_batch(deployment(name).step_model, [0.5, 0.7, 0.9], context=1024.0)
        cl = closed_loop_speedup(name, (0.5, 0.7, 0.9), sim_b, min_requests=16 if quick else 64,
                                 output_tokens=128 if quick else 512, policies=("none", "adaptive"))
        for row, a, col in zip(ks, (0.5, 0.7, 0.9), ("C0", "C1", "C2")):
            ax.step(b, row, where="mid", color=col, label=f"α = {a} (controller)")
            s = cl[(cl.alpha == a) & (cl.policy == "adaptive")]
            ax.plot(s.batch, s.mean_k, "o", color=col, ms=5)
        limit = _kv_feasible_batch(name, 1024.0)
        if limit < 256:
            ax.axvspan(limit, 256, color="grey", alpha=0.15, lw=0)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size")
        ax.set_title(_SERVING_TITLES[name], fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("speculation length k")
    axes[0][0].legend(fontsize=7, title="o: mean k simulated (online α)", title_fontsize=7)
    return fig


def fig_serving_latency_vs_qps(quick: bool = False):
    """Mean and p99 request latency and mean k vs QPS for each policy, Azure conversation trace
    replayed at each QPS (Poisson arrivals with 1024+256 tokens if the trace is absent). Top:
    Llama-2-7B + Llama-160M, α ~ Beta(0.7, 20); bottom: Llama-3.1-70B TP4 + Llama-3.2-1B, α ~ Beta(0.6, 20)."""
    from .serving.evidence import latency_vs_qps, trace_available

    trace = "conv" if trace_available("conv") else None
    cases = [("7b", 0.7, (1, 8) if quick else (1, 2, 4, 6, 8, 10, 12, 14)),
             ("70b", 0.6, (1, 8) if quick else (1, 2, 4, 6, 8, 10, 12, 16))]
    fig, axes = _figure(2, 3, figsize=(14.0, 8.0))
    for row, (name, alpha, qps) in zip(axes, cases):
        df = latency_vs_qps(name, qps=qps, trace=trace, n_requests=150 if quick else 2000, alpha=alpha)
        for pol, g in df.groupby("policy", sort=False):
            color, ls = _POLICY_STYLE[pol]
            for ax, col in zip(row, ("mean_latency_s", "p99_latency_s", "mean_k")):
                ax.plot(g.qps, g[col], "o" + ls, color=color, ms=3, label=pol)
        for ax, lab in zip(row, ("mean latency (s)", "p99 latency (s)", "mean k")):
            ax.set_xlabel("QPS")
            ax.set_ylabel(lab)
            ax.grid(alpha=0.3)
            ax.set_title(f"{_SERVING_TITLES[name]}; α ~ Beta({alpha}, 20)", fontsize=8)
        row[0].set_yscale("log")
        row[1].set_yscale("log")
        row[0].legend(fontsize=7)
    fig.suptitle("Azure conversation trace, first 2000 requests scaled to each QPS" if trace
                 else "Poisson arrivals, 1024+256 tokens", fontsize=9)
    return fig


def fig_serving_alpha_shift(quick: bool = False):
    """α drops from 0.8 to 0.4 for requests arriving after mid-run (conv trace, 4 QPS, Llama-2-7B +
    Llama-160M). Left: latency vs arrival time (rolling mean). Right: latency CDF after the shift."""
    import numpy as np

    from .serving.evidence import alpha_shift, trace_available

    trace = "conv" if trace_available("conv") else None
    df = alpha_shift("7b", qps=4.0, trace=trace, n_requests=300 if quick else 2000,
                     policies=("none", "k=5", "adaptive"))
    fig, ((ax1, ax2),) = _figure(1, 2, figsize=(11.0, 4.0))
    t_shift = df[df.after_shift].arrival_s.min()
    win = 25 if quick else 100
    for pol, g in df.groupby("policy", sort=False):
        color, ls = _POLICY_STYLE[pol]
        g = g.sort_values("arrival_s")
        roll = g.latency_s.rolling(win, center=True, min_periods=win // 2).mean()
        ax1.plot(g.arrival_s, roll, ls, color=color, label=pol)
        after = np.sort(g[g.after_shift].latency_s.to_numpy())
        ax2.plot(after, np.arange(1, after.size + 1) / after.size, ls, color=color,
                 label=f"{pol}: mean {after.mean():.2f} s, p99 {np.percentile(after, 99):.2f} s")
    ax1.axvline(t_shift, color="grey", lw=0.8)
    ax1.text(t_shift, ax1.get_ylim()[1] * 0.95, " α 0.8 → 0.4", fontsize=7, va="top")
    ax1.set_xlabel("arrival time (s)")
    ax1.set_ylabel(f"latency, rolling mean of {win} requests (s)")
    ax2.set_xlabel("request latency (s), requests after the shift")
    ax2.set_ylabel("CDF")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{_SERVING_TITLES['7b']}; {'Azure conv trace' if trace else 'Poisson'} at 4 QPS", fontsize=9)
    return fig
