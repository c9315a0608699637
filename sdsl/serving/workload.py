"""Serving workloads: request arrival times, prompt and output lengths, per-request acceptance.

A :class:`Workload` is a frozen set of equal-length arrays sorted by arrival. It comes from
Poisson arrivals at a target QPS (:func:`poisson_workload`) or from a replay of the Azure
Splitwise traces in ``sdsl/data/traces/splitwise_{conv,code}.csv`` (shipped with the package) (:func:`load_trace`,
time-scaled to a target QPS with :func:`scale_to_qps`). Per-request acceptance rates α_r come
from an :class:`AcceptanceDist` (a Beta distribution around a mean, optionally shifting to
another mean for requests that arrive after a given time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from sdsl._paths import DATA_DIR
from sdsl.errors import ConfigError, InvalidInputError

__all__ = [
    "Workload",
    "AcceptanceDist",
    "trace_path",
    "load_trace",
    "scale_to_qps",
    "poisson_workload",
    "trace_workload",
]

TRACE_NAMES = ("conv", "code")
ALPHA_CLIP = (0.01, 0.99)


def trace_path(name_or_path: str | Path, data_dir: str | Path | None = None) -> Path:
    """Resolve ``conv``/``code`` to the Splitwise CSV, or return an explicit path."""
    text = str(name_or_path)
    if text in TRACE_NAMES:
        base = Path(data_dir) if data_dir is not None else DATA_DIR
        return base / "traces" / f"splitwise_{text}.csv"
    return Path(text)


@dataclass(frozen=True)
class Workload:
    """Requests sorted by arrival. ``alpha`` is each request's true per-token acceptance rate."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    alpha: np.ndarray
    name: str = "workload"

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        for field_name in ("prompt_tokens", "output_tokens", "alpha"):
            if len(getattr(self, field_name)) != n:
                raise InvalidInputError(f"Workload.{field_name} must have one entry per request ({n}).")
        if n == 0:
            raise InvalidInputError("A workload needs at least one request.")
        if np.any(np.diff(self.arrival_s) < 0):
            raise InvalidInputError("Workload arrival times must be sorted.")
        if np.any(self.prompt_tokens < 1) or np.any(self.output_tokens < 1):
            raise InvalidInputError("Every request needs at least one prompt token and one output token.")

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def qps(self) -> float:
        """Mean arrival rate (requests per second) over the arrival span."""
        span = float(self.arrival_s[-1] - self.arrival_s[0])
        return (len(self) - 1) / span if span > 0 else math.inf

    def head(self, n: int) -> "Workload":
        """The first ``n`` requests."""
        return replace(self, arrival_s=self.arrival_s[:n], prompt_tokens=self.prompt_tokens[:n],
                       output_tokens=self.output_tokens[:n], alpha=self.alpha[:n])

    def with_alpha(self, dist: "AcceptanceDist", seed: int = 0) -> "Workload":
        """Draw each request's acceptance rate from ``dist`` (seeded)."""
        return replace(self, alpha=dist.sample(self.arrival_s, np.random.default_rng(seed)))

    def clip_context(self, max_context: int) -> "Workload":
        """Truncate prompts (then outputs) so that prompt + output <= ``max_context``."""
        out = np.minimum(self.output_tokens, max(1, max_context // 2))
        prompt = np.clip(np.minimum(self.prompt_tokens, max_context - out), 1, None)
        return replace(self, prompt_tokens=prompt.astype(np.int64), output_tokens=out.astype(np.int64))


@dataclass(frozen=True)
class AcceptanceDist:
    """Per-request acceptance α_r ~ Beta(mean·κ, (1−mean)·κ), clipped to [0.01, 0.99].

    ``concentration`` κ = inf gives every request exactly ``mean``. With ``shift_at_s`` set,
    requests arriving at or after that time use ``mean_after`` instead (a workload shift).
    """

    mean: float = 0.7
    concentration: float = 20.0
    shift_at_s: float | None = None
    mean_after: float | None = None

    def __post_init__(self) -> None:
        for value in (self.mean, self.mean_after if self.mean_after is not None else 0.5):
            if not 0.0 < value < 1.0:
                raise InvalidInputError(f"Mean acceptance rate must be in (0, 1), got {value}.")
        if not self.concentration > 0:
            raise InvalidInputError("Acceptance concentration must be positive.")
        if (self.shift_at_s is None) != (self.mean_after is None):
            raise InvalidInputError("Give both shift_at_s and mean_after for an acceptance shift, or neither.")

    def sample(self, arrival_s: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One α per request (arrival times decide which side of a shift a request is on)."""
        arrival_s = np.asarray(arrival_s, dtype=float)
        mean = np.full(arrival_s.shape, self.mean)
        if self.shift_at_s is not None:
            mean = np.where(arrival_s >= self.shift_at_s, self.mean_after, mean)
        if math.isinf(self.concentration):
            alpha = mean
        else:
            k = self.concentration
            alpha = rng.beta(mean * k, (1.0 - mean) * k)
        return np.clip(alpha, *ALPHA_CLIP)


def load_trace(name_or_path: str | Path, data_dir: str | Path | None = None) -> Workload:
    """Read a Splitwise trace CSV (``arrived_at``, ``num_prefill_tokens``, ``num_decode_tokens``).

    ``name_or_path`` is ``conv``, ``code`` or a CSV path with those three columns (or
    ``arrival_s,prompt_tokens,output_tokens``). α is left at NaN; draw it with
    :meth:`Workload.with_alpha`. A zero-token prompt is raised to one token (a request prefills at least one);
    an empty trace, a negative prompt, an output of fewer than one token or a fractional count is a ConfigError
    naming the line.
    """
    path = trace_path(name_or_path, data_dir)
    if not path.is_file():
        raise ConfigError(f"Trace file not found: {path}.")
    try:
        raw = np.genfromtxt(path, delimiter=",", names=True, dtype=float)
    except ValueError as exc:  # numpy lists every bad line; keep the first so the error stays one line
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        detail = next((ln for ln in lines if ln.startswith("Line #")), lines[0] if lines else "unreadable")
        raise ConfigError(f"Malformed trace CSV {path}: {detail.rstrip('.! ')}.") from None
    names = raw.dtype.names or ()
    for cols in (("arrived_at", "num_prefill_tokens", "num_decode_tokens"),
                 ("arrival_s", "prompt_tokens", "output_tokens")):
        if all(c in names for c in cols):
            break
    else:
        raise ConfigError(f"Trace {path} needs columns arrived_at,num_prefill_tokens,num_decode_tokens.")
    arr, prompt, out = (np.atleast_1d(raw[c]) for c in cols)
    if len(arr) == 0:
        raise ConfigError(f"Trace {path} holds no requests.")
    if not (np.all(np.isfinite(arr)) and np.all(np.isfinite(prompt)) and np.all(np.isfinite(out))):
        raise ConfigError(f"Trace {path} has missing or non-numeric values.")
    _check_token_counts(path, cols, prompt, out)
    order = np.argsort(arr, kind="stable")
    arr = arr[order] - arr[order][0]
    return Workload(arr, np.maximum(prompt[order], 1).astype(np.int64),
                    out[order].astype(np.int64), np.full(len(arr), np.nan),
                    name=path.stem)


def _check_token_counts(path: Path, cols: tuple, prompt: np.ndarray, out: np.ndarray) -> None:
    """Token counts are whole numbers, prompts non-negative and outputs positive: else one ConfigError naming the
    file, the line (the header is line 1) and the column."""
    for name, values, lo, what in ((cols[1], prompt, 0, "a non-negative"), (cols[2], out, 1, "a positive")):
        bad = np.flatnonzero((values < lo) | (values != np.round(values)))
        if bad.size:
            i = int(bad[0])
            raise ConfigError(f"Trace {path}, line {i + 2}: {name} must be {what} whole number of tokens; "
                              f"got {values[i]:g}.")


def scale_to_qps(workload: Workload, qps: float) -> Workload:
    """Stretch or compress arrival times so the mean arrival rate is ``qps`` (shape preserved)."""
    if not qps > 0 or not math.isfinite(qps):
        raise InvalidInputError(f"QPS must be a positive number, got {qps}.")
    current = workload.qps
    if not math.isfinite(current):
        return workload
    return replace(workload, arrival_s=workload.arrival_s * (current / qps))


def poisson_workload(n_requests: int, qps: float, prompt_tokens=512, output_tokens=256,
                     alpha: AcceptanceDist | None = None, seed: int = 0) -> Workload:
    """Poisson arrivals at ``qps``; lengths are ints (all equal) or arrays to resample from."""
    if n_requests < 1:
        raise InvalidInputError("n_requests must be at least 1.")
    if not qps > 0 or not math.isfinite(qps):
        raise InvalidInputError(f"QPS must be a positive number, got {qps}.")
    rng_arr, rng_len, rng_alpha = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3))
    gaps = rng_arr.exponential(1.0 / qps, n_requests)
    arrival = np.cumsum(gaps) - gaps[0]

    def lengths(spec) -> np.ndarray:
        spec = np.asarray(spec)
        if spec.ndim == 0:
            return np.full(n_requests, int(spec), dtype=np.int64)
        return rng_len.choice(spec.astype(np.int64), size=n_requests, replace=True)

    dist = alpha or AcceptanceDist()
    return Workload(arrival, np.maximum(lengths(prompt_tokens), 1), np.maximum(lengths(output_tokens), 1),
                    dist.sample(arrival, rng_alpha), name=f"poisson@{qps:g}")


def trace_workload(trace: str | Path | Workload, qps: float, n_requests: int | None = None,
                   alpha: AcceptanceDist | None = None, seed: int = 0, max_context: int | None = None,
                   data_dir: str | Path | None = None) -> Workload:
    """Replay the first ``n_requests`` of a trace (a name, a CSV path, or a :func:`load_trace` result read once for
    several rates), time-scaled to ``qps``, with α drawn from ``alpha``."""
    w = trace if isinstance(trace, Workload) else load_trace(trace, data_dir)
    if n_requests is not None:
        if n_requests < 2:
            raise InvalidInputError("A trace replay needs at least 2 requests.")
        w = w.head(n_requests)
    if max_context is not None:
        w = w.clip_context(max_context)
    w = scale_to_qps(w, qps)
    return w.with_alpha(alpha or AcceptanceDist(), seed=seed)
