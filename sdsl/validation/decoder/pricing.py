"""Leak-free pricing of ``sdsl validate decoder`` rows: held-out CPU fits and the speculative-step terms.

**Held out.** Each (target, proposer) pair is priced with a CPU calibration refitted
(:func:`sdsl.fit.calibration.fit_latency`, the fit behind ``profiles/cpu.calib.json``) without any row
of either model: its operator and decoder-layer profiles (``profiles/cpu-*.csv`` whose model has the
same name or the same layer width ``d_model``) and its whole-forward rows (``profiles/model-*-cpu.csv``).

**Terms.** A speculative step is priced by the shared step function users call
(:func:`sdsl.speculation.step.price_step`, docs/model.md §3.3 and §3.7): T_draft + T_target(b, γ + 1) +
T_host, with τ tokens per sequence (:func:`shared_step`). The terms are switched on one by one so each can be
judged on its own (:data:`MODELS`); the first four are terms of the shared pricing, set from what the
reference decoder and its benchmark do:

* ``overhead`` — the decoder's own per-step work outside model forwards (sampling, verification,
  accept/rollback bookkeeping, prompt lookup), measured with zero-cost stand-in models (``loop_overhead``):
  the step's host time, ``price_step(overhead_s=...)``; plain decoding gets its own (``plain_overhead_s``);
* ``resync`` — the reference decoder re-feeds the last two tokens to the draft at the start of each
  step (its cache may hold a rejected draft), so the first draft forward is over q = 2 tokens:
  ``DraftModel(first_pass_tokens=2)``;
* ``finish`` — only the first ``max_new`` tokens of a sequence count and a batch steps until its
  slowest sequence is done: τ becomes :func:`sdsl.speculation.finish.effective_tau` (the step is priced at that τ);
* ``switch`` — switching models: the target's forward evicts the draft's weights and KV cache, so the
  draft's first forward of each step re-reads them from DRAM (:func:`sdsl.roofline.model_switch.switch_time_s`,
  ρ from the committed bandwidth sweep ``profiles/bandwidth-cpu.csv``, :func:`measured_dram_ratio`):
  ``DraftModel(switch_ratio=ρ)``.

The headline ``pred_speedup`` (:data:`DEFAULT_MODEL`, ``switch``) is the shared step's speedup. One reported
variant adds CPU-only seconds outside the shared pricing, and says so:

* ``rows`` — this CPU's GEMM cost over M = b·q rows: every forward's GEMMs at κ(M, weight bytes) times sdsl's
  price (:func:`sdsl.validation.decoder.synthetic_terms.forward_extra_s`; κ measured on weight shapes of no family
  model, ``profiles/cpu-gemm-rows.json``), target at b·(γ + 1) rows, each draft forward at b rows (the
  resync pass at 2b), the plain step at b rows.

The CPU forward terms (cold weights, GEMM packing, per-row cost) are a research variant outside the package:
``research/forward_forms.py`` (VALIDATION.md, "Variants not adopted").
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

__all__ = ["MODELS", "DEFAULT_MODEL", "measured_dram_ratio", "priced_speedup", "shared_step", "heldout_inputs",
           "heldout_params", "pair_models", "pair_params", "price_rows", "error_stats"]

# model variant -> terms it prices (from the step alone to every shared term, then the CPU-only rows variant)
MODELS = {"base": ("overhead",), "finish": ("overhead", "finish"), "full": ("overhead", "finish", "resync"),
          "switch": ("overhead", "finish", "resync", "switch"),
          "rows": ("overhead", "finish", "resync", "switch", "rows")}
DEFAULT_MODEL = "switch"  # what ``pred_speedup`` (the headline) prices: every term of the shared pricing
PROFILES = Path(__file__).resolve().parents[3] / "profiles"


@lru_cache(maxsize=4)
def measured_dram_ratio(path=None) -> float:
    """ρ (:func:`sdsl.roofline.model_switch.dram_ratio`) of the committed bandwidth sweep of this CPU (read once)."""
    import pandas as pd

    from sdsl.roofline.model_switch import dram_ratio

    sweep = pd.read_csv(PROFILES / "bandwidth-cpu.csv" if path is None else path)
    return dram_ratio(sweep["size_bytes"], sweep["warm_gbs"], sweep["cold_gbs"])


def shared_step(target, draft, gamma, alpha, batch, dep, *, overhead=0.0, overhead_plain=0.0,
                max_new: int | None = None, terms=MODELS[DEFAULT_MODEL], dram_ratio: float | None = None):
    """The row's step priced by the shared step function (:func:`sdsl.speculation.step.price_step`, what
    ``sdsl predict`` calls), with the shared terms among ``terms`` (module docstring): ``overhead`` as the host
    time per speculative and per plain step, ``resync`` and ``switch`` as the draft model's
    ``first_pass_tokens = 2`` and ``switch_ratio = ρ`` (:class:`sdsl.speculation.proposers.DraftModel`), ``finish`` as
    the τ the benchmark's max_new and static batch leave (:func:`sdsl.speculation.finish.effective_tau`)."""
    from sdsl.acceptance import tau
    from sdsl.speculation.finish import effective_tau
    from sdsl.speculation.proposers import DraftModel, NGramLookup
    from sdsl.speculation.step import price_step

    ovh, ovh0 = (overhead, overhead_plain) if "overhead" in terms else (0.0, 0.0)
    if draft is None:
        proposer = NGramLookup()
    else:
        rho = (measured_dram_ratio() if dram_ratio is None else dram_ratio) if "switch" in terms else 1.0
        proposer = DraftModel(draft, first_pass_tokens=2 if "resync" in terms else 1, switch_ratio=rho)
    finish = "finish" in terms and max_new
    tokens = effective_tau(alpha, gamma, max_new, batch) if finish else tau(alpha, gamma)
    return price_step(target, proposer, dep, tau=tokens, gamma=gamma, batch=batch, overhead_s=ovh,
                      plain_overhead_s=ovh0, tau_source="effective tau (max_new, batch tail)" if finish else "iid")


def priced_speedup(target, draft, gamma, alpha, batch, ctx, params, hw, *, overhead=0.0, overhead_plain=0.0,
                   max_new: int | None = None, terms=MODELS[DEFAULT_MODEL], dram_ratio: float | None = None) -> float:
    """Predicted speedup over plain decoding of the same target, with the listed ``terms`` (module docstring).
    Without ``rows`` it is the shared step's speedup (:func:`shared_step`); ``rows`` adds CPU-only seconds to it
    here, outside the shared pricing. ``dram_ratio`` (ρ) prices the ``switch`` term (default:
    :func:`measured_dram_ratio`)."""
    from sdsl.roofline.deployment import Deployment

    dep = Deployment(hw, dtype="fp32", context=ctx, params=params)
    step = shared_step(target, draft, gamma, alpha, batch, dep, overhead=overhead, overhead_plain=overhead_plain,
                       max_new=max_new, terms=terms, dram_ratio=dram_ratio)
    if "rows" not in terms:
        return float(step.speedup)
    extra, plain = _rows_extra_s(target, draft, dep, gamma, batch, "resync" in terms)
    return float(step.tau) / (float(step.t_step_s) + extra) * (float(step.t_plain_s) + plain)


def _rows_extra_s(target, draft, dep, gamma, batch, resync: bool) -> tuple[float, float]:
    """Seconds κ(rows) adds to a speculative step and to a plain step (module docstring, ``rows``)."""
    from sdsl.validation.decoder.synthetic_terms import model_extra_s, passes_extra_s

    plain, step = model_extra_s(target, dep, batch), model_extra_s(target, dep, batch * (gamma + 1))
    if draft is not None:
        step += passes_extra_s(draft, target, dep, [2.0 if resync else 1.0] + [1.0] * (gamma - 1), batch)
    return step, plain


def pair_models(target: str, draft: str) -> tuple[str, ...]:
    """The checkpoints a (target, proposer) row depends on (prompt lookup has no model)."""
    return (target,) if draft == "prompt-lookup" else (target, draft)


def heldout_inputs(profiles=None, forwards=None):
    """(operator rows, [(layer rows, ModelSpec)], [(forward rows, ModelSpec)]) of every CPU profile."""
    import pandas as pd

    from sdsl.catalog.models import ModelSpec
    from sdsl.fit.model_steps import read_model_steps
    from sdsl.fit.profiles import read_profile

    profiles = sorted(PROFILES.glob("cpu-*.csv")) if profiles is None else list(profiles)
    forwards = [PROFILES / "model-forwards-cpu.csv"] if forwards is None else list(forwards)
    ops, layers = [], []
    for p in profiles:
        prof = read_profile(p)
        spec = ModelSpec.from_dict(prof.meta["model"])
        ops.append(prof.ops.assign(dtype=prof.meta["dtype"], model=spec.name, d_model=spec.d_model))
        if len(prof.layers):
            layers.append((prof.layers, spec))
    steps = [s for f in forwards for s in read_model_steps(f)[0]]
    return pd.concat(ops, ignore_index=True), layers, steps


def heldout_params(held, spec: dict, inputs):
    """(LatencyParams, what was dropped) fitted without any row of the checkpoints in ``held``."""
    from sdsl.catalog.hardware import get_hardware
    from sdsl.fit.calibration import fit_latency

    ops, layers, steps = inputs
    names = set(held)
    widths = {spec[m].d_model for m in held}
    hit = lambda sp: sp.name in names or sp.d_model in widths  # noqa: E731  (same model or same layer shape)
    keep_ops = ops[~(ops["model"].isin(names) | ops["d_model"].isin(widths))].drop(columns=["model", "d_model"])
    keep_layers = [(r, sp) for r, sp in layers if not hit(sp)]
    keep_steps = [(r, sp) for r, sp in steps if sp.name not in names]
    fit = fit_latency(keep_ops, get_hardware("cpu"), dtype="fp32", layers=keep_layers, steps=keep_steps,
                      keep_points=False)
    dropped = {"operator_rows": int(len(ops) - len(keep_ops)),
               "layer_rows": int(sum(len(r) for r, _ in layers) - sum(len(r) for r, _ in keep_layers)),
               "forward_rows": int(sum(len(r) for r, _ in steps) - sum(len(r) for r, _ in keep_steps)),
               "profiles_kept": sorted({sp.name for _, sp in keep_layers})}
    return fit.params, dropped


def error_stats(pred, meas) -> dict:
    """Median |error|, median and mean signed error, pooled (mean) |error|, worst case, share over-predicted."""
    from sdsl.validation.error_stats import summarize_errors

    s = summarize_errors(np.asarray(pred, dtype=float) / np.asarray(meas, dtype=float) - 1)
    return {k: s[k] for k in ("median_abs", "median_signed", "mean_signed", "pooled_abs", "worst_abs", "share_over", "n")}


def _inputs_digest(profiles=None, forwards=None) -> str:
    """A short hash of the fit's input files, so a cached held-out fit is redone when a profile changes."""
    import hashlib

    files = sorted(PROFILES.glob("cpu-*.csv")) if profiles is None else list(profiles)
    files += [PROFILES / "model-forwards-cpu.csv"] if forwards is None else list(forwards)
    h = hashlib.sha1()
    for f in files:
        h.update(Path(f).read_bytes())
    return h.hexdigest()[:12]


def pair_params(pairs, spec, cache) -> dict:
    """{(target, proposer): (LatencyParams, fit record)}, each fitted once and kept in the row cache."""
    from dataclasses import asdict

    from sdsl.roofline.latency import LatencyParams

    digest, inputs, out = _inputs_digest(), None, {}
    for t, d in pairs:
        held = pair_models(t, d)

        def fit():
            nonlocal inputs
            inputs = inputs or heldout_inputs()
            params, dropped = heldout_params(held, spec, inputs)
            return {"params": asdict(params), "dropped": dropped}

        rec = cache.get(f"fit|{'+'.join(sorted(held))}|{digest}", fit)
        out[(t, d)] = (LatencyParams(**rec["params"]),
                       {"target": t, "draft": d, "held_out": list(held)} | rec["dropped"] | {"params": rec["params"]})
    return out


def price_rows(rows: list[dict], spec: dict, ctx: int, max_new: int, fits: dict, in_sample_params,
               in_sample: bool = False) -> None:
    """Add each model variant's prediction and error to every row, each pair priced with ``fits[(target, proposer)][0]``
    (:func:`pair_params`).

    ``pred_speedup_<model>`` (leak-free, one fit per pair) for every :data:`MODELS` entry,
    ``pred_speedup`` = the :data:`DEFAULT_MODEL` (leak-free unless ``in_sample``), ``pred_speedup_in_sample`` with
    the committed calibration, ``pred_speedup_pooled_alpha`` at the α pooled over γ (the optimizer's view)
    and ``pred_steps`` (E[steps to finish every chunk], :func:`sdsl.speculation.finish.steps_to_finish`) beside
    the measured ``steps``.
    """
    from sdsl.speculation.finish import steps_to_finish
    from sdsl.catalog.hardware import get_hardware

    hw, rho = get_hardware("cpu"), measured_dram_ratio()
    for r in rows:
        t, d, g, b = r["target"], r["draft"], r["gamma"], r["batch"]
        tgt, drf = spec[t], None if d == "prompt-lookup" else spec[d]
        common = dict(overhead=r["overhead_s"], overhead_plain=r["overhead_plain_s"], max_new=max_new, dram_ratio=rho)
        alpha = min(r["alpha"], 1 - 1e-9)
        held = fits[(t, d)][0]
        for name, terms in MODELS.items():
            r[f"pred_speedup_{name}"] = priced_speedup(tgt, drf, g, alpha, b, ctx, held, hw, terms=terms, **common)
            r[f"speedup_error_{name}"] = r[f"pred_speedup_{name}"] / r["speedup"] - 1
        r["pred_speedup_in_sample"] = priced_speedup(tgt, drf, g, alpha, b, ctx, in_sample_params, hw, **common)
        r["pred_speedup"] = r["pred_speedup_in_sample"] if in_sample else r[f"pred_speedup_{DEFAULT_MODEL}"]
        r["speedup_error"] = r["pred_speedup"] / r["speedup"] - 1
        price = in_sample_params if in_sample else held
        r["pred_speedup_pooled_alpha"] = priced_speedup(tgt, drf, g, r["alpha_pooled"], b, ctx, price, hw, **common)
        r["pred_steps"] = float(sum(steps_to_finish(alpha, g, max_new, n) for n in r["chunk_sizes"]))
