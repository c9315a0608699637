"""Acceptance as a per-position vector: one value type, :class:`Acceptance`, that sdsl takes everywhere.
Summary of docs/model.md §2 and §3.5 (acceptance vectors and trees).

Draft position i = 1..k is accepted with *conditional* probability p_i; the *marginal* rate is
m_i = Π_{j≤i} p_j. Expected tokens emitted per target forward pass, bonus token included, generalise
Leviathan et al. (ICML 2023) Eq. (1) to position-dependent acceptance:

    τ(k) = 1 + Σ_{i=1..k} m_i = 1 + Σ_{i=1..k} Π_{j≤i} p_j,

the chain case of the SpecInfer (Miao et al., ASPLOS 2024) / Sequoia (Chen et al., 2024) token-tree
formula τ = 1 + Σ_nodes P(path to node accepted) (:mod:`sdsl.acceptance.trees`). The i.i.d. α of Leviathan et
al. is the special case p_i = α, priced with their closed form (1 − α^{k+1})/(1 − α). Engines' conventions
and the converters are :mod:`sdsl.acceptance.converters`.

When only a mean accepted length is known, :meth:`Acceptance.from_accepted_length` fits the decay form
of :mod:`sdsl.acceptance.decay` (conditional p_i = min(1, a·r^{i−1}); r from published
per-position rates, VALIDATION.md "Acceptance decay form").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sdsl._result import Result
from sdsl.acceptance.converters import accepted_length_with_bonus, conditional_from_marginal, positional_acceptance
from sdsl.acceptance.decay import DEFAULT_DECAY, decay_conditional, solve_decay
from sdsl.acceptance.tau import alpha_from_tau, check_alpha, tau as tau_iid
from sdsl.errors import InvalidInputError

__all__ = ["Acceptance"]


@dataclass(frozen=True)
class Acceptance(Result):
    """Per-position conditional acceptance p_1..p_K, optionally extended past K by a geometric tail.

    ``positions`` are the conditional rates as measured or fitted; ``tail_ratio`` (None, or r ≥ 0)
    extends the vector past K by p_{i+1} = min(1, p_i·r): the i.i.d. model is ``((α,), 1.0)``, the decay
    form ``((a,), r)``. A measured vector (``tail_ratio=None``) prices k ≤ K only.
    """

    positions: tuple
    tail_ratio: float | None = None
    source: str = "given"
    evidence: dict | None = field(default=None, compare=False, repr=False)  # where a default came from (catalog rows)
    measured_k: int | None = field(default=None, compare=False)  # the k an accepted length was measured at

    def __post_init__(self):
        p = check_alpha(np.atleast_1d(np.asarray(self.positions, dtype=float)), name="acceptance")
        if p.ndim != 1 or p.size == 0:
            raise InvalidInputError("An acceptance vector needs at least one draft position.")
        if self.tail_ratio is not None and not (math.isfinite(self.tail_ratio) and self.tail_ratio >= 0):
            raise InvalidInputError(f"tail_ratio must be a finite non-negative number; got {self.tail_ratio}.")
        object.__setattr__(self, "positions", tuple(float(x) for x in p))

    # constructors ---------------------------------------------------------------------------------
    @classmethod
    def from_iid(cls, alpha: float) -> Acceptance:
        """The i.i.d. model of Leviathan et al. (2023) §3.1: p_i = α for every position."""
        return cls((float(check_alpha(alpha)),), 1.0, "iid")

    @classmethod
    def from_conditional(cls, p, *, source: str = "conditional") -> Acceptance:
        """A measured conditional vector p_1..p_K (EAGLE's "n-α", sdsl's own histograms)."""
        return cls(tuple(np.atleast_1d(check_alpha(p, name="conditional acceptance")).tolist()), None, source)

    @classmethod
    def from_marginal(cls, m, *, source: str = "marginal") -> Acceptance:
        """A measured marginal vector m_1..m_K (vLLM's "Per-position acceptance rate")."""
        return cls(tuple(conditional_from_marginal(np.atleast_1d(m)).tolist()), None, source)

    @classmethod
    def from_histogram(cls, counts, *, source: str = "histogram") -> Acceptance:
        """From an accept-count histogram (counts[i] = steps with exactly i drafts accepted, gpt-fast)."""
        p = positional_acceptance(counts)
        return cls(tuple(np.nan_to_num(p, nan=0.0).tolist()), None, source)

    @classmethod
    def from_accepted_length(cls, mean, k: int, *, bonus_included: bool = True, decay: float | None = None,
                             source: str = "accepted-length") -> Acceptance:
        """Fit the decay form p_i = min(1, a·r^{i−1}) to a mean accepted length measured at k drafts
        (:func:`sdsl.acceptance.decay.solve_decay`; r defaults to the published-data fit)."""
        if int(k) != k or k < 1:
            raise InvalidInputError(f"k (draft tokens per step) must be a positive integer; got {k}.")
        t = float(accepted_length_with_bonus(mean, bonus_included=bonus_included))
        a, r = solve_decay(t, int(k), DEFAULT_DECAY if decay is None else decay)
        return cls((float(a),), float(r), source, measured_k=int(k))

    @classmethod
    def from_dict(cls, d: dict) -> Acceptance:
        """Inverse of :meth:`to_dict` (also accepts {"conditional": [...]} or {"marginal": [...]})."""
        if "positions" in d:
            return cls(tuple(d["positions"]), d.get("tail_ratio"), d.get("source", "file"),
                       measured_k=d.get("measured_k"))
        if "conditional" in d:
            return cls.from_conditional(d["conditional"], source=d.get("source", "file"))
        if "marginal" in d:
            return cls.from_marginal(d["marginal"], source=d.get("source", "file"))
        raise InvalidInputError("An acceptance file needs 'positions', 'conditional' or 'marginal'.")

    # views ----------------------------------------------------------------------------------------
    @property
    def k(self) -> int:
        """Positions given (the engine's k for a measured vector; 1 for i.i.d. and decay forms)."""
        return len(self.positions)

    @property
    def max_k(self) -> float:
        """Largest k this acceptance prices (infinite with a tail)."""
        return math.inf if self.tail_ratio is not None else len(self.positions)

    @property
    def is_iid(self) -> bool:
        return self.tail_ratio == 1.0 and len(self.positions) == 1

    def conditional_at(self, k: int) -> np.ndarray:
        """p_1..p_k, extending a parametric tail past the given positions."""
        k = self._check_k(k)
        p = np.asarray(self.positions, dtype=float)
        if k <= p.size:
            return p[:k]
        return np.concatenate([p, decay_conditional(p[-1], self.tail_ratio, k - p.size + 1)[1:]])

    def marginal_at(self, k: int) -> np.ndarray:
        """m_1..m_k = cumulative products of :meth:`conditional_at`."""
        return np.cumprod(self.conditional_at(k))

    @property
    def conditional(self) -> np.ndarray:
        return self.conditional_at(self.k)

    @property
    def marginal(self) -> np.ndarray:
        return self.marginal_at(self.k)

    def _check_k(self, k) -> int:
        if not np.isfinite(k) or int(k) != k or k < 0:
            raise InvalidInputError(f"k (draft tokens per step) must be a non-negative integer; got {k}.")
        if k > self.max_k:
            raise InvalidInputError(f"This acceptance vector covers {self.k} draft positions; k = {int(k)} is beyond it.")
        return int(k)

    def tau(self, k=None) -> np.ndarray:
        """Expected tokens per target pass, bonus included: 1 + Σ_{i≤k} m_i (Leviathan et al. 2023
        Eq. (1) generalised; the i.i.d. case uses the closed form exactly). Broadcasts over integer k."""
        k_arr = np.asarray(self.k if k is None else k)
        flat = np.atleast_1d(k_arr).ravel()
        kf = flat.astype(float)
        bad = flat[~np.isfinite(kf) | (kf < 0) | ((kf != np.round(kf)) & (not self.is_iid))]  # i.i.d.: closed form in k
        if bad.size:
            raise InvalidInputError(f"k (draft tokens per step) must be a non-negative integer; got {bad[0]}.")
        if self.is_iid:
            return tau_iid(self.positions[0], k_arr)
        kmax = self._check_k(int(flat.max())) if flat.size else 0
        for v in np.unique(flat):
            self._check_k(v)
        cum = np.concatenate([[0.0], np.cumsum(self.marginal_at(kmax))])
        out = 1.0 + cum[k_arr.astype(int)]
        return out[()] if out.ndim == 0 else out

    def accepted_length(self, k=None, *, bonus_included: bool = True) -> np.ndarray:
        """Mean accepted length as an engine prints it: τ(k), or τ(k) − 1 without the bonus token."""
        t = self.tau(k)
        return t if bonus_included else t - 1.0

    def iid_alpha(self, k=None) -> np.ndarray:
        """The i.i.d. α with the same τ at k (Leviathan Eq. (1) inverted): prices this acceptance through
        formulas written for α. Exact for τ at that k, not for other k."""
        k_arr = np.asarray(self.k if k is None else k)
        if self.is_iid:
            out = np.full(k_arr.shape, self.positions[0])
            return out[()] if out.ndim == 0 else out
        t = self.tau(k_arr)
        safe_k = np.maximum(k_arr, 1)
        out = np.where(k_arr >= 1, alpha_from_tau(np.where(k_arr >= 1, t, 1.0), safe_k), self.positions[0])
        return out[()] if np.ndim(out) == 0 else out

    # result protocol ------------------------------------------------------------------------------
    def to_dict(self, k: int | None = None) -> dict:
        """Plain values for JSON: the stored form plus conditional/marginal/τ at k (default: K)."""
        k = self.k if k is None else self._check_k(k)
        out = {"positions": list(self.positions), "tail_ratio": self.tail_ratio, "source": self.source, "k": k,
               "conditional": self.conditional_at(k).tolist(), "marginal": self.marginal_at(k).tolist(),
               "tau": float(self.tau(k))}
        if self.measured_k is not None:
            out["measured_k"] = self.measured_k
        return out if self.evidence is None else {**out, "evidence": self.evidence}

    def report(self, k: int | None = None) -> str:
        """Two lines: conditional and marginal rates by position, and τ."""
        d = self.to_dict(k)
        fmt = lambda xs: ", ".join(f"{x:.3f}" for x in xs)  # noqa: E731
        return (f"acceptance ({d['source']}), k = {d['k']}: tau = {d['tau']:.3f}\n"
                f"  conditional p_i: {fmt(d['conditional'])}\n  marginal m_i:    {fmt(d['marginal'])}")

    def plot(self, ax=None, k: int | None = None):
        """Conditional and marginal rates by position up to k (default: K)."""
        from sdsl.plots.results import plot_acceptance_by_position

        d = self.to_dict(k)
        return plot_acceptance_by_position(d["conditional"], d["marginal"], ax, f"{d['source']}: tau = {d['tau']:.2f}")
