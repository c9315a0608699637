"""Steps a speculative decoder needs to emit ``n`` tokens per sequence: overshoot and the batch tail.
A τ for :func:`sdsl.speculation.step.price_step` when only the first ``n`` tokens count (docs/model.md §3.3).

τ(α, γ) (Leviathan et al. 2023, Eq. 1) is the mean number of tokens one SD step emits per sequence,
so b·τ/T_step is the throughput of an endless stream. A request of ``n`` tokens is not endless:

* **overshoot** — its last step emits up to γ tokens past ``n`` that nobody asked for;
* **batch tail** — a static batch of ``b`` sequences steps until its *slowest* member has ``n``
  tokens; the others idle in the batch (their drafts and verification rows are still computed).

Under the same i.i.d. acceptance assumption as τ (each draft accepted with probability α; Leviathan
et al. 2023, §3.1), the tokens a sequence gains per step are X = 1 + min(Geometric, γ) with
P(X = j + 1) = α^j (1 − α) for j < γ and P(X = γ + 1) = α^γ. The steps to reach ``n`` tokens are
K = min{k : X₁ + … + X_k ≥ n}, so P(K > k) = P(X₁ + … + X_k ≤ n − 1), which a short dynamic programme over
the partial sums (truncated at n − 1) gives exactly; for ``b`` independent sequences
E[max K] = Σ_k (1 − (1 − P(K > k))^b). The effective tokens per step is n / E[max K] ≤ τ.
Plain decoding (γ = 0) needs exactly n steps.
"""

from __future__ import annotations

import numpy as np

from sdsl.acceptance import check_alpha, check_gamma
from sdsl.errors import InvalidInputError

__all__ = ["steps_to_finish", "effective_tau"]


def _tokens_pmf(alpha: np.ndarray, gamma: np.ndarray, n: int) -> np.ndarray:
    """P(X = j) for j = 0 … n − 1 (X ≥ 1 tokens gained per step), shape alpha.shape + (n,)."""
    j = np.arange(n)  # tokens gained
    acc = j - 1  # drafts accepted
    a, g = alpha[..., None], gamma[..., None]
    with np.errstate(invalid="ignore"):
        body = np.where(acc < g, a ** np.maximum(acc, 0) * (1 - a), a ** g)
    return np.where((acc >= 0) & (acc <= g), body, 0.0)


def steps_to_finish(alpha, gamma, n_tokens: int, batch=1) -> np.ndarray:
    """E[steps until every one of ``batch`` sequences has ``n_tokens`` new tokens] (see module docstring).

    Broadcasts over ``alpha``, ``gamma`` and ``batch``; γ = 0 gives exactly ``n_tokens``.
    """
    n = int(n_tokens)
    if n != n_tokens or n < 1:
        raise InvalidInputError("n_tokens must be a whole number >= 1.")
    a, g = check_alpha(alpha), check_gamma(gamma)
    b = np.asarray(batch, dtype=float)
    if np.any(~np.isfinite(b)) or np.any(b < 1):
        raise InvalidInputError("batch must be >= 1.")
    a, g, b = np.broadcast_arrays(a, g, b)
    pmf = _tokens_pmf(a, g, n)
    lag = np.arange(n)[:, None] - np.arange(n)[None, :]  # s' - s
    move = np.where(lag >= 0, np.take(pmf, lag.clip(0), axis=-1), 0.0)  # P(s -> s'), s' < n
    below = np.zeros(a.shape + (n,))  # P(partial sum = s, s < n) after k steps
    below[..., 0] = 1.0
    expected = np.zeros(a.shape)
    for _ in range(n):  # K <= n since X >= 1: n rounds of the DP, vectorised over configurations
        alive = below.sum(-1).clip(0.0, 1.0)  # P(K > k) for one sequence
        expected += 1.0 - (1.0 - alive) ** b
        below = np.einsum("...ij,...j->...i", move, below)
    return expected


def effective_tau(alpha, gamma, n_tokens: int, batch=1) -> np.ndarray:
    """Tokens per sequence per SD step when only the first ``n_tokens`` count: n / E[max K] (≤ τ)."""
    return int(n_tokens) / steps_to_finish(alpha, gamma, n_tokens, batch)
