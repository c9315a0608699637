"""The controller's step-time model, fitted online from the step times it observes (TurboSpec).

TurboSpec (Liu et al., arXiv 2406.14066, §4.2) prices a step with a linear model fitted to the
engine's own logs, not with an exact cost table. The target's verification forward has the form
of :mod:`sdsl.serving.linear_model`,

    T_target = c_kv·N_kv + c_tok·N_tok + c_b·n + c_0,

and each of the k draft passes the same form at one token per request. Summed over a decode step
of n requests with k_r proposals each (mean context L̄, N_kv = n·L̄, N_tok = Σ(k_r + 1),
draft passes k_max = max k_r), the step is linear in seven features

    x = [N_kv, N_tok, n, 1, L̄·Σk_r, Σk_r, k_max]

(uniform k: L̄·Σk_r = k·N_kv, Σk_r = k·n). The draft's per-token cost multiplies Σk_r like the
target's c_tok does, so only their sum is identified; the fit below does not need more.

:class:`OnlineStepModel` keeps the last ``window`` observed steps and solves a ridge least-squares
problem anchored at a prior θ₀ (a warm-up prior worth ``prior_weight`` pseudo-steps), so that directions the window does not excite (e.g. batch size at low load) stay at
the prior instead of drifting. Refitting is cheap (a 7×7 solve) and happens at the
first decision after ``refit_every`` new observations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdsl.errors import InvalidInputError
from sdsl.serving.linear_model import LinearStepModel

__all__ = ["N_FEATURES", "step_features", "prior_coefficients", "profile_prior", "OnlineStepModel"]

N_FEATURES = 7


def step_features(kv_tokens, n: int, k_sum: float, k_max: int) -> np.ndarray:
    """Rows of x = [N_kv, N_tok, n, 1, L̄·Σk_r, Σk_r, k_max] for steps with ``kv_tokens`` = N_kv each."""
    kv = np.atleast_1d(np.asarray(kv_tokens, dtype=float))
    x = np.empty((kv.size, N_FEATURES))
    x[:] = (0.0, k_sum + n, n, 1.0, 0.0, k_sum, k_max)
    x[:, 0] = kv
    x[:, 4] = kv * (k_sum / n)
    return x


def prior_coefficients(target: LinearStepModel, draft: LinearStepModel) -> np.ndarray:
    """θ₀ (seconds) from a target line and a draft line in TurboSpec's form (milliseconds)."""
    t, d = target, draft
    return 1e-3 * np.array([t.c_kv, t.c_tok, t.c_b, t.c_0, d.c_kv, d.c_tok + d.c_b, d.c_0])


def profile_prior(step_model, contexts=(256.0, 1024.0, 3072.0)) -> np.ndarray:
    """θ₀ fitted to a coarse offline profile of ``step_model``: uniform k at a few (n, k, L̄) points.

    TurboSpec profiles the engine before serving; this is that profile (batch 1, 8, 32, ... up to
    the table, k = 0..max_k, three contexts), least squares over the seven features.
    """
    ns = np.unique(np.minimum([1, 8, 32, 128], step_model.max_batch))
    rows, times = [], []
    for n in ns:
        for L in contexts:
            t_all = step_model.decode_time_all_k(int(n), L)
            for k in range(step_model.max_k + 1 if step_model.has_draft else 1):
                rows.append(step_features(n * L, int(n), float(k * n), k)[0])
                times.append(t_all[k])
    coef, *_ = np.linalg.lstsq(np.array(rows), np.array(times), rcond=None)
    return coef


@dataclass
class OnlineStepModel:
    """Least squares over the last ``window`` observed steps, ridge-anchored at ``prior`` (seconds).

    ``decode_time_all_k(n, context)`` prices uniform k = 0..max_k like :class:`BatchStepModel`, so
    the goodput controller can use either.
    """

    prior: np.ndarray
    max_k: int
    window: int = 256
    prior_weight: float = 1.0
    refit_every: int = 64

    def __post_init__(self) -> None:
        self.prior = np.asarray(self.prior, dtype=float)
        if self.prior.shape != (N_FEATURES,) or not np.all(np.isfinite(self.prior)):
            raise InvalidInputError(f"The step-time prior needs {N_FEATURES} finite coefficients.")
        if self.window < 1 or self.refit_every < 1 or not self.prior_weight > 0:
            raise InvalidInputError("window and refit_every must be >= 1 and prior_weight > 0.")
        self.coef = self.prior.copy()
        # the window, one entry per observed step: N_kv, n, Σk_r, k_max and the step time
        self._log = np.zeros((5, self.window))
        self._seen = 0
        self._since_fit = 0
        self._ks = np.arange(self.max_k + 1, dtype=float)
        self._coef_src, self._coef_list = None, []

    def observe(self, kv_tokens: np.ndarray, n: int, k_sum: float, k_max: int, times_s: np.ndarray) -> None:
        """Record observed steps of one batch composition (N_kv per step, n, Σk_r, k_max) and their seconds."""
        m = len(times_s)
        if m >= self.window:
            kv_tokens, times_s, m = kv_tokens[-self.window:], times_s[-self.window:], self.window
        start = self._seen % self.window
        first = min(m, self.window - start)  # the ring's tail, then its head
        for lo, hi, at in ((0, first, start), (first, m, 0)):
            if hi > lo:
                block = self._log[:, at:at + hi - lo]
                block[0], block[1], block[2], block[3], block[4] = kv_tokens[lo:hi], n, k_sum, k_max, times_s[lo:hi]
        self._seen += m
        self._since_fit += m

    def refit_if_due(self) -> None:
        """Refit when ``refit_every`` steps arrived since the last fit (the controller calls it before deciding)."""
        if self._since_fit >= self.refit_every:
            self.refit()

    def refit(self) -> np.ndarray:
        """Ridge solve anchored at the prior, in features scaled to unit RMS over the window.

        With z = x / s (s the RMS of each feature), φ = θ·s solves (ZᵀZ + λI)φ = Zᵀy + λφ₀: the prior
        weighs as ``prior_weight`` = λ pseudo-steps in every direction the window excites, and holds
        the directions it does not (a feature that stayed at zero keeps its prior coefficient).
        """
        filled = min(self._seen, self.window)
        kv, n, k_sum, k_max, y = self._log[:, :filled]
        x = np.column_stack([kv, k_sum + n, n, np.ones(filled), kv * (k_sum / np.maximum(n, 1.0)), k_sum, k_max])
        rms = np.sqrt((x * x).mean(axis=0)) if filled else np.zeros(N_FEATURES)
        scale = np.where(rms > 0, rms, 1.0)
        z = x / scale
        lhs = z.T @ z + self.prior_weight * np.eye(N_FEATURES)
        phi = np.linalg.solve(lhs, z.T @ y + self.prior_weight * self.prior * scale)
        self.coef = phi / scale
        self._since_fit = 0
        return self.coef

    def decode_time_all_k(self, n: int, context: float) -> np.ndarray:
        """Predicted T(n, k, L̄) for uniform k = 0..max_k (seconds)."""
        if self._coef_src is not self.coef:  # Python floats: the same IEEE products, without numpy scalars
            self._coef_src, self._coef_list = self.coef, self.coef.tolist()
        c = self._coef_list
        kv = n * context
        base = c[0] * kv + c[1] * n + c[2] * n + c[3]
        per_k = c[1] * n + c[4] * kv + c[5] * n + c[6]
        return base + per_k * self._ks
