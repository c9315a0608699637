"""Measured speculative decoding vs sdsl's predictions (``sdsl validate decoder``).

For each (draft, target) pair of the committed byte-level family, γ ∈ 1…8 and batch ∈ {1, 8},
decode the same held-out prompts plainly and speculatively, and record the measured α (MLE from the
accept-count histogram), τ, tokens/s and speedup. Next to them, two predictions from the measured α:

* ``pred_speedup`` — sdsl's hardware model: :func:`sdsl.core.throughput.predict` on the ``cpu`` hardware
  with the calibrated CPU latency parameters (``profiles/cpu*.calib.json``) when present, plus the
  decoder's own per-step overhead T_overhead (docs/model.md §3.3), measured once per (batch, γ, proposer
  kind) by decoding with zero-cost stand-in models (:func:`loop_overhead`); plain decoding gets its
  own T_overhead. ``pred_speedup_no_overhead`` is the bare roofline prediction;
* ``pred_speedup_steps`` — the same formula, τ·(T_t(b,1) + o₀) / (T_d(b,2) + (γ−1)·T_d(b,1) + T_t(b,γ+1) + o),
  priced with each model's measured forward times (microbenchmarked here).

Errors are ``pred/measured − 1``. Rows are cached in a JSON file keyed by configuration, so an
interrupted run resumes and a rerun only re-summarises. Also: the SDSL acceptance plane fitted on
the family's (ppl_draft, ppl_target, α) points, and prompt-lookup (and optionally SmolLM2) rows.
With ``holdout_pairs``, :func:`leave_pair_out` re-prices each (target, proposer)'s rows with the CPU
calibration refitted without those models' whole-forward rows (``sdsl validate decoder --holdout-pairs``).
"""

from __future__ import annotations

import json
import time
from dataclasses import fields
from pathlib import Path

import numpy as np
import torch

from sdsl._io import atomic_write_text
from sdsl.torch.checkpoint import CHECKPOINT_DIR, list_checkpoints, load_checkpoint
from sdsl.torch.decoder import DraftModel, PromptLookup, generate

__all__ = ["model_spec", "calibrated_params", "step_times", "validate_decoder", "fit_plane", "leave_pair_out",
           "PAPER_PLANE"]

PAPER_PLANE = {"A": -0.0067, "B": 0.01297, "C": 0.642, "R2": 0.60}
DEFAULT_TARGETS = ("byte-d192", "byte-d288")
DEFAULT_DRAFTS = ("byte-d64", "byte-d96", "byte-d128", "byte-wide", "byte-deep")


def model_spec(spec: dict):
    """A core :class:`sdsl.core.architecture.ModelSpec` from a checkpoint's spec dict."""
    from sdsl.core.architecture import ModelSpec

    names = {f.name for f in fields(ModelSpec)}
    return ModelSpec(**{k: v for k, v in spec.items() if k in names})


def calibrated_params(root: str | Path | None = None):
    """(LatencyParams, path) from ``profiles/cpu*.calib.json`` if one exists, else (None, None)."""
    from sdsl.fit.calibration import load_latency_params

    root = Path(root or Path(__file__).resolve().parents[2] / "profiles")
    hits = sorted(root.glob("cpu*.calib.json"))
    if not hits:
        return None, None
    try:
        shown = hits[0].relative_to(Path(__file__).resolve().parents[2]).as_posix()
    except ValueError:
        shown = str(hits[0])
    return load_latency_params(hits[0]), shown


@torch.no_grad()
def step_times(model, batch: int, qs, context: int, repeats: int = 15, clock: str = "cpu") -> dict[int, float]:
    """Fastest wall time (s) over ``repeats`` of one cached forward over ``q`` new tokens per sequence, per q."""
    now = time.process_time if clock == "cpu" else time.perf_counter
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
        out[q] = min(ts[2:])
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
    least-disturbed timing on a shared machine.
    """
    counts = np.zeros(gamma + 1, dtype=np.int64)
    tokens = steps = 0
    secs = draft_s = 0.0
    for i in range(0, len(prompts), batch):
        runs = [generate(target, prompts[i:i + batch], max_new, proposer, gamma, temperature, seed=seed + i, clock=clock)
                for _ in range(repeats)]
        r = min(runs, key=lambda x: x.decode_s)
        counts += r.accept_counts
        tokens, steps, secs, draft_s = tokens + r.new_tokens, steps + r.steps, secs + r.decode_s, draft_s + r.draft_s
    out = {"tokens": tokens, "steps": steps, "decode_s": secs, "draft_s": draft_s, "tokens_per_s": tokens / secs,
           "repeats": repeats, "clock": clock}
    if gamma:
        from sdsl.core.acceptance import alpha_from_accept_histogram, positional_acceptance

        out.update(accept_counts=counts.tolist(), alpha=float(alpha_from_accept_histogram(counts)),
                   tau=float((np.arange(gamma + 1) * counts).sum() / counts.sum() + 1),
                   per_position=[None if np.isnan(v) else float(v) for v in positional_acceptance(counts)])
    return out


class _Cache:
    def __init__(self, path):
        self.path = Path(path) if path else None
        self.data = json.loads(self.path.read_text()) if self.path and self.path.exists() else {}

    def get(self, key, fn):
        if key not in self.data:
            self.data[key] = fn()
            if self.path:
                atomic_write_text(self.path, json.dumps(self.data, indent=1, sort_keys=True))
        return self.data[key]


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
                     holdout_pairs: bool = False) -> dict:
    """Run the measurement grid and summarise; see the module docstring."""
    from tqdm.auto import tqdm

    from sdsl.core.deployment import Deployment
    from sdsl.core.hardware import get_hardware
    from sdsl.core.throughput import predict

    torch.set_num_threads(threads)
    hw = get_hardware("cpu")
    params, params_path = calibrated_params()
    models = {p.stem: load_checkpoint(p) for p in list_checkpoints(CHECKPOINT_DIR)}
    unknown = sorted((set(targets) - set(models)) | (set(drafts) - set(models) - {"prompt-lookup"}))
    if unknown:
        from sdsl.errors import UnknownNameError

        raise UnknownNameError(f"No checkpoint named {', '.join(unknown)} in {CHECKPOINT_DIR} "
                               f"(known: {', '.join(sorted(models))}).")
    prompts = _prompts(n_prompts, prompt_len)
    ctx = prompt_len + max_new // 2
    dep = Deployment(hw, dtype="fp32", context=ctx, params=params)
    tag = f"T{temperature}-n{n_prompts}-p{prompt_len}-m{max_new}-s{seed}-r{repeats}-cpu"
    cache = _Cache(cache_path)
    spec = {name: model_spec(meta["spec"]) for name, (_, meta) in models.items()}
    ppl = {name: meta["heldout_ppl"] for name, (_, meta) in models.items()}
    jobs = [(t, d, b, g) for t in targets for b in batches for d in list(drafts) + (["prompt-lookup"] if prompt_lookup else [])
            for g in gammas]
    rows = []
    bar = tqdm(total=len(jobs), desc="validate decoder", disable=not progress)
    for t, d, b, g in jobs:
        target = models[t][0]
        base = cache.get(f"plain|{t}|b{b}|{tag}", lambda: _run(target, None, 0, b, prompts, max_new, temperature, seed,
                                                                2 * repeats))
        tt = cache.get(f"steps|{t}|b{b}|c{ctx}", lambda: step_times(target, b, range(1, max(gammas) + 2), ctx))
        proposer = PromptLookup() if d == "prompt-lookup" else DraftModel(models[d][0], d)
        m = cache.get(f"sd|{t}|{d}|b{b}|g{g}|{tag}",
                      lambda: _run(target, proposer, g, b, prompts, max_new, temperature, seed, repeats))
        tt = {int(k): v for k, v in tt.items()}
        if d == "prompt-lookup":
            t_draft = 0.0
        else:
            td = {int(k): v for k, v in cache.get(f"steps|{d}|b{b}|c{ctx}", lambda: step_times(models[d][0], b, (1, 2), ctx)).items()}
            t_draft = td[2] + (g - 1) * td[1]
        alpha = min(m["alpha"], 1 - 1e-9)
        kind = "prompt-lookup" if d == "prompt-lookup" else "draft"
        ovh0 = cache.get(f"overhead|b{b}|g0|{tag}", lambda: loop_overhead(b, 0, prompts, max_new, temperature))
        ovh = cache.get(f"overhead|{kind}|b{b}|g{g}|{tag}", lambda: loop_overhead(b, g, prompts, max_new, temperature, kind))
        proposer = None if d == "prompt-lookup" else spec[d]
        pred = predict(spec[t], proposer, dep, gamma=g, alpha=alpha, batch=b, overhead_s=ovh)
        pred_speedup = priced_speedup(spec[t], proposer, dep, gamma=g, alpha=alpha, batch=b, overhead_s=ovh,
                                      plain_overhead_s=ovh0)
        meas = m["tokens_per_s"] / base["tokens_per_s"]
        pred_steps = m["tau"] * (tt[1] + ovh0) / (t_draft + tt[g + 1] + ovh)
        pred_bare = predict(spec[t], proposer, dep, gamma=g, alpha=alpha, batch=b)
        rows.append({"target": t, "draft": d, "batch": b, "gamma": g, "alpha": m["alpha"], "tau": m["tau"],
                     "tokens_per_s": m["tokens_per_s"], "plain_tokens_per_s": base["tokens_per_s"], "speedup": meas,
                     "pred_speedup": pred_speedup, "speedup_error": pred_speedup / meas - 1,
                     "pred_speedup_no_overhead": float(pred_bare.speedup),
                     "speedup_error_no_overhead": float(pred_bare.speedup) / meas - 1,
                     "overhead_s": ovh, "overhead_plain_s": ovh0,
                     "pred_speedup_steps": pred_steps, "speedup_error_steps": pred_steps / meas - 1,
                     "c_measured": (t_draft / g) / tt[1], "c_model": float(pred.cost_ratio),
                     "accept_counts": m["accept_counts"], "per_position": m["per_position"],
                     "ppl_draft": ppl.get(d), "ppl_target": ppl[t]})
        bar.update(1)
    bar.close()
    # what sdsl's optimizer would pick knowing one α per (target, draft, batch): pool the histograms
    pooled: dict = {}
    for r in rows:
        acc, rej = pooled.get((r["target"], r["draft"], r["batch"]), (0, 0))
        c = np.asarray(r["accept_counts"])
        pooled[(r["target"], r["draft"], r["batch"])] = (acc + (np.arange(c.size) * c).sum(), rej + c[:-1].sum())
    for r in rows:
        acc, rej = pooled[(r["target"], r["draft"], r["batch"])]
        a = min(acc / (acc + rej), 1 - 1e-9)
        r["alpha_pooled"] = float(a)
        r["pred_speedup_pooled_alpha"] = priced_speedup(
            spec[r["target"]], None if r["draft"] == "prompt-lookup" else spec[r["draft"]], dep, gamma=r["gamma"],
            alpha=a, batch=r["batch"], overhead_s=r["overhead_s"], plain_overhead_s=r["overhead_plain_s"])
    out = _summarise(rows, params_path)
    out["sdsl_optimize_pick"] = _optimize_pick(rows, out["best_config"], spec, dep)
    out["settings"] = {"temperature": temperature, "n_prompts": n_prompts, "prompt_len": prompt_len, "max_new": max_new,
                       "seed": seed, "repeats": repeats, "threads": threads, "clock": "process CPU time (1 torch thread)", "context_for_prediction": ctx, "hardware": "cpu",
                       "latency_params": params_path or "uncalibrated defaults"}
    out["perplexities"] = ppl
    if plane:
        out["plane"] = _plane(models, ppl, prompts, max_new, temperature, seed, tag, cache)
    if holdout_pairs:
        out["holdout_pairs"] = leave_pair_out(rows, spec, ctx)
    if smollm2:
        from sdsl.torch.smollm2 import smollm2_rows

        out["smollm2"] = smollm2_rows(smollm2, cache, hw, params, temperature=0.0, seed=seed)
    return out


def priced_speedup(target, draft, deployment, *, gamma, alpha, batch, overhead_s, plain_overhead_s) -> float:
    """sdsl's predicted speedup over plain decoding, each side with the decoder's own per-step overhead
    (``overhead_s`` per speculative step, ``plain_overhead_s`` per plain step)."""
    from sdsl.core.throughput import predict

    pr = predict(target, draft, deployment, gamma=gamma, alpha=alpha, batch=batch, overhead_s=overhead_s)
    return float(pr.tau / pr.t_step_s * (pr.t_plain_s + plain_overhead_s))


def leave_pair_out(rows: list[dict], spec: dict, ctx: int, profiles=None, forwards=None) -> dict:
    """Median |speedup error| with the CPU calibration refitted, per (target, proposer), without the
    whole-forward rows of both models (operator and decoder-layer rows kept), pricing only that pair's rows.

    The fit is the one that produced ``profiles/cpu.calib.json`` (``sdsl calibrate profiles/cpu-*.csv
    --fit-layers --steps profiles/model-forwards-cpu.csv``: :func:`sdsl.fit.calibration.fit_latency` with
    ``layers=`` and ``steps=`` from :mod:`sdsl.fit.model_steps`); ``profiles`` and ``forwards`` override its inputs.
    """
    import pandas as pd

    from sdsl.core.architecture import ModelSpec
    from sdsl.core.deployment import Deployment
    from sdsl.fit.calibration import fit_latency
    from sdsl.core.hardware import get_hardware
    from sdsl.fit.model_steps import read_model_steps
    from sdsl.fit.profiles import read_profile

    root = Path(__file__).resolve().parents[2] / "profiles"
    profiles = sorted(root.glob("cpu-*.csv")) if profiles is None else list(profiles)
    forwards = root / "model-forwards-cpu.csv" if forwards is None else Path(forwards)
    hw = get_hardware("cpu")
    frames, layers = [], []
    for p in profiles:
        prof = read_profile(p)
        frames.append(prof.ops.assign(dtype=prof.meta["dtype"]))
        if len(prof.layers):
            layers.append((prof.layers, ModelSpec.from_dict(prof.meta["model"])))
    data = pd.concat(frames, ignore_index=True)
    steps, _ = read_model_steps(forwards)
    pairs, errs = [], []
    for t, d in dict.fromkeys((r["target"], r["draft"]) for r in rows):
        kept = [(st, sp) for st, sp in steps if sp.name not in (t, d)]
        params = fit_latency(data, hw, dtype="fp32", layers=layers, steps=kept, keep_points=False).params
        e = []
        for r in (r for r in rows if r["target"] == t and r["draft"] == d):
            pred = priced_speedup(spec[t], None if d == "prompt-lookup" else spec[d],
                                  Deployment(hw, dtype="fp32", context=ctx, params=params), gamma=r["gamma"],
                                  alpha=min(r["alpha"], 1 - 1e-9), batch=r["batch"], overhead_s=r["overhead_s"],
                                  plain_overhead_s=r["overhead_plain_s"])
            e.append(pred / r["speedup"] - 1)
        errs += e
        pairs.append({"target": t, "draft": d, "rows": len(e), "forward_rows_dropped": sum(len(st) for st, _ in steps) -
                      sum(len(st) for st, _ in kept), "median_abs_error": float(np.median(np.abs(e))),
                      "median_abs_error_in_sample": float(np.median([abs(r["speedup_error"]) for r in rows
                                                                      if r["target"] == t and r["draft"] == d]))})
    return {"median_speedup_error": float(np.median(np.abs(errs))), "fits": len(pairs), "pairs": pairs,
            "profiles": [Path(p).name for p in profiles], "forwards": forwards.name}


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


def _optimize_pick(rows, best_cfg, spec, deployment) -> dict:
    """The pick of ``sdsl optimize``'s ranking (:func:`sdsl.core.search.evaluate_grid`, no decoder overhead),
    each model draft at its pooled measured α, for the best row's target and batch."""
    from sdsl.core.search import evaluate_grid

    t, b = best_cfg["target"], best_cfg["batch"]
    same = [r for r in rows if r["target"] == t and r["batch"] == b and r["draft"] != "prompt-lookup"]
    gammas = sorted({r["gamma"] for r in same})
    cands = []
    for d in sorted({r["draft"] for r in same}):
        a = next(r["alpha_pooled"] for r in same if r["draft"] == d)
        grid = evaluate_grid(spec[t], deployment, drafts=[spec[d]], gammas=gammas, batch=(b,), alpha=a)
        tps = np.asarray(grid.prediction.tokens_per_s).reshape(-1)
        cands.append((float(tps.max()), d, gammas[int(tps.argmax())]))
    _, d, g = max(cands)
    meas = next(r["speedup"] for r in same if r["draft"] == d and r["gamma"] == g)
    best = max(r["speedup"] for r in rows if r["target"] == t and r["batch"] == b)
    return {"target": t, "batch": b, "draft": d, "gamma": g, "measured_speedup": meas, "regret": 1 - meas / best}


def _summarise(rows: list[dict], params_path) -> dict:
    err = [abs(r["speedup_error"]) for r in rows]
    err_s = [abs(r["speedup_error_steps"]) for r in rows]
    err_0 = [abs(r["speedup_error_no_overhead"]) for r in rows]
    best = max(rows, key=lambda r: r["speedup"])
    # sdsl's pick for the best row's (target, batch): the (draft, γ) with the highest predicted speedup
    same = [r for r in rows if r["target"] == best["target"] and r["batch"] == best["batch"]]
    pick = max(same, key=lambda r: r["pred_speedup_pooled_alpha"])
    pick_s = max(same, key=lambda r: r["pred_speedup_steps"])
    cfg = lambda r: {k: r[k] for k in ("target", "draft", "gamma", "batch")}  # noqa: E731
    return {
        "rows": rows,
        "median_speedup_error": float(np.median(err)),
        "median_speedup_error_steps": float(np.median(err_s)),
        "median_speedup_error_no_overhead": float(np.median(err_0)),
        "best_speedup": best["speedup"], "best_config": cfg(best),
        "sdsl_pick": cfg(pick) | {"measured_speedup": pick["speedup"], "pred_speedup": pick["pred_speedup"]},
        "optimizer_regret": 1 - pick["speedup"] / best["speedup"],
        "sdsl_pick_steps": cfg(pick_s) | {"measured_speedup": pick_s["speedup"]},
        "optimizer_regret_steps": 1 - pick_s["speedup"] / best["speedup"],
    }
