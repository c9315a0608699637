"""Converters from what engines and benchmarks print to sdsl's acceptance: α, per-position rates, and
the bonus-token convention. Summary of docs/model.md §2 (notation) and the README's acceptance table.

Draft position i = 1..k is accepted with *conditional* probability p_i = P(i accepted | 1..i−1 accepted);
the *marginal* rate m_i = P(i accepted) = Π_{j≤i} p_j (acceptance stops at the first rejection).
Engines' conventions:

- vLLM v1 "Per-position acceptance rate" = marginal m_i (accepted at position i / drafts,
  vllm/v1/spec_decode/metrics.py); "Mean acceptance length" = 1 + Σ m_i (bonus included since vLLM
  PR #17908, May 2025; before it the same line printed Σ m_i, bonus excluded); "draft acceptance rate"
  = (τ − 1) / γ.
- SGLang "accept len" = (accepted drafts + 1 per request) / verify passes: bonus included.
- Spec-Bench "#Mean Accepted Tokens", EAGLE papers' τ, llama.cpp "mean acceptance length": bonus included.
- gpt-fast "Mean Accepted" and per-step accepted-draft counts (its accept-count histogram): bonus
  excluded (τ − 1).

The α converters invert Leviathan et al.'s τ(α, γ) (:func:`sdsl.acceptance.tau.alpha_from_tau`),
which is monotone in α.
"""

from __future__ import annotations

import numpy as np

from sdsl.acceptance.tau import alpha_from_tau, check_alpha
from sdsl.errors import InvalidInputError

__all__ = ["alpha_from_mean_accepted", "alpha_from_accept_histogram", "positional_acceptance", "alpha_from_vllm",
           "alpha_from_spec_bench", "marginal_from_conditional", "conditional_from_marginal", "check_marginal",
           "accepted_length_with_bonus"]


def alpha_from_mean_accepted(mean_accepted, gamma) -> np.ndarray:
    """α from gpt-fast's "Mean Accepted" (accepted draft tokens per step = τ − 1)."""
    return alpha_from_tau(np.asarray(mean_accepted, dtype=float) + 1.0, gamma)


def _histogram(counts) -> np.ndarray:
    c = np.asarray(counts, dtype=float)
    if c.ndim != 1 or c.size < 2:
        raise InvalidInputError("The accept-count histogram needs gamma + 1 >= 2 bins (counts[i] = steps with i accepted).")
    if np.any(~np.isfinite(c)) or np.any(c < 0) or c.sum() <= 0:
        raise InvalidInputError("Accept counts must be non-negative and not all zero.")
    return c


def alpha_from_accept_histogram(counts) -> float:
    """Maximum-likelihood α from an accept-count histogram (gpt-fast's ``accept_counts``), under the
    i.i.d. model of Leviathan et al. (2023) §3.1.

    ``counts[i]`` = number of steps in which exactly i of the γ = len(counts) − 1 drafts were
    accepted. Under the i.i.d. model each step is a geometric trial truncated at γ: it contributes
    i acceptances and, when i < γ, one rejection. The MLE is acceptances / (acceptances + rejections).
    """
    c = _histogram(counts)
    i = np.arange(c.size)
    accepted = float((i * c).sum())
    rejected = float(c[:-1].sum())
    return accepted / (accepted + rejected)


def positional_acceptance(counts) -> np.ndarray:
    """Per-position conditional acceptance α_j = P(draft j accepted | drafts < j accepted), j = 1..γ
    (the position-dependent generalisation of Leviathan et al.'s i.i.d. α, docs/model.md §2).

    From the same histogram as :func:`alpha_from_accept_histogram`; NaN where no step reached j.
    """
    c = _histogram(counts)
    reached = c[::-1].cumsum()[::-1]  # steps with >= j accepted, j = 0..γ
    with np.errstate(invalid="ignore", divide="ignore"):
        return reached[1:] / reached[:-1]


def alpha_from_vllm(gamma, *, mean_acceptance_length=None, draft_acceptance_rate=None) -> np.ndarray:
    """α from vLLM v1 metrics: "mean acceptance length" (= τ) or "draft acceptance rate" (= (τ − 1)/γ)."""
    if (mean_acceptance_length is None) == (draft_acceptance_rate is None):
        raise InvalidInputError("Give exactly one of mean_acceptance_length or draft_acceptance_rate.")
    if mean_acceptance_length is not None:
        return alpha_from_tau(mean_acceptance_length, gamma)
    rate = check_alpha(draft_acceptance_rate, name="draft_acceptance_rate")
    return alpha_from_tau(1.0 + rate * np.asarray(gamma, dtype=float), gamma)


def alpha_from_spec_bench(mean_accepted_tokens, gamma) -> np.ndarray:
    """α from Spec-Bench's "mean accepted tokens" (= τ, bonus token included)."""
    return alpha_from_tau(mean_accepted_tokens, gamma)


def marginal_from_conditional(p) -> np.ndarray:
    """Marginal rates m_i = Π_{j≤i} p_j over the last axis (what vLLM logs per position)."""
    return np.cumprod(check_alpha(p, name="conditional acceptance"), axis=-1)


def check_marginal(m) -> np.ndarray:
    """Return ``m`` as a float array, raising InvalidInputError unless it lies in [0, 1] and is
    non-increasing along the last axis (a marginal rate cannot grow with position)."""
    m = check_alpha(m, name="marginal acceptance")
    if m.ndim == 0:
        raise InvalidInputError("A marginal acceptance vector needs one rate per draft position.")
    if np.any(np.diff(m, axis=-1) > 1e-9):
        raise InvalidInputError(f"Marginal (per-position) acceptance must be non-increasing; got {np.round(m, 4).tolist()}.")
    return m


def conditional_from_marginal(m) -> np.ndarray:
    """Conditional rates p_i = m_i / m_{i−1} (m_0 = 1) from marginal rates; 0 once m reaches 0."""
    m = check_marginal(m)
    prev = np.concatenate([np.ones(m.shape[:-1] + (1,)), m[..., :-1]], axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(prev > 0, m / np.where(prev > 0, prev, 1.0), 0.0)
    return np.clip(p, 0.0, 1.0)  # m_i <= m_{i-1} up to the 1e-9 check tolerance: rounding only


def accepted_length_with_bonus(value, *, bonus_included: bool = True) -> np.ndarray:
    """Mean accepted length with the bonus token (τ) from an engine's number: unchanged when the engine
    counts the bonus token (vLLM ≥ PR #17908, SGLang, Spec-Bench), + 1 when it does not (gpt-fast)."""
    v = np.asarray(value, dtype=float)
    lo = 1.0 if bonus_included else 0.0
    if np.any(~np.isfinite(v)):
        raise InvalidInputError(f"Mean accepted length must be a finite number; got {v.ravel()[~np.isfinite(v.ravel())][0]:g}.")
    if np.any(v < lo):
        raise InvalidInputError(f"Mean accepted length must be at least {lo:g}; got {float(np.min(v)):g}.")
    return v if bonus_included else v + 1.0
