"""Rank proposers × speculation length k over batch sizes and acceptance levels, in one array per proposer.

Each proposer is priced by :func:`sdsl.core.speculation.price_speculation` on a (k, batch, acceptance)
grid; τ(k) per acceptance level comes from an i.i.d. α (Leviathan et al. 2023, Eq. 1) or any acceptance
object with ``tau(k)``. The pick per (batch, acceptance) is the (proposer, k) with the most tokens/s;
k = 0 is plain decoding, so speculation "stops paying" at the first batch whose pick is k = 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdsl.core.proposers import make_proposer
from sdsl.core.speculation import price_speculation, tau_of
from sdsl.errors import InvalidInputError

__all__ = ["ProposerRanking", "rank_proposers", "k_table"]


@dataclass(frozen=True)
class ProposerRanking:
    """tokens/s on (proposer, k, batch, acceptance); ``acceptance[p]`` is what priced proposer p."""

    proposers: tuple
    gammas: np.ndarray
    batches: np.ndarray
    n_acceptance: int
    tokens_per_s: np.ndarray
    tpot_s: np.ndarray
    tau: np.ndarray
    plain_tokens_per_s: np.ndarray  # (batch,)

    def best(self) -> dict:
        """Arrays over (batch, acceptance): proposer index, k, tokens/s, speedup of the pick."""
        n_p, n_k = self.tokens_per_s.shape[:2]
        flat = self.tokens_per_s.reshape(n_p * n_k, *self.tokens_per_s.shape[2:])
        i = np.argmax(flat, axis=0)
        tps = np.take_along_axis(flat, i[None], axis=0)[0]
        return {"proposer": i // n_k, "gamma": self.gammas[i % n_k].astype(int), "tokens_per_s": tps,
                "speedup": tps / self.plain_tokens_per_s[:, None]}

    def break_even_batch(self) -> np.ndarray:
        """Per acceptance level: the smallest batch at which no (proposer, k ≥ 1) beats plain decoding
        (NaN when speculation pays at every batch searched)."""
        gain = self.best()["gamma"] > 0
        stops = ~gain
        first = np.argmax(stops, axis=0)
        return np.where(stops.any(axis=0), self.batches[first], np.nan)

    def records(self, top: int | None = None) -> list[dict]:
        """Every (proposer, k, batch, acceptance) as records, best first within each (batch, acceptance)."""
        rows = []
        for p, g, b, a in np.ndindex(self.tokens_per_s.shape):
            if np.isfinite(self.tokens_per_s[p, g, b, a]):
                rows.append({"proposer": self.proposers[p].name, "gamma": int(self.gammas[g]),
                             "batch": int(self.batches[b]), "acceptance_index": a,
                             "tau": float(self.tau[p, g, b, a]), "tokens_per_s": float(self.tokens_per_s[p, g, b, a]),
                             "tpot_s": float(self.tpot_s[p, g, b, a]),
                             "speedup": float(self.tokens_per_s[p, g, b, a] / self.plain_tokens_per_s[b])})
        rows.sort(key=lambda r: (r["batch"], r["acceptance_index"], -r["tokens_per_s"]))
        if top is None:
            return rows
        out, seen = [], {}
        for r in rows:
            key = (r["batch"], r["acceptance_index"])
            seen[key] = seen.get(key, 0) + 1
            if seen[key] <= top:
                out.append(r)
        return out


def _taus(acceptance, gammas: np.ndarray) -> np.ndarray:
    """τ on (k, acceptance): i.i.d. α levels (array) or a list of acceptance objects with ``tau(k)``."""
    if isinstance(acceptance, (list, tuple)) and acceptance and hasattr(acceptance[0], "tau"):
        return np.stack([np.asarray(a.tau(gammas), dtype=float) for a in acceptance], axis=-1)
    a = np.atleast_1d(np.asarray(acceptance, dtype=float))
    return tau_of(a[None, :], gammas[:, None])


def rank_proposers(target, proposers, deployment, *, acceptance, gammas=range(0, 9), batches=(1,)) -> ProposerRanking:
    """Price every proposer × k × batch × acceptance. ``acceptance`` is one spec for all proposers or a
    dict {proposer name: spec}; a spec is i.i.d. α level(s) or a list of objects with ``tau(k)``."""
    props = tuple(make_proposer(p) for p in proposers)
    if not props:
        raise InvalidInputError("Need at least one proposer to rank.")
    g = np.asarray(list(gammas), dtype=float)
    b = np.asarray(list(np.atleast_1d(batches)), dtype=float)
    if g.size == 0 or b.size == 0 or np.any(g < 0):
        raise InvalidInputError("Need at least one k >= 0 and one batch size.")
    tps, tpot, taus = [], [], []
    for p in props:
        spec = acceptance.get(p.name, acceptance.get(p.kind)) if isinstance(acceptance, dict) else acceptance
        if spec is None:
            raise InvalidInputError(f"No acceptance given for proposer {p.name}.")
        usable = g if p.max_depth is None else np.minimum(g, p.max_depth)
        t = _taus(spec, usable)[:, None, :]  # (k, 1, acceptance)
        out = price_speculation(target, p, deployment, tau_value=t, gamma=usable[:, None, None], batch=b[None, :, None])
        mask = np.where(g <= (p.max_depth if p.max_depth is not None else np.inf), 1.0, np.nan)[:, None, None]
        tps.append(out["tokens_per_s"] * mask)
        tpot.append(out["tpot_s"] * mask)
        taus.append(np.broadcast_to(t, out["tokens_per_s"].shape))
    shape = np.broadcast_shapes(*(x.shape for x in tps))
    stack = lambda xs: np.stack([np.broadcast_to(x, shape) for x in xs])  # noqa: E731
    n_acc = shape[-1]
    plain = np.broadcast_to(out["plain_tokens_per_s"], shape)[0, :, 0]
    return ProposerRanking(props, g, b, n_acc, np.nan_to_num(stack(tps), nan=-np.inf), stack(tpot), stack(taus), plain)


def k_table(ranking: ProposerRanking, proposer_index: int, acceptance_index: int = 0) -> list[dict]:
    """The best k of one proposer per batch, as ranges {batch_min, batch_max, k} (k = 0: do not speculate)."""
    tps = ranking.tokens_per_s[proposer_index, :, :, acceptance_index]
    ks = ranking.gammas[np.argmax(tps, axis=0)].astype(int)
    rows = []
    for b, k in zip(ranking.batches.astype(int), ks):
        if rows and rows[-1]["k"] == k:
            rows[-1]["batch_max"] = int(b)
        else:
            rows.append({"batch_min": int(b), "batch_max": int(b), "k": int(k)})
    return rows
