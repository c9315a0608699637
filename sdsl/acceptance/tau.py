"""τ, the expected tokens a speculative step emits: Leviathan et al.'s closed form for an i.i.d. α, its
per-position generalisation, and the inverse α(τ). Summary of docs/model.md §2 (notation) and §3.1.

α is the per-token acceptance probability under the i.i.d. model, γ (k) the number of drafted tokens per
step, τ the expected tokens *emitted* per target forward pass with the bonus token included. The i.i.d.
model is Leviathan et al. (ICML 2023), §3.1, Eq. (1): τ(α, γ) = (1 − α^{γ+1}) / (1 − α). With a
conditional acceptance p_i per draft position, τ = 1 + Σ_i Π_{j≤i} p_j (:func:`tau_from_conditional`).
"""

from __future__ import annotations

import numpy as np

from sdsl._checks import broadcast_shapes, numbers
from sdsl.errors import InvalidInputError

__all__ = ["tau", "tau_unchecked", "tau_from_conditional", "chain_tau", "alpha_from_tau", "check_alpha",
           "check_gamma"]


def check_alpha(alpha, *, open_interval: bool = False, name: str = "alpha") -> np.ndarray:
    """Return ``alpha`` as a float array, raising InvalidInputError outside [0, 1] (or (0, 1))."""
    a = numbers(alpha, name, allow_empty=True)
    bad = ~np.isfinite(a) | (a <= 0 if open_interval else a < 0) | (a >= 1 if open_interval else a > 1)
    if np.any(bad):
        rng = "(0, 1)" if open_interval else "[0, 1]"
        raise InvalidInputError(f"{name} must lie in {rng}; got {float(np.asarray(a)[bad].ravel()[0]):g}.")
    return a


def check_gamma(gamma, *, name: str = "gamma") -> np.ndarray:
    """Return ``gamma`` as a float array, raising InvalidInputError for negative or non-finite values."""
    g = numbers(gamma, name, allow_empty=True)
    if np.asarray(gamma).dtype == bool:
        raise InvalidInputError(f"{name} must be a non-negative number of draft tokens; got the boolean {gamma!r}.")
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
    a, g = check_alpha(alpha), check_gamma(gamma)
    broadcast_shapes(alpha=a, gamma=g)
    return tau_unchecked(a, g)


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


def tau_from_conditional(p) -> np.ndarray:
    """τ with position-dependent acceptance: 1 + Σ_i Π_{j≤i} p_i over the last axis, p_i the conditional
    rate of draft position i (Leviathan et al. 2023 Eq. (1) generalised per position; the chain case of the
    SpecInfer/Sequoia tree sum). Broadcasts over leading axes."""
    a = check_alpha(p, name="conditional acceptance")
    if a.ndim == 0:
        raise InvalidInputError("Conditional acceptance needs a last axis of draft positions.")
    return 1.0 + np.cumprod(a, axis=-1).sum(axis=-1)


def chain_tau(acceptance, gamma) -> np.ndarray:
    """τ of a chain of ``gamma`` drafts from an i.i.d. α (number or array; Leviathan Eq. (1)) or from an
    :class:`~sdsl.acceptance.Acceptance` (anything with ``tau(k)``). Broadcasts."""
    if hasattr(acceptance, "tau"):
        return np.asarray(acceptance.tau(gamma), dtype=float)
    return tau(check_alpha(acceptance), gamma)


def alpha_from_tau(tau_value, gamma, *, iterations: int = 80) -> np.ndarray:
    """Invert Leviathan et al. (2023) Eq. (1), τ(α, γ), for α by vectorised bisection (τ is strictly
    increasing in α for γ ≥ 1).

    ``tau_value`` must lie in [1, γ + 1]; τ = 1 gives α = 0 and τ = γ + 1 gives α = 1.
    """
    t = numbers(tau_value, "tau")
    g = check_gamma(gamma)
    broadcast_shapes(tau=t, gamma=g)
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


