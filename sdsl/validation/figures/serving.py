"""Serving-simulator figures (TurboSpec goodput-adaptive speculation; data from sdsl.validation.serving_evidence)."""

from __future__ import annotations

from sdsl.plots._common import _figure

__all__ = ["fig_serving_speedup_vs_batch", "fig_serving_k_vs_batch", "fig_serving_latency_vs_qps", "fig_serving_alpha_shift"]

_SERVING_TITLES = {"7b": "Llama-2-7B + Llama-160M, H100, TP1", "70b": "Llama-3.1-70B (TP4) + Llama-3.2-1B, H100"}
_POLICY_STYLE = {"none": ("k", ":"), "k=1": ("C0", "-"), "k=3": ("C1", "-"), "k=5": ("C2", "-"),
                 "k=7": ("C3", "-"), "adaptive": ("C4", "--"), "per-request": ("C5", "-.")}


def _kv_feasible_batch(name: str, context: float) -> float:
    from sdsl.validation.serving_evidence import deployment

    return deployment(name).kv_budget_tokens(True) / context


def fig_serving_speedup_vs_batch(quick: bool = False):
    """Speedup over plain decoding vs batch size for k = 1, 3, 5, 7 and the goodput-adaptive k at
    α = 0.5, 0.7, 0.9 — lines: analytic (known α, context 1024); markers: closed-loop simulation
    (online α, per-request α ~ Beta(α, 20)). Rows: the two deployments."""
    import numpy as np

    from sdsl.validation.serving_evidence import analytic_speedup, closed_loop_speedup

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

    from sdsl.validation.serving_evidence import closed_loop_speedup, deployment
    from sdsl.serving.k_table import best_k_by_batch

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
    from sdsl.validation.serving_evidence import latency_vs_qps, trace_available

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

    from sdsl.validation.serving_evidence import alpha_shift, trace_available

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
