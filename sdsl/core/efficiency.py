"""Latency parameters for a GPU nobody measured, from the GPUs somebody did (cross-GPU efficiency model).

Each calibrated GPU contributes its fitted :class:`~sdsl.core.latency_params.LatencyParams` (efficiencies
η_c, η_m, kernel floor t_kernel, per-layer/step overheads, smoothness p and the all-reduce terms).
A GPU ``x`` without measurements gets a kernel-weighted average of them (Nadaraya–Watson kernel
regression; Nadaraya 1964, Watson 1964) over what its datasheet gives:

    θ(x) = Σ_i w_i θ_i / Σ_i w_i,   w_i = exp(−d(x, i)² / 2),
    d(x, i)² = Σ_f ((f(x) − f(i)) / s_f)² + [arch(x) ≠ arch(i)] + [memory class(x) ≠ memory class(i)]

with continuous features f = log peak bf16 FLOP/s, log bandwidth, log machine balance
(FLOP/s ÷ bytes/s), log SM count and log L2 size (a feature either side lacks is skipped), each
scaled by its spread s_f over the accelerator catalog (so nothing measured sets the scale).
Efficiencies (every ``eta_*`` field) are averaged as logits, the smoothness as 1/p (hard max = 0),
other numbers (times) as they are; a non-numeric field is the closest calibrated GPU's.

With one calibrated GPU this is that GPU's parameters; with two it leans towards the closer one.
It cannot learn a trend that the calibrated GPUs do not span: a model with two measured GPUs
(H100-SXM and A100-80GB from Vidur) can only interpolate between them (VALIDATION.md).
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Mapping

import numpy as np

__all__ = ["datasheet_features", "feature_distance", "transfer_weights", "transfer_params"]

_CONTINUOUS = ("log_peak_flops", "log_bandwidth", "log_balance", "log_sm_count", "log_l2")


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
    from sdsl.core.hardware import list_hardware

    feats = [datasheet_features(h) for h in list_hardware() if h.kind == "gpu"]
    out = {}
    for f in _CONTINUOUS:
        vals = [x[f] for x in feats if x[f] is not None]
        out[f] = float(np.std(vals)) if len(vals) > 1 and np.std(vals) > 0 else 1.0
    return out


def feature_distance(a, b) -> float:
    """d(a, b) of the module docstring between two :class:`~sdsl.core.hardware.Hardware`."""
    fa, fb, s = datasheet_features(a), datasheet_features(b), _scales()
    d2 = sum(((fa[f] - fb[f]) / s[f]) ** 2 for f in _CONTINUOUS if fa[f] is not None and fb[f] is not None)
    d2 += float(fa["architecture"] != fb["architecture"]) + float(fa["memory_class"] != fb["memory_class"])
    return math.sqrt(d2)


def transfer_weights(hardware, measured: Mapping[str, tuple]) -> dict[str, float]:
    """Normalised kernel weights of the calibrated GPUs ``{name: (Hardware, LatencyParams)}`` for ``hardware``."""
    d = {k: feature_distance(hardware, hw) for k, (hw, _) in measured.items()}
    dmin = min(d.values())
    w = {k: math.exp(-(v * v - dmin * dmin) / 2.0) for k, v in d.items()}  # shifted: no underflow
    total = sum(w.values())
    return {k: v / total for k, v in w.items()}


def _logit(x: float) -> float:
    x = min(max(x, 1e-9), 1 - 1e-9)
    return math.log(x / (1 - x))


def transfer_params(hardware, measured: Mapping[str, tuple]):
    """Latency parameters for ``hardware`` from calibrated GPUs ``{name: (Hardware, LatencyParams)}``.

    The kernel regression of the module docstring, returned as the calibrated GPUs' parameter class
    (:class:`~sdsl.core.latency_params.LatencyParams`); ``source`` names the GPUs and their weights and says
    that nothing was measured on ``hardware``.
    """
    if not measured:
        raise ValueError("transfer_params needs at least one calibrated GPU.")
    w = transfer_weights(hardware, measured)
    params = {k: p for k, (_, p) in measured.items()}
    cls = type(next(iter(params.values())))  # LatencyParams, without importing sdsl.core.latency_params (no cycle)
    out = {}
    nearest = max(w, key=w.get)
    for f in fields(cls):
        if f.name == "source":
            continue
        vals = {k: getattr(p, f.name) for k, p in params.items()}
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals.values()):
            out[f.name] = vals[nearest]  # a non-numeric setting: the closest calibrated GPU's
        elif f.name.startswith("eta"):
            z = sum(w[k] * _logit(float(v)) for k, v in vals.items())
            out[f.name] = min(1.0, 1.0 / (1.0 + math.exp(-z)))
        elif f.name == "smoothness":
            inv = sum(w[k] / float(v) for k, v in vals.items())
            out[f.name] = math.inf if inv <= 0 else max(1.0, 1.0 / inv)
        else:
            out[f.name] = sum(w[k] * float(v) for k, v in vals.items())
    names = ", ".join(f"{measured[k][0].name} {w[k]:.2f}" for k in sorted(w, key=w.get, reverse=True))
    src = (f"cross-GPU efficiency model (sdsl.core.efficiency; datasheet-feature kernel weights {names}) "
           f"for {hardware.name}, not measured on it")
    return cls(**out, source=src)
