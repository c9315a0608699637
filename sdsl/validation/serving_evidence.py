"""The serving experiments behind VALIDATION.md and paper_figures/serving_*.png.

Each function returns a pandas DataFrame; :func:`main` (``python -m sdsl.validation.serving_evidence``)
prints them all. Deployments (H100-SXM, roofline step times with the shipped latency parameters):

- ``7b``: Llama-2-7B target + Llama-160M draft, TP1;
- ``70b``: Llama-3.1-70B target (TP4) + Llama-3.2-1B draft (TP1).

Adaptive policies run TurboSpec's controller as it runs in a server: α̂ estimated online from an
EMA that starts at a prior, and steps priced by a linear model fitted online to the step times it
observes (:class:`~sdsl.serving.online_model.OnlineStepModel`). The headline experiment
(:func:`latency_vs_qps`) starts α̂ at ``HEADLINE_PRIOR`` = 0.5, away from the workload's mean
α = 0.7 on purpose; :func:`controller_cost` measures what the online fit and the wrong prior cost
against an oracle controller that knows every request's α and the exact step table.
"""

from __future__ import annotations

import numpy as np

from sdsl.roofline.deployment import Deployment
from sdsl.serving.k_table import speedup_vs_batch
from sdsl.serving.simulator import SimConfig, simulate
from sdsl.serving.system import ServingSystem
from sdsl.serving.workload import AcceptanceDist, Workload, poisson_workload, trace_path, trace_workload

__all__ = ["DEPLOYMENTS", "HEADLINE_PRIOR", "CONTROLLERS", "deployment", "trace_available", "analytic_speedup",
           "closed_loop_speedup", "latency_vs_qps", "controller_cost", "step_fit_error", "alpha_shift",
           "linear_vs_roofline", "gap_to_best_fixed", "main"]

DEPLOYMENTS = {
    "7b": dict(target="llama-2-7b", draft="llama-160m", deployment=Deployment("h100-sxm", tp=1, engine="ideal")),
    "70b": dict(target="llama-3.1-70b", draft="llama-3.2-1b", deployment=Deployment("h100-sxm", tp=4, engine="ideal")),
}
FIXED = ("k=1", "k=3", "k=5", "k=7")
HEADLINE_PRIOR = 0.5  # the EMA's starting α̂ in the headline runs; the workload's mean α is 0.7
# controller variants of the adaptive policy: α source, step pricing, and (where given) the α̂ prior
# ("workload": the workload's mean α, the prior a controller that knew its workload would use)
CONTROLLERS = {"oracle": dict(alpha_source="oracle", pricing="table"),
               "estimated α from the right prior, exact table": dict(alpha_source="estimate", pricing="table",
                                                                     prior="workload"),
               "estimated α, exact table": dict(alpha_source="estimate", pricing="table"),
               "TurboSpec (estimated α, online fit)": dict(alpha_source="estimate", pricing="online")}
_CACHE: dict = {}


def deployment(name: str, max_batch: int = 256, max_context: int = 4096) -> ServingSystem:
    """A :class:`ServingSystem` for ``"7b"`` or ``"70b"`` (cached)."""
    key = (name, max_batch, max_context)
    if key not in _CACHE:
        _CACHE[key] = ServingSystem.from_catalog(**DEPLOYMENTS[name], max_batch=max_batch, max_k=7,
                                                 max_context=max_context, max_prompt=max_context)
    return _CACHE[key]


def analytic_speedup(alphas=(0.5, 0.7, 0.9), batches=None, context: float = 1024.0, max_batch: int = 64):
    """Speedup over k = 0 of each fixed k and of the goodput-optimal k (known α), both deployments."""
    import pandas as pd

    batches = np.arange(1, max_batch + 1) if batches is None else np.asarray(batches)
    frames = []
    for name in DEPLOYMENTS:
        df = speedup_vs_batch(deployment(name, max_batch=max(max_batch, 64)).step_model, alphas, batches,
                              ks=(1, 3, 5, 7), context=context)
        df.insert(0, "deployment", name)
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def closed_loop_speedup(name: str = "7b", alphas=(0.5, 0.7, 0.9), batches=(1, 4, 16, 64), min_requests: int = 64,
                        prompt_tokens: int = 512, output_tokens: int = 512, concentration: float = 20.0,
                        policies=("none",) + FIXED + ("adaptive",), seed: int = 0):
    """Simulated throughput at fixed concurrency b: max(4b, min_requests) requests queued at t = 0, max_batch b.

    Per-request α ~ Beta(mean α, concentration), acceptance sampled per token, α estimated online.
    Columns: deployment, alpha, batch, policy, tokens_per_s, speedup (over ``none``), mean_k.
    """
    import pandas as pd

    system = deployment(name, max_batch=max(batches))
    rows = []
    for a in alphas:
        for b in batches:
            n = max(4 * int(b), min_requests)
            rng = np.random.default_rng(seed)
            w = Workload(np.zeros(n), np.full(n, prompt_tokens), np.full(n, output_tokens),
                         AcceptanceDist(a, concentration).sample(np.zeros(n), rng), name="closed")
            base = None
            for p in policies:
                s = simulate(w, system, p, SimConfig(max_batch=int(b)), seed=seed).summary()
                base = s["tokens_per_s"] if p == "none" else base
                rows.append({"deployment": name, "alpha": a, "batch": int(b), "policy": p,
                             "tokens_per_s": s["tokens_per_s"], "mean_k": s["mean_k"]})
    df = pd.DataFrame(rows)
    base = df[df.policy == "none"].set_index(["alpha", "batch"]).tokens_per_s
    df["speedup"] = df.tokens_per_s / base.loc[list(zip(df.alpha, df.batch))].to_numpy()
    return df


def _workload(trace, qps, n_requests, dist, seed, data_dir) -> Workload:
    """A replayed trace, or (``trace=None``) Poisson arrivals with 1024-token prompts and 256-token outputs."""
    if trace is None:
        return poisson_workload(n_requests, qps, 1024, 256, dist, seed=seed)
    return trace_workload(trace, qps, n_requests, dist, seed=seed, max_context=4096, data_dir=data_dir)


def trace_available(trace: str = "conv", data_dir=None) -> bool:
    """Whether the Splitwise trace is on disk (shipped in sdsl/data/traces by default)."""
    return trace_path(trace, data_dir).is_file()


def latency_vs_qps(name: str = "7b", qps=(1, 2, 4, 6, 8, 10, 12), policies=("none",) + FIXED + ("adaptive", "per-request"),
                   trace: str = "conv", n_requests: int = 2000, alpha: float = 0.7, seed: int = 0, data_dir=None,
                   prior: float = HEADLINE_PRIOR):
    """Mean/p50/p99 latency, TTFT, TPOT, tokens/s and mean k per (QPS, policy) on a replayed trace.

    Adaptive policies start α̂ at ``prior`` and fit their step-time model online.
    """
    import pandas as pd

    system = deployment(name)
    config = SimConfig(prior=prior)
    rows = []
    for r in qps:
        w = _workload(trace, r, n_requests, AcceptanceDist(alpha), seed, data_dir)
        for p in policies:
            rows.append({"deployment": name, **simulate(w, system, p, config, seed=seed, qps=r).summary()})
    return pd.DataFrame(rows)


def step_fit_error(system, coef) -> float:
    """Mean |relative error| of fitted step-time coefficients against the exact table (uniform k,
    batch 1–64, k 0–max_k, context 256–3072): how far the online fit ended from the truth."""
    from sdsl.serving.online_model import step_features

    sm = system.step_model
    errors = []
    for n in (1, 2, 4, 8, 16, 32, 64):
        for context in (256.0, 1024.0, 3072.0):
            exact = sm.decode_time_all_k(n, context)
            x = np.vstack([step_features(n * context, n, float(k * n), k) for k in range(sm.max_k + 1)])
            errors.append(np.abs(x @ np.asarray(coef) / exact - 1.0))
    return float(np.mean(errors))


def controller_cost(name: str = "7b", qps=(1, 2, 4, 6, 8, 10, 12), trace: str = "conv", n_requests: int = 2000,
                    alpha: float = 0.7, prior: float = HEADLINE_PRIOR, policy: str = "adaptive", seed: int = 0,
                    data_dir=None):
    """Latency of the adaptive policy under each controller of :data:`CONTROLLERS`, per QPS.

    Columns: deployment, qps, controller, mean_latency_s, p99_latency_s, mean_k, cost_mean and
    cost_p99 (relative to the oracle: true α, exact step table), fit_error (of the online fit at the
    end of the run, :func:`step_fit_error`; NaN for table pricing).
    """
    import pandas as pd

    system = deployment(name)
    rows = []
    for r in qps:
        w = _workload(trace, r, n_requests, AcceptanceDist(alpha), seed, data_dir)
        for label, kw in CONTROLLERS.items():
            cfg = {"prior": prior, **kw}
            cfg["prior"] = alpha if cfg["prior"] == "workload" else cfg["prior"]
            res = simulate(w, system, policy, SimConfig(**cfg), seed=seed, qps=r)
            s = res.summary()
            coef = res.stats.get("step_model_coef")
            rows.append({"deployment": name, "qps": r, "controller": label, "mean_latency_s": s["mean_latency_s"],
                         "p99_latency_s": s["p99_latency_s"], "mean_k": s["mean_k"],
                         "fit_error": step_fit_error(system, coef) if coef else float("nan")})
    df = pd.DataFrame(rows)
    oracle = df[df.controller == "oracle"].set_index("qps")
    for col in ("mean", "p99"):
        ref = oracle[f"{col}_latency_s"].loc[df.qps].to_numpy()
        df[f"cost_{col}"] = df[f"{col}_latency_s"].to_numpy() / ref - 1.0
    return df


def alpha_shift(name: str = "7b", qps: float = 4.0, before: float = 0.8, after: float = 0.4, shift_fraction: float = 0.5,
                policies=("none", "k=5", "adaptive"), trace: str = "conv", n_requests: int = 2000, seed: int = 0,
                data_dir=None):
    """Per-request latencies when α drops from ``before`` to ``after`` for requests arriving mid-run."""
    import pandas as pd

    system = deployment(name)
    w = _workload(trace, qps, n_requests, AcceptanceDist(before), seed, data_dir)
    t_shift = float(w.arrival_s[int(shift_fraction * len(w))])
    w = w.with_alpha(AcceptanceDist(before, shift_at_s=t_shift, mean_after=after), seed=seed)
    frames = []
    for p in policies:
        df = simulate(w, system, p, seed=seed, qps=qps).requests()
        df["policy"] = p
        df["after_shift"] = df.arrival_s >= t_shift
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def linear_vs_roofline(n_rows: int = 4000, seed: int = 0):
    """TurboSpec's linear form fitted to roofline step times, held-out R²; published coefficients vs roofline.

    Rows: batch 1–256, q 1–8, mean context 64–4096 (uniform random), target forward only.
    """
    import pandas as pd

    from sdsl.serving.linear_model import TURBOSPEC_PUBLISHED, fit_linear_step_model, r_squared
    from sdsl.serving.step_model import roofline_step_fn

    rng = np.random.default_rng(seed)
    b = rng.integers(1, 257, n_rows)
    q = rng.integers(1, 9, n_rows)
    L = rng.integers(64, 4097, n_rows)
    cases = [("llama-2-7b", 1, None), ("llama-3.1-8b", 1, "llama-3.1-8b-h100"),
             ("llama-3.1-70b", 4, "llama-3.1-70b-tp4-h100")]
    rows = []
    for model, tp, published in cases:
        t = roofline_step_fn(model, Deployment("h100-sxm", tp=tp, engine="ideal"))(b, q, L)
        fit = fit_linear_step_model(b, q, L, t, test_fraction=0.25, seed=seed, source=f"fit to roofline {model}")
        m = fit.model
        row = {"model": model, "tp": tp, "c_kv": m.c_kv, "c_tok": m.c_tok, "c_b": m.c_b, "c_0": m.c_0,
               "r2_train": fit.r2_train, "r2_test": fit.r2_test, "mape_test": fit.mape_test}
        if published:
            pub = TURBOSPEC_PUBLISHED[published]
            tp_ = pub.step_fn(b, q, L)
            row.update({"published_r2_vs_roofline": r_squared(t, tp_),
                        "published_over_roofline_median": float(np.median(tp_ / t))})
        rows.append(row)
    return pd.DataFrame(rows)


def gap_to_best_fixed(df, column: str = "mean_latency_s", policy: str = "adaptive"):
    """Per (qps[, seed]): ``policy``'s ``column`` relative to the best fixed k, in percent."""
    keys = ["qps", "seed"] if "seed" in df.columns else ["qps"]
    p = df.pivot_table(index=keys, columns="policy", values=column)
    fixed = p[[c for c in p.columns if c.startswith("k=")]].min(axis=1)
    return (p[policy] / fixed - 1.0) * 100.0


def main() -> None:  # pragma: no cover - the reproducing command of VALIDATION.md
    import pandas as pd

    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 500)
    an = analytic_speedup(batches=[1, 2, 4, 8, 16, 32, 64])
    print("Analytic speedup over k=0 (known alpha, context 1024):")
    print(an.pivot_table(index=["deployment", "alpha", "batch"], columns="policy", values="speedup").round(2))
    for name in DEPLOYMENTS:
        cl = closed_loop_speedup(name)
        print(f"\nSimulated closed-loop speedup over none ({name}; online alpha):")
        print(cl.pivot_table(index=["alpha", "batch"], columns="policy", values="speedup").round(3))
        print(cl[cl.policy == "adaptive"].set_index(["alpha", "batch"]).mean_k.round(2))
    lq = latency_vs_qps()
    print("\nConv trace, Llama-2-7B + Llama-160M, mean latency (s):")
    print(lq.pivot_table(index="qps", columns="policy", values="mean_latency_s").round(3))
    print("p99 latency (s):")
    print(lq.pivot_table(index="qps", columns="policy", values="p99_latency_s").round(3))
    print("mean k:")
    print(lq.pivot_table(index="qps", columns="policy", values="mean_k").round(2))
    for col in ("mean_latency_s", "p99_latency_s"):
        gaps = pd.DataFrame({pol: gap_to_best_fixed(lq, col, pol) for pol in ("adaptive", "per-request")})
        print(f"\n{col}: % above the best fixed k:")
        print(gaps.round(2))
    cc = controller_cost()
    print(f"\nWhat the controller's online fit and prior (alpha0 = {HEADLINE_PRIOR}) cost against the oracle:")
    for col in ("mean_latency_s", "cost_mean", "cost_p99", "mean_k", "fit_error"):
        print(col)
        print(cc.pivot_table(index="qps", columns="controller", values=col, sort=False).round(4))
    print("\nTurboSpec linear step-time form vs the roofline (held-out 25% of 4000 rows):")
    print(linear_vs_roofline().to_string(float_format=lambda v: f"{v:.4g}"))
    l70 = latency_vs_qps("70b", qps=(1, 2, 4, 6, 8, 10, 12, 16), alpha=0.6)
    print("\nConv trace, Llama-3.1-70B TP4 + Llama-3.2-1B, alpha ~ Beta(0.6, 20):")
    for col in ("mean_latency_s", "p99_latency_s", "mean_k", "tokens_per_s", "mean_batch"):
        print(col)
        print(l70.pivot_table(index="qps", columns="policy", values=col).round(3))
    sh = alpha_shift()
    print("\nAlpha shift 0.8 -> 0.4 at mid-run (conv trace, 4 QPS), latency (s) by policy and side of the shift:")
    print(sh.groupby(["policy", "after_shift"]).latency_s.describe(percentiles=[0.5, 0.9, 0.99]).round(3))


if __name__ == "__main__":  # pragma: no cover
    main()
