"""Speculation on a mixture-of-experts target vs a dense target of about the same active size, by batch size
(MoESD, arXiv 2505.19645: speculation benefits an MoE target most at medium batch, where the batch's plain step
already reads most experts and the verified tokens add few)."""

from __future__ import annotations

from sdsl.plots._common import _figure, _finish

__all__ = ["moe_vs_dense_by_batch", "fig_moe_speculation_vs_batch", "MOE_FIGURE_ALPHA", "MOE_FIGURE_HOST_S"]

#: i.i.d. acceptance per draft position of the EAGLE-3 chains (τ = 2.53 at k = 3, within the accepted lengths
#: 1.9-3.5 the published Qwen3-30B-A3B and Qwen3-235B-A22B EAGLE-3 rows measure at 4-8 verified tokens).
MOE_FIGURE_ALPHA = 0.7
#: Host time per speculative step of the dashed curves: below the constant per step the published Qwen3-30B-A3B
#: rows leave unpriced (VALIDATION.md, verify-growth check: +3.7 ms and +5.1 ms at batch 1).
MOE_FIGURE_HOST_S = 3e-3
PAIR = (("qwen3-30b-a3b", "MoE, 3.3B active of 30.5B"), ("qwen3-4b", "dense, 4.0B"))


def moe_vs_dense_by_batch(batches, *, alpha: float = MOE_FIGURE_ALPHA, host_s: float = 0.0, gammas=range(1, 8),
                          fixed_k: int = 3, hardware: str = "h100-sxm", context: int = 1024) -> dict:
    """Per target of :data:`PAIR`: the best EAGLE-3 chain's speedup over plain decoding per batch (k in
    ``gammas``, i.i.d. ``alpha``, ``host_s`` per speculative step), its k and the verify/plain forward time ratio
    at that k; at ``fixed_k`` the verify/plain ratio and the verify's distinct experts per MoE layer; the plain
    forward's distinct experts."""
    import numpy as np

    from sdsl.roofline.deployment import Deployment
    from sdsl.speculation.step import price_step

    b = np.asarray(batches, dtype=float)
    g = np.asarray(list(gammas), dtype=float)[:, None]
    dep = Deployment(hardware, context=context, engine="ideal")  # the roofline alone; host_s adds the host time
    out = {}
    for name, _ in PAIR:
        step = price_step(name, "eagle3", dep, acceptance=alpha, gamma=g, batch=b[None, :], overhead_s=host_s)
        speedup = np.broadcast_to(step.speedup, (g.size, b.size))
        best = np.argmax(speedup, axis=0)
        cols = np.arange(b.size)
        verify = np.broadcast_to(step.t_verify_s, speedup.shape)[best, cols]
        plain = np.broadcast_to(step.plain_time.total_s, speedup.shape)[best, cols]
        at = (np.flatnonzero(g[:, 0] == fixed_k)[0],) if np.any(g[:, 0] == fixed_k) else (best,)
        pick = lambda a, i: np.broadcast_to(a, speedup.shape)[i, cols]  # noqa: E731
        out[name] = {"speedup": speedup[best, cols], "k": g[best, 0].astype(int), "verify_over_plain": verify / plain,
                     "fixed_k": fixed_k,
                     "fixed_k_verify_over_plain": pick(step.t_verify_s, at[0]) / pick(step.plain_time.total_s, at[0]),
                     "fixed_k_verify_experts": pick(step.verify_time.distinct_experts, at[0]),
                     "plain_experts": pick(step.plain_time.distinct_experts, best)}
    return out


def fig_moe_speculation_vs_batch(quick: bool = False):
    """Left: best EAGLE-3 speedup vs batch, Qwen3-30B-A3B vs Qwen3-4B on one H100-SXM, roofline alone and with a
    host time per speculative step. Right: what verifying k + 1 tokens costs over the plain step, and the
    distinct experts per MoE layer of both forwards."""
    import numpy as np

    b = np.unique(np.round(np.logspace(0, 8, 17 if quick else 49, base=2)))
    roof = moe_vs_dense_by_batch(b)
    host = moe_vs_dense_by_batch(b, host_s=MOE_FIGURE_HOST_S)
    fig, ((ax, ax2),) = _figure(1, 2, figsize=(11.5, 4.3))
    colors = {"qwen3-30b-a3b": "tab:red", "qwen3-4b": "tab:blue"}
    for name, label in PAIR:
        ax.plot(b, roof[name]["speedup"], "-", color=colors[name], label=f"{name} ({label}), roofline")
        ax.plot(b, host[name]["speedup"], "--", color=colors[name],
                label=f"{name}, + {1e3 * MOE_FIGURE_HOST_S:.0f} ms host per speculative step")
    moe_ahead = roof["qwen3-30b-a3b"]["speedup"] > roof["qwen3-4b"]["speedup"]
    if np.any(moe_ahead):
        ax.axvspan(b[moe_ahead].min(), b[moe_ahead].max(), color="tab:red", alpha=0.08,
                   label="MoE gains more than dense (roofline)")
    ax.axhline(1.0, color="black", lw=0.8)
    _finish(ax, "batch size (sequences)", "best speedup over plain decoding (k = 1..7)",
            f"EAGLE-3 chain, i.i.d. α = {MOE_FIGURE_ALPHA} per position, H100-SXM, TP 1, context 1024",
            xscale="log", base=2, legend=6)
    k = roof["qwen3-30b-a3b"]["fixed_k"]
    for name, _ in PAIR:
        ax2.plot(b, roof[name]["fixed_k_verify_over_plain"], "-", color=colors[name],
                 label=f"{name}: T_verify({k + 1} tokens) / T_plain")
    ax3 = ax2.twinx()
    moe = roof["qwen3-30b-a3b"]
    ax3.plot(b, moe["plain_experts"], ":", color="tab:gray", label="qwen3-30b-a3b: experts/layer, plain step")
    ax3.plot(b, moe["fixed_k_verify_experts"], "-.", color="tab:gray",
             label=f"qwen3-30b-a3b: experts/layer, verify of {k + 1} tokens")
    ax3.set_ylabel("distinct experts per MoE layer (of 128)")
    ax3.legend(fontsize=6, loc="center right")
    _finish(ax2, "batch size (sequences)", "verify forward / plain forward (time)",
            f"what verifying k + 1 = {k + 1} tokens per sequence costs (roofline)", xscale="log", base=2, legend=6)
    return fig
