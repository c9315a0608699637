"""The decay form's ratio r, fitted on published per-position acceptance and checked leave-one-source-out.

Data: sdsl/data/published/per_position.csv (marginal rates as vLLM/llama.cpp log them, with sources) and
the chain rows of sdsl/data/published/speculative.csv that give a mean accepted length at two k for one
proposer (vLLM PR #16035: EAGLE-1, k = 2 and 4). The use being checked is the one sdsl makes of the form:
only a mean accepted length τ(K) at the engine's K is known, and the per-position rates and τ at other k
are predicted from it (:func:`sdsl.acceptance.decay.solve_decay`). The i.i.d. α (r = 1) is the
baseline. Results: VALIDATION.md "Acceptance decay form" (recomputed by tests/evidence/test_acceptance_fit.py).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from sdsl._evidence import leave_one_group_out, published_rows
from sdsl.acceptance import decay_conditional, decay_tau, fit_decay_ratio, solve_decay

__all__ = ["load_per_position", "decay_fit_report", "published_k_pairs", "catalog_sweeps", "fit_group_decay",
           "fit_decay_groups", "tree_pair_errors", "fit_draft_temperature", "DECAY_GRID", "TEMPERATURE_GRID"]


def load_per_position(path=None) -> list[dict]:
    """Rows of per_position.csv: source key, family (model | ngram), k, marginal array, mean length."""
    return [{"source": r["source"].split(" (")[0], "family": r["family"], "proposer": r["proposer"], "k": int(r["k"]),
             "marginal": np.array([float(x) for x in r["marginal"].split(";")]),
             "mean_accepted_len": float(r["mean_accepted_len"])} for r in published_rows("per_position", path=path)]


def published_k_pairs(path=None) -> list[dict]:
    """Chain rows of speculative.csv with a mean accepted length at two or more integer k for one
    (source, target, draft): [{source, draft, k: [...], tau: [...]}]."""
    groups: dict[tuple, list] = {}
    for r in published_rows("speculative", ("dev",), path=path):
        if r["gamma"].isdigit() and r["mean_accepted_len"]:
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

    def held_out(s):  # r fitted on the other sources' vectors, scored on this source's
        train = [r["marginal"] for r in model if r["source"] != s]
        r_fit = fit_decay_ratio(train) if train else 1.0
        return [{"held_out": s, "decay": _score(row, r_fit), "iid": _score(row, 1.0)} for row in model if row["source"] == s]

    loso = [x for rows_s in leave_one_group_out(sources, held_out).values() for x in rows_s]
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


# --- the catalog (sdsl/data/acceptance): decay ratio per proposer group, and the dynamic tree's draft scores ---

DECAY_GRID = np.round(np.arange(0.5, 1.3 + 1e-9, 0.005), 3)
TEMPERATURE_GRID = np.round(np.arange(1.0, 8.0 + 1e-9, 0.05), 2)


def catalog_sweeps(rows=None, exclude_sources=()) -> list[dict]:
    """Accepted length at several k for one proposer in one setting, from the catalog: the chain/block
    k-sweeps (:func:`sdsl.acceptance.catalog.k_sweeps`) and every per-position vector (τ(j) = 1 + Σ_{i≤j}
    m_i, plus the printed τ(k) when the vector stops short of k). Greedy or unstated temperature only; rows of
    ``exclude_sources`` (source ids) left out. Each: {method, target, source, row_ids, k: [...], tau: [...]}."""
    from sdsl.acceptance.catalog import catalog_rows, k_sweeps

    rows = catalog_rows() if rows is None else rows
    keep = [r for r in rows if r.temperature in (None, 0.0) and r.source_id not in set(exclude_sources)]
    out = [{"method": g[0].method, "target": g[0].target, "source": g[0].source_id, "row_ids": [r.row_id for r in g],
            "k": [r.k for r in g], "tau": [r.accepted_length for r in g]} for g in k_sweeps(keep)]
    for r in keep:
        if r.marginal and r.k and len(r.marginal) >= 2:
            ks = list(range(1, len(r.marginal) + 1))
            taus = list(1.0 + np.cumsum(r.marginal))
            if r.tau is not None and r.k > len(r.marginal):
                ks, taus = ks + [r.k], taus + [r.tau]
            out.append({"method": r.method, "target": r.target, "source": r.source_id, "row_ids": [r.row_id], "k": ks,
                        "tau": taus})
    return out


@lru_cache(maxsize=4096)
def _log_errors(ks: tuple, taus: tuple, grid: tuple) -> np.ndarray:
    g = np.asarray(grid)
    errs = []
    for ki, ti in zip(ks, taus):
        a, r = solve_decay(np.full(g.shape, ti), ki, g)
        for kj, tj in zip(ks, taus):
            if kj != ki:
                errs.append(np.log(decay_tau(a, r, kj) / tj))
    out = np.array(errs).reshape(-1, g.size)
    out.flags.writeable = False
    return out


def _sweep_log_errors(sweep: dict, grid) -> np.ndarray:
    """(pairs, grid): log(predicted / measured) τ(k_j) from τ(k_i) alone, every ordered pair i ≠ j."""
    return _log_errors(tuple(int(k) for k in sweep["k"]), tuple(float(t) for t in sweep["tau"]),
                       tuple(float(x) for x in np.atleast_1d(grid)))


def fit_group_decay(sweeps: list[dict], grid=DECAY_GRID) -> float | None:
    """r minimising Σ over sources of the mean squared log error of τ(k_j) predicted from τ(k_i), every
    ordered pair of every sweep (each source weighs the same however many sweeps it has); None without data."""
    by_source: dict[str, list] = {}
    for s in sweeps:
        by_source.setdefault(s["source"], []).append(_sweep_log_errors(s, grid))
    if not by_source:
        return None
    loss = sum(np.mean(np.concatenate(v, axis=0) ** 2, axis=0) for v in by_source.values())
    return float(grid[int(np.argmin(loss))])


def fit_decay_groups(exclude_sources=(), rows=None, fit_other: bool = False) -> dict:
    """{group: r} of :data:`sdsl.acceptance.decay.GROUP_DECAY` from the catalog's sweeps without
    ``exclude_sources``: EAGLE-1's and the chained MTP module's r fitted (1.0 when none of a group's sweeps is left),
    every other proposer the i.i.d. model r = 1 — or, with ``fit_other``, fitted too (the alternative VALIDATION.md
    reports and rejects)."""
    from sdsl.acceptance.decay import DECAY_GROUPS, decay_group

    sweeps = catalog_sweeps(rows, exclude_sources)
    out = {}
    for group in (*DECAY_GROUPS, "other"):
        fit = (fit_group_decay([s for s in sweeps if decay_group(s["method"], s.get("target")) == group])
               if group != "other" or fit_other else None)
        out[group] = 1.0 if fit is None else fit
    return out


def _pair_chains(pairs, rows) -> list[dict]:
    """Each chain/tree pair with its setting's chain acceptance: (a, r) of the decay form fitted to the
    setting's chains at every k (least squares in τ over :data:`DECAY_GRID`) — the chain the tree is built on,
    measured, so that only the tree model is tested."""
    from sdsl.acceptance.catalog import k_sweeps

    sweeps = {}
    for g in k_sweeps(rows):
        sweeps.setdefault((g[0].source, g[0].target, g[0].draft, g[0].dataset, g[0].task), g)
    out = []
    for chain, tree in pairs:
        g = sweeps.get((chain.source, chain.target, chain.draft, chain.dataset, chain.task))
        if g is None or len(g) < 2:
            continue
        ks, taus = np.array([r.k for r in g]), np.array([r.accepted_length for r in g])
        a, r = solve_decay(np.full(DECAY_GRID.size, taus[0]), int(ks[0]), DECAY_GRID)
        sse = sum((decay_tau(a, r, int(k)) - t) ** 2 for k, t in zip(ks[1:], taus[1:]))
        i = int(np.argmin(sse))
        out.append({"chain": chain, "tree": tree, "a": float(a[i]), "r": float(r[i])})
    return out


def tree_pair_errors(pair_fits: list[dict], temperature, rank_ratio=None) -> np.ndarray:
    """(pairs, temperatures): predicted / measured − 1 of each tree's accepted length from its setting's chain
    acceptance, the tree's nodes chosen by the draft's scores at each temperature."""
    from sdsl.acceptance.trees import sglang_tree_tau_stack

    temps = np.atleast_1d(np.asarray(temperature, dtype=float))
    out = np.empty((len(pair_fits), temps.size))
    for i, p in enumerate(pair_fits):
        t = p["tree"]
        cond = np.broadcast_to(decay_conditional(p["a"], p["r"], t.k), (temps.size, t.k))
        tau = sglang_tree_tau_stack(cond, t.k, t.topk, t.verify_tokens, rank_ratio, selection="draft",
                                    draft_temperature=temps)
        out[i] = tau / t.tau - 1.0
    return out


_PAIR_ERRORS: dict = {}


def _cached_pair_errors(key, grid, rank_ratio, fits) -> np.ndarray:
    k = (key, grid, rank_ratio)
    if k not in _PAIR_ERRORS:
        _PAIR_ERRORS[k] = tree_pair_errors(fits, np.asarray(grid), rank_ratio)
    return _PAIR_ERRORS[k]


def fit_draft_temperature(exclude_sources=(), rows=None, rank_ratio=None, grid=TEMPERATURE_GRID) -> dict | None:
    """The draft temperature T of :func:`sdsl.acceptance.trees.draft_scores` minimising the median |error| of the
    catalog's chain/tree pairs (:func:`sdsl.acceptance.catalog.chain_tree_pairs`) without
    ``exclude_sources``; None when no pair is left. Returns {temperature, n_pairs, median_abs_error, errors}."""
    from sdsl.acceptance.catalog import catalog_rows, chain_tree_pairs

    rows = [r for r in (catalog_rows() if rows is None else rows) if r.source_id not in set(exclude_sources)]
    fits = _pair_chains(chain_tree_pairs(rows), rows)
    if not fits:
        return None
    err = _cached_pair_errors(tuple((p["chain"].row_id, p["tree"].row_id, p["a"], p["r"]) for p in fits),
                              tuple(np.atleast_1d(grid).tolist()), rank_ratio, fits)
    j = int(np.argmin(np.median(np.abs(err), axis=0)))
    return {"temperature": float(grid[j]), "n_pairs": len(fits), "median_abs_error": float(np.median(np.abs(err[:, j]))),
            "errors": err[:, j], "pairs": fits}
