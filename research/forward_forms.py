"""CPU forward-pass terms the roofline misses at batch 8: a research variant of the decoder pricing, not the default.

Measured on this 2-core AMD EPYC VM (``benchmarks/bench_forward_split.py``; VALIDATION.md, "Forward terms"),
three things make a whole forward of the reference family cost more than its operator and layer profiles
(each timed on its own, back to back, weights warm) say, and each is priced here from evidence that holds
the validated models out:

* **cold weights** — inside a forward every layer's GEMMs read weights the other layers (and the rest of
  the loop) evicted: a GEMM inside a forward of a model with ≥ 8 MiB of weights costs 0.085 ms per MiB
  more than the same GEMM run on its own, for models of 2–63 MiB of weights with shapes no family
  checkpoint has (``benchmarks/results/forward_split_synthetic.json``); below ~4 MiB most of it stays
  cached. Priced like the switch term (docs/model.md §3.7) with a residency share m(W):

      t_cold = m(W) · W · (ρ − 1) / (η_m · bandwidth),   m(W) = 1 / (1 + (C / W)^k)

  W a forward's GEMM weight bytes, ρ the measured warm/cold bandwidth ratio (``profiles/bandwidth-cpu.csv``),
  C and k least-squares fitted to the synthetic benchmark (:func:`fit_residency`); the draft's switch term
  is scaled by 1 − m(W_draft) (only the part that was cached can be evicted);
* **GEMM packing knee** — a GEMM over M ≥ 2 rows runs a packed kernel that passes over its weights once
  more than the M = 1 GEMV (operator rows: the 288×1536 GEMM costs 43 µs at M = 1, 83 µs at M = 2, 86 µs
  at M = 4): κ_pack · W_gemm / (η_m · bandwidth) per GEMM for M ≥ 2, κ_pack fitted;
* **per-row layer cost** — eager PyTorch's non-GEMM work per token and layer (norms, RoPE, attention,
  adds, KV writes) is several µs, not the nanoseconds of its bytes: t_row per token and layer, fitted.

κ_pack and t_row are fitted jointly with the roofline's parameters (:func:`fit_forward_form`, the same
rows and log-error objective as :func:`sdsl.fit.calibration.fit_latency`; op and layer rows get no cold
term, since they are profiled warm), held out per (target, proposer) pair exactly as the default.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["FormParams", "fit_residency", "sweep_residency", "heldout_form_capacity", "CAPACITY_GRID_MIB", "residency_miss", "gemm_weight_bytes", "form_extra_s",
           "fit_forward_form", "SYNTHETIC_IDLE", "heldout_form", "step_extras", "FORWARD_TERMS", "priced_speedup_forward"]

SYNTHETIC = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "forward_split_synthetic.json"
#: the same benchmark (plus 8 shapes at 6-25 MiB) with BOTH cores idle, run and repeat (``benchmarks/run_forward_split_idle.sh``)
SYNTHETIC_IDLE = tuple(SYNTHETIC.parent / f"forward_split_synthetic_idle{s}.json" for s in ("", "_repeat"))


@dataclass(frozen=True)
class FormParams:
    """A held-out fit of the roofline plus the forward terms (module docstring)."""

    params: object  # LatencyParams
    kappa_pack: float
    t_row: float
    capacity: float  # C, bytes
    sharpness: float  # k
    rho: float

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return {"params": asdict(self.params), "kappa_pack": self.kappa_pack, "t_row": self.t_row,
                "capacity_bytes": self.capacity, "sharpness": self.sharpness, "rho": self.rho}

    @classmethod
    def from_dict(cls, d: dict) -> "FormParams":
        from sdsl.roofline.latency import LatencyParams

        return cls(LatencyParams(**d["params"]), d["kappa_pack"], d["t_row"], d["capacity_bytes"], d["sharpness"], d["rho"])


def fit_residency(path=SYNTHETIC) -> dict:
    """(a, c, C, k) of in-forward − solo GEMM ms = a·n_linear + c·W_MiB·m(W) over the synthetic benchmark's rows
    (one file, or the rows of several pooled): a the per-call cost of the timing hooks, c the cold cost per MiB,
    C (bytes) and k of :func:`residency_miss`."""
    from scipy.optimize import least_squares

    paths = [path] if isinstance(path, (str, Path)) else list(path)
    rows = [r for p in paths for r in json.loads(Path(p).read_text())["rows"]]
    w = np.array([r["weight_bytes"] for r in rows], dtype=float) / 2**20
    n = np.array([r["n_linear"] for r in rows], dtype=float)
    gap = np.array([r["in_linear_ms"] - r["solo_linear_ms"] for r in rows])

    def model(x):
        return x[0] * n + x[1] * w / (1 + (x[2] / w) ** x[3])

    sol = least_squares(lambda x: model(x) / gap - 1, [0.005, 0.09, 5.0, 3.0], bounds=([0, 0, 0.5, 0.5], [0.05, 1, 64, 20]))
    a, c, cap, k = map(float, sol.x)
    return {"a_ms_per_linear": a, "c_ms_per_mib": c, "capacity_bytes": cap * 2**20, "sharpness": k,
            "rel_rms": float(np.sqrt(np.mean(sol.fun ** 2))), "rows": len(rows)}


def sweep_residency(path=None) -> dict:
    """C (bytes) and k of :func:`residency_miss` least-squares fitted to the bandwidth sweep
    (``profiles/bandwidth-cpu.csv``, the idle machine): m(S) = (1/warm(S) − 1/B_cache) / (1/B_dram − 1/B_cache)
    for working sets S ≥ 2 MiB, B_cache and B_dram as in :func:`sdsl.roofline.model_switch.dram_ratio`."""
    import pandas as pd
    from scipy.optimize import least_squares

    from sdsl.roofline.model_switch import CACHE_SIZES, DRAM_FROM

    sw = pd.read_csv(Path(__file__).resolve().parents[1] / "profiles" / "bandwidth-cpu.csv" if path is None else path)
    size, warm, cold = (sw[c].to_numpy(dtype=float) for c in ("size_bytes", "warm_gbs", "cold_gbs"))
    b_cache = np.median(warm[(size >= CACHE_SIZES[0]) & (size <= CACHE_SIZES[1])])
    b_dram = np.median(cold[size >= DRAM_FROM])
    sel = size >= CACHE_SIZES[0]
    miss = (1 / warm[sel] - 1 / b_cache) / (1 / b_dram - 1 / b_cache)
    sol = least_squares(lambda x: residency_miss(size[sel], x[0] * 2**20, x[1]) - miss, [16.0, 3.0], bounds=([1, 0.5], [128, 20]))
    return {"capacity_bytes": float(sol.x[0]) * 2**20, "sharpness": float(sol.x[1]), "rms": float(np.sqrt(np.mean(sol.fun ** 2)))}


def residency_miss(weight_bytes, capacity: float, sharpness: float):
    """m(W) = 1 / (1 + (C/W)^k): the share of a forward's weights read from DRAM rather than the caches."""
    w = np.asarray(weight_bytes, dtype=float)
    return 1.0 / (1.0 + (capacity / w) ** sharpness)


def gemm_weight_bytes(spec, dtype_bytes: int = 4) -> float:
    """Weight bytes of every GEMM of one forward (the layers' four and the LM head)."""
    from sdsl.roofline.latency import GEMM_OPS, ModelShapes

    sh = ModelShapes.of(spec)
    return float(dtype_bytes * (sum(sh.gemm_in[o] * sh.gemm_out[o] for o in GEMM_OPS) * sh.n_layer + sh.lm_in * sh.lm_out))


def _pack_s(tokens, n_in, n_out, eta_m, bw, kappa, dtype_bytes=4):
    w = dtype_bytes * np.asarray(n_in, dtype=float) * np.asarray(n_out, dtype=float)
    return np.where(np.asarray(tokens, dtype=float) >= 2, kappa * w / (eta_m * bw), 0.0)


def _layer_extra_s(spec, tokens, eta_m, bw, kappa, t_row):
    """One layer's packing passes and per-row cost (no cold term: what a warm layer profile sees)."""
    from sdsl.roofline.latency import GEMM_OPS, ModelShapes

    sh = ModelShapes.of(spec)
    return sum(_pack_s(tokens, sh.gemm_in[o], sh.gemm_out[o], eta_m, bw, kappa) for o in GEMM_OPS) + t_row * tokens


def form_extra_s(spec, dep, batch, q, form: FormParams, cold: bool = True):
    """Seconds the forward terms add to :func:`sdsl.roofline.latency.step_time_s` of one forward (b, q)."""
    from sdsl.roofline.latency import ModelShapes

    bw, eta_m = dep.hardware.mem_bandwidth, dep.params.eta_memory
    tokens = np.asarray(batch, dtype=float) * np.asarray(q, dtype=float)
    sh = ModelShapes.of(spec)
    extra = sh.n_layer * _layer_extra_s(spec, tokens, eta_m, bw, form.kappa_pack, form.t_row)
    extra = extra + _pack_s(tokens, sh.lm_in, sh.lm_out, eta_m, bw, form.kappa_pack)
    if cold:
        w = gemm_weight_bytes(spec)
        extra = extra + residency_miss(w, form.capacity, form.sharpness) * w * (form.rho - 1) / (eta_m * bw)
    return extra


def step_extras(target, draft, dep, gamma: int, batch: int, resync: bool, form: FormParams) -> tuple[float, float, float]:
    """(seconds added to a speculative step, to a plain step, factor on the draft's switch term 1 − m(W_draft))."""
    ex = lambda spec, q: float(form_extra_s(spec, dep, batch, q, form))  # noqa: E731
    step, plain = ex(target, gamma + 1), ex(target, 1)
    scale = 1.0
    if draft is not None:
        step += ex(draft, 2 if resync else 1) + (gamma - 1) * ex(draft, 1)
        scale = 1.0 - float(residency_miss(gemm_weight_bytes(draft), form.capacity, form.sharpness))
    return step, plain, scale


_NAMES = ("eta_compute", "eta_memory", "t_kernel", "t_layer", "t_step", "smoothness", "kappa_pack", "t_row")
_BOUNDS = ((1e-6, 1.0), (1e-6, 1.0), (0.0, 1e-3), (0.0, 1e-2), (0.0, 1.0), (1.0, 64.0), (0.0, 10.0), (0.0, 1e-4))
_SCALE = (0.1, 0.1, 1e-6, 1e-5, 1e-4, 1.0, 0.1, 1e-6)


def fit_forward_form(ops, hardware, layers, steps, *, capacity: float, sharpness: float, rho: float,
                     terms=("pack", "row")) -> FormParams:
    """Least squares of log time over operator, layer and forward rows (as :func:`sdsl.fit.calibration.fit_latency`,
    p free in [1, 64]) with the packing knee and per-row cost on all rows and the cold term on forward rows.
    ``terms`` names the fitted terms (``pack``: κ_pack, ``row``: t_row; a missing one is 0); ``capacity`` ∞
    switches the cold term off."""
    from scipy.optimize import least_squares

    from sdsl.roofline.deployment import Deployment
    from sdsl.fit.calibration import _problem, predict_layer_times, predict_step_times

    pb = _problem(ops, hardware, "fp32", None, None, layers, steps, 1.0)
    d = pb.data
    tok, n_in, n_out = (d[c].to_numpy(dtype=float) for c in ("num_tokens", "in_features", "out_features"))
    meas = np.log(np.concatenate([pb.y, pb.layer_meas, pb.step_meas]))

    free = [i for i, n in enumerate(_NAMES) if i < 6 or {"kappa_pack": "pack", "t_row": "row"}[n] in terms]

    def full(x):
        v = np.zeros(len(_NAMES))
        v[free] = x
        return v

    def pred(x):
        x = full(x)
        kw = dict(zip(_NAMES[:6], x[:6]))
        p, kappa, t_row = pb.base.replace(**kw), x[6], x[7]
        form = FormParams(p, kappa, t_row, capacity, sharpness, rho)
        out = [pb.op_pred(p) + _pack_s(tok, n_in, n_out, p.eta_memory, pb.bw, kappa)]
        for ly, spec in pb.layers:
            tokens = ly["batch"].to_numpy(dtype=float) * ly["q"].to_numpy(dtype=float)
            out.append(predict_layer_times(ly, spec, hardware, p, "fp32")
                       + _layer_extra_s(spec, tokens, p.eta_memory, pb.bw, kappa, t_row))
        dep = Deployment(hardware, dtype="fp32", params=p)
        for st, spec in pb.steps:
            b, q = st["batch"].to_numpy(dtype=float), st["q"].to_numpy(dtype=float)
            out.append(predict_step_times(st, spec, hardware, p, "fp32") + form_extra_s(spec, dep, b, q, form))
        return np.concatenate(out)

    x0 = np.array([0.01, 0.05, 1e-6, 2e-4, 1e-4, 1.5, 0.5, 1e-6])[free]
    lo, hi = (np.array(b)[free] for b in zip(*_BOUNDS))
    sol = least_squares(lambda x: np.log(np.maximum(pred(x), 1e-12)) - meas, x0, bounds=(lo, hi),
                        x_scale=np.array(_SCALE)[free], xtol=1e-10, ftol=1e-10, gtol=1e-10, max_nfev=400)
    x = full(sol.x)
    p = pb.base.replace(**dict(zip(_NAMES[:6], map(float, x[:6]))),
                        source=f"forward-form fit to {len(pb.y)} operator timings, {len(pb.layer_meas)} decoder-layer "
                               f"steps, {len(pb.step_meas)} whole forward passes on CPU")
    return FormParams(p, float(x[6]), float(x[7]), capacity, sharpness, rho)


def heldout_form(held, spec: dict, inputs, residency: dict, rho: float, terms=("pack", "row")) -> tuple[FormParams, dict]:
    """:func:`fit_forward_form` without any row of the checkpoints in ``held`` (same drop rule as
    :func:`sdsl.validation.decoder.pricing.heldout_params`)."""
    from sdsl.catalog.hardware import get_hardware

    ops, layers, steps = inputs
    names, widths = set(held), {spec[m].d_model for m in held}
    hit = lambda sp: sp.name in names or sp.d_model in widths  # noqa: E731
    keep_ops = ops[~(ops["model"].isin(names) | ops["d_model"].isin(widths))].drop(columns=["model", "d_model"])
    keep_layers = [(r, sp) for r, sp in layers if not hit(sp)]
    keep_steps = [(r, sp) for r, sp in steps if sp.name not in names]
    form = fit_forward_form(keep_ops, get_hardware("cpu"), keep_layers, keep_steps, capacity=residency["capacity_bytes"],
                            sharpness=residency["sharpness"], rho=rho, terms=terms)
    return form, {"held_out": sorted(names), "profiles_kept": sorted({sp.name for _, sp in keep_layers}),
                  "forward_models_kept": sorted({sp.name for _, sp in keep_steps}), "finite": math.isfinite(form.kappa_pack)}


#: capacities (MiB) :func:`heldout_form_capacity` profiles over
CAPACITY_GRID_MIB = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48)


def _forward_rms(form: FormParams, steps) -> float:
    """RMS log error of the forward rows ``steps`` priced with ``form`` (every term)."""
    from sdsl.roofline.deployment import Deployment
    from sdsl.catalog.hardware import get_hardware
    from sdsl.fit.calibration import predict_step_times

    hw = get_hardware("cpu")
    dep, err = Deployment(hw, dtype="fp32", params=form.params), []
    for st, sp in steps:
        b, q = st["batch"].to_numpy(dtype=float), st["q"].to_numpy(dtype=float)
        pred = predict_step_times(st, sp, hw, form.params, "fp32") + form_extra_s(sp, dep, b, q, form)
        err.append(np.log(pred) - np.log(st["time_s"].to_numpy(dtype=float)))
    return float(np.sqrt(np.mean(np.concatenate(err) ** 2)))


def heldout_form_capacity(held, spec: dict, inputs, sharpness: float, rho: float) -> tuple[FormParams, dict]:
    """:func:`heldout_form` with the residency capacity C chosen per fit from the held-out data: the C of
    :data:`CAPACITY_GRID_MIB` whose refit prices the kept (idle-machine) forward rows best; k fixed."""
    steps = [(r, sp) for r, sp in inputs[2] if sp.name not in set(held)]
    best = None
    for c in CAPACITY_GRID_MIB:
        form, meta = heldout_form(held, spec, inputs, {"capacity_bytes": c * 2**20, "sharpness": sharpness}, rho)
        rms = _forward_rms(form, steps)
        if best is None or rms < best[0]:
            best = (rms, form, meta | {"capacity_mib": c, "forward_rms_log": rms})
    return best[1], best[2]


#: the terms of the decoder pricing's ``switch`` model (:data:`sdsl.validation.decoder.pricing.MODELS`)
FORWARD_TERMS = ("overhead", "finish", "resync", "switch")


def priced_speedup_forward(target, draft, gamma, alpha, batch, ctx, hw, form: FormParams, *, overhead=0.0,
                           overhead_plain=0.0, max_new: int | None = None, dram_ratio: float | None = None,
                           terms=FORWARD_TERMS) -> float:
    """The ``switch`` model's speedup (:func:`sdsl.validation.decoder.pricing.shared_step`) priced with ``form``'s
    fit, plus the forward terms' seconds (:func:`step_extras`) and the draft's switch term scaled by 1 − m(W_draft)."""
    from sdsl.roofline.deployment import Deployment
    from sdsl.roofline.model_switch import switch_time_s
    from sdsl.validation.decoder.pricing import measured_dram_ratio, shared_step

    dep = Deployment(hw, dtype="fp32", context=ctx, params=form.params)
    step = shared_step(target, draft, gamma, alpha, batch, dep, overhead=overhead, overhead_plain=overhead_plain,
                       max_new=max_new, terms=terms, dram_ratio=dram_ratio)
    extra, plain, scale = step_extras(target, draft, dep, gamma, batch, "resync" in terms, form)
    rho = measured_dram_ratio() if dram_ratio is None else dram_ratio
    switch = float(switch_time_s(draft, dep, batch=batch, ratio=rho)) if "switch" in terms and draft else 0.0
    t_step = float(step.t_step_s) + extra + switch * (scale - 1.0)
    return float(step.tau) / t_step * (float(step.t_plain_s) + plain)
