"""Rank proposers × speculation length k over batch sizes and acceptance levels, in one array per proposer.

Each proposer is priced by :func:`sdsl.core.speculation.price_speculation` on a (k, batch, acceptance)
grid; τ(k) per acceptance level comes from an i.i.d. α (Leviathan et al. 2023, Eq. 1) or any acceptance
object with ``tau(k)``. The pick per (batch, acceptance) is the (proposer, k) with the most tokens/s;
k = 0 is plain decoding, so speculation "stops paying" at the first batch whose pick is k = 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdsl._result import Result
from sdsl.core.proposers import make_proposer
from sdsl.core.speculation import resolve_deployment, price_speculation, tau_of
from sdsl.errors import InvalidInputError

__all__ = ["ProposerRanking", "rank_proposers", "k_table", "TreeRanking", "rank_trees"]


def _report(rows: list[dict]) -> str:
    lines = [f"{'batch':>6} {'proposer':<22} {'k/tree':>9} {'tau':>6} {'tokens/s':>10} {'TPOT ms':>8} {'speedup':>8}"]
    for r in rows:
        shape = ",".join(map(str, r["tree"])) if r.get("tree") else str(r["gamma"])
        lines.append(f"{r['batch']:>6} {r['proposer']:<22} {shape:>9} {r['tau']:6.2f} {r['tokens_per_s']:10.1f} "
                     f"{1e3 * r['tpot_s']:8.2f} {r['speedup']:8.2f}")
    return "\n".join(lines)


@dataclass(frozen=True)
class ProposerRanking(Result):
    """tokens/s on (proposer, k, batch, acceptance); ``acceptance[p]`` is what priced proposer p.
    Result protocol: ``report()`` (best 3 per batch), ``to_dict()``, ``to_json()``, ``plot()``."""

    proposers: tuple
    gammas: np.ndarray
    batches: np.ndarray
    n_acceptance: int
    tokens_per_s: np.ndarray  # (proposer, k, batch, acceptance); -inf where a proposer cannot draft k
    taus: tuple  # per proposer: τ on (k, 1, acceptance)
    plain_tokens_per_s: np.ndarray  # (batch,)

    @property
    def tpot_s(self) -> np.ndarray:
        """Time per output token of one sequence, b / tokens/s (= step time / τ)."""
        with np.errstate(divide="ignore"):
            return self.batches[None, None, :, None] / self.tokens_per_s

    def best(self) -> dict:
        """Arrays over (batch, acceptance): proposer index, k, tokens/s, speedup of the pick."""
        n_p, n_k = self.tokens_per_s.shape[:2]
        flat = self.tokens_per_s.reshape(n_p * n_k, *self.tokens_per_s.shape[2:])
        i = np.argmax(flat, axis=0)
        tps = np.take_along_axis(flat, i[None], axis=0)[0]
        return {"proposer": i // n_k, "gamma": self.gammas[i % n_k].astype(int), "tokens_per_s": tps,
                "speedup": tps / self.plain_tokens_per_s[:, None]}

    def report(self, top: int = 3) -> str:
        return _report(self.records(top=top))

    def to_dict(self, top: int | None = 3) -> dict:
        stop = self.break_even_batch()
        return {"proposers": [p.name for p in self.proposers], "gammas": self.gammas.tolist(),
                "batches": self.batches.tolist(), "configs": self.records(top=top),
                "break_even_batch": [None if np.isnan(x) else int(x) for x in stop]}

    def plot(self, ax=None):
        """Best speedup over plain decoding per batch size (:func:`sdsl.plots.results.plot_speedup_by_batch`)."""
        from sdsl.plots.results import plot_speedup_by_batch

        return plot_speedup_by_batch(self.batches[:, None], self.best()["speedup"], ax=ax)

    def break_even_batch(self) -> np.ndarray:
        """Per acceptance level: the smallest batch at which no (proposer, k ≥ 1) beats plain decoding
        (NaN when speculation pays at every batch searched)."""
        gain = self.best()["gamma"] > 0
        stops = ~gain
        first = np.argmax(stops, axis=0)
        return np.where(stops.any(axis=0), self.batches[first], np.nan)

    def records(self, top: int | None = None, batches=None) -> list[dict]:
        """Configurations as records, best first within each (batch, acceptance); only ``batches`` when
        given, and only the ``top`` best of each (batch, acceptance) when given."""
        tpot = self.tpot_s
        keep = np.ones(self.batches.size, bool) if batches is None else np.isin(self.batches, list(batches))
        order = np.argsort(-self.tokens_per_s.reshape(-1, *self.tokens_per_s.shape[2:]), axis=0, kind="stable")
        n_k = self.gammas.size
        rows = []
        for b in np.flatnonzero(keep):
            for a in range(self.n_acceptance):
                for i in order[: top or order.shape[0], b, a]:
                    p, g = divmod(int(i), n_k)
                    if not np.isfinite(self.tokens_per_s[p, g, b, a]):
                        continue
                    tps = float(self.tokens_per_s[p, g, b, a])
                    rows.append({"proposer": self.proposers[p].name, "gamma": int(self.gammas[g]),
                                 "batch": int(self.batches[b]), "acceptance_index": a,
                                 "tau": float(self.taus[p][g, 0, a]), "tokens_per_s": tps,
                                 "tpot_s": float(tpot[p, g, b, a]), "speedup": tps / float(self.plain_tokens_per_s[b])})
        return rows


def _taus(acceptance, gammas: np.ndarray) -> np.ndarray:
    """τ on (k, acceptance): i.i.d. α levels (array) or a list of acceptance objects with ``tau(k)``."""
    if isinstance(acceptance, (list, tuple)) and acceptance and hasattr(acceptance[0], "tau"):
        return np.stack([np.asarray(a.tau(gammas), dtype=float) for a in acceptance], axis=-1)
    a = np.atleast_1d(np.asarray(acceptance, dtype=float))
    return tau_of(a[None, :], gammas[:, None])


def rank_proposers(target, proposers, deployment, *, acceptance, gammas=range(0, 9), batches=(1,),
                   pass_overhead_s=0.0, host_step_s=0.0) -> ProposerRanking:
    """Price every proposer × k × batch × acceptance. ``acceptance`` is one spec for all proposers or a
    dict {proposer name: spec}; a spec is i.i.d. α level(s) or a list of objects with ``tau(k)``.
    ``pass_overhead_s``: an engine's host time per forward pass (:func:`price_speculation`);
    ``host_step_s``: its exposed host time per speculative step (k > 0 only; :mod:`sdsl.core.engine_host`)."""
    props = tuple(make_proposer(p) for p in proposers)
    deployment = resolve_deployment(deployment)
    if not props:
        raise InvalidInputError("Need at least one proposer to rank.")
    g = np.asarray(list(gammas), dtype=float)
    b = np.asarray(list(np.atleast_1d(batches)), dtype=float)
    if g.size == 0 or b.size == 0 or np.any(g < 0):
        raise InvalidInputError("Need at least one k >= 0 and one batch size.")
    tps, taus = [], []
    for p in props:
        spec = acceptance.get(p.name, acceptance.get(p.kind)) if isinstance(acceptance, dict) else acceptance
        if spec is None:
            raise InvalidInputError(f"No acceptance given for proposer {p.name}.")
        usable = g if p.max_depth is None else np.minimum(g, p.max_depth)
        t = _taus(spec, usable)[:, None, :]  # (k, 1, acceptance)
        out = price_speculation(target, p, deployment, tau_value=t, gamma=usable[:, None, None], batch=b[None, :, None],
                                overhead_s=host_step_s * (usable[:, None, None] > 0), pass_overhead_s=pass_overhead_s)
        tp = out["tokens_per_s"]
        if p.max_depth is not None:
            tp = np.where((g > p.max_depth)[:, None, None], -np.inf, tp)
        tps.append(tp)
        taus.append(t)
    shape = np.broadcast_shapes(*(x.shape for x in tps))
    stacked = np.stack([np.broadcast_to(x, shape) for x in tps])
    plain = np.broadcast_to(out["plain_tokens_per_s"], (1, b.size, 1))[0, :, 0]
    return ProposerRanking(props, g, b, shape[-1], stacked, tuple(np.broadcast_to(t, (g.size, 1, shape[-1])) for t in taus),
                           plain)


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


@dataclass(frozen=True)
class TreeRanking(Result):
    """tokens/s of SGLang trees on (proposer, triple, batch); τ per triple from the tree model.
    Result protocol: ``report()``, ``to_dict()``, ``to_json()``, ``plot()``."""

    proposers: tuple
    steps: np.ndarray
    topk: np.ndarray
    tokens: np.ndarray
    tau: np.ndarray  # (proposer, triple)
    batches: np.ndarray
    tokens_per_s: np.ndarray
    plain_tokens_per_s: np.ndarray

    def report(self, top: int = 3) -> str:
        return _report(self.records(top=top))

    def to_dict(self, top: int = 5) -> dict:
        return {"proposers": [p.name for p in self.proposers], "batches": self.batches.tolist(),
                "configs": self.records(top=top)}

    def plot(self, ax=None):
        """Best speedup per batch size over every (proposer, tree) (:func:`sdsl.plots.results.plot_speedup_by_batch`)."""
        from sdsl.plots.results import plot_speedup_by_batch

        best = self.tokens_per_s.reshape(-1, self.batches.size).max(axis=0) / self.plain_tokens_per_s
        return plot_speedup_by_batch(self.batches, best, ax=ax)

    def records(self, top: int = 5, batches=None) -> list[dict]:
        """The ``top`` best (proposer, tree) per batch, best first."""
        keep = np.ones(self.batches.size, bool) if batches is None else np.isin(self.batches, list(batches))
        flat = self.tokens_per_s.reshape(-1, self.batches.size)
        rows = []
        for b in np.flatnonzero(keep):
            for i in np.argsort(-flat[:, b], kind="stable")[:top]:
                p, j = divmod(int(i), self.steps.size)
                tps = float(flat[i, b])
                rows.append({"proposer": self.proposers[p].name, "tree": [int(self.steps[j]), int(self.topk[j]),
                                                                            int(self.tokens[j])],
                             "gamma": None, "batch": int(self.batches[b]), "tau": float(self.tau[p, j]),
                             "tokens_per_s": tps, "tpot_s": float(self.batches[b]) / tps,
                             "speedup": tps / float(self.plain_tokens_per_s[b])})
        return rows


def rank_trees(target, proposers, deployment, *, acceptance, batches=(1,), steps=range(1, 9), topks=(1, 2, 4, 8),
               max_tokens: int = 64, rank_ratio: float | None = None, pass_overhead_s=0.0,
               host_step_s=0.0) -> TreeRanking:
    """``acceptance`` is one Acceptance for all proposers or a dict {proposer name: [Acceptance]};
    ``pass_overhead_s``/``host_step_s`` as in :func:`rank_proposers` (every tree step is speculative)."""
    props = tuple(make_proposer(p) for p in proposers)
    grid = (steps, topks, max_tokens, rank_ratio, pass_overhead_s, host_step_s)
    if isinstance(acceptance, dict):
        parts = [_rank_trees(target, (p,), deployment, acceptance[p.name][0], batches, *grid) for p in props]
        return TreeRanking(props, parts[0].steps, parts[0].topk, parts[0].tokens, np.concatenate([r.tau for r in parts]),
                           parts[0].batches, np.concatenate([r.tokens_per_s for r in parts]),
                           parts[0].plain_tokens_per_s)
    return _rank_trees(target, props, deployment, acceptance, batches, *grid)


def _rank_trees(target, props, deployment, acceptance, batches, steps, topks, max_tokens, rank_ratio,
                pass_overhead_s, host_step_s) -> TreeRanking:
    """Price every SGLang (steps, topk, num_draft_tokens) triple for each proposer and batch: τ from the
    SpecInfer/Sequoia tree model (:func:`sdsl.core.tree_search.sglang_grid`) over per-rank acceptance built
    from ``acceptance`` (an :class:`~sdsl.core.acceptance_vector.Acceptance`) by
    :func:`sdsl.core.trees.rank_acceptance`; cost from :func:`price_speculation` on the roofline."""
    from sdsl.core.tree_search import sglang_grid
    from sdsl.core.trees import DEFAULT_RANK_RATIO, rank_acceptance

    deployment = resolve_deployment(deployment)
    P = rank_acceptance(acceptance.conditional_at(max(steps)), max(topks),
                        DEFAULT_RANK_RATIO if rank_ratio is None else rank_ratio)
    grid = sglang_grid(P, steps, topks, max_tokens)
    b = np.asarray(list(np.atleast_1d(batches)), dtype=float)
    trees = {"steps": grid.steps[:, None], "topk": grid.topk[:, None], "tokens": grid.num_draft_tokens[:, None]}
    tps = []
    for p in props:
        usable = grid.steps <= (p.max_depth or np.inf)
        sub = {k: np.where(usable[:, None], v, 1 + (k == "tokens")) for k, v in trees.items()}
        out = price_speculation(target, p, deployment, tau_value=np.where(usable, grid.tau, 1.0)[:, None], tree=sub,
                                batch=b[None, :], overhead_s=host_step_s, pass_overhead_s=pass_overhead_s)
        tps.append(np.where(usable[:, None], out["tokens_per_s"], -np.inf))
    plain = np.broadcast_to(out["plain_tokens_per_s"], (1, b.size))[0]
    return TreeRanking(props, grid.steps, grid.topk, grid.num_draft_tokens, np.broadcast_to(grid.tau, (len(props),
                       grid.tau.size)), b, np.stack(tps), plain)
