"""Latency parameters for a GPU nobody measured, transferred from the GPUs somebody did (the cross-GPU
efficiency model). Summary of docs/model.md §3.3.

Each calibrated GPU contributes its fitted :class:`~sdsl.roofline.latency_params.LatencyParams` (efficiencies
η_c, η_m, kernel floor t_kernel, per-layer/step overheads, smoothness p and the all-reduce terms).
A GPU ``x`` without measurements gets a kernel-weighted average of them (Nadaraya–Watson kernel
regression; Nadaraya 1964, Watson 1964) over what its datasheet gives:

    θ(x) = Σ_i w_i θ_i / Σ_i w_i,   w_i = exp(−d(x, i)² / 2),
    d(x, i)² = Σ_f ((f(x) − f(i)) / s_f)² + [arch(x) ≠ arch(i)] + [memory class(x) ≠ memory class(i)]

with continuous features f = log peak bf16 FLOP/s, log bandwidth, log machine balance
(FLOP/s ÷ bytes/s), log SM count and log L2 size (a feature either side lacks is skipped), each
scaled by its spread s_f over the accelerator catalog (so nothing measured sets the scale).
Efficiencies (every ``eta_*`` field) are averaged as logits, the smoothness as 1/p (hard max = 0),
other numbers (times) as they are; a non-numeric or integer field (the GEMM tile ``m_tile``) is the
closest calibrated GPU's, except the smallest row tile ``m_tile_min``, which is the target's own
tensor-core instruction (:func:`sdsl.roofline.kernels.min_row_tile`: a datasheet fact, not a fit). The
all-reduce terms are averaged over the calibrated GPUs whose all-reduce was measured (their ``source``
says "all-reduce fitted"), so assumed defaults never dilute a measured all-reduce; with none, they
are the candidates' (unfitted) values as for any other field.

Nearest architecture first (``rule="architecture"``, the default): when some calibrated GPU shares
the target's architecture, the average runs over those GPUs only; otherwise over all of them.
Evidence (VALIDATION.md "Cross-GPU transfer", leave one GPU out over Vidur's H100-SXM, A100-80GB and A40):
the memory efficiency η_m follows the architecture, not the memory class or the bandwidth
(A100, HBM2e, 0.83 and A40, GDDR6, 0.81 against H100, HBM3, 0.99), so an Ampere card priced from
the other Ampere card beats one priced from the HBM-sharing Hopper card in the decode regime.
``rule="kernel"`` is the plain kernel average over every calibrated GPU (the form before the A40
data); ``rule="memory"`` restricts to the same memory class instead (both kept for that comparison).

With one candidate GPU this is that GPU's parameters; with two it leans towards the closer one.
It cannot learn a trend that the calibrated GPUs do not span: three measured GPUs of two
architectures identify which calibration to borrow, not a regression on the features.
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Mapping

import numpy as np

__all__ = ["TRANSFER_RULES", "datasheet_features", "feature_distance", "transfer_weights", "transfer_params"]

_CONTINUOUS = ("log_peak_flops", "log_bandwidth", "log_balance", "log_sm_count", "log_l2")
#: Which calibrated GPUs a target may lean on (module docstring): the default first.
TRANSFER_RULES = ("architecture", "kernel", "memory")


def datasheet_features(hw) -> dict[str, float | str | None]:
    """What the cross-GPU model reads from a datasheet: log peaks, balance, SMs, L2, architecture, memory class."""
    mem = (hw.memory_type or "").upper()
    return {
        "log_peak_flops": math.log(hw.peak_flops),
        "log_bandwidth": math.log(hw.mem_bandwidth),
        "log_balance": math.log(hw.peak_flops / hw.mem_bandwidth),
        "log_sm_count": math.log(hw.sm_count) if hw.sm_count else None,
        "log_l2": math.log(hw.l2_cache) if hw.l2_cache else None,
        "architecture": hw.architecture,
        "memory_class": "HBM" if mem.startswith("HBM") else (mem[:4] or None),
    }


def _scales() -> dict[str, float]:
    """Spread (std) of each continuous feature over the catalog's accelerators."""
    from sdsl.catalog.hardware import list_hardware

    feats = [datasheet_features(h) for h in list_hardware() if h.kind == "gpu"]
    out = {}
    for f in _CONTINUOUS:
        vals = [x[f] for x in feats if x[f] is not None]
        out[f] = float(np.std(vals)) if len(vals) > 1 and np.std(vals) > 0 else 1.0
    return out


def feature_distance(a, b) -> float:
    """d(a, b) of the module docstring between two :class:`~sdsl.catalog.hardware.Hardware`."""
    fa, fb, s = datasheet_features(a), datasheet_features(b), _scales()
    d2 = sum(((fa[f] - fb[f]) / s[f]) ** 2 for f in _CONTINUOUS if fa[f] is not None and fb[f] is not None)
    d2 += float(fa["architecture"] != fb["architecture"]) + float(fa["memory_class"] != fb["memory_class"])
    return math.sqrt(d2)


def _candidates(hardware, measured: Mapping[str, tuple], rule: str) -> list[str]:
    """The calibrated GPUs ``hardware`` may lean on under ``rule`` (all of them if none qualifies)."""
    if rule not in TRANSFER_RULES:
        raise ValueError(f"transfer rule must be one of {TRANSFER_RULES}, not {rule!r}.")
    if rule == "kernel":
        return list(measured)
    key = "architecture" if rule == "architecture" else "memory_class"
    mine = datasheet_features(hardware)[key]
    same = [k for k, (hw, _) in measured.items() if mine is not None and datasheet_features(hw)[key] == mine]
    return same or list(measured)


def transfer_weights(hardware, measured: Mapping[str, tuple], rule: str = "architecture") -> dict[str, float]:
    """Normalised weights of the calibrated GPUs ``{name: (Hardware, LatencyParams)}`` for ``hardware``
    (0 for a GPU the ``rule`` leaves out; module docstring)."""
    keep = _candidates(hardware, measured, rule)
    d = {k: feature_distance(hardware, measured[k][0]) for k in keep}
    dmin = min(d.values())
    w = {k: math.exp(-(v * v - dmin * dmin) / 2.0) for k, v in d.items()}  # shifted: no underflow
    total = sum(w.values())
    return {k: w.get(k, 0.0) / total for k in measured}


def _logit(x: float) -> float:
    x = min(max(x, 1e-9), 1 - 1e-9)
    return math.log(x / (1 - x))


def _is_allreduce_term(name: str) -> bool:
    """The all-reduce fields of LatencyParams (:func:`sdsl.roofline.kernels.allreduce_time`)."""
    return name.startswith("allreduce_") or name == "eta_interconnect"


def transfer_params(hardware, measured: Mapping[str, tuple], rule: str = "architecture"):
    """Latency parameters for ``hardware`` from calibrated GPUs ``{name: (Hardware, LatencyParams)}``.

    The kernel regression of the module docstring under ``rule`` (:data:`TRANSFER_RULES`), returned as
    the calibrated GPUs' parameter class (:class:`~sdsl.roofline.latency_params.LatencyParams`); ``source``
    names the GPUs it leans on and their weights and says that nothing was measured on ``hardware``.
    """
    if not measured:
        raise ValueError("transfer_params needs at least one calibrated GPU.")
    from sdsl.roofline.kernels import min_row_tile

    w = {k: v for k, v in transfer_weights(hardware, measured, rule).items() if v > 0.0}
    params = {k: p for k, (_, p) in measured.items()}
    cls = type(next(iter(params.values())))
    out = {}
    with_allreduce = {k: v for k, v in w.items() if "all-reduce fitted" in params[k].source}
    for f in fields(cls):
        if f.name == "source":
            continue
        wf = with_allreduce if _is_allreduce_term(f.name) and with_allreduce else w
        vals = {k: getattr(p, f.name) for k, p in params.items() if k in wf}
        total = sum(wf.values())
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals.values())
        if not numeric or f.type in ("int", int):
            out[f.name] = vals[max(wf, key=wf.get)]  # a setting or a count (m_tile), not averaged: the closest GPU's
        elif f.name.startswith("eta"):
            z = sum(wf[k] * _logit(float(v)) for k, v in vals.items()) / total
            out[f.name] = min(1.0, 1.0 / (1.0 + math.exp(-z)))
        elif f.name == "smoothness":
            inv = sum(wf[k] / float(v) for k, v in vals.items()) / total
            out[f.name] = math.inf if inv <= 0 else max(1.0, 1.0 / inv)
        else:
            out[f.name] = sum(wf[k] * float(v) for k, v in vals.items()) / total
    if out.get("m_tile_min"):
        out["m_tile_min"] = min_row_tile(hardware)
    names = ", ".join(f"{measured[k][0].name} {w[k]:.2f}" for k in sorted(w, key=w.get, reverse=True))
    src = (f"cross-GPU efficiency model (sdsl.roofline.gpu_transfer; datasheet-feature kernel weights {names}) "
           f"for {hardware.name}, not measured on it")
    if with_allreduce and set(with_allreduce) != set(w):
        src += "; all-reduce terms from " + ", ".join(measured[k][0].name for k in with_allreduce) + " (measured)"
    return cls(**out, source=src)
