"""Engine speculative rows priced with the *sourced* exposed host time per step (sdsl.core.engine_host).

Each row's engine selects a profile of ``sdsl/data/published/engine_host.csv`` (:data:`ROW_PROFILES`): an
overlap on/off measurement of that engine's speculative decoding at batch 1, published by the engine's
developers, never fitted to these rows. Its host time is charged once per speculative step
(``price_speculation(..., overhead_s=...)``); plain-decode rows are not charged. The profiles come from
builds later than the rows (2025-09/10 against 2025-03/04) and measure only what overlap hides, so they are
lower bounds for the rows' builds; the leave-one-source-out fit (:func:`loso_host_step`) stays beside them
as a cross-check. docs/model.md §3.5.1.
"""

from __future__ import annotations

import numpy as np

from sdsl.core.engine_host import NO_HOST, engine_hosts, host_step_s

__all__ = ["ROW_PROFILES", "row_host_s", "sourced_host", "goal_status", "share_over", "overlap_source_check"]

# engine of a published row (sdsl.experiments.published_rows._engine) -> host profile of engine_host.csv
ROW_PROFILES = {"sglang": "sglang-2025-10", "vllm": "vllm-v1-2025-09"}


def row_host_s(engine: str, hosts: dict | None = None) -> float:
    """Host seconds per speculative step charged to a row of ``engine``: ``hosts[engine]`` when given (a
    what-if, e.g. ``{"sglang": 0.0}``), else the sourced profile's value; 0 for engines without a profile."""
    if hosts is not None and engine in hosts:
        return float(hosts[engine])
    return host_step_s(ROW_PROFILES.get(engine, NO_HOST))


def share_over(errors) -> float:
    """Fraction of rows over-predicted (signed error > 0)."""
    e = np.asarray(list(errors), dtype=float)
    return float(np.mean(e > 0)) if e.size else float("nan")


def sourced_host(specs, price, summarize, hosts: dict | None = None) -> dict:
    """Engine speculative rows (``specs`` of sglang/vllm with a proposer) priced with their engine's host
    time: per-row errors, the summary (``summarize``) plus the share over-predicted, and the profiles used.
    ``price(spec, step_overhead_s=...)`` returns (predicted, priced step) as in published_validation."""
    rows = []
    for spec in specs:
        host = row_host_s(spec.engine, hosts)
        pred = float(price(spec, step_overhead_s=host)[0])
        rows.append({"file": spec.file, "row": spec.index, "engine": spec.engine, "host_step_s": host,
                     "predicted": pred, "measured": spec.measured, "error": pred / spec.measured - 1.0})
    errs = [r["error"] for r in rows]
    profiles = {e: engine_hosts()[p].to_dict() for e, p in ROW_PROFILES.items()}
    return {"rows": rows, "engine_speculative": {**summarize(errs), "share_over_predicted": share_over(errs)},
            "profiles": profiles, "hosts": {e: row_host_s(e, hosts) for e in ROW_PROFILES}}


def goal_status(result: dict, speculative_key: str = "sourced_host") -> dict:
    """The published-measurement goals on a ``validate_published`` result: speculative median |error| ≤ 10% (with the
    host time of ``speculative_key``: ``"sourced_host"`` or ``"summary"`` for none), plain decode ≤ 5%, and
    the k-sweep's best k (with the same host time) within one of the measured best."""
    goals = result["goals"]
    spec = (result["summary"] if speculative_key == "summary" else result[speculative_key])["engine_speculative"]
    sweep = result["k_sweep"]["shipped" if speculative_key == "summary" else speculative_key]
    return {"engine_speculative": spec["median_abs_error"] <= goals["engine_speculative_median_abs_error_max"],
            "engine_decode": result["summary"]["engine_decode"]["median_abs_error"]
            <= goals["engine_decode_median_abs_error_max"],
            "k_sweep_best_k": abs(sweep["best_k"] - sweep["best_measured_k"]) <= 1}


def overlap_source_check(hardware: str = "h100-sxm", context: int = 512) -> dict:
    """SGLang PR #11398's own two rows (Llama-3.1-8B + EAGLE-1 head, chain of 5, batch 1; GPU not stated, priced
    on ``hardware``): without overlap (τ 2.99, 246.80 tok/s) with the profile's host time, and with overlap
    (τ 3.01, 273.43 tok/s) with none. What both still miss is time overlap did not hide."""
    from sdsl.core.architecture import get_model
    from sdsl.core.deployment import Deployment
    from sdsl.core.speculation import price_speculation

    dep, target, host = Deployment(hardware, context=context), get_model("llama-3.1-8b"), host_step_s("sglang-2025-10")
    out = {}
    for key, tau, h, measured in (("no_overlap", 2.99, host, 246.80), ("overlap", 3.01, 0.0, 273.43)):
        p = price_speculation(target, "eagle", dep, tau_value=tau, gamma=5, batch=1, overhead_s=h)
        out[key] = {"tau": tau, "host_step_s": h, "predicted": float(p["tokens_per_s"]), "measured": measured,
                    "error": float(p["tokens_per_s"]) / measured - 1.0, "t_step_s": float(p["t_step_s"]),
                    "measured_step_s": tau / measured}
    return {"hardware": hardware, "context": context, **out}
