"""Synthetic-acceptance validation at real model shapes (``sdsl validate decoder --synthetic``).

A random-weight target shaped like a catalog model (default ``qwen2.5-0.5b``) decodes with a proposer
at a forced acceptance: every drafted position is accepted with probability α given the previous ones
were (:func:`sdsl.torch.decoder.forced_acceptance`; the row is priced at the realised α, the MLE from its
accept histogram, as ``sdsl validate decoder`` prices measured rows), so the decoder runs the configuration's real draft
and verify work at that acceptance. Proposers: a separate draft shaped like ``smollm2-135m`` (with the
target's vocabulary) and an EAGLE-shaped head (fc + one decoder layer at the target's width, the
target's LM head). For every proposer × k × batch × α the measured speedup over plain decoding (process
CPU time, one torch thread; each row paired with its own plain decoding at the same batch, adjacent in time,
``repeats`` pairs in ABBA order, the median pair's ratio: :func:`measure_paired`) is compared with sdsl's prediction:
:func:`sdsl.speculation.step.price_step` with the proposer's cost model from
:mod:`sdsl.speculation.proposers` (a draft model; EAGLE-1's head with its draft-extend pass and selection
kernels), on the ``cpu`` hardware with the shipped CPU calibration
(``profiles/cpu.calib.json``, fitted to the byte-level family and llama-68m only: the synthetic shapes
are held out of it), with the decoder's own per-step overhead T_overhead measured with zero-cost
stand-ins (:func:`sdsl.torch.synthetic.loop_overhead`, once per proposer × k × batch, at α = 0.7):

    predicted speedup = n / E[K_b] · (T_t(b, 1) + o₀ + Δ₀) / (T_propose(b, k) + T_t(b, k+1) + o + Δ)
                                                                                     (docs/model.md §3.3, §3.6)

with the terms of :data:`TERMS` (:mod:`sdsl.validation.decoder.synthetic_terms`): Δ, Δ₀ the CPU GEMM row factor's
extra seconds (every forward's GEMMs at κ(rows, weight bytes)) and the draft's two-token re-read, n / E[K_b] the
requested tokens per sequence per step (``finish``: n = max_new, E[K_b] the expected steps until the slowest of b
sequences has n tokens, :func:`sdsl.speculation.finish.effective_tau`; τ(α, k) without the term; only the first n tokens
of a sequence count, in the measurement too), the EAGLE head's draft-extend logits at the last token only, and the
reference head's own work counted exactly (``benchmarks/head_step_accounting.py``): its extend pass over all
k + 1 slots and its prompt pass in the first decode step (:func:`prompt_pass_s`). The head drafts k − 1 passes
after the extend pass (:meth:`sdsl.speculation.proposers.EagleHead.draft_time`).

Rows are cached in a JSON file keyed by configuration (resumable); :func:`summarise_synthetic` and
:func:`reprice` recompute the summary from the measured rows alone (what the test suite checks).
"""

from __future__ import annotations


import numpy as np
import torch

from sdsl.validation.decoder.row_cache import RowCache
from sdsl.torch.decoder import generate
from sdsl.torch.synthetic import draft_spec_for, head_spec_for, loop_overhead, random_model, synthetic_proposer

__all__ = ["SYNTHETIC_DEFAULTS", "COUNTED", "cpu_params", "family_spec", "measure", "measure_paired", "synthetic_sweep", "reprice",
           "count_requested", "emitted_tokens", "to_requested", "without_predictions",
           "reprice_file", "summarise_synthetic"]

SYNTHETIC_DEFAULTS = {"target": "qwen2.5-0.5b", "draft": "smollm2-135m", "gammas": (1, 2, 3, 4, 5, 6),
                      "batches": (1, 4), "alphas": (0.5, 0.7, 0.9), "prompt_len": 32, "max_new": 12, "repeats": 2}


def measure(target, proposer, tree, batch: int, prompts: torch.Tensor, max_new: int, *, acceptance=None,
            temperature: float = 0.0, seed: int = 0, repeats: int = 2, clock: str = "cpu") -> dict:
    """Decode ``prompts[:batch]`` ``repeats`` times; the fastest run's tokens/s (the first ``max_new`` of each
    sequence: :attr:`sdsl.torch.decoder.DecodeResult.tokens_per_s`), tokens emitted, τ, per-position rates."""
    runs = [generate(target, prompts[:batch], max_new, proposer, temperature=temperature, seed=seed, clock=clock,
                     tree=tree, acceptance=acceptance) for _ in range(repeats)]
    best = min(runs, key=lambda r: r.decode_s)
    return {"tokens_per_s": best.tokens_per_s, "new_tokens": best.new_tokens, "tau": best.tau, "steps": best.steps,
            "decode_s": best.decode_s,
            "draft_s": best.draft_s, "accept_counts": best.accept_counts.tolist(),
            "per_position": [float(v) for v in best.per_position], "tree": best.tree, "repeats": repeats}


def measure_paired(target, proposer, tree, batch: int, prompts: torch.Tensor, max_new: int, *, acceptance, seed: int,
                   repeats: int, clock: str = "cpu") -> dict:
    """A speculative row with its own plain decoding at the same batch, adjacent in time: ``repeats`` pairs,
    alternately speculative-then-plain and plain-then-speculative (ABBA, so a drift of the shared machine that
    is linear over the pairs cancels), as the head validation pairs its rows (:mod:`sdsl.validation.decoder.heads`).
    ``speedup`` is the median over pairs of the pair's ratio of tokens/s; the other fields are the speculative
    run's (the same acceptance draws in every repeat: the seed is fixed), tokens/s and seconds as medians."""
    runs = {"sd": [], "plain": []}
    for r in range(repeats):
        order = (("sd", proposer, tree, acceptance), ("plain", None, None, None))
        for name, p, t, a in (order if r % 2 == 0 else order[::-1]):
            runs[name].append(measure(target, p, t, batch, prompts, max_new, acceptance=a, seed=seed, repeats=1,
                                      clock=clock))
    med = lambda name, key: float(np.median([m[key] for m in runs[name]]))  # noqa: E731
    ratios = [s["tokens_per_s"] / p["tokens_per_s"] for s, p in zip(runs["sd"], runs["plain"])]
    return runs["sd"][0] | {"tokens_per_s": med("sd", "tokens_per_s"), "decode_s": med("sd", "decode_s"),
                            "draft_s": med("sd", "draft_s"), "repeats": repeats, "pair_speedups": ratios,
                            "speedup": float(np.median(ratios)), "plain_tokens_per_s": med("plain", "tokens_per_s"),
                            "plain_decode_s": med("plain", "decode_s"), "plain_steps": runs["plain"][0]["steps"]}


def cpu_params():
    """The shipped CPU calibration (``profiles/cpu.calib.json``: byte-level family and llama-68m rows only)."""
    from sdsl._paths import REPO_ROOT
    from sdsl.fit.calibration import load_latency_params

    return load_latency_params(REPO_ROOT / "profiles" / "cpu.calib.json")


def family_spec(spec: dict):
    """A core ModelSpec from a family checkpoint's spec dict."""
    from dataclasses import fields

    from sdsl.catalog.models import ModelSpec

    names = {f.name for f in fields(ModelSpec)}
    return ModelSpec(**{k: v for k, v in spec.items() if k in names})


# sdsl.validation.decoder.synthetic_terms (the GEMM factor only on hardware "cpu"), the batch tail, EAGLE's draft-extend
# logits at the last accepted token only (EagleHead(extend_logits="last"), as the reference decoder, vLLM and SGLang do),
# and two facts of the reference decoder's head (benchmarks/results/head_step_accounting.json): its draft-extend pass
# runs over every slot of the verified chain, k + 1 per sequence (EagleHead(extend_tokens="verified")), and its first
# decode step runs the head over the prompt's P - 1 pairs (:func:`prompt_pass_s`)
TERMS = ("gemm_rows", "reread", "finish", "extend_last", "extend_verified", "prompt_pass")
#: what a row's tokens/s counts (settings.counted): tokens past max_new per sequence are not output
COUNTED = "first max_new tokens of each sequence"


def _price(row: dict, specs: dict, settings: dict, params, terms=TERMS) -> float:
    """sdsl's predicted speedup of one row (module docstring): :func:`sdsl.speculation.step.price_step`
    with the proposer's cost model (:mod:`sdsl.speculation.proposers`: a draft model, or EAGLE-1's head with its
    draft-extend pass and selection kernels), τ from the row's α, the measured overheads, and ``terms``
    (:mod:`sdsl.validation.decoder.synthetic_terms`: the CPU GEMM row factor, the draft's re-read)."""
    from sdsl.roofline.deployment import Deployment
    from sdsl.speculation.proposers import DraftModel, EagleHead
    from sdsl.speculation.step import price_step

    deployment = Deployment(settings["hardware"], dtype=settings["dtype"],
                            context=settings["prompt_len"] + settings["max_new"] // 2, params=params)
    alpha, gamma = min(row["alpha"], 1 - 1e-9), row["gamma"]
    extend = "last" if "extend_last" in terms else "all"
    rows_ = "verified" if "extend_verified" in terms else "accepted"
    proposer = (EagleHead(extend_logits=extend, extend_tokens=rows_) if row["proposer"] == "head"
                else DraftModel(specs["draft"]))
    tau = (1 - alpha ** (gamma + 1)) / (1 - alpha)
    pr = price_step(specs["target"], proposer, deployment, tau=tau, gamma=gamma, batch=row["batch"],
                    overhead_s=row["overhead_s"], plain_overhead_s=row["overhead_plain_s"])
    step_extra, plain_extra = _extra_terms(row, specs, deployment, proposer, alpha, tau, terms, settings["hardware"])
    if "prompt_pass" in terms and row["proposer"] == "head":
        step_extra += prompt_pass_s(row, specs, deployment, proposer, alpha, tau, terms, settings)
    t_plain = np.asarray(pr.t_plain_s) + plain_extra
    return float(_tokens_per_step(alpha, gamma, tau, row["batch"], settings["max_new"], terms)
                 / (np.asarray(pr.t_step_s) + step_extra) * t_plain)


def _tokens_per_step(alpha, gamma, tau, batch, max_new, terms) -> float:
    """Requested tokens per sequence per step. With ``finish`` in ``terms``: max_new / E[K_b], the steps a static
    batch of b runs until its slowest sequence has ``max_new`` tokens (:func:`sdsl.speculation.finish.effective_tau`: the
    batch tail and the last step's overshoot, which the measurement does not count); τ without it."""
    if "finish" not in terms:
        return float(tau)
    from sdsl.speculation.finish import effective_tau

    return float(effective_tau(alpha, gamma, max_new, batch))


def emitted_tokens(row: dict, max_new: int) -> int:
    """Tokens a row's speculative run emitted, overshoot included, for rows measured before ``new_tokens`` was
    recorded (their tokens/s counted every emitted token): the one whole number n with b·max_new ≤ n ≤ b·(max_new + γ),
    n/τ a whole number of sequence-steps, and n ≤ tokens/s × seconds ≤ 1.05·n (the medians of two runs of the
    same tokens give n·(1 + ε), ε ≥ 0 by the AM–HM inequality)."""
    from sdsl.errors import InvalidInputError

    b, g, product = row["batch"], row["gamma"], row["tokens_per_s"] * row["decode_s"]
    fits = [n for n in range(b * max_new, b * (max_new + g) + 1)
            if n <= product * (1 + 1e-9) <= 1.05 * n and abs(n / row["tau"] - round(n / row["tau"])) < 1e-6]
    if len(fits) != 1:
        raise InvalidInputError(f"cannot recover the emitted tokens of row {row['proposer']} b{b} k{g}: {fits}.")
    return fits[0]


def count_requested(rows: list[dict], max_new: int) -> list[dict]:
    """Rows measured when tokens/s counted overshoot, converted to the first ``max_new`` tokens of each sequence
    (only the requested tokens count; plain decoding never overshoots): tokens/s and every speedup × b·max_new / n. Rows that
    carry ``new_tokens`` were measured that way already and are returned as they are."""
    return [row if "new_tokens" in row else to_requested(row, emitted_tokens(row, max_new), row["batch"] * max_new)
            for row in rows]


def to_requested(row: dict, emitted: int, requested: int) -> dict:
    """A row whose tokens/s counted ``emitted`` tokens, counted by the ``requested`` ones instead: tokens/s and every
    speedup × requested / emitted (the paired plain runs never overshoot); ``new_tokens`` records ``emitted``."""
    f = requested / emitted
    out = row | {"tokens_per_s": row["tokens_per_s"] * f, "speedup": row["speedup"] * f, "new_tokens": emitted}
    if "pair_speedups" in row:
        out["pair_speedups"] = [v * f for v in row["pair_speedups"]]
    return out


def without_predictions(rows: list[dict]) -> list[dict]:
    """The measured part of result rows (``pred_speedup`` and ``speedup_error`` dropped), for re-pricing."""
    return [{k: v for k, v in r.items() if k not in ("pred_speedup", "speedup_error")} for r in rows]


def _extra_terms(row, specs, deployment, proposer, alpha, tau, terms, hardware) -> tuple[float, float]:
    """Seconds the terms add to a speculative step and to a plain step (:mod:`sdsl.validation.decoder.synthetic_terms`)."""
    from sdsl.roofline.latency import ModelShapes
    from sdsl.speculation.proposers import forward_time
    from sdsl.validation.decoder.synthetic_terms import model_extra_s, passes_extra_s, reread_probability

    b, g, ctx, target = row["batch"], row["gamma"], deployment.context, specs["target"]
    gemm = "gemm_rows" in terms and hardware == "cpu"
    extra = (lambda spec, tokens: model_extra_s(spec, deployment, tokens)) if gemm else (lambda spec, tokens: 0.0)
    step, plain = extra(target, b * (g + 1)), extra(target, b)
    if row["proposer"] == "head":  # depth 1 comes out of the extend pass: g - 1 drafting passes (EagleHead.draft_time)
        n = float(proposer.extend_rows(tau, g))
        passes = [n] + [1.0] * (g - 1)
        first = 1.0 if proposer.extend_logits == "last" else n
        return step + (passes_extra_s(proposer, target, deployment, passes, b, first) if gemm else 0.0), plain
    step += extra(specs["draft"], b) * g
    if "reread" in terms:
        draft = ModelShapes.of(specs["draft"], deployment.tp)
        two, one = (float(forward_time(draft, deployment, batch=b, q=q, context=ctx)) for q in (2, 1))
        step += float(reread_probability(alpha, g, b)) * (two + extra(specs["draft"], 2 * b) - one - extra(specs["draft"], b))
    return step, plain


def prompt_pass_s(row, specs, deployment, proposer, alpha, tau, terms, settings) -> float:
    """The reference decoder's head is prefilled inside the timed loop: its first decode step runs the head over
    the prompt's P − 1 pairs (target feature, next token) instead of the usual draft-extend rows
    (``benchmarks/results/head_step_accounting.json``), once per run; spread over the run's expected steps
    E[K_b] (:func:`sdsl.speculation.finish.steps_to_finish`). Priced like the extend pass (same form, same terms)."""
    from sdsl.speculation.finish import steps_to_finish
    from sdsl.validation.decoder.synthetic_terms import passes_extra_s

    b, g, target = row["batch"], row["gamma"], specs["target"]
    gemm = "gemm_rows" in terms and settings["hardware"] == "cpu"

    def first_pass(n, context):
        first = 1.0 if proposer.extend_logits == "last" else n
        kappa = passes_extra_s(proposer, target, deployment, [n], b, first) if gemm else 0.0
        return float(proposer.extend_time(target, deployment, batch=b, tau=n, context=context)) + kappa

    once = first_pass(settings["prompt_len"] - 1.0, 0.0) - first_pass(float(proposer.extend_rows(tau, g)),
                                                                      deployment.context)
    return once / float(steps_to_finish(alpha, g, settings["max_new"], b))


def _specs(target_name, draft_name) -> dict:
    from sdsl.catalog.models import get_model

    target = get_model(target_name)
    return {"target": target, "draft": draft_spec_for(get_model(draft_name), target), "head": head_spec_for(target)}


def reprice(rows: list[dict], settings: dict, params=None, specs: dict | None = None, terms=None) -> list[dict]:
    """Rows with ``pred_speedup`` and ``speedup_error`` (pred/measured − 1) recomputed by sdsl's model
    (``params`` None: the shipped CPU calibration on the CPU, the hardware's default calibration elsewhere;
    ``terms``: which of :data:`TERMS` to add, default those the rows' ``settings`` name, for ablations)."""
    if params is None and settings["hardware"] == "cpu":
        params = cpu_params()
    specs = specs or _specs(settings["target"], settings["draft"])
    terms = settings.get("terms", ()) if terms is None else terms
    out = []
    for row in rows:
        pred = _price(row, specs, settings, params, terms)
        out.append(row | {"pred_speedup": pred, "speedup_error": pred / row["speedup"] - 1})
    return out


def reprice_file(path, terms=TERMS) -> dict:
    """Re-price a committed sweep (``{"synthetic": ...}``) with ``terms`` and the current cost model and rewrite it:
    the measured rows are kept as they are, ``settings.terms``, every ``pred_speedup`` and the summary change."""
    import json
    from pathlib import Path

    from sdsl._io import atomic_write_text

    s = json.loads(Path(path).read_text())["synthetic"]
    settings = s["settings"] | {"terms": list(terms), "counted": COUNTED}
    measured = count_requested(without_predictions(s["rows"]), settings["max_new"])
    out = summarise_synthetic(reprice(measured, settings)) | {"settings": settings}
    atomic_write_text(path, json.dumps({"synthetic": out}, indent=2, sort_keys=True) + "\n")
    return out


def summarise_synthetic(rows: list[dict]) -> dict:
    """Median |error|, median signed error, pooled (mean |error|), worst case, per-proposer medians."""
    from sdsl.validation.error_stats import summarize_errors

    s = summarize_errors(r["speedup_error"] for r in rows)
    by = {p: summarize_errors(r["speedup_error"] for r in rows if r["proposer"] == p)["median_abs"]
          for p in sorted({r["proposer"] for r in rows})}
    groups = sorted({(r["proposer"], r["batch"]) for r in rows})
    by_batch = {f"{p}/b{b}": {k: summarize_errors(r["speedup_error"] for r in rows if (r["proposer"], r["batch"]) == (p, b))[k]
                              for k in ("median_abs", "median_signed")} for p, b in groups}
    worst = max(rows, key=lambda r: abs(r["speedup_error"]))
    return {"median_speedup_error": s["median_abs"], "median_signed_error": s["median_signed"],
            "mean_abs_error": s["pooled_abs"], "worst_error": s["worst"],
            "worst_row": {k: worst[k] for k in ("proposer", "gamma", "batch", "alpha_forced")},
            "median_error_by_proposer": by, "median_error_by_proposer_batch": by_batch, "n_rows": len(rows), "rows": rows}


def _random_models(specs: dict, proposers, seed: int, capacity: int, dtype) -> dict:
    """The random-weight target and proposers (:mod:`sdsl.torch.synthetic`), keyed "target" and by proposer."""
    target = random_model(specs["target"], seed, capacity, dtype)
    return {"target": target} | {k: synthetic_proposer(k, target, specs.get(k), seed + 1, dtype) for k in proposers}


_ROW_KEYS = ("tau", "per_position", "tokens_per_s", "new_tokens", "plain_tokens_per_s", "speedup", "pair_speedups", "steps",
             "decode_s", "draft_s", "plain_decode_s", "plain_steps")


def synthetic_sweep(target=SYNTHETIC_DEFAULTS["target"], draft=SYNTHETIC_DEFAULTS["draft"],
                    gammas=SYNTHETIC_DEFAULTS["gammas"], batches=SYNTHETIC_DEFAULTS["batches"],
                    alphas=SYNTHETIC_DEFAULTS["alphas"], proposers=("draft", "head"),
                    prompt_len: int = SYNTHETIC_DEFAULTS["prompt_len"], max_new: int = SYNTHETIC_DEFAULTS["max_new"],
                    repeats: int = SYNTHETIC_DEFAULTS["repeats"], seed: int = 0, cache_path=None, threads: int = 1,
                    progress: bool = True, device: str = "cpu", dtype: str = "fp32", hardware: str = "cpu",
                    deadline: float | None = None) -> dict:
    """Measure every proposer × γ × batch × α at forced acceptance and price it; see the module docstring.

    ``target``/``draft`` are catalog names or ModelSpecs. On a GPU (``device="cuda"``) the wall clock is
    used and rows are priced on ``hardware``'s default calibration; ``deadline`` (a ``time.time()``) stops
    measuring new rows after it (the rows so far are summarised)."""
    import time

    from tqdm.auto import tqdm

    from sdsl.acceptance import alpha_from_accept_histogram
    from sdsl.torch.harness.layer import TORCH_DTYPES

    torch.set_num_threads(threads)
    specs = _specs(target, draft)
    clock = "cpu" if device == "cpu" else "wall"
    settings = {"terms": list(TERMS), "target": specs["target"].name, "draft": specs["draft"].name.split("@")[0], "prompt_len": prompt_len,
                "max_new": max_new, "repeats": repeats, "seed": seed, "threads": threads, "device": device,
                "clock": "process CPU time" if clock == "cpu" else "wall clock", "dtype": dtype, "hardware": hardware,
                "paired_plain": True, "counted": COUNTED}
    warm, models = {}, {}  # the random models are built only when a row is measured (cached rows re-price without them)
    capacity = prompt_len + max_new + 2 * max(gammas) + 8
    prompts = torch.randint(0, specs["target"].vocab_size, (max(batches), prompt_len),
                            generator=torch.Generator().manual_seed(seed), device="cpu").to(device)
    tag = f"{settings['target']}|{settings['draft']}|p{prompt_len}|m{max_new}|r{repeats}|s{seed}|{device}|{dtype}|paired"
    cache = RowCache(cache_path)
    vocab = specs["target"].vocab_size
    rows = []
    jobs = [(b, k, g, a) for b in batches for k in proposers for g in gammas for a in alphas]
    for b, k, g, a in tqdm(jobs, desc="synthetic sweep", disable=not progress):
        key = f"sd|{k}|b{b}|g{g}|a{a}|{tag}"
        if deadline is not None and time.time() > deadline and key not in cache.data:
            break
        if key not in cache.data and not warm.get(b):  # one untimed plain decode first (a fresh process's first calls)
            models = models or _random_models(specs, proposers, seed, capacity, TORCH_DTYPES[dtype])
            warm[b] = measure(models["target"], None, None, b, prompts, 2, repeats=1, clock=clock)
        over0 = cache.get(f"overhead|plain|b{b}|{tag}", lambda: loop_overhead("plain", vocab, b, None))
        over = cache.get(f"overhead|{k}|b{b}|g{g}|{tag}", lambda: loop_overhead(k, vocab, b, f"chain{g}", [0.7] * g))
        m = cache.get(key, lambda: measure_paired(models["target"], models[k], f"chain{g}", b, prompts, max_new,
                                                  acceptance=[a] * g, seed=seed, repeats=repeats, clock=clock))
        rows.append({"proposer": k, "gamma": g, "batch": b, "alpha_forced": a,
                     "alpha": float(alpha_from_accept_histogram(np.asarray(m["accept_counts"]))), "overhead_s": over,
                     "overhead_plain_s": over0} | {key_: m[key_] for key_ in _ROW_KEYS if key_ in m})
    out = summarise_synthetic(reprice(count_requested(rows, max_new), settings, specs=specs))  # rows cached before the count
    out["settings"] = settings | {"models": {k: v.name for k, v in specs.items()}}
    return out
