"""``sdsl validate acceptance``: the published acceptance catalog held against itself.

1. **Accepted length, leave one source out.** Every catalogued row with an accepted length, a k or tree
   shape and greedy or unstated temperature is predicted by the rules that give sdsl's default acceptance
   (:func:`sdsl.acceptance.rules.predict_row`) from the *other* sources' rows only: the
   decay ratios (:func:`sdsl.fit.acceptance_fit.fit_decay_groups`) and the draft temperature of the tree
   model (:func:`sdsl.fit.acceptance_fit.fit_draft_temperature`) are refitted without the held-out source
   too (without SpecForge no chain/tree pair is left, and trees are chosen by acceptance). Reported pooled,
   per source and source-weighted, by tier.
2. **Across k.** Each k-sweep and per-position vector predicted upwards from its smallest k: the decay ratio
   of the proposer's group fitted without the sweep's source, against the earlier shared r = 0.915 and the
   i.i.d. model.
3. **Trees.** SpecForge's chain/tree pairs at equal verified-token budget: the tree predicted from its
   setting's measured chains, nodes chosen by acceptance (the earlier model) or by the draft's scores
   (temperature fitted on all pairs, and leave-one-target-out), with the rank ratio profiled.
4. **Ranking in Spec-Bench.** For each Spec-Bench target and GPU, the methods sdsl has a proposer for, priced
   by :func:`sdsl.speculation.step.price_step` on that GPU at batch 1 (the cost model is ``engine``:
   ``"roofline"``, the shipped calibrated operator roofline alone — the ``ideal`` engine profile — with
   ``pass_overhead_s`` host time per forward pass, 0 by default; or an engine execution profile, any
   :func:`sdsl.engine.profiles.resolve_engine` spec or :class:`~sdsl.engine.profiles.EngineProfile`, e.g. ``"hf-eager"``,
   the Hugging Face eager decoding Spec-Bench runs), with the measured accepted length (an oracle acceptance:
   this checks the cost model) and with the leave-one-source-out prediction; Kendall τ of predicted against
   measured speedup order.

Results: VALIDATION.md "Acceptance catalog: defaults, k and trees"; recomputed by
tests/evidence/test_acceptance_validation.py.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from sdsl._evidence import leave_one_group_out, summarize_errors
from sdsl.errors import InvalidInputError

__all__ = ["validate_acceptance", "loso_predictions", "k_sweep_check", "tree_pair_check", "specbench_ranking",
           "within_source_check",
           "kendall_tau", "cost_profile", "COST_ENGINES", "GOALS"]

COST_ENGINES = ("roofline",)  # cost models that are not engine profiles (the roofline alone)
GOALS = {"median_abs_error": 0.10, "worst_abs_error": 0.25, "min_rows": 40, "min_sources": 5, "kendall_tau": 0.8}
PREVIOUS_DECAY = 0.915  # the shared r before per-group ratios (sdsl/data/published/per_position.csv fit)


_STAT_KEYS = {"median_abs_error": "median_abs", "worst_abs_error": "worst_abs", "median_signed_error": "median_signed",
              "mean_abs_error": "pooled_abs"}


def _stats(errors) -> dict:
    """:func:`sdsl._evidence.summarize_errors` under this report's key names."""
    return summarize_errors(errors, _STAT_KEYS)


# --- 1. accepted length, leave one source out ----------------------------------------------------------------

@lru_cache(maxsize=64)
def _held_out_models(source: str):
    """(decay ratios, tree model) fitted without ``source``."""
    from sdsl.acceptance.rules import TreeModel
    from sdsl.fit.acceptance_fit import fit_decay_groups

    ratios = fit_decay_groups(exclude_sources=(source,))
    fit = _temperature_without(source)
    tree = TreeModel(draft_temperature=fit, draft_scores=fit is not None)
    return ratios, tree


def _temperature_without(source: str):
    from sdsl.acceptance.catalog import catalog_rows, chain_tree_pairs

    if not any(c.source_id == source or t.source_id == source for c, t in chain_tree_pairs(catalog_rows())):
        source = ""  # the source has no pair: the fit on every pair is already without it
    return _temperature_fit(source)


@lru_cache(maxsize=64)
def _temperature_fit(source: str):
    from sdsl.fit.acceptance_fit import fit_draft_temperature

    fit = fit_draft_temperature(exclude_sources=(source,) if source else ())
    return None if fit is None else fit["temperature"]


def loso_predictions(rows=None) -> tuple[list, list]:
    """(predicted, not predicted): one dict per catalogued row with an accepted length (module docstring, 1)."""
    from sdsl.acceptance.rules import predict_row
    from sdsl.acceptance.catalog import catalog_rows

    rows = [r for r in (catalog_rows() if rows is None else rows) if r.accepted_length is not None]
    done, skipped = [], []
    for r in rows:
        ratios, tree = _held_out_models(r.source_id)
        p = predict_row(r, ratios=ratios, tree=tree)
        (done if "predicted" in p else skipped).append(p)
    return done, skipped


def _summary(done: list) -> dict:
    by_source: dict[str, list] = {}
    for p in done:
        by_source.setdefault(p["source"], []).append(p["error"])
    per_source = {s: _stats(v) for s, v in sorted(by_source.items())}
    medians = [v["median_abs_error"] for v in per_source.values()]
    pooled = _stats(p["error"] for p in done)
    tiers = {t: _stats(p["error"] for p in done if p["tier"] == t) for t in sorted({p["tier"] for p in done})}
    structures = {s: _stats(p["error"] for p in done if p["structure"] == s) for s in sorted({p["structure"] for p in done})}
    without_largest = max(by_source, key=lambda s: len(by_source[s])) if by_source else None
    rest = [p["error"] for p in done if p["source"] != without_largest]
    goals = {"median_abs_error": pooled.get("median_abs_error", np.inf) <= GOALS["median_abs_error"],
             "worst_abs_error": pooled.get("worst_abs_error", np.inf) <= GOALS["worst_abs_error"],
             "rows": pooled["n"] >= GOALS["min_rows"], "sources": len(per_source) >= GOALS["min_sources"]}
    return {"pooled": pooled, "n_sources": len(per_source), "per_source": per_source,
            "source_weighted": {"median_of_source_medians": float(np.median(medians)) if medians else None,
                                "worst_source_median": float(max(medians)) if medians else None},
            "largest_source": without_largest, "without_largest_source": _stats(rest), "by_tier": tiers,
            "by_structure": structures, "goals": goals, "goals_met": all(goals.values())}


# --- 2. across k ------------------------------------------------------------------------------------------------

def k_sweep_check() -> dict:
    """Upward predictions of every catalog sweep from its smallest k (module docstring, 2)."""
    from sdsl.acceptance.decay import decay_tau, group_decay, solve_decay
    from sdsl.fit.acceptance_fit import catalog_sweeps

    out = {"leave_one_source_out": [], "both_groups_fitted": [], "previous_r": [], "iid": []}
    rows = []
    for s in catalog_sweeps():
        order = np.argsort(s["k"])
        ks, taus = np.array(s["k"])[order], np.array(s["tau"])[order]
        ratios, _ = _held_out_models(s["source"])
        both = _both_groups_without(s["source"])
        for name, r in (("leave_one_source_out", group_decay(s["method"], ratios, s["target"])),
                        ("both_groups_fitted", group_decay(s["method"], both, s["target"])),
                        ("previous_r", PREVIOUS_DECAY), ("iid", 1.0)):
            a, r2 = solve_decay(taus[0], int(ks[0]), r)
            for k, t in zip(ks[1:], taus[1:]):
                e = float(decay_tau(a, r2, int(k)) / t - 1.0)
                out[name].append(e)
                rows.append({"model": name, "source": s["source"], "method": s["method"], "k_from": int(ks[0]),
                             "k": int(k), "measured": float(t), "error": e, "r": float(r)})
    summary = {name: _stats(v) for name, v in out.items()}
    specforge = {}
    for name in out:
        for k in (5, 7):
            sel = [x["error"] for x in rows if x["model"] == name and x["source"] == "sgl-project/SpecForge"
                   and x["k_from"] == 3 and x["k"] == k]
            specforge[f"{name}_k3_to_k{k}"] = _stats(sel)
    per_source = {}
    for name in out:
        for src in sorted({x["source"] for x in rows}):
            per_source.setdefault(src, {})[name] = _stats(x["error"] for x in rows if x["model"] == name and x["source"] == src)
    medians = {name: float(np.median([per_source[s][name]["median_abs_error"] for s in per_source])) for name in out}
    from sdsl.fit.acceptance_fit import DECAY_GRID, fit_group_decay

    own = [fit_group_decay([s]) for s in catalog_sweeps() if s["source"] == "sgl-project/SpecForge" and len(s["k"]) >= 3]
    return {"summary": summary, "median_of_source_medians": medians, "specforge": specforge, "per_source": per_source,
            "n_sweeps": len(catalog_sweeps()), "rows": rows,
            "specforge_own_r": {"n": len(own), "min": float(min(own)), "median": float(np.median(own)),
                                "max": float(max(own)), "grid": [float(DECAY_GRID[0]), float(DECAY_GRID[-1])]}}


def within_source_check(source: str = "sgl-project/SpecForge") -> dict:
    """Inside one multi-target source (not held out by source): each chain row predicted from the same source's
    other rows at the same k, by which rows are used — the evidence for putting workload before target in the tiers."""
    from sdsl.acceptance.rules import row_fit, target_family

    rows = [r for r in _evidence() if r.source_id == source and r.structure == "chain"]
    fits = {r.row_id: row_fit(r) for r in rows}
    rules = {"other targets, same dataset": lambda x, r: x.target != r.target and x.dataset == r.dataset,
             "other targets of the family, same workload": lambda x, r: x.target != r.target and x.workload == r.workload
             and target_family(x.target) == target_family(r.target),
             "other targets, same workload": lambda x, r: x.target != r.target and x.workload == r.workload,
             "same target, other workloads": lambda x, r: x.target == r.target and x.workload != r.workload,
             "other targets, any workload": lambda x, r: x.target != r.target}
    out = {}
    for name, keep in rules.items():
        errors = []
        for r in rows:
            a = [fits[x.row_id].a for x in rows if x.k == r.k and keep(x, r)]
            if a:
                errors.append(_tau(np.median(a), fits[r.row_id].r, r.k) / r.accepted_length - 1)
        out[name] = _stats(errors)
    return {"source": source, "n_rows": len(rows), "by_rule": out}


def _tau(a, r, k):
    from sdsl.acceptance.decay import decay_tau

    return float(decay_tau(a, r, int(k)))


def _evidence():
    from sdsl.acceptance.rules import row_is_evidence
    from sdsl.acceptance.catalog import catalog_rows

    return [r for r in catalog_rows() if row_is_evidence(r) is None]


@lru_cache(maxsize=64)
def _both_groups_without(source: str) -> dict:
    from sdsl.fit.acceptance_fit import fit_decay_groups

    return fit_decay_groups(exclude_sources=(source,), fit_other=True)


# --- 3. trees ----------------------------------------------------------------------------------------------------

def tree_pair_check() -> dict:
    """SpecForge's chain/tree pairs under the earlier and the draft-score tree model (module docstring, 3)."""
    from sdsl.acceptance.decay import decay_conditional
    from sdsl.acceptance.trees import DEFAULT_RANK_RATIO, sglang_tree_tau_stack
    from sdsl.fit.acceptance_fit import TEMPERATURE_GRID, fit_draft_temperature, tree_pair_errors

    fit = fit_draft_temperature()
    pairs = fit["pairs"]
    measured_below = sum(p["tree"].tau < p["chain"].tau for p in pairs)
    gap = [p["tree"].tau / p["chain"].tau - 1 for p in pairs]
    previous = []
    for p in pairs:
        t = p["tree"]
        cond = decay_conditional(p["a"], p["r"], t.k)[None, :]
        tau = sglang_tree_tau_stack(cond, t.k, t.topk, t.verify_tokens, selection="acceptance")[0]
        previous.append(tau / t.tau - 1)
    grid_err = tree_pair_errors(pairs, TEMPERATURE_GRID)
    targets = sorted({p["chain"].target for p in pairs})

    def held_out(tg):  # the temperature fitted on the other targets' pairs, scored on this target's
        train = np.array([p["chain"].target != tg for p in pairs])
        return list(grid_err[~train, int(np.argmin(np.median(np.abs(grid_err[train]), axis=0)))])

    held = [e for errs in leave_one_group_out(targets, held_out).values() for e in errs]
    profile = {}
    for s in (0.1, 0.25, 0.5, 0.55, 0.75, 1.0):
        e = tree_pair_errors(pairs, TEMPERATURE_GRID, rank_ratio=s)
        m = np.median(np.abs(e), axis=0)
        profile[f"{s:g}"] = {"temperature": float(TEMPERATURE_GRID[int(np.argmin(m))]), "median_abs_error": float(m.min())}
    pred_tree = [(1 + e) * p["tree"].tau for e, p in zip(fit["errors"], pairs)]
    return {"n_pairs": len(pairs), "measured_tree_below_chain": int(measured_below),
            "measured_gap": _stats(gap), "predicted_tree_below_chain": int(sum(t < p["chain"].tau for t, p in
                                                                                zip(pred_tree, pairs))),
            "acceptance_selection": _stats(previous), "draft_selection": {**_stats(fit["errors"]),
                                                                          "temperature": fit["temperature"],
                                                                          "rank_ratio": DEFAULT_RANK_RATIO},
            "leave_one_target_out": {**_stats(held), "n_targets": len(targets)}, "rank_ratio_profile": profile}


# --- 4. Spec-Bench ranking ----------------------------------------------------------------------------------------

def kendall_tau(x, y) -> float:
    """Kendall's τ-b of two orderings (ties count neither way; NaN below two items)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size < 2:
        return float("nan")
    i, j = np.triu_indices(x.size, 1)
    dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
    denom = np.sqrt(np.count_nonzero(dx) * np.count_nonzero(dy))
    return float((dx * dy).sum() / denom) if denom else float("nan")


def _vicuna(row_target: str):
    """Vicuna v1.3's shape: LLaMA-1's (Touvron et al. 2023, arXiv 2302.13971, Table 2: 7B d 4096, 32 heads,
    32 layers; 13B 5120, 40, 40; 33B 6656, 52, 60), SwiGLU width 2/3·4d rounded up to 256 (11008, 13824,
    17920 in the released configs), vocabulary 32000, context 2048. 7B and 13B equal Llama-2's catalog shapes."""
    from sdsl.catalog.models import ModelSpec, get_model

    size = row_target.split("-")[1].lower()
    if size in ("7b", "13b"):
        base = get_model(f"llama-2-{size}")
        return replace(base, name=f"vicuna-{size}-v1.3", max_context=2048, hf_id=f"lmsys/vicuna-{size}-v1.3",
                       published_params=None, source="LLaMA-1 shape (Touvron et al. 2023, Table 2) = llama-2-" + size)
    if size == "33b":
        return ModelSpec(name="vicuna-33b-v1.3", family="llama", n_layer=60, d_model=6656, n_head=52, n_kv_head=52,
                         d_ff=17920, vocab_size=32000, max_context=2048, hf_id="lmsys/vicuna-33b-v1.3",
                         source="LLaMA-1 33B shape (Touvron et al. 2023, arXiv 2302.13971, Table 2)")
    raise InvalidInputError(f"No Vicuna shape for {row_target!r}.")


_HARDWARE = {"RTX 3090": "rtx-3090", "A100-80GB": "a100-80gb"}
# Spec-Bench method → sdsl proposer (kind and settings); the rest have no proposer in sdsl (reason given).
_SPECBENCH_PROPOSERS = {"eagle": "eagle", "eagle2": "eagle", "eagle3": "eagle3", "medusa": "medusa", "ngram": "ngram"}
_NO_PROPOSER = {"hydra": "no Hydra proposer in sdsl", "lookahead": "no Lookahead proposer in sdsl",
                "rest": "no REST proposer in sdsl", "token_recycling": "no Token Recycling proposer in sdsl",
                "samd": "no SAM-Decoding proposer in sdsl",
                "draft_model": "draft length chosen at run time by transformers' assistant schedule (not stated)"}


def _proposer(method: str):
    from sdsl.speculation.proposers import Eagle3Head, make_proposer

    if method == "eagle3":
        return Eagle3Head(vocab=32000)  # Vicuna's vocabulary is 32000: the head's draft vocabulary is the full one
    return make_proposer(_SPECBENCH_PROPOSERS[method])


def cost_profile(engine):
    """The engine profile a cost model name prices with: ``"roofline"`` the roofline alone (``ideal``), anything else
    as :func:`sdsl.engine.profiles.resolve_engine` takes it (an unknown name is a one-line :class:`UnknownNameError`)."""
    from sdsl.engine.profiles import resolve_engine

    return resolve_engine("ideal" if isinstance(engine, str) and engine.strip().lower() in COST_ENGINES else engine)


def _price(row, tau: float, engine, pass_overhead_s: float) -> float:
    from sdsl.roofline.deployment import Deployment
    from sdsl.catalog.hardware import get_hardware
    from sdsl.roofline.latency import default_params
    from sdsl.speculation.step import price_step

    hw = get_hardware(next(v for k, v in _HARDWARE.items() if row.hardware.startswith(k)))
    dep = Deployment(hw, tp=1, dtype="fp16", params=default_params(hw), engine=cost_profile(engine))
    shape = {"gamma": row.k} if row.structure == "chain" else {"tree": f"{row.k},{row.topk},{row.verify_tokens}"}
    step = price_step(_vicuna(row.target), _proposer(row.method), dep, tau=tau, batch=1, pass_overhead_s=pass_overhead_s,
                      **shape)
    return float(step.speedup)


def specbench_ranking(predictions: dict | None = None, *, engine="roofline", pass_overhead_s: float = 0.0) -> dict:
    """Per Spec-Bench (target, GPU): measured speedups, speedups priced with the measured and with the
    leave-one-source-out accepted length, and Kendall τ of each against the measured order. ``engine``:
    ``"roofline"`` or an engine profile (:func:`cost_profile`)."""
    from sdsl.acceptance.catalog import catalog_rows

    profile = cost_profile(engine)
    if predictions is None:
        predictions = {p["row_id"]: p for p in loso_predictions()[0]}
    rows = [r for r in catalog_rows() if r.source_id == "hemingkx/Spec-Bench" and r.task.startswith("Spec-Bench overall")
            and r.speedup is not None]
    groups: dict[tuple, list] = {}
    for r in rows:
        groups.setdefault((r.target, r.hardware.split(" (")[0]), []).append(r)
    out = []
    for (target, hw), members in sorted(groups.items()):
        priced, left = [], []
        for r in members:
            if r.method not in _SPECBENCH_PROPOSERS:
                left.append({"method": r.method, "reason": _NO_PROPOSER.get(r.method, "no proposer in sdsl")})
                continue
            pred = predictions.get(r.row_id)
            priced.append({"method": r.method, "row_id": r.row_id, "measured_speedup": r.speedup,
                           "measured_tau": r.accepted_length,
                           "speedup_with_measured_tau": _price(r, r.accepted_length, profile, pass_overhead_s),
                           "predicted_tau": None if pred is None else pred["predicted"],
                           "speedup_with_predicted_tau": None if pred is None else _price(r, pred["predicted"], profile,
                                                                                          pass_overhead_s)})
        meas = [p["measured_speedup"] for p in priced]
        oracle = kendall_tau(meas, [p["speedup_with_measured_tau"] for p in priced])
        both = [p for p in priced if p["speedup_with_predicted_tau"] is not None]
        predicted = kendall_tau([p["measured_speedup"] for p in both], [p["speedup_with_predicted_tau"] for p in both])
        out.append({"target": target, "hardware": hw, "methods": priced, "not_priced": left,
                    "kendall_tau_measured_tau": oracle, "kendall_tau_predicted_tau": predicted,
                    "n_predicted": len(both)})
    name = engine if isinstance(engine, str) else profile.name
    return {"engine": name, "engine_profile": profile.summary(), "pass_overhead_s": pass_overhead_s, "batch": 1,
            "dtype": "fp16", "groups": out,
            "goal": GOALS["kendall_tau"],
            "goal_met_measured_tau": all(g["kendall_tau_measured_tau"] >= GOALS["kendall_tau"] for g in out),
            "goal_met_predicted_tau": all(g["kendall_tau_predicted_tau"] >= GOALS["kendall_tau"] for g in out)}


def validate_acceptance(*, engine="roofline", pass_overhead_s: float = 0.0) -> dict:
    """Everything ``sdsl validate acceptance`` prints (module docstring); ``engine`` prices the Spec-Bench ranking
    (``"roofline"`` or an engine profile, :func:`cost_profile`)."""
    cost_profile(engine)  # an unknown engine is one line before any work
    if not (np.isfinite(pass_overhead_s) and pass_overhead_s >= 0):
        raise InvalidInputError("--pass-overhead-us must be a finite non-negative number of microseconds.")
    done, skipped = loso_predictions()
    reasons: dict[str, int] = {}
    for s in skipped:
        reasons[s["reason"]] = reasons.get(s["reason"], 0) + 1
    return {"accepted_length": {**_summary(done), "rows": done, "not_predicted": skipped,
                                "not_predicted_reasons": dict(sorted(reasons.items(), key=lambda x: -x[1])),
                                "goal": {k: GOALS[k] for k in ("median_abs_error", "worst_abs_error", "min_rows",
                                                                 "min_sources")}},
            "within_source": within_source_check(), "k_sweeps": k_sweep_check(), "trees": tree_pair_check(),
            "ranking": specbench_ranking({p["row_id"]: p for p in done}, engine=engine, pass_overhead_s=pass_overhead_s)}
