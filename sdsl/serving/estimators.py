"""Online estimates of the acceptance rate α from observed accept counts (TurboSpec, docs/model.md §3.4).

One speculation step of a request with k > 0 proposals accepts ``a`` of them (0 <= a <= k). Under
the i.i.d. model that step observed ``a`` successes and, when a < k, one failure: ``trials = a +
[a < k]`` Bernoulli(α) outcomes. The per-step maximum-likelihood α is a/trials; pooled over steps
it is Σa / Σtrials. Dividing accepted by *proposed* tokens instead (a/k) is biased low, because
proposals after the first rejection are never tested.

Both estimators below keep one estimate per running request (vectorised over a batch of slots) and
one global estimate over the whole batch, and accept a block of S steps at once (an ``(n, S)``
array of accept counts) so that the simulator can advance several steps per numpy call.

- :class:`EMAEstimator`: TurboSpec's exponential moving average α ← β·α + (1−β)·α_obs with
  β = 0.85 and prior α₀ = 0.7 (Liu et al., arXiv 2406.14066, §4). sdsl applies the same weights to
  the accepted and trial counts and reports their ratio, which is the count-weighted form of the
  same filter and removes the truncation bias of per-step ratios.
- :class:`WindowEstimator`: Σaccepted / Σtrials over the last W steps, with a weak prior.

Steps where a request proposes nothing (k = 0) carry no evidence and leave its estimate unchanged.
"""

from __future__ import annotations

import numpy as np

from sdsl.errors import InvalidInputError

__all__ = ["trials_from_accepts", "EMAEstimator", "WindowEstimator", "make_estimator"]


def trials_from_accepts(accepted, k) -> np.ndarray:
    """Bernoulli outcomes observed in a step with ``k`` proposals and ``accepted`` acceptances: a + [a < k]
    (the i.i.d. acceptance model behind Leviathan et al. 2023, Eq. 1; see the module docstring)."""
    accepted = np.asarray(accepted)
    k = np.asarray(k)
    return np.where(k > 0, accepted + (accepted < k), 0)


class EMAEstimator:
    """Per-request and global EMA of α (β = 0.85, prior 0.7; TurboSpec §4). Vectorised over slots.

    Each new request starts from the current global estimate (itself starting at ``prior``).
    """

    def __init__(self, beta: float = 0.85, prior: float = 0.7, capacity: int = 0) -> None:
        if not 0.0 <= beta < 1.0:
            raise InvalidInputError(f"EMA weight beta must be in [0, 1), got {beta}.")
        if not 0.0 < prior < 1.0:
            raise InvalidInputError(f"Prior acceptance rate must be in (0, 1), got {prior}.")
        self.beta = float(beta)
        self.prior = float(prior)
        self.acc = np.zeros(0)
        self.trials = np.zeros(0)
        self.global_acc = prior
        self.global_trials = 1.0
        self._weights: dict[int, np.ndarray] = {}

    @property
    def alpha(self) -> np.ndarray:
        """Current per-slot estimates."""
        return self.acc / self.trials

    @property
    def global_alpha(self) -> float:
        return self.global_acc / self.global_trials

    def add(self, count: int, alpha0: float | None = None) -> None:
        """Append ``count`` new slots initialised at ``alpha0`` (default: the global estimate)."""
        a0 = self.global_alpha if alpha0 is None else float(alpha0)
        self.acc = np.concatenate([self.acc, np.full(count, a0)])
        self.trials = np.concatenate([self.trials, np.ones(count)])

    def keep(self, mask: np.ndarray) -> None:
        """Drop the slots where ``mask`` is False (finished requests)."""
        self.acc = self.acc[mask]
        self.trials = self.trials[mask]

    def _decay_weights(self, steps: int) -> np.ndarray:
        w = self._weights.get(steps)
        if w is None:
            w = self._weights[steps] = (1.0 - self.beta) * self.beta ** np.arange(steps - 1, -1, -1)
        return w

    def update(self, accepted: np.ndarray, trials: np.ndarray, all_informative: bool = False) -> None:
        """Absorb an ``(n, S)`` block of accept and trial counts, oldest step first.

        ``all_informative``: the caller guarantees every row has trials in every step (uniform k > 0).
        """
        accepted = np.asarray(accepted, dtype=float)
        trials = np.asarray(trials, dtype=float)
        if accepted.ndim == 1:
            accepted, trials = accepted[:, None], trials[:, None]
        steps = accepted.shape[1]
        w = self._decay_weights(steps)
        new_acc, new_trials = accepted @ w, trials @ w
        if all_informative:
            decay = self.beta ** steps
            self.acc *= decay
            self.acc += new_acc
            self.trials *= decay
            self.trials += new_trials
            g_decay = decay
            self.global_acc = self.global_acc * g_decay + float(np.add.reduce(new_acc))
            self.global_trials = self.global_trials * g_decay + float(np.add.reduce(new_trials))
            return
        informative = trials.sum(axis=1) > 0
        decay = np.where(informative, self.beta ** steps, 1.0)
        self.acc = self.acc * decay + new_acc
        self.trials = self.trials * decay + new_trials
        col_trials = trials.sum(axis=0)
        cols = col_trials > 0
        n_cols = int(cols.sum())
        if n_cols:
            wg = self._decay_weights(n_cols)
            g_decay = self.beta ** n_cols
            self.global_acc = self.global_acc * g_decay + float(accepted.sum(axis=0)[cols] @ wg)
            self.global_trials = self.global_trials * g_decay + float(col_trials[cols] @ wg)


class WindowEstimator:
    """Per-request and global Σaccepted / Σtrials over the last ``window`` informative steps.

    A prior of ``prior_weight`` pseudo-trials at ``prior`` keeps early estimates finite.
    """

    def __init__(self, window: int = 16, prior: float = 0.7, prior_weight: float = 1.0) -> None:
        if window < 1:
            raise InvalidInputError("The estimation window must be at least one step.")
        if not 0.0 < prior < 1.0:
            raise InvalidInputError(f"Prior acceptance rate must be in (0, 1), got {prior}.")
        self.window = int(window)
        self.prior = float(prior)
        self.prior_weight = float(prior_weight)
        self.acc = np.zeros((0, window))
        self.trials = np.zeros((0, window))
        self.prior_alpha = np.zeros(0)
        self.g_acc = np.zeros(window)
        self.g_trials = np.zeros(window)

    @property
    def alpha(self) -> np.ndarray:
        w = self.prior_weight
        return (w * self.prior_alpha + self.acc.sum(axis=1)) / (w + self.trials.sum(axis=1))

    @property
    def global_alpha(self) -> float:
        w = self.prior_weight
        return float((w * self.prior + self.g_acc.sum()) / (w + self.g_trials.sum()))

    def add(self, count: int, alpha0: float | None = None) -> None:
        a0 = self.global_alpha if alpha0 is None else float(alpha0)
        self.acc = np.concatenate([self.acc, np.zeros((count, self.window))])
        self.trials = np.concatenate([self.trials, np.zeros((count, self.window))])
        self.prior_alpha = np.concatenate([self.prior_alpha, np.full(count, a0)])

    def keep(self, mask: np.ndarray) -> None:
        self.acc, self.trials, self.prior_alpha = self.acc[mask], self.trials[mask], self.prior_alpha[mask]

    def update(self, accepted: np.ndarray, trials: np.ndarray, all_informative: bool = False) -> None:
        """Absorb an ``(n, S)`` block, oldest step first; rows with no trials are left as they were."""
        accepted = np.asarray(accepted, dtype=float)
        trials = np.asarray(trials, dtype=float)
        if accepted.ndim == 1:
            accepted, trials = accepted[:, None], trials[:, None]
        W = self.window
        informative = trials.sum(axis=1) > 0
        new_acc = np.concatenate([self.acc, accepted], axis=1)[:, -W:]
        new_trials = np.concatenate([self.trials, trials], axis=1)[:, -W:]
        self.acc = np.where(informative[:, None], new_acc, self.acc)
        self.trials = np.where(informative[:, None], new_trials, self.trials)
        cols = trials.sum(axis=0) > 0
        if cols.any():
            self.g_acc = np.concatenate([self.g_acc, accepted.sum(axis=0)[cols]])[-W:]
            self.g_trials = np.concatenate([self.g_trials, trials.sum(axis=0)[cols]])[-W:]


def make_estimator(kind: str = "ema", *, beta: float = 0.85, window: int = 16, prior: float = 0.7):
    """``"ema"`` → :class:`EMAEstimator`, ``"window"`` → :class:`WindowEstimator`."""
    if kind == "ema":
        return EMAEstimator(beta=beta, prior=prior)
    if kind == "window":
        return WindowEstimator(window=window, prior=prior)
    raise InvalidInputError(f"Unknown acceptance estimator {kind!r}; use 'ema' or 'window'.")
