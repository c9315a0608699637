"""The decay form's ratio r, fitted on published per-position acceptance and checked leave-one-source-out.

Data: sdsl/data/published/per_position.csv (marginal rates as vLLM/llama.cpp log them, with sources) and
the chain rows of sdsl/data/published/speculative.csv that give a mean accepted length at two k for one
proposer (vLLM PR #16035: EAGLE-1, k = 2 and 4). The use being checked is the one sdsl makes of the form:
only a mean accepted length τ(K) at the engine's K is known, and the per-position rates and τ at other k
are predicted from it (:func:`sdsl.core.acceptance.decay.solve_decay`). The i.i.d. α (r = 1) is the
baseline. Results: VALIDATION.md "Acceptance decay form" (recomputed by tests/unit/test_acceptance_fit.py).
"""

from __future__ import annotations

import csv

import numpy as np

from sdsl._paths import data_path
from sdsl.core.acceptance import decay_conditional, decay_tau, fit_decay_ratio, solve_decay

__all__ = ["load_per_position", "decay_fit_report", "published_k_pairs"]


def load_per_position(path=None) -> list[dict]:
    """Rows of per_position.csv: source key, family (model | ngram), k, marginal array, mean length."""
    path = path or data_path("published", "per_position.csv")
    rows = []
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            m = np.array([float(x) for x in r["marginal"].split(";")])
            rows.append({"source": r["source"].split(" (")[0], "family": r["family"], "proposer": r["proposer"],
                         "k": int(r["k"]), "marginal": m, "mean_accepted_len": float(r["mean_accepted_len"])})
    return rows


def published_k_pairs(path=None) -> list[dict]:
    """Chain rows of speculative.csv with a mean accepted length at two or more integer k for one
    (source, target, draft): [{source, draft, k: [...], tau: [...]}]."""
    path = path or data_path("published", "speculative.csv")
    groups: dict[tuple, list] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r["gamma"].isdigit() and r["mean_accepted_len"] and (r.get("row_set") or "dev") == "dev":
                groups.setdefault((r["source"].split(" (")[0], r["target"], r["draft"]), []).append(
                    (int(r["gamma"]), float(r["mean_accepted_len"])))
    return [{"source": s, "target": t, "draft": d, "k": [k for k, _ in sorted(v)], "tau": [x for _, x in sorted(v)]}
            for (s, t, d), v in groups.items() if len(v) >= 2]


def _predict_from_mean(tau_k: float, k: int, r: float, ks) -> tuple[np.ndarray, np.ndarray]:
    """Marginal rates m_1..m_k and τ at each of ``ks`` predicted from τ(k) alone with ratio r."""
    a, r2 = solve_decay(tau_k, k, r)
    kmax = max(max(ks), k)
    marginal = np.cumprod(decay_conditional(a, r2, kmax))
    return marginal[:k], np.array([decay_tau(a, r2, j) for j in ks])


def _score(row: dict, r: float) -> dict:
    """Errors of predicting a held-out vector's rates and τ(j), j < K, from its τ(K) with ratio r."""
    m, k = row["marginal"], row["k"]
    tau_meas = 1.0 + np.cumsum(m)
    pred_m, pred_tau = _predict_from_mean(tau_meas[-1], k, r, range(1, k))
    rel = pred_tau / tau_meas[:-1] - 1.0
    return {"source": row["source"], "proposer": row["proposer"], "k": k, "r": r,
            "marginal_mae": float(np.abs(pred_m - m).mean()), "marginal_max_abs": float(np.abs(pred_m - m).max()),
            "tau_rel_err": rel.tolist(), "tau_max_abs_rel": float(np.abs(rel).max())}


def decay_fit_report(path=None, spec_path=None) -> dict:
    """r fitted on all model-based vectors, leave-one-source-out scores (decay vs i.i.d.) for every
    model-based source, the n-gram vectors scored out of family, and the published k pairs."""
    rows = load_per_position(path)
    model = [r for r in rows if r["family"] == "model"]
    sources = sorted({r["source"] for r in model})
    r_all = fit_decay_ratio([r["marginal"] for r in model])
    loso = []
    for s in sources:
        train = [r["marginal"] for r in model if r["source"] != s]
        r_fit = fit_decay_ratio(train) if train else 1.0
        for row in (x for x in model if x["source"] == s):
            loso.append({"held_out": s, "decay": _score(row, r_fit), "iid": _score(row, 1.0)})
    ngram = [{"decay": _score(row, r_all), "iid": _score(row, 1.0)} for row in rows if row["family"] == "ngram"]
    pairs = []
    for p in published_k_pairs(spec_path):
        (k_lo, k_hi), (t_lo, t_hi) = p["k"][:2], p["tau"][:2]
        for name, r in (("decay", r_all), ("iid", 1.0)):
            up = _predict_from_mean(t_lo, k_lo, r, [k_hi])[1][0]
            down = _predict_from_mean(t_hi, k_hi, r, [k_lo])[1][0]
            pairs.append({"source": p["source"], "draft": p["draft"], "model": name, "r": r, "k": [k_lo, k_hi],
                          "measured": [t_lo, t_hi], f"tau_at_{k_hi}_from_{k_lo}": float(up),
                          f"tau_at_{k_lo}_from_{k_hi}": float(down),
                          "rel_err_up": float(up / t_hi - 1), "rel_err_down": float(down / t_lo - 1)})
    return {"r_model_all": r_all, "r_ngram": fit_decay_ratio([r["marginal"] for r in rows if r["family"] == "ngram"])
            if any(r["family"] == "ngram" for r in rows) else None, "loso": loso, "ngram": ngram, "k_pairs": pairs}
