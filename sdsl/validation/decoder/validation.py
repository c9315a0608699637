"""Measured speculative decoding vs sdsl's predictions (``sdsl validate decoder``).

For each (draft, target) pair of the committed byte-level family, γ ∈ 1…8 and batch ∈ {1, 8},
decode the same held-out prompts plainly and speculatively, and record the measured α (MLE from the
accept-count histogram), τ, tokens/s and speedup. Next to them, two predictions from the measured α:

* ``pred_speedup`` — sdsl's hardware model (:mod:`sdsl.validation.decoder.pricing`): each (target,
  proposer) priced with a CPU calibration refitted without any row of its models (leak-free; or the
  committed ``profiles/cpu.calib.json`` with ``in_sample``), with the decoder's own per-step overhead
  T_overhead (docs/model.md §3.3, measured with zero-cost stand-in models, :func:`loop_overhead`), the
  overshoot and batch tail of :mod:`sdsl.speculation.finish`, the draft's q = 2 resync forward and the draft's
  re-read of what the target evicted (:mod:`sdsl.roofline.model_switch`); each term's share is reported per
  model variant (``models``);
* ``pred_speedup_steps`` — τ·(T_t(b,1) + o₀) / (T_d(b,2) + (γ−1)·T_d(b,1) + T_t(b,γ+1) + o), priced with
  each model's measured forward times (median of 15, microbenchmarked here).

Only the first ``max_new`` tokens of a sequence count, and plain and speculative runs get the same
repeats. Errors are ``pred/measured − 1``; the summary gives the median |error|, the median and mean
signed error, the pooled (mean) |error|, the worst case and the share over-predicted. Rows (and the
held-out fits) are cached in a JSON file keyed by configuration, so an interrupted run resumes and a
rerun only re-summarises. Also: the SDSL acceptance plane fitted on the family's (ppl_draft,
ppl_target, α) points, and prompt-lookup (and optionally SmolLM2) rows.
"""

from __future__ import annotations

import time
from dataclasses import fields
from pathlib import Path

import numpy as np
import torch

from sdsl.torch.checkpoint import CHECKPOINT_DIR, list_checkpoints, load_checkpoint
from sdsl.validation.decoder.pricing import pair_params, price_rows
from sdsl.validation.decoder.row_cache import RowCache
from sdsl.torch.decoder import DraftModel, PromptLookup, generate

__all__ = ["model_spec", "calibrated_params", "step_times", "validate_decoder", "fit_plane", "PAPER_PLANE"]

PAPER_PLANE = {"A": -0.0067, "B": 0.01297, "C": 0.642, "R2": 0.60}
DEFAULT_TARGETS = ("byte-d192", "byte-d288")
DEFAULT_DRAFTS = ("byte-d64", "byte-d96", "byte-d128", "byte-wide", "byte-deep")


def model_spec(spec: dict):
    """A core :class:`sdsl.catalog.models.ModelSpec` from a checkpoint's spec dict."""
    from sdsl.catalog.models import ModelSpec

    names = {f.name for f in fields(ModelSpec)}
    return ModelSpec(**{k: v for k, v in spec.items() if k in names})


def calibrated_params(root: str | Path | None = None):
    """(LatencyParams, path) from ``profiles/cpu*.calib.json`` if one exists, else (None, None)."""
    from sdsl.fit.calibration import load_latency_params

    root = Path(root or Path(__file__).resolve().parents[3] / "profiles")
    hits = sorted(root.glob("cpu*.calib.json"))
    if not hits:
        return None, None
    try:
        shown = hits[0].relative_to(Path(__file__).resolve().parents[3]).as_posix()
    except ValueError:
        shown = str(hits[0])
    return load_latency_params(hits[0]), shown


@torch.no_grad()
def step_times(model, batch: int, qs, context: int, repeats: int = 15, clock: str = "cpu",
               stat: str = "median") -> dict[int, float]:
    """Time (s) of one cached forward over ``q`` new tokens per sequence, per q: the median (or ``stat="min"``,
    the fastest) of ``repeats`` runs after two warm-ups.

    The median is what a decoding loop pays per forward on a shared machine: on these 2 contended cores the
    fastest of 15 is up to 2× below the median for sub-millisecond forwards (and ~5% for 10 ms ones), so
    pricing decoding with minima under-prices small drafts most (VALIDATION.md, decoder section).
    """
    now = time.process_time if clock == "cpu" else time.perf_counter
    pick = {"median": np.median, "min": np.min}[stat]
    cache = model.new_cache(batch, context + max(qs) + 1)
    model(torch.zeros(batch, context, dtype=torch.long), cache)
    out = {}
    for q in qs:
        x = torch.zeros(batch, q, dtype=torch.long)
        ts = []
        for _ in range(repeats + 2):
            cache.set_lengths(context)
            t = now()
            model(x, cache)
            ts.append(now() - t)
        out[q] = float(pick(ts[2:]))
    return out


class _NullModel:
    """A zero-cost stand-in model (uniform logits): decoding with it times only the decoder's own work."""

    def __init__(self, vocab: int = 256):
        from sdsl.torch.model import Shape

        self.shape = Shape(n_layer=0, d_model=1, n_head=1, n_kv_head=1, d_ff=1, vocab_size=vocab, head_dim=1)

    def new_cache(self, batch, capacity=None, dtype=None):
        from sdsl.torch.model import KVCache

        return KVCache(self.shape, batch, capacity or 4096)

    def __call__(self, tokens, cache):
        cache.lengths = cache.lengths + tokens.shape[1]
        return torch.zeros(tokens.shape[0], tokens.shape[1], self.shape.vocab_size)


def loop_overhead(batch: int, gamma: int, prompts, max_new: int, temperature: float, proposer: str = "draft",
                  repeats: int = 5) -> float:
    """CPU seconds per decoding step spent outside model forwards (sampling, verification, bookkeeping,
    prompt lookup), measured by decoding with zero-cost stand-in models. This is docs/model.md §3.3's T_overhead."""
    null = _NullModel()
    prop = None if gamma == 0 else (PromptLookup() if proposer == "prompt-lookup" else DraftModel(null))
    p = prompts[:batch].repeat((batch + len(prompts) - 1) // len(prompts), 1)[:batch]
    best = min((generate(null, p, max_new, prop, gamma, temperature, seed=0, clock="cpu") for _ in range(repeats)),
               key=lambda r: r.decode_s)
    return best.decode_s / best.steps


def _prompts(n: int, length: int) -> torch.Tensor:
    from sdsl.torch.train import load_corpus

    held = load_corpus()["heldout"]
    starts = np.linspace(0, len(held) - length - 1, n + 2)[1:-1].astype(int)
    return torch.from_numpy(np.stack([held[s:s + length] for s in starts]).astype(np.int64))


def _run(target, proposer, gamma, batch, prompts, max_new, temperature, seed, repeats: int = 3, clock: str = "cpu") -> dict:
    """Decode all prompts in chunks of ``batch``, ``repeats`` times; pool counts, keep each chunk's fastest time.

    Runs are seeded, so every repeat emits the same tokens; the minimum over repeats is the
    least-disturbed timing on a shared machine. Only the first ``max_new`` tokens of each sequence
    count (``tokens``): the last step of a sequence can overshoot by up to γ tokens, and a sequence
    that is done idles in its batch until the slowest one finishes — both are time spent, not tokens
    gained. ``chunk_steps`` are the target forwards each chunk needed; ``overshoot`` the tokens past ``max_new``.
    """
    counts = np.zeros(gamma + 1, dtype=np.int64)
    tokens = raw = steps = 0
    secs = draft_s = target_s = 0.0
    chunk_steps, chunk_sizes = [], []
    for i in range(0, len(prompts), batch):
        runs = [generate(target, prompts[i:i + batch], max_new, proposer, gamma, temperature, seed=seed + i, clock=clock)
                for _ in range(repeats)]
        r = min(runs, key=lambda x: x.decode_s)
        counts += r.accept_counts
        tokens += r.batch * max_new
        raw, steps, secs = raw + r.new_tokens, steps + r.steps, secs + r.decode_s
        draft_s, target_s = draft_s + r.draft_s, target_s + r.target_s
        chunk_steps.append(r.steps)
        chunk_sizes.append(r.batch)
    out = {"tokens": tokens, "overshoot": raw - tokens, "steps": steps, "chunk_steps": chunk_steps,
           "chunk_sizes": chunk_sizes, "decode_s": secs, "draft_s": draft_s, "target_s": target_s,
           "tokens_per_s": tokens / secs, "repeats": repeats, "clock": clock}
    if gamma:
        from sdsl.acceptance import alpha_from_accept_histogram, positional_acceptance

        out.update(accept_counts=counts.tolist(), alpha=float(alpha_from_accept_histogram(counts)),
                   tau=float((np.arange(gamma + 1) * counts).sum() / counts.sum() + 1),
                   per_position=[None if np.isnan(v) else float(v) for v in positional_acceptance(counts)])
    return out


def fit_plane(points: list[dict]) -> dict:
    """Least-squares α = A·ppl_draft + B·ppl_target + C over ``points`` (keys x, y, alpha)."""
    x = np.array([[p["ppl_draft"], p["ppl_target"], 1.0] for p in points])
    a = np.array([p["alpha"] for p in points])
    coef, *_ = np.linalg.lstsq(x, a, rcond=None)
    pred = x @ coef
    r2 = 1 - ((a - pred) ** 2).sum() / max(((a - a.mean()) ** 2).sum(), 1e-30)
    paper = np.clip(x @ np.array([PAPER_PLANE["A"], PAPER_PLANE["B"], PAPER_PLANE["C"]]), 0, 1)
    return {"A": float(coef[0]), "B": float(coef[1]), "C": float(coef[2]), "R2": float(r2), "n": len(points),
            "signs_match_paper": bool(np.sign(coef[0]) == np.sign(PAPER_PLANE["A"]) and np.sign(coef[1]) == np.sign(PAPER_PLANE["B"])),
            "paper_plane_mae": float(np.abs(paper - a).mean()), "paper": PAPER_PLANE}


def validate_decoder(targets=DEFAULT_TARGETS, drafts=DEFAULT_DRAFTS, gammas=range(1, 9), batches=(1, 8),
                     n_prompts: int = 16, prompt_len: int = 64, max_new: int = 64, repeats: int = 2, temperature: float = 1.0,
                     seed: int = 0, cache_path: str | Path | None = None, prompt_lookup: bool = True,
                     plane: bool = True, smollm2: str | Path | None = None, threads: int = 1, progress: bool = True,
                     in_sample: bool = False) -> dict:
    """Run the measurement grid, price every row leak-free and summarise; see the module docstring.

    ``in_sample=True`` prices with the committed ``profiles/cpu.calib.json`` (fitted on the validated
    models too) instead of a fit without the row's models; the summary always reports both.
    """
    torch.set_num_threads(threads)
    params, params_path = calibrated_params()
    models = {p.stem: load_checkpoint(p) for p in list_checkpoints(CHECKPOINT_DIR)}
    unknown = sorted((set(targets) - set(models)) | (set(drafts) - set(models) - {"prompt-lookup"}))
    if unknown:
        from sdsl.errors import UnknownNameError

        raise UnknownNameError(f"No checkpoint named {', '.join(unknown)} in {CHECKPOINT_DIR} "
                               f"(known: {', '.join(sorted(models))}).")
    prompts = _prompts(n_prompts, prompt_len)
    ctx = prompt_len + max_new // 2
    tag = f"T{temperature}-n{n_prompts}-p{prompt_len}-m{max_new}-s{seed}-r{repeats}-cpu-v2"
    cache = RowCache(cache_path)
    spec = {name: model_spec(meta["spec"]) for name, (_, meta) in models.items()}
    ppl = {name: meta["heldout_ppl"] for name, (_, meta) in models.items()}
    jobs = [(t, d, b, g) for t in targets for b in batches for d in list(drafts) + (["prompt-lookup"] if prompt_lookup else [])
            for g in gammas]
    run = dict(prompts=prompts, max_new=max_new, temperature=temperature, seed=seed, repeats=repeats, ctx=ctx, tag=tag,
               gmax=max(gammas))
    rows = [_measure_row(models, cache, t, d, b, g, run) | {"ppl_draft": ppl.get(d), "ppl_target": ppl[t]}
            for t, d, b, g in _progress(jobs, progress)]
    _pool_alpha(rows)
    fits = pair_params(dict.fromkeys((r["target"], r["draft"]) for r in rows), spec, cache)
    price_rows(rows, spec, ctx, max_new, fits, params, in_sample=in_sample)
    out = _summarise(rows, params_path)
    fits = [rec for _, rec in fits.values()]
    out["heldout_fits"] = fits
    out["sdsl_optimize_pick"] = _optimize_pick(rows, out["best_config"], spec, ctx, fits, params, in_sample)
    out["settings"] = {"temperature": temperature, "n_prompts": n_prompts, "prompt_len": prompt_len, "max_new": max_new,
                       "seed": seed, "repeats": repeats, "repeats_plain": repeats, "threads": threads,
                       "clock": "process CPU time (1 torch thread)", "context_for_prediction": ctx, "hardware": "cpu",
                       "tokens_counted": "first max_new per sequence",
                       "latency_params": params_path if in_sample else "refitted per pair without its models' rows"}
    out["perplexities"] = ppl
    if plane:
        out["plane"] = _plane(models, ppl, prompts, max_new, temperature, seed, tag, cache)
    if smollm2:
        from sdsl.validation.decoder.smollm2_pricing import price_smollm2
        from sdsl.torch.smollm2 import smollm2_rows

        out["smollm2"] = price_smollm2(smollm2_rows(smollm2, cache, temperature=0.0, seed=seed), params)
    return out


def _progress(jobs, progress: bool):
    from tqdm.auto import tqdm

    return tqdm(jobs, desc="validate decoder", disable=not progress)


def _measure_row(models, cache, t, d, b, g, run) -> dict:
    """One configuration measured (or read from the cache): plain and SD runs, step microbenchmarks, T_overhead."""
    target, tag, ctx = models[t][0], run["tag"], run["ctx"]
    args = (run["prompts"], run["max_new"], run["temperature"], run["seed"], run["repeats"])
    base = cache.get(f"plain|{t}|b{b}|{tag}", lambda: _run(target, None, 0, b, *args))
    tt = cache.get(f"steps-median|{t}|b{b}|c{ctx}", lambda: step_times(target, b, range(1, run["gmax"] + 2), ctx))
    proposer = PromptLookup() if d == "prompt-lookup" else DraftModel(models[d][0], d)
    m = cache.get(f"sd|{t}|{d}|b{b}|g{g}|{tag}", lambda: _run(target, proposer, g, b, *args))
    tt = {int(k): v for k, v in tt.items()}
    if d == "prompt-lookup":
        t_draft = 0.0
    else:
        td = {int(k): v for k, v in cache.get(f"steps-median|{d}|b{b}|c{ctx}", lambda: step_times(models[d][0], b, (1, 2), ctx)).items()}
        t_draft = td[2] + (g - 1) * td[1]
    kind = "prompt-lookup" if d == "prompt-lookup" else "draft"
    p, mx, temp = run["prompts"], run["max_new"], run["temperature"]
    ovh0 = cache.get(f"overhead|b{b}|g0|{tag}", lambda: loop_overhead(b, 0, p, mx, temp))
    ovh = cache.get(f"overhead|{kind}|b{b}|g{g}|{tag}", lambda: loop_overhead(b, g, p, mx, temp, kind))
    meas = m["tokens_per_s"] / base["tokens_per_s"]
    pred_steps = m["tau"] * (tt[1] + ovh0) / (t_draft + tt[g + 1] + ovh)
    return {"target": t, "draft": d, "batch": b, "gamma": g, "alpha": m["alpha"], "tau": m["tau"],
            "tokens_per_s": m["tokens_per_s"], "plain_tokens_per_s": base["tokens_per_s"], "speedup": meas,
            "tokens": m["tokens"], "plain_tokens": base["tokens"], "repeats": m["repeats"], "plain_repeats": base["repeats"],
            "steps": m["steps"], "chunk_steps": m["chunk_steps"], "chunk_sizes": m["chunk_sizes"],
            "overshoot": m["overshoot"], "decode_s": m["decode_s"], "draft_s": m["draft_s"], "target_s": m["target_s"],
            "plain_decode_s": base["decode_s"], "plain_steps": base["steps"],
            "overhead_s": ovh, "overhead_plain_s": ovh0, "t_target_s": tt, "t_draft_total_s": t_draft,
            "pred_speedup_steps": pred_steps, "speedup_error_steps": pred_steps / meas - 1,
            "c_measured": (t_draft / g) / tt[1] if g else None,
            "accept_counts": m["accept_counts"], "per_position": m["per_position"]}


def _pool_alpha(rows) -> None:
    """α pooled over γ per (target, draft, batch): what sdsl's optimizer would know."""
    pooled: dict = {}
    for r in rows:
        acc, rej = pooled.get((r["target"], r["draft"], r["batch"]), (0, 0))
        c = np.asarray(r["accept_counts"])
        pooled[(r["target"], r["draft"], r["batch"])] = (acc + (np.arange(c.size) * c).sum(), rej + c[:-1].sum())
    for r in rows:
        acc, rej = pooled[(r["target"], r["draft"], r["batch"])]
        r["alpha_pooled"] = float(min(acc / (acc + rej), 1 - 1e-9))


def _plane(models, ppl, prompts, max_new, temperature, seed, tag, cache) -> dict:
    """α for every (worse draft, better target) pair at γ = 4, batch 8, then the plane fit."""
    pts = []
    for t in models:
        for d in models:
            if ppl[d] <= ppl[t]:
                continue
            key = f"sd|{t}|{d}|b8|g4|{tag}"
            m = cache.data.get(key) or cache.get(key + "|alpha-only", lambda: _run(
                models[t][0], DraftModel(models[d][0]), 4, 8, prompts, max_new, temperature, seed, 1))
            pts.append({"target": t, "draft": d, "ppl_draft": ppl[d], "ppl_target": ppl[t], "alpha": m["alpha"]})
    return {"points": pts, "fit": fit_plane(pts) if len(pts) >= 4 else None}


def _optimize_pick(rows, best_cfg, spec, ctx, fits, params, in_sample: bool) -> dict:
    """The pick of ``sdsl optimize``'s ranking (the draft grid, :func:`sdsl.plan.search.evaluate_grid`, which prices
    drafts with the same stacked :func:`sdsl.speculation.step.price_step` call; no decoder overhead),
    each model draft at its pooled measured α, for the best row's target and batch; each draft is
    priced with its pair's held-out fit (or the committed calibration when ``in_sample``)."""
    from sdsl.roofline.deployment import Deployment
    from sdsl.catalog.hardware import get_hardware
    from sdsl.roofline.latency import LatencyParams
    from sdsl.plan.search import evaluate_grid

    held = {(f["target"], f["draft"]): f for f in fits}
    t, b = best_cfg["target"], best_cfg["batch"]
    same = [r for r in rows if r["target"] == t and r["batch"] == b and r["draft"] != "prompt-lookup"]
    gammas = sorted({r["gamma"] for r in same})
    cands = []
    for d in sorted({r["draft"] for r in same}):
        a = next(r["alpha_pooled"] for r in same if r["draft"] == d)
        p = params if in_sample else LatencyParams(**held[(t, d)]["params"])
        dep = Deployment(get_hardware("cpu"), dtype="fp32", context=ctx, params=p)
        grid = evaluate_grid(spec[t], dep, drafts=[spec[d]], gammas=gammas, batch=(b,), alpha=a)
        tps = np.asarray(grid.prediction.tokens_per_s).reshape(-1)
        cands.append((float(tps.max()), d, gammas[int(tps.argmax())]))
    _, d, g = max(cands)
    meas = next(r["speedup"] for r in same if r["draft"] == d and r["gamma"] == g)
    best = max(r["speedup"] for r in rows if r["target"] == t and r["batch"] == b)
    return {"target": t, "batch": b, "draft": d, "gamma": g, "measured_speedup": meas, "regret": 1 - meas / best}


def _pick(rows, key: str, best) -> dict:
    """sdsl's pick for the best row's (target, batch): the (draft, γ) with the highest ``key``, and its regret."""
    same = [r for r in rows if r["target"] == best["target"] and r["batch"] == best["batch"]]
    pick = max(same, key=lambda r: r[key])
    return {k: pick[k] for k in ("target", "draft", "gamma", "batch")} | {
        "measured_speedup": pick["speedup"], "pred": pick[key], "regret": 1 - pick["speedup"] / best["speedup"]}


def _evidence(rows: list[dict]) -> dict:
    """Sizes of the speculative-step terms, from the rows: tokens past max_new, T_overhead per step (s)."""
    share = [r["overshoot"] / r["tokens"] for r in rows]
    return {"overshoot_share_max": float(max(share)), "overshoot_share_median": float(np.median(share)),
            "overhead_s": [float(min(r["overhead_s"] for r in rows)), float(max(r["overhead_s"] for r in rows))],
            "overhead_plain_s": [float(min(r["overhead_plain_s"] for r in rows)),
                                 float(max(r["overhead_plain_s"] for r in rows))]}


def _summarise(rows: list[dict], params_path) -> dict:
    """Errors of every model variant (leak-free), the in-sample and measured-step-time references, the picks."""
    from sdsl._evidence import summarize_errors
    from sdsl.validation.decoder.pricing import MODELS, error_stats

    meas = [r["speedup"] for r in rows]
    stats = {name: error_stats([r[f"pred_speedup_{name}"] for r in rows], meas) for name in MODELS}
    stats["in_sample"] = error_stats([r["pred_speedup_in_sample"] for r in rows], meas)
    stats["step_times"] = error_stats([r["pred_speedup_steps"] for r in rows], meas)
    main = error_stats([r["pred_speedup"] for r in rows], meas)
    best = max(rows, key=lambda r: r["speedup"])
    pick, pick_s = _pick(rows, "pred_speedup_pooled_alpha", best), _pick(rows, "pred_speedup_steps", best)
    steps_err = summarize_errors(r["pred_steps"] / r["steps"] - 1 for r in rows)
    return {
        "rows": rows,
        "median_speedup_error": main["median_abs"], "median_signed_error": main["median_signed"],
        "mean_signed_error": main["mean_signed"], "pooled_speedup_error": main["pooled_abs"],
        "worst_speedup_error": main["worst_abs"], "share_over_predicted": main["share_over"],
        "models": stats,
        "by_batch": {str(b): error_stats([r["pred_speedup"] for r in rows if r["batch"] == b],
                                         [r["speedup"] for r in rows if r["batch"] == b])
                     for b in sorted({r["batch"] for r in rows})},
        "evidence": _evidence(rows),
        "median_speedup_error_steps": stats["step_times"]["median_abs"],
        "steps_to_finish_error": {k: steps_err[k] for k in ("median_abs", "mean_signed")},
        "best_speedup": best["speedup"], "best_config": {k: best[k] for k in ("target", "draft", "gamma", "batch")},
        "sdsl_pick": pick, "optimizer_regret": pick["regret"],
        "sdsl_pick_steps": pick_s, "optimizer_regret_steps": pick_s["regret"],
        "in_sample_latency_params": params_path,
    }
