"""Pure drawing functions behind the result objects' ``plot(ax=None)``: plain data in, Axes out.

Each takes numbers (arrays, lists of records, dicts), never a model or a file, and draws on ``ax``
(a new pyplot Axes when None). numpy and matplotlib are imported inside the functions only.
"""

from __future__ import annotations

from sdsl.plots._common import _axes, _finish

__all__ = ["plot_speedup_by_batch", "plot_step_breakdown", "plot_best_by_batch", "plot_draft_law",
           "plot_latency_cdf", "plot_linear_step_model", "plot_acceptance_histogram",
           "plot_acceptance_by_position", "plot_tau_by_tree_size", "plot_predicted_vs_measured", "plot_speedup_lines",
           "plot_heldout_errors"]


def plot_speedup_by_batch(batch, speedup, ax=None, title: str = ""):
    """Bars of the best speedup over plain decoding at each batch size (max over every other axis of
    the configurations), with a line at 1 (no gain)."""
    import numpy as np

    ax = _axes(ax)
    b = np.ravel(np.broadcast_to(np.asarray(batch, dtype=float), np.shape(speedup)))
    s = np.ravel(np.asarray(speedup, dtype=float))
    sizes = np.unique(b)
    best = [float(np.max(s[b == x])) for x in sizes]
    ax.bar([f"{x:g}" for x in sizes], best, color=["C2" if v > 1 else "C3" for v in best])
    ax.axhline(1.0, color="k", lw=0.8)
    _finish(ax, "batch size", "speedup over plain decoding", title or "best speedup per batch size", legend=None)
    return ax


def plot_step_breakdown(parts: dict, ax=None, title: str = ""):
    """Grouped bars of a step time's parts in ms (``parts``: name -> seconds per configuration)."""
    import numpy as np

    ax = _axes(ax)
    names = list(parts)
    values = [np.ravel(np.asarray(parts[n], dtype=float)) * 1e3 for n in names]
    n_cfg = max(v.size for v in values)
    width = 0.8 / len(names)
    for i, (name, v) in enumerate(zip(names, values)):
        ax.bar(np.arange(n_cfg) + i * width, np.broadcast_to(v, (n_cfg,)), width, label=name)
    ax.set_xticks(np.arange(n_cfg) + 0.4 - width / 2, [str(i) for i in range(n_cfg)])
    _finish(ax, "configuration", "time (ms)", title or "step time by part")
    return ax


def plot_best_by_batch(rows: list[dict], ax=None, title: str = ""):
    """Tokens/s at the best γ against batch size, one line per (draft, α) of ``rows`` (records with
    draft, alpha, batch, tokens_per_s), and plain decoding dashed."""
    ax = _axes(ax)
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["draft"], r["alpha"]), []).append(r)
    for (draft, alpha), rs in groups.items():
        rs = sorted(rs, key=lambda r: r["batch"])
        ax.plot([r["batch"] for r in rs], [r["tokens_per_s"] for r in rs], "o-", ms=3,
                label=f"{draft} (α {alpha:.2f})")
    plain = sorted({(r["batch"], r["plain_tokens_per_s"]) for r in rows})
    ax.plot([b for b, _ in plain], [t for _, t in plain], "k--", lw=1, label="plain decoding")
    _finish(ax, "batch size", "tokens/s at the best γ", title or "best speculation per draft", xscale="log", base=2)
    return ax


def plot_draft_law(law: dict, ax=None):
    """SDSL's optimal draft size N* against target size M (``law``: a DraftLaw's to_dict), with the
    fitted line μ·M + M₀ and the paper's."""
    import numpy as np

    ax = _axes(ax)
    m = np.array([t["params"] for t in law["targets"]], dtype=float)
    n = np.array([t["n_star"] for t in law["targets"]], dtype=float)
    ax.scatter(m, n, s=14, color="C0", label="N* per target")
    x = np.linspace(0.0, m.max() * 1.05, 50)
    ax.plot(x, law["mu"] * x + law["m0"], color="C1", label=f"fit: {law['mu']:.3g}·M + {law['m0']:.3g}")
    paper = law.get("paper") or {}
    if "mu" in paper:
        ax.plot(x, paper["mu"] * x + paper["m0"], "k:", label="SDSL paper")
    _finish(ax, "target parameters M", "optimal draft parameters N*", f"draft-size law (R² {law['r2']:.3f})")
    return ax


def plot_latency_cdf(latency_s, ttft_s, ax=None, title: str = ""):
    """Empirical CDFs of per-request end-to-end latency and time to first token (seconds)."""
    import numpy as np

    ax = _axes(ax)
    for values, label in ((latency_s, "end-to-end latency"), (ttft_s, "time to first token")):
        v = np.sort(np.asarray(values, dtype=float))
        ax.step(v, np.arange(1, v.size + 1) / max(v.size, 1), where="post", label=label)
    _finish(ax, "seconds", "fraction of requests", title or "request latency")
    return ax


def plot_linear_step_model(coefficients: dict, ax=None, contexts=(512, 2048, 8192), max_batch: int = 256):
    """TurboSpec's linear step time T = c_kv·n·L + c_tok·n + c_b·n + c_0 (ms, ``coefficients``) of a
    plain decode step against batch size n, one line per context L."""
    import numpy as np

    ax = _axes(ax)
    n = np.arange(1, max_batch + 1, dtype=float)
    c = coefficients
    for L in contexts:
        ax.plot(n, c["c_kv"] * n * L + c["c_tok"] * n + c["c_b"] * n + c["c_0"], label=f"context {L}")
    _finish(ax, "batch size", "step time (ms)", "linear step-time model")
    return ax


def plot_acceptance_histogram(accept_counts, ax=None, title: str = ""):
    """Bars: how many sequence-steps accepted 0, 1, …, γ drafted tokens."""
    import numpy as np

    ax = _axes(ax)
    c = np.asarray(accept_counts, dtype=float)
    ax.bar(np.arange(c.size), c, color="C0")
    _finish(ax, "drafted tokens accepted", "sequence-steps", title or "acceptance histogram", legend=None)
    return ax


def plot_acceptance_by_position(conditional, marginal, ax=None, title: str = ""):
    """Per-position acceptance: conditional p_i (bars) and marginal m_i = p_1···p_i (line), i = 1..k."""
    import numpy as np

    ax = _axes(ax)
    i = np.arange(1, len(conditional) + 1)
    ax.bar(i, conditional, color="C0", alpha=0.6, label="conditional p_i")
    ax.plot(i, marginal, "o-", color="C1", label="marginal m_i")
    ax.set_ylim(0, 1.02)
    _finish(ax, "draft position i", "acceptance rate", title or "acceptance by position")
    return ax


def plot_tau_by_tree_size(tau_by_size, ax=None, title: str = ""):
    """Expected tokens per step τ of the best tree with at most n draft tokens, n = 0, 1, ..."""
    import numpy as np

    ax = _axes(ax)
    ax.plot(np.arange(len(tau_by_size)), tau_by_size, "o-", ms=3, color="C0")
    _finish(ax, "draft tokens in the tree", "τ (tokens per target pass)", title or "best tree by size", legend=None)
    return ax


def plot_predicted_vs_measured(measured, predicted, ax=None, title: str = ""):
    """Predicted against measured values on log axes, with the identity and ±10% lines."""
    import numpy as np

    ax = _axes(ax)
    m, p = np.asarray(measured, dtype=float), np.asarray(predicted, dtype=float)
    ax.scatter(m, p, s=18, color="C0")
    lo, hi = float(min(m.min(), p.min())) * 0.9, float(max(m.max(), p.max())) * 1.1
    ax.plot([lo, hi], [lo, hi], color="k", lw=0.8)
    for f in (0.9, 1.1):
        ax.plot([lo, hi], [f * lo, f * hi], color="k", lw=0.5, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _finish(ax, "measured", "predicted", title or "predicted vs measured (±10% dotted)", legend=None)
    return ax


def plot_speedup_lines(batches, lines: dict, pick: dict | None = None, ax=None, title: str = ""):
    """Speed-up over plain decoding against batch size on a log axis: one line per proposer (``lines``: name →
    {"speedup": per batch, "runnable": bool, optional "low"/"high": a band per batch}), plain decoding at 1, and
    the pick ({"proposer", "batch", "speedup", "k"}) marked. A proposer the target cannot run is dotted."""
    import numpy as np

    ax = _axes(ax, figsize=(6.0, 4.2))
    b = np.asarray(batches, dtype=float)
    for i, (name, line) in enumerate(lines.items()):
        color = f"C{i % 10}"
        label = name if line.get("runnable", True) else f"{name} (not runnable)"
        ax.plot(b, np.asarray(line["speedup"], dtype=float), color=color, lw=1.4,
                ls="-" if line.get("runnable", True) else ":", label=label)
        if line.get("low") is not None and line.get("high") is not None:
            ax.fill_between(b, np.asarray(line["low"], dtype=float), np.asarray(line["high"], dtype=float),
                            color=color, alpha=0.15, lw=0)
    ax.axhline(1.0, color="k", lw=0.8, ls="--", label="plain decoding")
    if pick:
        ax.plot([pick["batch"]], [pick["speedup"]], "o", ms=8, mfc="none", mec="k", mew=1.5,
                label=f"pick: {pick['proposer']}, k {pick['k']} at batch {pick['batch']}")
    _finish(ax, "batch size", "speed-up over plain decoding (best k)", title or "speed-up by proposer",
            xscale="log", base=2)
    return ax


def plot_heldout_errors(labels, median_abs, worst_abs, goals=(0.10, 0.25), ax=None, title: str = ""):
    """Horizontal bars of the median and worst held-out |error| (%) per label, with the goals dotted."""
    import numpy as np

    ax = _axes(ax, figsize=(6.0, max(3.0, 0.22 * len(labels) + 1.0)))
    y = np.arange(len(labels))
    ax.barh(y + 0.2, 100 * np.asarray(worst_abs, dtype=float), 0.4, color="C1", label="worst")
    ax.barh(y - 0.2, 100 * np.asarray(median_abs, dtype=float), 0.4, color="C0", label="median")
    for g, c in zip(goals, ("C0", "C1")):
        ax.axvline(100 * g, color=c, lw=0.8, ls=":")
    ax.set_yticks(y, list(labels), fontsize=6)
    ax.invert_yaxis()
    _finish(ax, "held-out |error| (%)", None, title or "held-out errors (goals dotted)")
    return ax
