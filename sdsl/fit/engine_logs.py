"""Acceptance as serving engines log it, read into an :class:`~sdsl.acceptance.vector.Acceptance`.

Formats (each engine's own source):
- vLLM v1 (vllm/v1/spec_decode/metrics.py, SpecDecodingLogging.log): "SpecDecoding metrics: Mean acceptance
  length: 2.89, Accepted throughput: … tokens/s, Drafted throughput: … tokens/s, Accepted: 104 tokens,
  Drafted: 330 tokens, Per-position acceptance rate: 0.691, 0.491, …, Avg Draft acceptance rate: 31.5%".
  The per-position rates are marginal (accepted at position i / drafts); mean length = 1 + Σ rates since
  vLLM PR #17908 (May 2025), Σ rates before it: the two conventions are told apart by that sum.
  Intervals are pooled weighted by their drafts (Drafted / k).
- SGLang (scheduler decode log): "Decode batch. #running-req: 1, #token: …, token usage: …, accept len: 3.21,
  [accept rate: …,] cuda graph: True, gen throughput (token/s): …" — accept len = (accepted drafts + 1
  per request) / verify passes, bonus included. No per-position rates: the vector is the decay form
  (:mod:`sdsl.acceptance.decay`) at k = speculative_num_steps (from the logged server_args or
  given). Intervals are pooled unweighted (the line carries no pass count).
- llama.cpp server (PR #24536): "mean acceptance length =  2.92, acceptance rate per position =
  (0.805, 0.632, 0.483)" — vLLM's definitions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sdsl._result import Result
from sdsl.acceptance import Acceptance
from sdsl.errors import ConfigError, InvalidInputError

__all__ = ["LogAcceptance", "read_acceptance_log", "parse_acceptance_log", "ENGINES"]

ENGINES = ("vllm", "sglang", "llamacpp")
_NUM = r"([0-9]*\.?[0-9]+)"
_VLLM = re.compile(r"Mean acceptance length: " + _NUM)
_VLLM_POS = re.compile(r"Per-position acceptance rate: ([0-9.,\s]+?)(?:,\s*Avg|\s*$)")
_VLLM_DRAFTED = re.compile(r"Drafted: (\d+) tokens")
_SGLANG = re.compile(r"accept len: " + _NUM)
_SGLANG_STEPS = re.compile(r"speculative_num_steps=(\d+)")
_LLAMACPP = re.compile(r"mean acceptance length =\s*" + _NUM + r", acceptance rate per position = \(([0-9.,\s]+)\)")


@dataclass(frozen=True)
class LogAcceptance(Result):
    """The acceptance read from one engine log (result protocol: report, to_dict, to_json, plot)."""

    engine: str
    convention: str  # how the log's mean length counts the bonus token
    lines: int  # metrics lines pooled
    k: int
    mean_accepted_length: float  # bonus included, pooled
    acceptance: Acceptance

    def to_dict(self) -> dict:
        return {"engine": self.engine, "convention": self.convention, "lines": self.lines, "k": self.k,
                "mean_accepted_length": self.mean_accepted_length, **self.acceptance.to_dict(self.k)}

    def plot(self, ax=None):
        """The logged acceptance by position."""
        return self.acceptance.plot(ax, k=self.k)

    def report(self) -> str:
        return (f"{self.engine} log: {self.lines} metrics line(s), k = {self.k}, mean accepted length "
                f"{self.mean_accepted_length:.3f} (bonus included; {self.convention})\n" + self.acceptance.report(self.k))


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.replace(" ", "").split(",") if v]


def _vllm_convention(mean: float, marginal: list[float], where: str) -> str:
    """'bonus-included' (1 + Σ m, vLLM ≥ PR #17908) or 'bonus-excluded' (Σ m, earlier v1 releases). A rate
    outside [0, 1] is no acceptance rate: refused here, before any pooling could clip it."""
    bad = [r for r in marginal if not (0.0 <= r <= 1.0)]
    if bad:
        raise ConfigError(f"{where}: per-position acceptance rate {bad[0]:g} is outside [0, 1]; the line is not an "
                          "engine's acceptance metrics.")
    tol = 0.006 + 0.0005 * len(marginal)  # mean printed to 2 decimals, rates to 3
    total = sum(marginal)
    if abs(mean - (1.0 + total)) <= tol:
        return "bonus-included"
    if abs(mean - total) <= tol:
        return "bonus-excluded"
    raise ConfigError(f"{where}: mean acceptance length {mean:g} matches neither 1 + the sum of the per-position "
                      f"rates ({1.0 + total:.3f}) nor that sum ({total:.3f}); the line is not vLLM's format.")


def _pool_vllm(lines: list[str], where: str) -> LogAcceptance:
    rates, weights, conventions = [], [], set()
    for n, line in lines:
        pos = _VLLM_POS.search(line)
        if pos is None:
            continue
        m = _floats(pos.group(1))
        conventions.add(_vllm_convention(float(_VLLM.search(line).group(1)), m, f"{where}:{n}"))
        drafted = _VLLM_DRAFTED.search(line)
        rates.append(m)
        weights.append(int(drafted.group(1)) / len(m) if drafted else 1.0)
    if not rates:
        raise ConfigError(f"{where}: vLLM metrics lines without 'Per-position acceptance rate'; give --k to fit the "
                          "decay form to the mean length, or upgrade vLLM (v0.9+ logs the rates).")
    if len({len(r) for r in rates}) > 1:
        raise ConfigError(f"{where}: the per-position vectors change length (num_speculative_tokens changed mid-log).")
    if len(conventions) > 1:
        raise ConfigError(f"{where}: the log mixes both mean-length conventions (bonus included and excluded).")
    w = np.asarray(weights, dtype=float)
    if w.sum() <= 0:
        raise ConfigError(f"{where}: every vLLM metrics interval drafted 0 tokens; there is no acceptance to read.")
    marginal = (np.asarray(rates) * w[:, None]).sum(axis=0) / w.sum()
    marginal = np.minimum.accumulate(marginal)  # pooled rates (each in [0, 1]) stay non-increasing
    acc = Acceptance.from_marginal(marginal, source="vllm-log")
    return LogAcceptance("vllm", conventions.pop(), len(rates), len(marginal), float(acc.tau()), acc)


def _pool_sglang(lines, text: str, k: int | None, where: str) -> LogAcceptance:
    values = [float(_SGLANG.search(line).group(1)) for _, line in lines]
    values = [v for v in values if v >= 1.0]  # 0.00 is printed by intervals without a verify pass
    if not values:
        raise ConfigError(f"{where}: no SGLang 'accept len' of at least 1 (speculation was off or never ran).")
    if k is None:
        steps = _SGLANG_STEPS.findall(text)
        if not steps:
            raise InvalidInputError(f"{where} does not log speculative_num_steps; give --k (the draft steps per pass).")
        k = int(steps[-1])
    mean = float(np.mean(values))
    acc = Acceptance.from_accepted_length(mean, k, source="sglang-log")
    return LogAcceptance("sglang", "bonus-included", len(values), k, mean, acc)


def _pool_llamacpp(lines, where: str) -> LogAcceptance:
    rates, means = [], []
    for _, line in lines:
        g = _LLAMACPP.search(line)
        means.append(float(g.group(1)))
        rates.append(_floats(g.group(2)))
    if len({len(r) for r in rates}) > 1:
        raise ConfigError(f"{where}: the per-position vectors change length mid-log.")
    for (n, _), mean, m in zip(lines, means, rates):
        if _vllm_convention(mean, m, f"{where}:{n}") != "bonus-included":
            raise ConfigError(f"{where}:{n}: llama.cpp's mean acceptance length should include the bonus token.")
    acc = Acceptance.from_marginal(np.minimum.accumulate(np.mean(rates, axis=0)), source="llamacpp-log")
    return LogAcceptance("llamacpp", "bonus-included", len(rates), len(rates[0]), float(acc.tau()), acc)


def parse_acceptance_log(text: str, *, engine: str = "auto", k: int | None = None, where: str = "log") -> LogAcceptance:
    """Pool every acceptance metrics line of ``text`` (one engine's log) into a :class:`LogAcceptance`.

    ``engine``: "auto" (whichever format the log holds), or one of :data:`ENGINES`. ``k``: the draft
    length, needed only when the log has no per-position rates and does not state it.
    """
    if engine not in ("auto",) + ENGINES:
        raise InvalidInputError(f"Unknown engine {engine!r}; choose one of auto, {', '.join(ENGINES)}.")
    found = {e: [] for e in ENGINES}
    for n, line in enumerate(text.splitlines(), 1):
        if "SpecDecoding metrics" in line and _VLLM.search(line):
            found["vllm"].append((n, line))
        elif _LLAMACPP.search(line):
            found["llamacpp"].append((n, line))
        elif "Decode batch" in line and _SGLANG.search(line):
            found["sglang"].append((n, line))
    present = [e for e in ENGINES if found[e]] if engine == "auto" else [engine]
    if not present or not found[present[0]]:
        raise ConfigError(f"{where}: no acceptance metrics lines of {engine if engine != 'auto' else 'vLLM, SGLang or llama.cpp'} found.")
    if len(present) > 1:
        raise ConfigError(f"{where} holds metrics of several engines ({', '.join(present)}); pass --engine.")
    e = present[0]
    if e == "vllm":
        if k is not None and not any(_VLLM_POS.search(line) for _, line in found[e]):
            means = [float(_VLLM.search(line).group(1)) for _, line in found[e]]
            acc = Acceptance.from_accepted_length(float(np.mean(means)), k, source="vllm-log")
            return LogAcceptance("vllm", "bonus-included (assumed)", len(means), k, float(np.mean(means)), acc)
        return _pool_vllm(found[e], where)
    if e == "sglang":
        return _pool_sglang(found[e], text, k, where)
    return _pool_llamacpp(found[e], where)


def read_acceptance_log(path, *, engine: str = "auto", k: int | None = None) -> LogAcceptance:
    """:func:`parse_acceptance_log` on a file (UTF-8, undecodable bytes replaced)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"Log file {p} not found.")
    return parse_acceptance_log(p.read_text(encoding="utf-8", errors="replace"), engine=engine, k=k, where=str(p))
