"""Acceptance: expected tokens per step τ(α, γ), and α from what engines report.

Notation (docs/model.md §2): α is the per-token acceptance probability under the i.i.d. model, γ the
number of drafted tokens per step, τ the expected tokens *emitted* per target forward pass with the
bonus token included. The i.i.d. model is Leviathan et al. (ICML 2023), §3.1, Eq. (1):
τ(α, γ) = (1 − α^{γ+1}) / (1 − α).

Converters from what engines report to α (all invert τ, which is monotone in α):

- gpt-fast "Mean Accepted" and its accept-count histogram: accepted drafts per step = τ − 1.
- vLLM v1 "mean acceptance length" = τ; vLLM "draft acceptance rate" = (τ − 1) / γ.
- Spec-Bench "mean accepted tokens" = τ.

Per-position acceptance (marginal vs conditional rates, the decay form, engine logs) is the value type
:class:`sdsl.core.acceptance_vector.Acceptance`; token trees are :mod:`sdsl.core.trees`.
"""

from __future__ import annotations

import numpy as np

from sdsl.errors import InvalidInputError

__all__ = [
    "tau",
    "tau_unchecked",
    "tau_positional",
    "alpha_from_tau",
    "alpha_from_mean_accepted",
    "alpha_from_accept_histogram",
    "positional_acceptance",
    "alpha_from_vllm",
    "alpha_from_spec_bench",
    "check_alpha",
    "check_gamma",
]


def check_alpha(alpha, *, open_interval: bool = False, name: str = "alpha") -> np.ndarray:
    """Return ``alpha`` as a float array, raising InvalidInputError outside [0, 1] (or (0, 1))."""
    a = np.asarray(alpha, dtype=float)
    bad = ~np.isfinite(a) | (a <= 0 if open_interval else a < 0) | (a >= 1 if open_interval else a > 1)
    if np.any(bad):
        rng = "(0, 1)" if open_interval else "[0, 1]"
        raise InvalidInputError(f"{name} must lie in {rng}; got {float(np.asarray(a)[bad].ravel()[0]):g}.")
    return a


def check_gamma(gamma, *, name: str = "gamma") -> np.ndarray:
    """Return ``gamma`` as a float array, raising InvalidInputError for negative or non-finite values."""
    g = np.asarray(gamma, dtype=float)
    bad = ~np.isfinite(g) | (g < 0)
    if np.any(bad):
        raise InvalidInputError(f"{name} must be a non-negative number; got {float(g[bad].ravel()[0]):g}.")
    return g


def tau(alpha, gamma) -> np.ndarray:
    """Expected tokens emitted per target forward pass, bonus token included.

    Leviathan et al. (2023), Eq. (1): τ = (1 − α^{γ+1}) / (1 − α), with τ(1, γ) = γ + 1 and
    τ(α, 0) = 1. Evaluated as expm1((γ+1)·ln α) / expm1(ln α), which keeps full relative
    precision as α → 1 (no cancellation between two numbers near 1; expm1 is exact to rounding for
    tiny arguments, so only α = 1 itself needs its limit) and gives 1 at α = 0.
    ``gamma`` may be non-integer (continuous relaxation, used by the γ* optimum). Broadcasts.
    """
    return tau_unchecked(check_alpha(alpha), check_gamma(gamma))


def tau_unchecked(alpha, gamma) -> np.ndarray:
    """:func:`tau` without input validation, for hot loops whose α ∈ [0, 1] and γ ≥ 0 are already
    checked (e.g. the serving controller, evaluated every few simulated steps)."""
    a = np.asarray(alpha, dtype=float)
    g = np.asarray(gamma, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_a = np.log(a)
        out = np.expm1((g + 1.0) * log_a) / np.expm1(log_a)
    at_one = log_a == 0.0  # α = 1: the 0/0 limit is γ + 1
    if at_one.any():
        out = np.where(at_one, g + 1.0, out)
    return out[()] if out.ndim == 0 else out


def tau_positional(alphas) -> np.ndarray:
    """τ with position-dependent acceptance: 1 + Σ_j Π_{i≤j} α_i over the last axis.

    Generalises Leviathan Eq. (1) to per-position conditional acceptance rates α_1..α_γ
    (draft position j is accepted with probability α_j given all earlier ones were).
    """
    a = check_alpha(alphas)
    if a.ndim == 0:
        raise InvalidInputError("alphas must have a last axis of draft positions.")
    return 1.0 + np.cumprod(a, axis=-1).sum(axis=-1)


def alpha_from_tau(tau_value, gamma, *, iterations: int = 80) -> np.ndarray:
    """Invert Leviathan et al. (2023) Eq. (1), τ(α, γ), for α by vectorised bisection (τ is strictly
    increasing in α for γ ≥ 1).

    ``tau_value`` must lie in [1, γ + 1]; τ = 1 gives α = 0 and τ = γ + 1 gives α = 1.
    """
    t = np.asarray(tau_value, dtype=float)
    g = check_gamma(gamma)
    t, g = np.broadcast_arrays(t, g)
    if np.any(g < 1):
        raise InvalidInputError("gamma must be at least 1 to infer alpha from tau.")
    bad = ~np.isfinite(t) | (t < 1) | (t > g + 1 + 1e-12)
    if np.any(bad):
        raise InvalidInputError(
            f"tau must lie in [1, gamma + 1]; got tau={float(t[bad].ravel()[0]):g} for gamma={float(g[bad].ravel()[0]):g}."
        )
    lo = np.zeros(t.shape)
    hi = np.ones(t.shape)
    for _ in range(iterations):  # 80 halvings: below float resolution
        mid = 0.5 * (lo + hi)
        above = tau(mid, g) > t
        hi = np.where(above, mid, hi)
        lo = np.where(above, lo, mid)
    out = 0.5 * (lo + hi)
    out = np.where(t <= 1, 0.0, np.where(t >= g + 1, 1.0, out))
    return out[()] if out.ndim == 0 else out


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
