"""SGLang token trees ranked (``sdsl optimize --trees``): every (steps, topk, num_draft_tokens) triple of each
proposer priced per batch, :func:`rank_trees` and its :class:`TreeRanking` (the chains are
:mod:`sdsl.plan.ranking`'s)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdsl._result import Result
from sdsl._checks import one_or_many
from sdsl.plan.config_table import config_row, report_rows
from sdsl.plan.ranking import band_lines
from sdsl.roofline.deployment import Deployment
from sdsl.speculation.proposers import Proposer, make_proposer
from sdsl.speculation.resolve import acceptance_levels
from sdsl.speculation.step import price_step

__all__ = ["TreeRanking", "rank_trees"]


@dataclass(frozen=True)
class TreeRanking(Result):
    """tokens/s of SGLang trees on (proposer, triple, batch); τ per triple from the tree model; ``priced[p]`` is
    proposer p's :class:`PricedStep` on (triple, batch). Result protocol: ``report()``, ``to_dict()``,
    ``to_json()``, ``plot()``."""

    proposers: tuple
    steps: np.ndarray  # SGLang --speculative-num-steps of each triple
    topk: np.ndarray
    tokens: np.ndarray
    tau: np.ndarray  # (proposer, triple)
    batches: np.ndarray
    tokens_per_s: np.ndarray  # (proposer, triple, batch); -inf where a proposer cannot draft that deep
    plain_tokens_per_s: np.ndarray
    acceptance: tuple = ()  # per proposer: the Acceptance its trees were built from
    priced: tuple = ()  # per proposer: PricedStep on (triple, batch)

    def report(self, top: int = 3) -> str:
        return report_rows(self.records(top=top)) + "\n" + self.band_line()

    def bands(self) -> dict:
        """Where each proposer's tree bands come from (as :meth:`ProposerRanking.bands`)."""
        return {p.name: s.band for p, s in zip(self.proposers, self.priced)}

    def band_line(self) -> str:
        """One line on the bands of the tree table (:func:`band_lines`)."""
        return band_lines(self.proposers, self.priced)

    def to_dict(self, top: int = 5) -> dict:
        return {"proposers": [p.name for p in self.proposers], "batches": self.batches.tolist(),
                "configs": self.records(top=top), "bands": self.bands()}

    def plot(self, ax=None):
        """Best speedup per batch size over every (proposer, tree) (:func:`sdsl.plots.results.plot_speedup_by_batch`)."""
        from sdsl.plots.results import plot_speedup_by_batch

        best = self.tokens_per_s.reshape(-1, self.batches.size).max(axis=0) / self.plain_tokens_per_s
        return plot_speedup_by_batch(self.batches, best, ax=ax)

    def records(self, top: int = 5, batches=None) -> list[dict]:
        """The ``top`` best (proposer, tree) per batch, best first, as table rows."""
        keep = np.ones(self.batches.size, bool) if batches is None else np.isin(self.batches, list(batches))
        flat = self.tokens_per_s.reshape(-1, self.batches.size)
        rows = []
        for b in np.flatnonzero(keep):
            for i in np.argsort(-flat[:, b], kind="stable")[:top]:
                p, j = divmod(int(i), self.steps.size)
                tree = [int(self.steps[j]), int(self.topk[j]), int(self.tokens[j])]
                rows.append(config_row(self.proposers[p], self.priced[p], (j, int(b)), self.acceptance[p], gamma=None,
                                       tree=tree, batch=int(self.batches[b]), acceptance_index=0))
        return rows


def rank_trees(target, proposers, deployment, *, acceptance=None, batches=(1,), steps=range(1, 9), topks=(1, 2, 4, 8),
               max_tokens: int = 64, rank_ratio: float | None = None, draft_temperature: float | None = None,
               acceptance_options: dict | None = None) -> TreeRanking:
    """Price every SGLang (steps, topk, num_draft_tokens) triple for each proposer and batch: τ from the
    SpecInfer/Sequoia tree model (:func:`sdsl.plan.tree_search.sglang_grid`) over per-rank acceptance built from
    the proposer's acceptance (its first level; resolved as in :func:`rank_proposers`) by
    :func:`sdsl.acceptance.trees.rank_acceptance`, the nodes chosen by the draft's scores as SGLang does
    (:func:`sdsl.acceptance.trees.draft_scores`); cost from :func:`price_step`; every tree step is speculative."""
    from sdsl.catalog.models import get_model
    from sdsl.plan.tree_search import sglang_grid
    from sdsl.acceptance.trees import tree_matrices

    target, dep = get_model(target), Deployment.of(deployment)
    props = tuple(make_proposer(p) for p in one_or_many(proposers, (str, Proposer)))
    b = np.asarray(list(np.atleast_1d(batches)), dtype=float)
    accs = tuple(acceptance_levels(p, target, acceptance, **(acceptance_options or {}))[0] for p in props)
    grids, priced, tps = {}, [], []
    for p, acc in zip(props, accs):
        if acc not in grids:
            P, S = tree_matrices(acc.conditional_at(max(steps)), max(topks), rank_ratio, "draft", draft_temperature)
            grids[acc] = sglang_grid(P, steps, topks, max_tokens, scores=S)
        grid = grids[acc]
        usable = grid.steps <= (p.max_depth or np.inf)
        trees = {"steps": grid.steps[:, None], "topk": grid.topk[:, None], "tokens": grid.num_draft_tokens[:, None]}
        sub = {k: np.where(usable[:, None], v, 1 + (k == "tokens")) for k, v in trees.items()}
        step = price_step(target, p, dep, tau=np.where(usable, grid.tau, 1.0)[:, None], tree=sub, batch=b[None, :],
                          tau_source=f"{acc.source} (tree model)")
        priced.append(step)
        tps.append(np.where(usable[:, None], step.tokens_per_s, -np.inf))
    grid = grids[accs[0]]
    plain = np.broadcast_to(priced[0].plain_tokens_per_s, (1, b.size))[0]
    taus = np.stack([grids[a].tau for a in accs])
    return TreeRanking(props, grid.steps, grid.topk, grid.num_draft_tokens, taus, b, np.stack(tps), plain, accs,
                       tuple(priced))
