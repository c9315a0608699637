"""The analytic optima: Leviathan's optimal speculation length γ* (closed form) and SDSL's optimal draft
size N* (FLOP model). Summary of docs/model.md §3.1–§3.2; the hardware-aware choice is :mod:`sdsl.plan.plan`.

- γ*: maximiser of Leviathan's speedup S(α, γ, c) = (1 − α^{γ+1}) / ((1 − α)(1 + γc)) over real γ.
  Setting dS/dγ = 0 gives, with L = ln(1/α) and z = −α^{1/c − 1}/e (docs/model.md §3.1),
  γ* = −(1 + W₋₁(z))/L − 1/c and S* = L / (c(1 − α)(−W₋₁(z))), W₋₁ the lower real Lambert-W branch.
  (Derivation: notebooks/02_scaling_law.ipynb, with sympy.) z ≤ −1/e (c ≥ 1) means no γ > 0 pays.
- Draft size: SDSL (arXiv 2603.11053) maximises S over γ and N, with α from the acceptance plane
  through the Chinchilla loss law and c = N/M, and regresses the optima N* = μ·M + M₀ over its
  13 targets (paper: μ = 2.71e-3, M₀ = 8.71e7).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sdsl._result import Result, plain
from sdsl.acceptance import check_alpha
from sdsl._checks import broadcast_shapes, numbers
from sdsl.errors import InvalidInputError
from sdsl.acceptance.plane import CHINCHILLA, SDSL_PLANE, AcceptancePlane, LossLaw
from sdsl.speculation.throughput import speedup

__all__ = [
    "lambert_w_minus1",
    "gamma_star",
    "best_speedup",
    "best_integer_gamma",
    "SDSL_TARGETS",
    "SDSL_PAPER_LAW",
    "optimal_draft_size",
    "DraftLaw",
    "fit_draft_law",
]

SDSL_TARGETS = (
    "opt-13b", "opt-30b", "opt-66b", "llama-3-70b", "llama-3.1-70b",
    "qwen1.5-14b", "qwen1.5-32b", "qwen1.5-72b", "qwen1.5-110b",
    "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b", "seed-oss-36b",
)
"""The 13 targets of SDSL's regression (docs/model.md §3.2); parameter counts come from the model catalog."""


# The paper's regression over its 13 targets (arXiv 2603.11053): N* = mu·M + m0, with 95% CIs.
SDSL_PAPER_LAW = {"mu": 2.71e-3, "mu_ci": [2.67e-3, 2.75e-3], "m0": 8.71e7, "m0_ci": [8.50e7, 8.93e7]}


def lambert_w_minus1_from_log(log_neg_z) -> np.ndarray:
    """W₋₁(z) given ℓ = ln(−z), for z ∈ [−1/e, 0), i.e. ℓ ≤ −1. Works where z underflows.

    Far from the branch point (ℓ ≤ −30) solves w + ln(−w) = ℓ (the log of w·e^w = z) by Newton
    from w₀ = ℓ − ln(−ℓ). Nearer, Halley's iteration on w·e^w − z from the branch-point series
    w₀ = −1 + p − p²/3 + 11p³/72, p = −√(2(1 + e·z)) (Corless et al. 1996, Eq. 4.22), or from the
    asymptotic start. Agrees with scipy.special.lambertw(z, −1) to ~1e-12 (tests), without
    importing scipy.special (it would slow the CLI's start).
    """
    ell = np.asarray(log_neg_z, dtype=float)
    far = ell <= -30.0
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        # far: Newton on the logarithmic form
        w_far = ell - np.log(np.maximum(-ell, 1.0))
        for _ in range(8):
            w_far = w_far - (w_far + np.log(-w_far) - ell) / (1.0 + 1.0 / w_far)
        # near: Halley on w·e^w = z
        z = -np.exp(np.minimum(ell, -1.0))
        p = -np.sqrt(np.maximum(2.0 * (1.0 + np.e * z), 0.0))
        w = np.where(ell > -2.5, -1.0 + p - p * p / 3.0 + 11.0 * p**3 / 72.0, ell - np.log(np.maximum(-ell, 1.0)))
        for _ in range(12):
            ew = np.exp(w)
            f = w * ew - z
            denom = ew * (w + 1.0) - (w + 2.0) * f / (2.0 * w + 2.0)
            step = np.where(np.abs(denom) > 0, f / denom, 0.0)
            w = np.where(np.isfinite(step), w - step, w)
        w = np.where(ell >= -1.0, -1.0, w)
    return np.where(far, w_far, w)


def lambert_w_minus1(z) -> np.ndarray:
    """Lower real branch W₋₁(z) for z ∈ [−1/e, 0)."""
    z = np.asarray(z, dtype=float)
    if np.any((z < -np.exp(-1.0) - 1e-15) | (z >= 0)):
        raise InvalidInputError("W₋₁(z) is real only for z in [-1/e, 0).")
    return lambert_w_minus1_from_log(np.log(-z))


def _alpha_c(alpha, c, what):
    """(α, c) broadcast, α strictly inside (0, 1): the closed form γ* = −(1 + W₋₁(z))/ln(1/α) − 1/c has no value
    at either end (τ itself is defined there: :func:`sdsl.acceptance.tau`)."""
    a = check_alpha(alpha)
    ends = (a <= 0) | (a >= 1)
    if np.any(ends):
        bad = float(a[ends].ravel()[0])
        why = ("at alpha = 1 every draft is accepted and (for c < 1) the optimal k is unbounded" if bad >= 1 else
               "at alpha = 0 no draft is ever accepted and speculation never pays (k = 0)")
        raise InvalidInputError(f"{what} needs 0 < alpha < 1: {why}; got {bad:g}.")
    c = numbers(c, "c")
    if np.any(~np.isfinite(c)) or np.any(c <= 0):
        raise InvalidInputError("The cost ratio c must be a finite positive number.")
    broadcast_shapes(alpha=a, c=c)
    return np.broadcast_arrays(a, c)


def _w(a, c):
    """W₋₁(z) with z = −α^{1/c − 1}/e in log space; NaN where z ≤ −1/e (no interior optimum)."""
    ell = (1.0 / c - 1.0) * np.log(a) - 1.0  # ln(−z)
    valid = ell < -1.0
    return np.where(valid, lambert_w_minus1_from_log(np.where(valid, ell, -2.0)), np.nan), valid


def gamma_star(alpha, c) -> np.ndarray:
    """Continuous optimal speculation length γ* = −(1 + W₋₁(z))/ln(1/α) − 1/c (Leviathan speedup,
    docs/model.md §3.1), clipped at 0 where speculation cannot pay (c ≥ 1 or γ* < 0). Broadcasts."""
    a, c = _alpha_c(alpha, c, "gamma_star")
    w, valid = _w(a, c)
    g = -(1.0 + w) / np.log(1.0 / a) - 1.0 / c
    out = np.where(valid, np.maximum(g, 0.0), 0.0)
    return out[()] if out.ndim == 0 else out


def best_speedup(alpha, c) -> np.ndarray:
    """S* = ln(1/α) / (c(1 − α)(−W₋₁(z))), Leviathan's speedup (Theorem 3.8) at γ* (docs/model.md §3.1);
    1 where no γ > 0 pays."""
    a, c = _alpha_c(alpha, c, "best_speedup")
    w, valid = _w(a, c)
    s = np.log(1.0 / a) / (c * (1.0 - a) * (-w))
    out = np.where(valid & (gamma_star(a, c) > 0), s, 1.0)
    return out[()] if out.ndim == 0 else out


def best_integer_gamma(alpha, c, gamma_max: int | None = None) -> np.ndarray:
    """Best whole γ for Leviathan's speedup (Theorem 3.8): floor or ceil of γ* (S is unimodal in γ),
    optionally capped at ``gamma_max``."""
    a, c = _alpha_c(alpha, c, "best_integer_gamma")
    g = gamma_star(a, c)
    lo, hi = np.floor(g), np.ceil(g)
    if gamma_max is not None:
        lo, hi = np.minimum(lo, gamma_max), np.minimum(hi, gamma_max)
    out = np.where(speedup(a, hi, c) > speedup(a, lo, c), hi, lo).astype(int)
    return out[()] if out.ndim == 0 else out


def optimal_draft_size(target_params, draft_tokens=1e12, target_tokens=1e12, *, law: LossLaw = CHINCHILLA,
                       plane: AcceptancePlane = SDSL_PLANE, n_min: float = 1e7, n_max: float = 5e9,
                       points: int = 2001):
    """SDSL's throughput-optimal draft size N* for each target size M (continuous N).

    Evaluates S*(α(N, M), c = N/M) on a log grid of N (α from the plane, draft and target
    perplexities exp(L(N, D)), exp(L(M, D′)); α outside (0, 1) rejected), then refines the grid
    maximum by a parabola in log N. Returns (N*, S*, α(N*), γ*(N*)) as arrays over M.
    """
    m = np.atleast_1d(np.asarray(target_params, dtype=float))
    if np.any(~(m > 0)):
        raise InvalidInputError("Target parameter counts must be positive.")
    if not (0 < n_min < n_max):
        raise InvalidInputError("Need 0 < n_min < n_max for the draft-size grid.")
    log_n = np.linspace(np.log(n_min), np.log(n_max), points)

    def objective(log_draft):
        n = np.exp(log_draft)
        ppl_d = np.exp(law.loss(n, draft_tokens))
        ppl_t = np.exp(law.loss(m[:, None], target_tokens))
        a = plane.alpha(ppl_d, ppl_t, out_of_range="nan")
        ok = np.isfinite(a)
        s = np.where(ok, best_speedup(np.where(ok, a, 0.5), n / m[:, None]), -np.inf)
        return s, a

    s, _ = objective(log_n[None, :])
    i = np.clip(np.argmax(s, axis=1), 1, points - 2)
    y0, y1, y2 = (np.take_along_axis(s, (i + k)[:, None], 1)[:, 0] for k in (-1, 0, 1))
    h = log_n[1] - log_n[0]
    denom = y0 - 2 * y1 + y2
    with np.errstate(invalid="ignore", divide="ignore"):
        shift = np.where(np.isfinite(denom) & (denom < 0), 0.5 * (y0 - y2) / denom, 0.0)
    best = log_n[i] + np.clip(shift, -1, 1) * h
    s_best, a_best = objective(best[:, None])
    n_best = np.exp(best)
    g_best = gamma_star(a_best[:, 0], n_best / m)
    return n_best, s_best[:, 0], a_best[:, 0], g_best


@dataclass(frozen=True, eq=False)  # a result object: equal only to itself
class DraftLaw(Result):
    """Fitted law N* = μ·M + M₀ with 95% confidence intervals, and the per-target optima.

    Result protocol: ``report()``, ``to_dict()``, ``to_json(path=None)``, ``plot(ax=None)`` (N*
    against M with the fitted and the paper's line).
    """

    mu: float
    m0: float
    mu_ci: tuple[float, float]
    m0_ci: tuple[float, float]
    r2: float
    targets: list = field(default_factory=list)  # dicts: name, params, n_star, speedup, alpha, gamma_star
    draft_tokens: float = 1e12
    target_tokens: float = 1e12
    paper: dict = field(default_factory=lambda: dict(SDSL_PAPER_LAW))

    def to_dict(self) -> dict:
        return plain({"mu": self.mu, "m0": self.m0, "mu_ci": list(self.mu_ci), "m0_ci": list(self.m0_ci),
                      "r2": self.r2, "draft_tokens": self.draft_tokens, "target_tokens": self.target_tokens,
                      "paper": self.paper, "targets": self.targets})

    def plot(self, ax=None):
        """N* against target size with the fitted law and the paper's (:mod:`sdsl.plots.results`)."""
        from sdsl.plots.results import plot_draft_law

        return plot_draft_law(self.to_dict(), ax=ax)

    def report(self) -> str:
        lines = [f"{'target':<16}{'M (params)':>14}{'N* (params)':>14}{'N*/M':>9}{'alpha':>8}{'gamma*':>8}{'S*':>7}"]
        for t in self.targets:
            lines.append(f"{t['name']:<16}{t['params']:>14.4g}{t['n_star']:>14.4g}{t['n_star'] / t['params']:>9.2e}"
                         f"{t['alpha']:>8.3f}{t['gamma_star']:>8.2f}{t['speedup']:>7.2f}")
        p = self.paper
        lines += [
            "",
            f"fit:   N* = mu*M + M0,  mu = {self.mu:.3e} (95% CI {self.mu_ci[0]:.3e}-{self.mu_ci[1]:.3e}),"
            f"  M0 = {self.m0:.3e} (95% CI {self.m0_ci[0]:.3e}-{self.m0_ci[1]:.3e}),  R^2 = {self.r2:.4f}",
            f"paper: mu = {p['mu']:.3e} ({p['mu_ci'][0]:.3e}-{p['mu_ci'][1]:.3e}),  M0 = {p['m0']:.3e} "
            f"({p['m0_ci'][0]:.3e}-{p['m0_ci'][1]:.3e})",
            f"pre-training tokens: draft D = {self.draft_tokens:.3g}, target D' = {self.target_tokens:.3g}",
        ]
        return "\n".join(lines)


def fit_draft_law(targets=SDSL_TARGETS, draft_tokens=1e12, target_tokens=1e12, *, law: LossLaw = CHINCHILLA,
                  plane: AcceptancePlane = SDSL_PLANE) -> DraftLaw:
    """Reproduce SDSL's law: N* for each target (catalog names or ModelSpecs), then OLS N* = μM + M₀."""
    from sdsl.catalog.models import get_model

    specs = [get_model(t) if isinstance(t, str) else t for t in targets]
    if len(specs) < 3:
        raise InvalidInputError("Fitting the draft-size law needs at least three targets.")
    m = np.array([s.total_params for s in specs], dtype=float)
    n_star, s_star, a_star, g_star = optimal_draft_size(m, draft_tokens, target_tokens, law=law, plane=plane)
    from scipy import stats

    ok = np.isfinite(n_star) & np.isfinite(s_star)
    fit = stats.linregress(m[ok], n_star[ok])
    t = stats.t.ppf(0.975, ok.sum() - 2)
    rows = [
        {"name": s.name, "params": float(mi), "n_star": float(n), "speedup": float(sp), "alpha": float(a),
         "gamma_star": float(g)}
        for s, mi, n, sp, a, g in zip(specs, m, n_star, s_star, a_star, g_star)
    ]
    return DraftLaw(
        mu=float(fit.slope), m0=float(fit.intercept),
        mu_ci=(float(fit.slope - t * fit.stderr), float(fit.slope + t * fit.stderr)),
        m0_ci=(float(fit.intercept - t * fit.intercept_stderr), float(fit.intercept + t * fit.intercept_stderr)),
        r2=float(fit.rvalue**2), targets=rows, draft_tokens=float(draft_tokens), target_tokens=float(target_tokens),
    )
