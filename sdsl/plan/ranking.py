"""Rank proposers × speculation length k over batch sizes and acceptance levels: draft models, heads and lookup
in one ranking, one table. Summary of docs/model.md §3.4–§3.5.

Each proposer is priced by :func:`sdsl.speculation.step.price_step` on a (k, batch, acceptance) grid; the
separate draft models are stacked as one :class:`~sdsl.roofline.latency.ModelShapes` and priced in one call
(:func:`sdsl.plan.search.price_draft_stack`, the draft grid's pricing), every other proposer in one call each.
Acceptance per proposer is the one given or :func:`sdsl.speculation.resolve.resolve_acceptance`'s (the published
catalog's for heads and lookup, SDSL's plane for a draft model). τ(k) per level is Leviathan et al. 2023
Eq. 1 for an i.i.d. α or the acceptance's per-position sum. The best (proposer, k) per (batch, acceptance) has the
most tokens/s; k = 0 is plain decoding, so speculation "stops paying" at the first batch whose best is k = 0 after
one that speculates. Each proposer's batch → k table (:meth:`ProposerRanking.k_table`, k within the tolerance of the
best are one choice) gives the k it is deployed at: the table's rows (:meth:`ProposerRanking.records`) and the pick
use it, with the per-batch best k beside it; the pick's table serves the engine export and the serving simulator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdsl._result import Result
from sdsl.acceptance import tau
from sdsl.speculation.resolve import acceptance_levels, given_acceptance
from sdsl.roofline.deployment import Deployment
from sdsl._checks import index, numbers_1d, one_or_many
from sdsl.speculation.proposers import Proposer, make_proposer
from sdsl.plan.config_table import config_row, frame_columns, report_rows
from sdsl.plan.robust import K_TOLERANCE, deploy_blocker, robust_k_ranges, table_k_index
from sdsl.speculation.step import price_step
from sdsl.errors import InvalidInputError

__all__ = ["ProposerRanking", "rank_proposers", "k_table", "k_ranges", "band_lines"]


def k_ranges(ks, batches) -> list[dict]:
    """Best k per batch (``ks[i]`` at ``batches[i]``, ascending) merged into ranges {batch_min, batch_max, k}."""
    rows = []
    for b, k in zip(np.asarray(batches).astype(int), np.asarray(ks).astype(int)):
        if rows and rows[-1]["k"] == k:
            rows[-1]["batch_max"] = int(b)
        else:
            rows.append({"batch_min": int(b), "batch_max": int(b), "k": int(k)})
    return rows


@dataclass(frozen=True, eq=False)  # a result object: equal only to itself
class ProposerRanking(Result):
    """tokens/s on (proposer, k, batch, acceptance); ``priced[p]`` is proposer p's :class:`PricedStep` on
    (k, batch, acceptance) and ``acceptance[p]`` its levels. Result protocol: ``report()`` (the best 3 per
    batch), ``to_dict()``, ``to_json()``, ``plot()``; ``to_frame()`` has every configuration."""

    proposers: tuple
    gammas: np.ndarray
    batches: np.ndarray
    acceptance: tuple  # per proposer: its Acceptance levels
    priced: tuple  # per proposer: PricedStep on (k, batch, acceptance)
    tokens_per_s: np.ndarray  # (proposer, k, batch, acceptance); -inf where a proposer cannot draft k
    plain_tokens_per_s: np.ndarray  # (batch,)
    blocked: tuple = ()  # per proposer: why the target cannot run it (sdsl.plan.robust.deploy_blocker), or None

    @property
    def n_acceptance(self) -> int:
        return self.tokens_per_s.shape[-1]

    @property
    def taus(self) -> tuple:
        """Per proposer: τ on (k, 1, acceptance)."""
        shape = self.tokens_per_s.shape[1:]
        return tuple(np.broadcast_to(s.tau, shape)[:, :1, :] for s in self.priced)

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

    def best_k_index(self) -> np.ndarray:
        """(proposer, batch, acceptance): index into ``gammas`` of each proposer's best k (read-only)."""
        return self.table_k_index(0.0)

    def table_k_index(self, tolerance: float = K_TOLERANCE) -> np.ndarray:
        """(proposer, batch, acceptance): index into ``gammas`` of each proposer's k in its own batch → k table
        (:meth:`k_table`), the k to deploy; the per-batch best (:meth:`best_k_index`) where ``tolerance`` is 0.
        Computed once per tolerance (the ranking is immutable; read-only arrays)."""
        memo = self.__dict__.setdefault("_k_index", {})
        if tolerance not in memo:
            if tolerance == 0:
                out = np.argmax(self.tokens_per_s, axis=1)
            else:
                n_p, _, n_b, n_a = self.tokens_per_s.shape
                out = np.stack([np.stack([table_k_index(self.tokens_per_s[p, :, :, a], self.gammas, self.batches,
                                                        tolerance) for a in range(n_a)], axis=-1)
                                for p in range(n_p)]).reshape(n_p, n_b, n_a)
            out.flags.writeable = False
            memo[tolerance] = out
        return memo[tolerance]

    def _order(self, chosen: np.ndarray, b: int, a: int) -> np.ndarray:
        """Proposer order at (batch b, acceptance a): runnable first, then tokens/s at the ``chosen`` k, then the best
        speculating tokens/s (which decides between proposers that all decode plainly there), then names' order."""
        props = np.arange(len(self.proposers))
        tps = self.tokens_per_s[props, chosen[:, b, a], b, a]
        spec = np.where((self.gammas > 0)[None, :], self.tokens_per_s[:, :, b, a], -np.inf).max(axis=1)
        return np.lexsort((props, -spec, -tps, ~self.runnable))

    def blocker(self, p: int) -> str | None:
        """Why the target cannot run proposer ``p`` (None: it can)."""
        return self.blocked[p] if self.blocked else None

    @property
    def runnable(self) -> np.ndarray:
        """(proposer,) mask: the target can run it (a blocked proposer is shown but never the pick)."""
        return np.array([self.blocker(p) is None for p in range(len(self.proposers))])

    def pick(self, batch, acceptance_index: int = 0, tolerance: float = K_TOLERANCE) -> tuple[int, int]:
        """(proposer index, k): the proposer the table (:meth:`records`) lists first at ``batch`` among those the
        target can run (all of them when it can run none), at its own table's k there (0: plain decoding is faster)."""
        b = np.flatnonzero(self.batches == batch)
        if b.size == 0:
            raise InvalidInputError(f"Batch {batch} was not ranked.")
        chosen = self.table_k_index(tolerance)
        runs = self.runnable if self.runnable.any() else np.ones(len(self.proposers), bool)
        p = int(next(p for p in self._order(chosen, int(b[0]), acceptance_index) if runs[p]))
        return p, int(self.gammas[chosen[p, int(b[0]), acceptance_index]])

    def k_table(self, proposer_index: int, acceptance_index: int = 0, tolerance: float = K_TOLERANCE) -> list[dict]:
        """One proposer's batch → k table as ranges {batch_min, batch_max, k} (k = 0: do not speculate): the fewest
        ranges whose k is within ``tolerance`` of the per-batch best at each of their batches, the smaller k on a
        tie (:func:`sdsl.plan.robust.robust_k_ranges`; ``tolerance=0``: the best k of every batch). The table the
        engine export and the serving simulator use."""
        p = index(proposer_index, "proposer_index", len(self.proposers), "proposers ranked")
        a = index(acceptance_index, "acceptance_index", self.n_acceptance, "acceptance levels")
        tps = self.tokens_per_s[p, :, :, a]
        if tolerance == 0:
            return k_ranges(self.gammas[np.argmax(tps, axis=0)], self.batches)
        return robust_k_ranges(tps, self.gammas, self.batches, tolerance)

    def break_even_batch(self) -> np.ndarray:
        """Per acceptance level: the first batch at which speculation stops paying — no (proposer, k ≥ 1) beats
        plain decoding there, though one did at a smaller batch; the first batch searched when speculation pays at
        none; NaN when it pays at every batch from the first at which it pays (on a mixture-of-experts target that
        need not be batch 1: :meth:`sdsl.plan.plan.SpeculationPlan.speculation_pays` gives the ranges)."""
        pays = self.best()["gamma"] > 0
        stops = ~pays & (np.cumsum(pays, axis=0) > 0)
        first = np.argmax(stops, axis=0)
        return np.where(stops.any(axis=0), self.batches[first],
                        np.where(pays.any(axis=0), np.nan, self.batches[0]))

    def row(self, p: int, g: int, b: int, a: int) -> dict:
        """The configuration (proposer p, k index g, batch index b, acceptance a) as one table row, with the
        proposer's best k at that batch and its gain over k."""
        best = int(self.best_k_index()[p, b, a])
        gain = float(self.tokens_per_s[p, best, b, a] / self.tokens_per_s[p, g, b, a] - 1.0)
        return config_row(self.proposers[p], self.priced[p], (g, b, a), self.acceptance[p][a],
                          gamma=int(self.gammas[g]), batch=int(self.batches[b]), acceptance_index=a,
                          best_gamma=int(self.gammas[best]), best_gamma_gain=gain)

    def records(self, top: int | None = None, batches=None, tolerance: float = K_TOLERANCE) -> list[dict]:
        """The table: each proposer at the k its own batch → k table deploys at that batch (:meth:`table_k_index`;
        ``tolerance=0``: its per-batch best), per (batch, acceptance), best first (:meth:`_order`; what the target
        cannot run last); each row names the per-batch best k (``best_gamma``) and its gain (``best_gamma_gain``).
        Only ``batches`` when given, and only the ``top`` best of each (batch, acceptance) when given."""
        keep = np.ones(self.batches.size, bool) if batches is None else np.isin(self.batches, list(batches))
        chosen = self.table_k_index(tolerance)
        rows = []
        for b in np.flatnonzero(keep):
            for a in range(self.n_acceptance):
                for p in self._order(chosen, b, a)[: top or len(self.proposers)]:
                    if np.isfinite(self.tokens_per_s[p, chosen[p, b, a], b, a]):
                        rows.append(self.row(int(p), int(chosen[p, b, a]), int(b), a))
        return rows

    def to_frame(self, batches=None):
        """Every (proposer, k, batch, acceptance) ranked (only ``batches`` when given) as a pandas DataFrame with
        the table's columns (:data:`sdsl.plan.config_table.ROW_KEYS`), in (proposer, k, batch, acceptance) order."""
        import pandas as pd

        keep = np.ones(self.batches.size, bool) if batches is None else np.isin(self.batches, list(batches))
        best = self.best_k_index()
        parts = [frame_columns(prop, step, self.acceptance[p], self.gammas, self.batches, keep,
                               np.isfinite(self.tokens_per_s[p]),
                               (self.gammas[best[p]], np.take_along_axis(self.tokens_per_s[p], best[p][None], 0)[0]))
                 for p, (prop, step) in enumerate(zip(self.proposers, self.priced))]
        return pd.concat([pd.DataFrame(x) for x in parts], ignore_index=True)

    def bands(self) -> dict:
        """Where each proposer's 80% bands come from (:attr:`PricedStep.band <sdsl.speculation.priced_step.PricedStep.band>`)."""
        return {p.name: s.band for p, s in zip(self.proposers, self.priced)}

    def band_line(self) -> str:
        """One line on the bands of the table (:func:`band_lines`)."""
        return band_lines(self.proposers, self.priced)

    def report(self, top: int = 3) -> str:
        return report_rows(self.records(top=top)) + "\n" + self.band_line()

    def to_dict(self, top: int | None = 3) -> dict:
        stop = self.break_even_batch()
        return {"proposers": [p.name for p in self.proposers], "gammas": self.gammas.tolist(),
                "batches": self.batches.tolist(), "configs": self.records(top=top),
                "break_even_batch": [None if np.isnan(x) else int(x) for x in stop], "bands": self.bands()}

    def plot(self, ax=None):
        """Best speedup over plain decoding per batch size (:func:`sdsl.plots.results.plot_speedup_by_batch`)."""
        from sdsl.plots.results import plot_speedup_by_batch

        return plot_speedup_by_batch(self.batches[:, None], self.best()["speedup"], ax=ax)


def band_lines(proposers, priced) -> str:
    """Where a table's 80% bands come from, in one line: the step-time and acceptance class of each proposer, and
    whether the engine profile priced any validation row (:mod:`sdsl.speculation.bands`)."""
    infos = [s.band for s in priced]
    parts = [f"{p.name}: {i['speculative_class']} x acceptance {i['acceptance_class']}" for p, i in zip(proposers, infos)]
    line = "80% bands (sdsl validate bands): " + "; ".join(parts)
    if infos and not infos[0]["profile_has_rows"]:
        line += (f". Engine profile {infos[0]['profile']} priced no validation row of its own: each figure has its "
                 "class's widest band")
    return line


def _level_taus(levels, ks: np.ndarray) -> np.ndarray:
    """τ on (k, acceptance level) from a proposer's Acceptance levels (i.i.d. levels in one call of Eq. 1)."""
    if all(a.is_iid for a in levels):
        return tau(np.array([a.positions[0] for a in levels])[None, :], ks[:, None])
    return np.stack([np.asarray(a.tau(ks), dtype=float) for a in levels], axis=-1)


def _levels(props, target, acceptance, options) -> tuple:
    """Each proposer's acceptance levels; a spec shared by several proposers is turned into levels once."""
    shared: dict = {}
    out = []
    for p in props:
        spec = given_acceptance(p, acceptance)
        if spec is None:
            out.append(acceptance_levels(p, target, None, **options))
        else:
            if id(spec) not in shared:
                shared[id(spec)] = acceptance_levels(p, target, spec, **options)
            out.append(shared[id(spec)])
    return tuple(out)


def _draft_groups(props) -> dict:
    """Indices of the separate draft models with catalog shapes, grouped by their latency params (each group is
    priced as one stack)."""
    from sdsl.catalog.models import ModelSpec

    groups: dict = {}
    for i, p in enumerate(props):
        if p.kind == "draft" and isinstance(getattr(p, "model", None), ModelSpec):
            groups.setdefault(id(p.params), []).append(i)
    return groups


def rank_proposers(target, proposers, deployment, *, acceptance=None, gammas=range(0, 9), batches=(1,),
                   acceptance_options: dict | None = None) -> ProposerRanking:
    """Price every proposer × k × batch × acceptance. ``acceptance``: None (each proposer's own,
    :func:`sdsl.speculation.resolve.resolve_acceptance`: the published catalog, SDSL's plane for draft models), one
    spec for all proposers, or a mapping {proposer name or kind: spec}; a spec is an Acceptance, i.i.d. α level(s), or a list of
    Acceptance levels (every proposer needs the same number). The deployment's engine profile prices the engine's
    host time (:mod:`sdsl.engine.profiles`); ``acceptance_options`` go to the acceptance rules (e.g. ``draft_tokens``)."""
    from sdsl.catalog.models import get_model
    from sdsl.plan.search import price_draft_stack

    target, dep = get_model(target), Deployment.of(deployment)
    props = tuple(make_proposer(p) for p in one_or_many(proposers, (str, Proposer)))
    if not props:
        raise InvalidInputError("Need at least one proposer to rank.")
    g = numbers_1d(gammas, "gammas", allow_empty=True)
    b = numbers_1d(batches, "batches", allow_empty=True)
    if g.size == 0 or b.size == 0 or np.any(g < 0):
        raise InvalidInputError("Need at least one k >= 0 and one batch size.")
    levels = _levels(props, target, acceptance, acceptance_options or {})
    if len({len(x) for x in levels}) > 1:
        raise InvalidInputError("Every proposer ranked needs the same number of acceptance levels.")
    steps = [None] * len(props)
    for group in _draft_groups(props).values():
        taus = np.stack([_level_taus(levels[i], g) for i in group])[:, :, None, :]  # (draft, k, 1, acceptance)
        stack = price_draft_stack(target, [props[i].model for i in group], dep, tau=taus, gamma=g[None, :, None, None],
                                  batch=b[None, None, :, None], draft_params=props[group[0]].params)
        for j, i in enumerate(group):
            steps[i] = stack.take(j, proposer=props[i].name, acceptance_source=levels[i][0].source)
    for i, p in enumerate(props):
        if steps[i] is None:
            usable = g if p.max_depth is None else np.minimum(g, p.max_depth)
            steps[i] = price_step(target, p, dep, tau=_level_taus(levels[i], usable)[:, None, :],
                                  gamma=usable[:, None, None], batch=b[None, :, None], tau_source=levels[i][0].source)
    shape = (g.size, b.size, len(levels[0]))
    plain = np.broadcast_to(steps[0].plain_tokens_per_s, shape)[0, :, 0]
    # k = 0 is plain decoding whatever the proposer: an EAGLE-style head priced at γ = 0 would still charge its
    # worker's draft-extend pass, which a k = 0 step (no speculation) does not run
    tps = np.stack([np.where((g > (p.max_depth if p.max_depth is not None else np.inf))[:, None, None], -np.inf,
                             np.where((g == 0)[:, None, None], plain[None, :, None], np.broadcast_to(s.tokens_per_s, shape)))
                    for p, s in zip(props, steps)])
    return ProposerRanking(props, g, b, levels, tuple(steps), tps, np.array(plain),
                           tuple(deploy_blocker(target, p) for p in props))


def k_table(ranking: ProposerRanking, proposer_index: int, acceptance_index: int = 0,
            tolerance: float = K_TOLERANCE) -> list[dict]:
    """:meth:`ProposerRanking.k_table` as a function."""
    return ranking.k_table(proposer_index, acceptance_index, tolerance)
