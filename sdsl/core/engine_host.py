"""Exposed host time per speculative step of an engine build, from published overlap on/off measurements.

An engine that cannot overlap its host work (scheduling, input preparation, sampling, the CPU side of
the speculative worker) with the GPU leaves the GPU idle for that host time once per step; the
operator-level roofline (docs/model.md §3.3) does not see it. Plain decoding in SGLang (overlap
scheduler since v0.4) and vLLM V1 with async scheduling hides it; speculative decoding did not until
SGLang's spec v2 (PRs #9588, #11398, 2025-08/10) and vLLM's async scheduling for EAGLE (PR #25872,
2025-09). docs/model.md §3.5.1.

Each profile in ``sdsl/data/published/engine_host.csv`` is one published batch-1 measurement of the same
engine build with and without overlap for speculative decoding: the per-step time it saved is the host
time that overlap hides, a *lower bound* on the exposed host time of the build without overlap (the
overlapped builds still sync once per step). The catalog is never fitted to sdsl's validation rows.
:func:`host_step_s` returns the value ``price_speculation(..., overhead_s=...)`` charges once per
speculative step; plain steps are not charged (overlap hides it there).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache

from sdsl._paths import data_path
from sdsl.errors import UnknownNameError

__all__ = ["EngineHost", "engine_hosts", "host_step_s", "ENGINE_PROFILES", "NO_HOST"]

NO_HOST = "none"  # the operator-level roofline alone (sdsl's default: an upper bound for these engines)


@dataclass(frozen=True)
class EngineHost:
    """One sourced overlap on/off measurement: the step time of the same build without and with overlap."""

    profile: str
    engine: str
    build: str
    step_before_s: float
    step_after_s: float
    derivation: str
    source: str
    quote: str
    model: str
    gpu: str
    batch: str
    notes: str

    @property
    def host_step_s(self) -> float:
        """Seconds per speculative step that overlap hid: step without overlap − step with it."""
        return self.step_before_s - self.step_after_s

    def to_dict(self) -> dict:
        return {**self.__dict__, "host_step_s": self.host_step_s}


@lru_cache(maxsize=1)
def _load() -> dict:
    with open(data_path("published", "engine_host.csv"), newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return {r["profile"]: EngineHost(**{**r, "step_before_s": float(r["step_before_s"]),
                                        "step_after_s": float(r["step_after_s"])}) for r in rows}


def engine_hosts() -> dict:
    """{profile: :class:`EngineHost`} of the shipped catalog."""
    return dict(_load())


ENGINE_PROFILES = (NO_HOST, *_load())


def host_step_s(profile: str) -> float:
    """Exposed host seconds per speculative step of ``profile`` (``"none"`` → 0); an unknown name is a
    one-line :class:`~sdsl.errors.UnknownNameError`."""
    key = str(profile).strip().lower()
    if key == NO_HOST:
        return 0.0
    hosts = _load()
    if key not in hosts:
        raise UnknownNameError(f"Unknown engine profile {profile!r}; known: {', '.join(ENGINE_PROFILES)}.")
    return hosts[key].host_step_s
