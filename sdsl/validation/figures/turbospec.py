"""TurboSpec-style figures on the roofline: step latency and speedup vs batch size."""

from __future__ import annotations

from sdsl.plots._common import _figure, _finish

__all__ = ["fig_turbospec_step_latency", "fig_turbospec_speedup_vs_batch", "fig_turbospec_linear_fit"]

def _turbospec_setup():
    from sdsl.catalog.models import get_model
    from sdsl.catalog.hardware import get_hardware
    from sdsl.roofline.latency import default_params

    hw = get_hardware("h100-sxm")
    return get_model("llama-2-7b"), get_model("llama-160m"), hw, default_params(hw)


def fig_turbospec_step_latency(quick: bool = False):
    """Predicted time of one speculative step (k draft steps + one verification of k+1 tokens) vs
    batch size for k = 0…5, Llama-2-7B + Llama-160M on H100-SXM, context 512."""
    import numpy as np

    from sdsl.roofline.latency import memory_per_gpu, step_time_s

    from sdsl.roofline.deployment import Deployment

    target, draft, hw, params = _turbospec_setup()
    dep = Deployment(hw, context=512, params=params, engine="ideal")
    b = np.unique(np.round(np.logspace(0, 8, 17 if quick else 65, base=2)))
    fig, ((ax,),) = _figure(figsize=(6.4, 4.3))
    t_d = step_time_s(draft, dep, batch=b, q=1)
    for k in range(6):
        t = k * t_d + step_time_s(target, dep, batch=b, q=k + 1)
        ax.plot(b, t * 1e3, "o-", ms=2.5, label=f"k = {k}" + (" (no speculation)" if k == 0 else ""))
    over = memory_per_gpu(target, dep, batch=b) + memory_per_gpu(draft, dep, batch=b) > hw.mem_capacity
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

    from sdsl.roofline.deployment import Deployment
    from sdsl.speculation.throughput import predict

    target, draft, hw, params = _turbospec_setup()
    b = np.unique(np.round(np.logspace(0, 8, 17 if quick else 65, base=2)))
    k = np.arange(0, 9)
    fig, ((ax, ax2),) = _figure(1, 2, figsize=(11.0, 4.0))
    alphas = np.array([0.5, 0.7, 0.9])
    s_all = predict(target, draft, Deployment(hw, context=512, params=params, engine="ideal"), gamma=k[None, :, None],
                    alpha=alphas[:, None, None], batch=b[None, None, :]).speedup  # (alpha, k, batch)
    s = s_all[0]
    for i in range(1, 6):
        ax.plot(b, s[i], label=f"k = {i}")
    ax.plot(b, s.max(axis=0), "k--", lw=1.2, label="best k ∈ 0…8")
    ax.axhline(1.0, color="grey", lw=0.8)
    _finish(ax, "batch size", "speedup over plain decoding", "α = 0.5", xscale="log", base=2)
    for a, sa, col in zip(alphas, s_all, ("C0", "C1", "C2")):
        ax2.step(b, k[np.argmax(sa, axis=0)], where="mid", color=col, label=f"α = {a}")
    _finish(ax2, "batch size", "throughput-optimal k", "proposed length vs batch size", xscale="log", base=2)
    fig.suptitle(f"{target.name} + {draft.name} on {hw.name}, context 512", fontsize=9)
    return fig


def fig_turbospec_linear_fit(quick: bool = False):
    """Batched step latency vs batched tokens for Llama-3.1-70B TP4 on H100-SXM (roofline with the
    shipped calibration, contexts 256–4096), with TurboSpec's linear form T = c_kv·N_kv + c_tok·N_tok
    + c_b·n + c_0 fitted to those points and the paper's published coefficients."""
    import numpy as np

    from sdsl.roofline.deployment import Deployment
    from sdsl.serving.linear_model import TURBOSPEC_PUBLISHED, fit_linear_step_model
    from sdsl.serving.step_model import roofline_step_fn

    step = roofline_step_fn("llama-3.1-70b", Deployment("h100-sxm", tp=4, engine="ideal"))
    b = np.unique(np.round(np.logspace(0, 8, 9 if quick else 33, base=2)))
    contexts = (256, 1024, 4096)
    fig, ((ax, ax2),) = _figure(1, 2, figsize=(11.0, 4.2))
    bb, cc = np.meshgrid(b, np.array(contexts, dtype=float))
    q = np.ones_like(bb)
    t = step(bb.ravel(), q.ravel(), cc.ravel())
    fit = fit_linear_step_model(bb.ravel(), q.ravel(), cc.ravel(), t, test_fraction=0.25, seed=0)
    pub = TURBOSPEC_PUBLISHED["llama-3.1-70b-tp4-h100"]
    for L, col in zip(contexts, ("C0", "C1", "C2")):
        tr = step(b, np.ones_like(b), np.full_like(b, L))
        ax.plot(b, tr * 1e3, "o", color=col, ms=3.5, label=f"roofline, context {L}")
        ax.plot(b, fit.model.step_fn(b, np.ones_like(b), np.full_like(b, L)) * 1e3, "-", color=col, lw=1)
        ax.plot(b, pub.step_fn(b, np.ones_like(b), np.full_like(b, L)) * 1e3, ":", color=col, lw=1)
    ax.set_xlabel("batched tokens (decode, 1 per request)")
    ax.set_ylabel("step latency (ms)")
    ax.set_xscale("log", base=2)
    ax.set_title(f"lines: linear form fitted (held-out R² {fit.r2_test:.3f}); dotted: TurboSpec's published fit",
                 fontsize=8)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    ax2.plot(t * 1e3, fit.model.step_fn(bb.ravel(), q.ravel(), cc.ravel()) * 1e3, "o", ms=3, label="fitted linear form")
    ax2.plot(t * 1e3, pub.step_fn(bb.ravel(), q.ravel(), cc.ravel()) * 1e3, "x", ms=3, label="TurboSpec published")
    lo, hi = float(t.min() * 1e3 * 0.8), float(t.max() * 1e3 * 1.2)
    ax2.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax2.set_xlabel("roofline step latency (ms)")
    ax2.set_ylabel("linear-form step latency (ms)")
    ax2.legend(fontsize=7)
    ax2.grid(alpha=0.3)
    fig.suptitle("Llama-3.1-70B TP4 on H100-SXM: batched latency vs batched tokens", fontsize=9)
    return fig
