"""What ``sdsl optimize`` computes, in one core call: rank the proposers (catalog draft models by default, or
heads, lookup and named drafts) × k over batch sizes, the batch at which speculation stops paying, the
pick's batch → k table, SGLang trees on request, the engine configuration, and SDSL's continuous N*.
Summary of docs/model.md §3.2–§3.5; the JSON schema is docs/json.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdsl._result import Result
from sdsl.acceptance import Acceptance
from sdsl.plan.config_table import report_rows
from sdsl.roofline.deployment import Deployment
from sdsl.plan.ranking import ProposerRanking, TreeRanking, k_ranges, rank_proposers, rank_trees
from sdsl.errors import InvalidInputError

__all__ = ["SpeculationPlan", "plan_speculation", "flop_optimum", "default_proposers", "MAX_RANKED_BATCH"]

MAX_RANKED_BATCH = 16384  # the ranking prices every batch 1..max_batch: a bound on the grid, far above engines' limits


def default_proposers(target, *, any_tokenizer: bool = False) -> list:
    """A :class:`~sdsl.speculation.proposers.DraftModel` per catalog draft candidate of ``target``
    (:func:`sdsl.plan.search.candidate_drafts`: ≤ 1/4 of its size, its vocabulary unless ``any_tokenizer``)."""
    from sdsl.speculation.proposers import DraftModel
    from sdsl.plan.search import candidate_drafts

    drafts = candidate_drafts(target, same_tokenizer=not any_tokenizer)
    if not drafts:
        raise InvalidInputError(f"No catalog draft shares {target.name}'s vocabulary; name the drafts to rank or allow any tokenizer.")
    return [DraftModel(d) for d in drafts]


def flop_optimum(target, pretrain_tokens: float = 1e12) -> dict:
    """SDSL's continuous FLOP-model optimum N* for the target (docs/model.md §3.2)."""
    from sdsl.speculation.optimum import optimal_draft_size

    n_star, s_star, a_star, g_star = optimal_draft_size(target.total_params, pretrain_tokens, pretrain_tokens)
    return {"n_star": float(n_star[0]), "flop_speedup": float(s_star[0]), "alpha": float(a_star[0]),
            "gamma_star": float(g_star[0]), "pretrain_tokens": float(pretrain_tokens)}


@dataclass(frozen=True)
class SpeculationPlan(Result):
    """The ranking over every batch 1..max_batch (and the batches asked for), the pick at the first batch asked
    for, its batch → k table, and what goes with them. Result protocol: ``report()``, ``to_dict()`` (the
    ``sdsl optimize --json`` schema, docs/json.md), ``to_json()``, ``plot()``."""

    target: object  # the target's ModelSpec
    deployment: Deployment
    ranking: ProposerRanking  # over every batch 1..max_batch and the batches asked for
    batches: tuple  # the batches asked for
    top: int  # rows per batch in the table
    max_batch: int
    pick: dict  # {"proposer", "gamma", "tree"} at the first batch asked for (gamma 0: do not speculate there)
    k_table: list  # the pick's batch -> k ranges
    flop_optimum: dict  # SDSL's continuous N*
    given: Acceptance | None = None  # the acceptance the caller gave for every proposer
    trees: TreeRanking | None = None
    tree_pick: dict | None = None
    export: dict | None = None

    @property
    def configs(self) -> list[dict]:
        """The table rows (docs/json.md) at the batches asked for, each proposer at its best k, best first."""
        return self.ranking.records(top=self.top, batches=self.batches)

    @property
    def break_even_batch(self) -> int | None:
        stop = self.ranking.break_even_batch()[0]
        return None if np.isnan(stop) else int(stop)

    @property
    def alpha_source(self) -> str:
        """Where the acceptance came from: the given one's source, else SDSL's plane or "per-proposer"."""
        if self.given is not None:
            return "given" if self.given.is_iid else self.given.source
        sources = {levels[0].source for levels in self.ranking.acceptance}
        return sources.pop() if len(sources) == 1 else "per-proposer"

    def fits_in_memory(self) -> bool:
        """Whether the target and the best first-batch configuration's draft (when it speculates) fit at the
        largest batch asked for."""
        from sdsl.catalog.models import get_model
        from sdsl.roofline.latency import memory_with_draft_per_gpu

        head = self.configs[0] if self.configs else None
        draft = get_model(head["draft"]) if head and head["draft"] and head["gamma"] else None
        need = memory_with_draft_per_gpu(self.target, draft, self.deployment, batch=max(self.batches))
        return bool(float(need) <= self.deployment.hardware.mem_capacity)

    def serving(self) -> dict:
        """The pick's batch → k table with what it was tuned for (the ``serving`` object of the JSON)."""
        p = self._pick_index()
        prop = self.ranking.proposers[p]
        alpha = float(self.ranking.acceptance[p][0].iid_alpha(self.pick["gamma"]))
        return {"proposer": prop.name, "draft": getattr(getattr(prop, "model", None), "name", None), "alpha": alpha,
                "context": self.deployment.context, "max_batch": self.max_batch, "k_table": self.k_table}

    def _pick_index(self) -> int:
        return [q.name for q in self.ranking.proposers].index(self.pick["proposer"])

    @property
    def speculation_pays(self) -> list[dict]:
        """Ranges {batch_min, batch_max} of the ranked batches at which some (proposer, k ≥ 1) beats plain
        decoding (at the first acceptance level). On a mixture-of-experts target they need not start at batch 1:
        verifying k + 1 tokens per sequence reads more experts at small batch (docs/model.md §3.8)."""
        pays = self.ranking.best()["gamma"][:, 0] > 0
        return [{"batch_min": r["batch_min"], "batch_max": r["batch_max"]}
                for r in k_ranges(pays.astype(int), self.ranking.batches) if r["k"]]

    def k_reasons(self) -> list[dict]:
        """The pick's best k per ranked batch and why, merged into ranges of equal (k, bound, cost driver): the
        speedup range, what bounds the verify forward (``bound``), the part of the step that speculation grows
        most over plain decoding (``cost_driver``, :mod:`sdsl.plan.cost_drivers`; at k = 1 where the best k is 0,
        i.e. what a speculative step would cost) and the routed experts per MoE layer of the plain and verify
        forwards at the range's first batch (0 on a dense target)."""
        from sdsl.plan.cost_drivers import cost_driver

        p = self._pick_index()
        step, g = self.ranking.priced[p], self.ranking.gammas
        shape = self.ranking.tokens_per_s.shape[1:]
        best = np.argmax(self.ranking.tokens_per_s[p, :, :, 0], axis=0)
        one = np.flatnonzero(g == 1)
        shown = np.where((g[best] == 0) & (one.size > 0), one[0] if one.size else 0, best)
        cols = np.arange(shape[1])
        full = lambda a: np.broadcast_to(np.asarray(a), shape)[shown, cols, 0]  # noqa: E731
        drivers, bounds = full(cost_driver(step)), full(step.verify_time.bound)
        verify_experts, plain_experts = full(step.verify_time.distinct_experts), full(step.plain_time.distinct_experts)
        speedup = self.ranking.tokens_per_s[p, best, cols, 0] / self.ranking.plain_tokens_per_s
        rows = []
        for i, b in enumerate(self.ranking.batches.astype(int)):
            key = (int(g[best[i]]), str(bounds[i]), str(drivers[i]))
            if rows and (rows[-1]["k"], rows[-1]["bound"], rows[-1]["cost_driver"]) == key:
                rows[-1].update(batch_max=int(b), speedup_max=max(rows[-1]["speedup_max"], float(speedup[i])),
                                speedup_min=min(rows[-1]["speedup_min"], float(speedup[i])))
                continue
            rows.append({"batch_min": int(b), "batch_max": int(b), "k": key[0], "speedup_min": float(speedup[i]),
                         "speedup_max": float(speedup[i]), "bound": key[1], "cost_driver": key[2],
                         "plain_distinct_experts": float(plain_experts[i]),
                         "verify_distinct_experts": float(verify_experts[i])})
        return rows

    def to_dict(self) -> dict:
        dep = self.deployment
        out = {"target": self.target.name, "hardware": dep.hardware.name, "context": dep.context, "tp": dep.tp,
               "draft_tp": dep.draft_tp, "dtype": dep.dtype, "alpha_source": self.alpha_source,
               "latency_params": dep.params.to_dict(), "engine": dep.engine.summary(),
               **({"acceptance": self.given.to_dict()} if self.given is not None else {}),
               "acceptance_by_proposer": {p.name: levels[0].to_dict() for p, levels in
                                          zip(self.ranking.proposers, self.ranking.acceptance)},
               "fits_in_memory": self.fits_in_memory(), "configs": self.configs, "break_even_batch": self.break_even_batch,
               "max_batch": self.max_batch, "pick": self.pick, "k_table": self.k_table,
               "speculation_pays": self.speculation_pays, "k_reasons": self.k_reasons(), "sdsl": self.flop_optimum}
        if self.trees is not None:
            out["trees"] = self.trees.records(self.top, self.batches)
            if self.tree_pick is not None:
                out["tree_pick"] = self.tree_pick
        if self.export is not None:
            out["export"] = self.export
        return out

    def report(self) -> str:
        lines = [report_rows(self.configs), "", self.stop_line(),
                 f"best k by batch for {self.pick['proposer']}: " +
                 ", ".join(f"{r['batch_min']}-{r['batch_max']}: {r['k']}" for r in self.k_table)]
        return "\n".join(lines)

    def stop_line(self) -> str:
        """Where speculation pays and where it stops paying, in one line (the report's and ``sdsl optimize``'s)."""
        pays, stop = self.speculation_pays, self.break_even_batch
        if not pays:
            return f"speculation pays at no batch of 1-{self.max_batch}: plain decoding is faster"
        ranges = ", ".join(f"{r['batch_min']}-{r['batch_max']}" for r in pays)
        if stop is None:
            return f"speculation pays at batch {ranges} and does not stop paying up to batch {self.max_batch}"
        return f"speculation pays at batch {ranges}; it stops paying at batch {stop}"

    def plot(self, ax=None):
        """Best speedup over plain decoding per batch size (:meth:`ProposerRanking.plot`)."""
        return self.ranking.plot(ax=ax)


def _tree_pick(trees: TreeRanking, ranking: ProposerRanking, batches) -> dict | None:
    """The best tree at the first batch when it is a real tree (topk > 1) that beats the best chain."""
    best_tree = trees.records(1, batches[:1])[0]
    chain_best = ranking.records(top=1, batches=batches[:1])[0]
    if best_tree["tokens_per_s"] > chain_best["tokens_per_s"] and best_tree["tree"][1] > 1:
        return {"proposer": best_tree["proposer"], "gamma": None, "tree": best_tree["tree"]}
    return None


def plan_speculation(target, deployment, *, proposers=None, acceptance=None, gamma_max: int = 10, batches=(1,),
                     max_batch: int = 256, trees: bool = False, export: str | None = None,
                     pretrain_tokens: float = 1e12, any_tokenizer: bool = False,
                     top: int = 10, workload: str = "chat") -> SpeculationPlan:
    """Everything ``sdsl optimize`` reports (module docstring). ``proposers``: names or Proposers (default: the
    catalog's draft candidates, :func:`default_proposers`); ``acceptance``: one Acceptance for every proposer, a
    mapping (proposer name or kind → Acceptance; the others resolve on their own), or None (each proposer's
    own, :func:`sdsl.speculation.resolve.resolve_acceptance`: the published catalog for ``workload``, SDSL's plane
    with D = D′ = ``pretrain_tokens`` for draft models). The deployment's engine profile prices every step
    (docs/model.md §3.9), so the best k and the batch at which speculation stops paying include the engine's
    costs."""
    from sdsl.catalog.models import get_model
    from sdsl.plan.export import ENGINES, export_config
    from sdsl._checks import count, one_or_many, positive_int
    from sdsl.speculation.proposers import Proposer, make_proposer

    target, dep = get_model(target), Deployment.of(deployment)
    batches = tuple(dict.fromkeys(int(b) for b in np.atleast_1d(count(batches, "batches"))))  # each batch once
    max_batch, top = positive_int(max_batch, "max_batch"), positive_int(top, "top")
    if max(max_batch, *batches) > MAX_RANKED_BATCH:
        raise InvalidInputError(f"sdsl ranks batches of at most {MAX_RANKED_BATCH} sequences; got "
                                f"{max(max_batch, *batches)}.")
    max_batch = max(max_batch, *batches)  # the table covers every batch asked for, and every batch below it
    gamma_max = positive_int(gamma_max, "gamma_max", minimum=0)
    if export and export.lower().replace("-", "") not in ENGINES:
        raise InvalidInputError(f"Unknown engine {export!r}; expected one of {', '.join(ENGINES)}.")
    given = None if proposers is None else one_or_many(proposers, (str, Proposer))
    if given is not None and not given:
        raise InvalidInputError("proposers is empty; give at least one proposer, or None for the catalog's default "
                                "candidates.")
    props = [make_proposer(p) for p in given] if given is not None else default_proposers(target, any_tokenizer=any_tokenizer)
    props = list({p.name: p for p in props}.values())  # a proposer named twice is ranked once, where first named
    if isinstance(acceptance, Acceptance) and np.isfinite(acceptance.max_k):
        gamma_max = min(gamma_max, int(acceptance.max_k))  # a measured vector prices only the positions it covers
    dense = np.unique(np.concatenate([np.arange(1, max_batch + 1), batches]))
    options = {"draft_tokens": pretrain_tokens, "target_tokens": pretrain_tokens, "workload": workload}
    ranking = rank_proposers(target, props, dep, acceptance=acceptance, gammas=range(0, gamma_max + 1),
                             batches=dense, acceptance_options=options)
    pick_i, _ = ranking.pick(batches[0])
    table = ranking.k_table(pick_i)
    # the best speculating proposer, at its best k at the first batch asked for: 0 where plain decoding is faster
    pick_k = next(r["k"] for r in table if r["batch_min"] <= batches[0] <= r["batch_max"])
    pick = {"proposer": ranking.proposers[pick_i].name, "gamma": pick_k, "tree": None}
    tree_ranking = tree_pick = None
    if trees:
        depth = range(1, max(1, min(8, gamma_max)) + 1)
        tree_ranking = rank_trees(target, props, dep, acceptance=acceptance, batches=batches, steps=depth,
                                  acceptance_options=options)
        tree_pick = _tree_pick(tree_ranking, ranking, batches)
    engine = None
    if export and pick["proposer"] == "mtp" and target.mtp_layers == 0:
        raise InvalidInputError(f"{target.name} ships no MTP module, so no engine's mtp method can run the pick; rank "
                                "other proposers (or a target with MTP modules) to export.")
    if export:
        engine_pick = tree_pick or pick if export.lower() == "sglang" else pick
        draft_tp = {"draft_tp": dep.draft_tp} if engine_pick["proposer"].startswith("draft:") and dep.draft_tp != dep.tp else {}
        engine = {"engine": export, "pick": engine_pick,
                  "config": export_config(export, {**engine_pick, **draft_tp}, table)}
    given = acceptance if isinstance(acceptance, Acceptance) else None
    return SpeculationPlan(target, dep, ranking, batches, top, max_batch, pick, table, flop_optimum(target, pretrain_tokens),
                           given=given, trees=tree_ranking,
                           tree_pick=tree_pick, export=engine)

