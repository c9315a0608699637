"""The 80% band on a priced step's tokens/s, TPOT and speed-up, read from ``sdsl/data/bands.json``.

The bands are sdsl's own held-out residuals per class (how they are computed, and their coverage on held-out
rows: :mod:`sdsl.validation.bands`, ``sdsl validate bands``; VALIDATION.md "Uncertainty bands"). A step gets:

- a **step-time band** by class: plain decode and speculative decoding of a dense target by engine family
  (``decode:<engine>``, ``speculative:<engine>``), and the mixture-of-experts classes for a target with routed
  experts (``moe_decode``, ``moe_speculative``, and ``moe_speedup`` for its speed-up). A class whose rows span too
  few sources has its rows joined by its parent's (``speculative:vllm`` by ``speculative``'s, then by every
  step-time row's) and its name says so (``class -> parent``). A dense target's speed-up takes its speculative tokens/s band: most published
  speculative rows state no plain baseline of their own, so the plain step's error is not netted out. An engine
  profile that priced no validation row (a newer build, a user's calibrated file, the roofline alone) gets the
  widest band of its class (the envelope of the class's bands) and ``profile_has_rows`` False says so.
- an **acceptance band** by how τ was obtained (:attr:`PricedStep.acceptance_source`): ``measured`` (a user's
  accepted length or per-position rates: the error of carrying a measurement to another k), ``same-target``
  (the catalog's rows for this target), ``transferred`` (the catalog's rows of other targets or workloads), the
  widest acceptance band for SDSL's plane (no held-out acceptance rows of its own), and none where τ or an i.i.d.
  α was given as such (a what-if level: its uncertainty is the caller's).

Speculative figures combine the two in log space, root-sum-square per side (independent errors):
low = −√(low_l² + low_a²), high = √(high_l² + high_a²); a step with τ = 1 (nothing drafted) has no acceptance
part. tokens/s and speed-up are x·exp([low, high]); a TPOT is TPOT·exp([−high, −low]).
"""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np

__all__ = ["load_bands", "step_band", "BAND_FIELDS", "acceptance_class", "combine"]

#: The low/high arrays a priced step carries, in ``to_dict`` order.
BAND_FIELDS = ("tokens_per_s_low", "tokens_per_s_high", "plain_tokens_per_s_low", "plain_tokens_per_s_high",
               "speedup_low", "speedup_high", "tpot_s_low", "tpot_s_high")

_MEASURED = ("given:", "accepted-length", "conditional", "marginal", "histogram", "file")


@lru_cache(maxsize=1)
def load_bands() -> dict:
    """The shipped bands (``sdsl/data/bands.json``)."""
    from sdsl._paths import data_path

    return json.loads(data_path("bands.json").read_text())


def acceptance_class(source: str) -> str | None:
    """The acceptance class of an acceptance source (module docstring); None for a τ or α given as such."""
    s = str(source or "given").split(" (")[0]
    if s.startswith("catalog[same-target]"):
        return "same-target"
    if s.startswith("catalog["):
        return "transferred"
    if s == "sdsl-plane":
        return "widest"
    if s.startswith(_MEASURED) and s != "given":
        return "measured"
    return None


def combine(a: tuple, b: tuple) -> tuple:
    """Two log-space bands (low ≤ 0 ≤ high) combined root-sum-square per side (module docstring)."""
    return -float(np.hypot(a[0], b[0])), float(np.hypot(a[1], b[1]))


def _widest(table: dict, names) -> tuple:
    bands = [(table[n]["low"], table[n]["high"]) for n in names if table.get(n, {}).get("low") is not None]
    return min(b[0] for b in bands), max(b[1] for b in bands)


def _latency(table: dict, kind: str, family: str, moe: bool, has_rows: bool) -> tuple[tuple, str]:
    """((low, high), class) of the step-time band for ``kind`` (decode, speculative, speedup)."""
    if moe:
        name = {"decode": "moe_decode", "speculative": "moe_speculative", "speedup": "moe_speedup"}[kind]
    else:
        kind = "speculative" if kind == "speedup" else kind
        if not has_rows:
            group = [n for n in table if n == kind or n.startswith(kind + ":")]
            return _widest(table, group), f"{kind}, widest"
        name = f"{kind}:{family}" if f"{kind}:{family}" in table else kind
    entry = table[name]
    used = name if entry["own"] else f"{name} -> {entry['from_class']}"
    return (entry["low"], entry["high"]), used


def _is_moe(step) -> bool:
    for t in (step.verify_time, step.plain_time):
        if t is not None and np.any(np.asarray(getattr(t, "distinct_experts", 0.0)) > 0):
            return True
    return False


def step_band(step) -> dict:
    """The band of a :class:`~sdsl.speculation.priced_step.PricedStep` (module docstring): the arrays of
    :data:`BAND_FIELDS` and ``info`` (level, the classes used, whether the profile priced validation rows, their
    log-space offsets)."""
    bands = load_bands()
    lat, acc = bands["latency"], bands["acceptance"]
    engine = step.engine
    name = "ideal" if engine is None else engine.name.split("+")[0]
    family = "ideal" if engine is None else engine.engine
    has_rows = name in bands["profiles_with_rows"]
    moe = _is_moe(step)
    plain, plain_cls = _latency(lat, "decode", family, moe, has_rows)
    spec, spec_cls = _latency(lat, "speculative", family, moe, has_rows)
    ratio, ratio_cls = _latency(lat, "speedup", family, moe, has_rows)
    a_cls = acceptance_class(step.acceptance_source)
    if a_cls is None:
        a_band = (0.0, 0.0)
    elif a_cls == "widest":
        a_band, a_cls = _widest(acc, list(acc)), "widest (SDSL's plane has no held-out rows)"
    else:
        a_band = (acc[a_cls]["low"], acc[a_cls]["high"])
    drafted = np.asarray(step.tau, dtype=float) > 1.0
    spec_c, ratio_c = combine(spec, a_band), combine(ratio, a_band)
    lo_s, hi_s = np.where(drafted, spec_c[0], spec[0]), np.where(drafted, spec_c[1], spec[1])
    lo_r, hi_r = np.where(drafted, ratio_c[0], ratio[0]), np.where(drafted, ratio_c[1], ratio[1])
    tps, plain_tps = np.asarray(step.tokens_per_s), np.asarray(step.plain_tokens_per_s)
    sp, tpot = np.asarray(step.speedup), np.asarray(step.tpot_s)
    info = {"level": bands["level"], "profile": name, "profile_has_rows": has_rows,
            "target_class": "moe" if moe else "dense", "plain_class": plain_cls, "speculative_class": spec_cls,
            "speedup_class": ratio_cls, "acceptance_class": a_cls or "given (no acceptance band)",
            "log_offsets": {"plain": list(plain), "speculative": list(spec_c), "speedup": list(ratio_c),
                            "acceptance": list(a_band)},
            "source": "sdsl/data/bands.json (sdsl validate bands)"}
    return {"tokens_per_s_low": tps * np.exp(lo_s), "tokens_per_s_high": tps * np.exp(hi_s),
            "plain_tokens_per_s_low": plain_tps * np.exp(plain[0]), "plain_tokens_per_s_high": plain_tps * np.exp(plain[1]),
            "speedup_low": sp * np.exp(lo_r), "speedup_high": sp * np.exp(hi_r),
            "tpot_s_low": tpot * np.exp(-hi_s), "tpot_s_high": tpot * np.exp(-lo_s), "info": info}
