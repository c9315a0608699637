"""``sdsl validate published``: price every published row sdsl can price with the execution profile of its engine and
date, and hold it against the measurement.

Rows (sdsl/data/published/{decode,speculative}.csv, development and engine rows alike) are priced by
:func:`sdsl.speculation.step.price_step` with the row's proposer shape (chain or tree), its measured accepted length
as τ (an oracle input: these rows test the step time, not acceptance), the hardware's shipped latency calibration
(fitted to Vidur's operator timings, never to these rows) and the row's engine profile
(:func:`sdsl.validation.published_rows.row_engine`). Errors are signed, of speed: predicted / measured − 1 of the
row's tokens/s (or speedup, for Spec-Bench and TensorRT-LLM PR #5146, whose baselines are their own), and
measured / predicted − 1 of a TPOT, so that a positive error always means sdsl predicts faster than measured.

Profile terms fitted on these rows (``"fit": "published"`` in sdsl/data/engines/profiles.json) are reported
leave-one-source-out (:func:`sdsl.validation.engine_fit.loso`): each row priced with the terms fitted without its
own source. That is the headline; the shipped (in-sample) values and the roofline alone (``ideal``) are beside it.
Per class — engine speculative (vLLM, SGLang, TensorRT-LLM with a stated accepted length), Hugging Face eager
(Spec-Bench), engine plain decoding (gpt-fast compiled, vLLM, SGLang, TensorRT-LLM), the Hugging Face eager
baseline and the naive eager loop — the summary gives median, worst and signed median error. Each k-sweep (rows of
one source, proposer and setup at several k) says whether the predicted TPOT ranks the measured k in the measured
order and whether the measured best k is sdsl's best among them.
"""

from __future__ import annotations

import numpy as np

from sdsl.validation.published_rows import ENGINE_SETS, source_key, speed_error, summarize  # noqa: F401

__all__ = ["validate_published", "summarize", "source_key", "k_sweeps", "k_sweep", "CLASSES", "GOALS", "row_class",
           "speed_error"]

#: (class, what it holds) in report order.
CLASSES = (("engine_speculative", "vLLM, SGLang and TensorRT-LLM speculative rows with a stated accepted length"),
           ("spec_bench", "Spec-Bench speedups over its Hugging Face eager baseline (hf-eager)"),
           ("engine_decode", "plain decoding in engines: gpt-fast compiled, vLLM, SGLang, TensorRT-LLM"),
           ("hf_eager_decode", "the EAGLE repository's Hugging Face eager baseline"),
           ("eager", "the 'GPT, Fast' blog's naive eager PyTorch loop"))

#: The goals the result is held to (docs: VALIDATION.md, "Published engine measurements").
GOALS = {"engine_speculative_median_abs": 0.10, "engine_speculative_worst_abs": 0.20,
         "engine_speculative_median_signed_abs": 0.05, "spec_bench_median_abs": 0.10, "engine_decode_median_abs": 0.03,
         "eager_abs": 0.25}


def row_class(spec) -> str:
    """The summary class of a row (:data:`CLASSES`)."""
    engine = spec.engine_column
    if spec.proposer:
        return "spec_bench" if engine == "hf-eager" else "engine_speculative"
    return {"hf-eager": "hf_eager_decode", "eager-pytorch": "eager"}.get(engine, "engine_decode")


def _ideal_value(point) -> float:
    """The row's metric on the roofline alone (the ``ideal`` profile)."""
    from sdsl.speculation.step import price_step

    s = point.spec
    step = price_step(s.target, s.proposer or "ngram", point.step.deployment.replace(engine="ideal"),
                      tau=s.accepted_length if s.proposer else 1.0,
                      gamma=None if s.tree else (s.gamma if s.proposer else 0), tree=s.tree, batch=s.batch)
    from sdsl.validation.engine_fit import Point, predict_point

    return predict_point(Point(s, step.deployment.engine, "ideal", step, point.source))


def _records(points, loso_rows, shipped):
    from sdsl.validation.engine_fit import predict_point

    loso = {i: v for fold in loso_rows.values() for i, v in fold["rows"]}
    out = []
    for i, p in enumerate(points):
        s = p.spec
        value, held = predict_point(p, shipped[p.base]), loso[i]
        ideal = _ideal_value(p)
        tree = None if s.tree is None else [s.tree.steps, s.tree.topk, s.tree.tokens]
        out.append({"file": s.file, "row": s.index, "source": s.source, "source_key": p.source, "class": row_class(s),
                    "engine": s.engine_column, "date": s.date, "profile": p.profile.name, "target": s.target.name,
                    "hardware": s.hardware, "tp": s.tp, "batch": s.batch, "context": s.context,
                    "proposer": s.proposer, "gamma": s.gamma, "tree": tree, "accepted_length": s.accepted_length,
                    "row_set": s.row_set, "metric": s.metric, "measured": s.measured, "predicted": held, "predicted_shipped": value,
                    "predicted_ideal": ideal, "error": speed_error(held, s.measured, s.metric),
                    "error_shipped": speed_error(value, s.measured, s.metric),
                    "error_ideal": speed_error(ideal, s.measured, s.metric), "fitted_terms": bool(_fitted(p)),
                    "assumptions": list(s.assumptions)})
    return out


def _fitted(point) -> tuple:
    from sdsl.validation.engine_fit import free_terms

    from sdsl.engine.profiles import engine_profiles

    prof = engine_profiles()[point.base]
    return free_terms(prof) + tuple(t for t in ("host_step_s", "spec_step_s", "draft_pass_s")
                                    if "inherit" in (prof.sources.get(t) or {}))


def _better(metric: str) -> int:
    return -1 if metric == "TPOT" else 1  # TPOT: lower is better; tokens/s and speedups: higher


def k_sweeps(rows: list[dict]) -> list[dict]:
    """Rows of one source, target, proposer, hardware and batch at several k (or tree depths): per sweep the measured
    and predicted values by k, whether the predicted order of the measured k is the measured order, and whether the
    measured best k is sdsl's best among them (leave-one-source-out, shipped and ideal)."""
    groups: dict = {}
    for r in rows:
        if not r["proposer"]:
            continue
        k = r["gamma"] if r["gamma"] is not None else r["tree"][0]
        shape = "chain" if r["gamma"] is not None else f"tree topk {r['tree'][1]}, {r['tree'][2]} tokens"
        key = (r["source_key"], r["target"], r["proposer"], r["hardware"], r["batch"], r["metric"], shape,
               r["profile"])
        groups.setdefault(key, {})[k] = r
    out = []
    for (src, target, proposer, hw, batch, metric, shape, profile), by_k in groups.items():
        if len(by_k) < 2:
            continue
        ks = sorted(by_k)
        sign = _better(metric)
        meas = np.array([by_k[k]["measured"] for k in ks])
        entry = {"source": src, "target": target, "proposer": proposer, "hardware": hw, "batch": batch, "metric": metric,
                 "shape": shape, "profile": profile, "k": ks, "measured": meas.tolist(),
                 "measured_best_k": int(ks[int(np.argmax(sign * meas))])}
        order = list(np.argsort(-sign * meas, kind="stable"))
        for label, field in (("loso", "predicted"), ("shipped", "predicted_shipped"), ("ideal", "predicted_ideal")):
            pred = np.array([by_k[k][field] for k in ks])
            entry[label] = {"predicted": pred.tolist(), "best_k": int(ks[int(np.argmax(sign * pred))]),
                            "same_order": list(np.argsort(-sign * pred, kind="stable")) == order,
                            "best_k_matches": int(ks[int(np.argmax(sign * pred))]) == entry["measured_best_k"]}
        out.append(entry)
    return out


def _decay_fit(lengths: dict) -> tuple[float, float]:
    """(a, r) of per-position acceptance p_i = a·r^(i−1) reproducing measured accepted lengths {k: τ}."""
    from scipy.optimize import least_squares

    ks = np.array(sorted(lengths), dtype=int)
    taus = np.array([lengths[k] for k in ks])

    def resid(x):
        p = np.cumprod(x[0] * x[1] ** np.arange(ks.max()))
        return 1.0 + np.cumsum(p)[ks - 1] - taus

    fit = least_squares(resid, x0=[0.7, 0.8], bounds=([1e-6, 1e-6], [1.0, 1.0]))
    return float(fit.x[0]), float(fit.x[1])


SWEEP_SOURCE = "github-pr:vllm-project/vllm#16937"


def k_sweep(terms: dict | None = None, profile: str = "vllm-2025-04") -> dict:
    """vLLM's EAGLE-1 k-sweep of the development set (PR #16937, Llama-3.1-8B, H100, batch 1): measured tokens/s at
    k = 2, 4, 7 against sdsl's curve for k = 1..8 with ``profile`` (its terms ``terms``, e.g. those fitted without
    PR #16937) and on the roofline alone. The sweep states no accepted length, so acceptance comes from another
    source (PR #16035: EAGLE-1 on Llama-3-8B, τ = 1.89 at k = 2 and 2.08 at k = 4) through the decay form
    p_i = a·r^(i−1); nothing is fitted on the sweep itself."""
    from sdsl.catalog.models import get_model
    from sdsl.roofline.deployment import Deployment
    from sdsl.engine.profiles import resolve_engine
    from sdsl.speculation.step import price_step
    from sdsl.validation.published_rows import load_rows

    rows = load_rows("speculative")
    sweep = {int(r["gamma"]): float(r["value"]) for r in rows
             if source_key(r["source"]) == SWEEP_SOURCE and r["draft"].startswith("EAGLE-1")}
    borrowed = {int(r["gamma"]): float(r["mean_accepted_len"]) for r in rows if "vllm#16035" in r["source"]}
    a, r = _decay_fit(borrowed)
    ks = np.arange(1, 9)
    taus = 1.0 + np.cumsum(np.cumprod(a * r ** np.arange(8)))
    eng = resolve_engine(profile)
    if terms:
        eng = eng.replace(**{k: v for k, v in terms.items() if k in ("host_step_s", "spec_step_s", "draft_pass_s",
                                                                        "launch_s")})

    def curve(engine):
        tps = price_step(get_model("llama-3.1-8b"), "eagle", Deployment("h100-sxm", context=512, engine=engine),
                         tau=taus, gamma=ks, batch=1).tokens_per_s
        at = {int(k): float(tps[k - 1]) for k in sorted(sweep)}
        measured_k = sorted(sweep)
        return {"tokens_per_s": np.asarray(tps).tolist(), "at_measured_k": at, "best_k": int(ks[np.argmax(tps)]),
                "best_measured_k": int(measured_k[int(np.argmax([at[k] for k in measured_k]))]),
                "same_order": sorted(sweep, key=lambda k: -at[k]) == sorted(sweep, key=lambda k: -sweep[k]),
                "errors": {int(k): at[k] / sweep[k] - 1.0 for k in measured_k}}

    return {"k": ks.tolist(), "tau": taus.tolist(), "decay": {"a": a, "r": r}, "borrowed_accepted_lengths": borrowed,
            "measured": dict(sorted(sweep.items())), "measured_best_k": int(max(sweep, key=sweep.get)),
            "profile": eng.name, "terms": {t: getattr(eng, t) for t in ("host_step_s", "spec_step_s", "draft_pass_s")},
            "engine": curve(eng), "ideal": curve("ideal")}


def _goal_status(summary: dict, rows: list[dict]) -> dict:
    spec, sb, dec, eager = (summary[c]["loso"] for c in ("engine_speculative", "spec_bench", "engine_decode", "eager"))
    stated = [r for r in rows if r["class"] == "engine_speculative"]
    goals = {"engine_speculative_median_abs": (spec.get("median_abs_error"), GOALS["engine_speculative_median_abs"]),
             "engine_speculative_worst_abs": (abs(spec.get("worst_error", np.nan)), GOALS["engine_speculative_worst_abs"]),
             "engine_speculative_median_signed": (spec.get("median_signed_error"),
                                                  GOALS["engine_speculative_median_signed_abs"]),
             "spec_bench_median_abs": (sb.get("median_abs_error"), GOALS["spec_bench_median_abs"]),
             "engine_decode_median_abs": (dec.get("median_abs_error"), GOALS["engine_decode_median_abs"]),
             "eager_gpt_fast_abs": (abs(eager.get("worst_error", np.nan)), GOALS["eager_abs"])}
    out = {k: {"value": None if v is None else float(v), "limit": lim,
               "met": v is not None and bool(abs(v) <= lim)} for k, (v, lim) in goals.items()}
    out["engine_speculative_rows"] = len(stated)
    return out


def validate_published() -> dict:
    """Every priceable row (development and engine rows) with its leave-one-source-out, shipped and roofline-only
    errors, the rows sdsl cannot price and why, per-class summaries, the k-sweeps, the fitted terms with their
    leave-one-source-out values, and the goals' status; under ``fp8``, the dense FP8 plain-decode rows and their bf16
    pairs (:func:`sdsl.validation.fp8_decode.validate_fp8_decode`), which no fit reads."""
    from sdsl.engine.profiles import engine_profiles
    from sdsl.validation.engine_fit import loso, published_points

    points, unpriced = published_points(row_sets=ENGINE_SETS)
    folds = loso(points)
    catalog = {k: v for k, v in engine_profiles().items() if k != "ideal"}
    shipped = {name: {t: getattr(p, t) for t in ("host_step_s", "spec_step_s", "draft_pass_s", "launch_s")}
               for name, p in catalog.items()}
    rows = _records(points, folds, shipped)
    summary = {}
    for cls, _ in CLASSES:
        sel = [r for r in rows if r["class"] == cls]
        summary[cls] = {"loso": summarize(r["error"] for r in sel), "shipped": summarize(r["error_shipped"] for r in sel),
                        "ideal": summarize(r["error_ideal"] for r in sel)}
    for cls in ("engine_speculative", "spec_bench", "engine_decode"):  # development set alone, as reported before
        sel = [r for r in rows if r["class"] == cls and r["row_set"] == "dev"]
        summary[f"{cls}_dev"] = {"loso": summarize(r["error"] for r in sel),
                                 "ideal": summarize(r["error_ideal"] for r in sel)}
    fitted = {src: {name: {t: v for t, v in vals.items()} for name, vals in fold["values"].items()
                    if not name.startswith("_")} for src, fold in folds.items()}
    sweep_terms = folds.get(SWEEP_SOURCE, {}).get("values", {}).get("vllm-2025-04")
    sweeps = k_sweeps(rows)
    from sdsl.validation.fp8_decode import validate_fp8_decode

    return {"rows": rows, "unpriced": unpriced, "summary": summary, "k_sweeps": sweeps, "fp8": validate_fp8_decode(),
            "k_sweep": k_sweep(sweep_terms), "profiles": {n: p.summary() for n, p in catalog.items()},
            "loso_terms": fitted, "goals": _goal_status(summary, rows),
            "k_sweep_goals": {"same_order": [s["loso"]["same_order"] for s in sweeps],
                              "best_k_matches": [s["loso"]["best_k_matches"] for s in sweeps]}}
