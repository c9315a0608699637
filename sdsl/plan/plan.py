"""What ``sdsl optimize`` computes, in one core call: rank the proposers (catalog draft models by default, or
heads, lookup and named drafts) × k over batch sizes, the batch at which speculation stops paying, the pick's
batch → k table, SGLang trees on request, the engine configuration, and SDSL's continuous N*. Summary of
docs/model.md §3.2–§3.5; the JSON schema is docs/json.md."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from sdsl._result import Result
from sdsl.acceptance import Acceptance
from sdsl.roofline.deployment import Deployment
from sdsl.roofline.step_ops import expert_provenance
from sdsl.plan.ranking import ProposerRanking, k_ranges, rank_proposers
from sdsl.plan.robust import K_TOLERANCE, beyond_measured, holding_range
from sdsl.errors import InvalidInputError

if TYPE_CHECKING:
    from sdsl.plan.tree_ranking import TreeRanking

__all__ = ["SpeculationPlan", "plan_speculation", "flop_optimum", "default_proposers", "MAX_RANKED_BATCH"]

MAX_RANKED_BATCH = 16384  # the ranking prices every batch 1..max_batch: a bound on the grid, far above engines' limits


def default_proposers(target, *, any_tokenizer: bool = False) -> list:
    """A :class:`~sdsl.speculation.proposers.DraftModel` per catalog draft candidate of ``target``
    (:func:`sdsl.plan.search.candidate_drafts`: ≤ 1/4 of its size, its vocabulary unless ``any_tokenizer``); where no
    catalog draft shares its vocabulary (DeepSeek-V3, gpt-oss, Kimi-K2 ...), the head kinds, MTP where the target
    ships MTP modules, and n-gram lookup (``--proposer all``), which need no separate model."""
    from sdsl.speculation.proposers import DraftModel, make_proposer
    from sdsl.plan.search import candidate_drafts, expand_proposers

    drafts = candidate_drafts(target, same_tokenizer=not any_tokenizer)
    if not drafts:
        return [make_proposer(p) for p in expand_proposers(target, ["all"])]
    return [DraftModel(d) for d in drafts]


def flop_optimum(target, pretrain_tokens: float = 1e12) -> dict:
    """SDSL's continuous FLOP-model optimum N* for the target (docs/model.md §3.2)."""
    from sdsl.speculation.optimum import optimal_draft_size

    n_star, s_star, a_star, g_star = optimal_draft_size(target.total_params, pretrain_tokens, pretrain_tokens)
    return {"n_star": float(n_star[0]), "flop_speedup": float(s_star[0]), "alpha": float(a_star[0]),
            "gamma_star": float(g_star[0]), "pretrain_tokens": float(pretrain_tokens)}


@dataclass(frozen=True, eq=False)  # a result object: equal only to itself
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
    tolerance: float = K_TOLERANCE  # relative tokens/s within which two k are one choice (sdsl.plan.robust)
    holds: dict | None = None  # {batch_min, batch_max}: where the pick's k stays within the tolerance of the best k
    notes: tuple = ()  # what the caller's inputs changed (a capped k range, a workload some proposers ignore, ...)

    @cached_property
    def configs(self) -> list[dict]:
        """The table rows (docs/json.md) at the batches asked for, each proposer at the k its batch → k table deploys
        there (the pick's is :attr:`k_table`), with the per-batch best k beside it, best first (computed once: the
        plan is immutable)."""
        return self.ranking.records(top=self.top, batches=self.batches, tolerance=self.tolerance)

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
        return self._fits_in_memory

    @cached_property
    def _fits_in_memory(self) -> bool:
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
        """The pick's k per ranked batch (its k table's) and why, merged into ranges of equal (k, bound, cost driver): the
        speedup range and its 80% band over the range (``speedup_low``, ``speedup_high``), what bounds the verify
        forward (``bound``), the part of the step that speculation grows
        most over plain decoding (``cost_driver``, :mod:`sdsl.plan.cost_drivers`; at k = 1 where the best k is 0,
        i.e. what a speculative step would cost) and the routed experts per MoE layer of the plain and verify
        forwards at the range's first batch (0 on a dense target)."""
        from sdsl.plan.cost_drivers import cost_driver

        p = self._pick_index()
        step, g = self.ranking.priced[p], self.ranking.gammas
        shape = self.ranking.tokens_per_s.shape[1:]
        table_k = np.concatenate([np.full(r["batch_max"] - r["batch_min"] + 1, r["k"]) for r in self.k_table])
        batch_k = table_k[np.clip(self.ranking.batches.astype(int) - self.k_table[0]["batch_min"], 0, table_k.size - 1)]
        best = np.searchsorted(g, batch_k)  # the table's k at each batch (gammas ascending)
        one = np.flatnonzero(g == 1)
        shown = np.where((g[best] == 0) & (one.size > 0), one[0] if one.size else 0, best)
        cols = np.arange(shape[1])
        full = lambda a: np.broadcast_to(np.asarray(a), shape)[shown, cols, 0]  # noqa: E731
        drivers, bounds = full(cost_driver(step)), full(step.verify_time.bound)
        verify_experts, plain_experts = full(step.verify_time.distinct_experts), full(step.plain_time.distinct_experts)
        speedup = self.ranking.tokens_per_s[p, best, cols, 0] / self.ranking.plain_tokens_per_s
        plain_k = g[best] == 0  # k = 0 is plain decoding: speedup 1 exactly
        low = np.where(plain_k, 1.0, np.broadcast_to(np.asarray(step.speedup_low), shape)[best, cols, 0])
        high = np.where(plain_k, 1.0, np.broadcast_to(np.asarray(step.speedup_high), shape)[best, cols, 0])
        rows = []
        for i, b in enumerate(self.ranking.batches.astype(int)):
            key = (int(g[best[i]]), str(bounds[i]), str(drivers[i]))
            if rows and (rows[-1]["k"], rows[-1]["bound"], rows[-1]["cost_driver"]) == key:
                rows[-1].update(batch_max=int(b), speedup_max=max(rows[-1]["speedup_max"], float(speedup[i])),
                                speedup_min=min(rows[-1]["speedup_min"], float(speedup[i])),
                                speedup_low=min(rows[-1]["speedup_low"], float(low[i])),
                                speedup_high=max(rows[-1]["speedup_high"], float(high[i])))
                continue
            rows.append({"batch_min": int(b), "batch_max": int(b), "k": key[0], "speedup_min": float(speedup[i]),
                         "speedup_max": float(speedup[i]), "speedup_low": float(low[i]), "speedup_high": float(high[i]),
                         "bound": key[1], "cost_driver": key[2],
                         "plain_distinct_experts": float(plain_experts[i]),
                         "verify_distinct_experts": float(verify_experts[i])})
        return rows

    @property
    def warnings(self) -> list[str]:
        """What the numbers rest on that the user should know (text and JSON): a context beyond the target's, a
        proposer the target cannot run (ranked last, never the pick), a pick beyond the k its acceptance was measured
        at, a deployment that does not fit in memory."""
        from sdsl.plan.report import proposer_warnings

        dep, t = self.deployment, self.target
        out = proposer_warnings(t, dep, self.ranking.proposers)
        p = self._pick_index()
        beyond = beyond_measured(self.pick["proposer"], self.ranking.acceptance[p][0],
                                 max([self.pick["gamma"] or 0] + [r["k"] for r in self.k_table]))
        if beyond:
            out.append(beyond)
        if not self.fits_in_memory():
            out.append(f"{t.name} (and its best draft) do not fit in {dep.hardware.name}'s "
                       f"{dep.hardware.mem_capacity / 2 ** 30:.0f} GiB per GPU (weights + KV cache); raise --tp or use "
                       "--dtype fp8")
        return out

    def to_dict(self) -> dict:
        """The ``sdsl optimize --json`` schema (docs/json.md): the same top-level keys whatever is ranked (null where
        a part was not asked for: ``acceptance`` without a given one, ``trees``, ``tree_pick``, ``export``)."""
        dep = self.deployment
        trees = None if self.trees is None else self.trees.records(self.top, self.batches)
        return {"target": self.target.name, "target_origin": target_origin(self.target), "hardware": dep.hardware.name,
                "context": dep.context, "tp": dep.tp, "ep": dep.ep, "draft_tp": dep.draft_tp, "dtype": dep.dtype,
                "weight_dtype": dep.weight_dtype, "alpha_source": self.alpha_source, "engine": dep.engine.summary(),
                "latency_params": dep.params.to_dict(), "moe_experts": expert_provenance(self.target, dep),
                "acceptance": None if self.given is None else self.given.to_dict(),
                "acceptance_by_proposer": {p.name: levels[0].to_dict() for p, levels in
                                           zip(self.ranking.proposers, self.ranking.acceptance)},
                "not_runnable": {p.name: self.ranking.blocker(i) for i, p in enumerate(self.ranking.proposers)
                                 if self.ranking.blocker(i)},
                "fits_in_memory": self.fits_in_memory(), "configs": self.configs, "break_even_batch": self.break_even_batch,
                "max_batch": self.max_batch, "pick": self.pick, "tolerance": self.tolerance, "pick_holds": self.holds,
                "k_table": self.k_table, "speculation_pays": self.speculation_pays, "k_reasons": self.k_reasons(),
                "serving": self.serving(), "trees": trees, "tree_pick": self.tree_pick, "export": self.export,
                "sdsl": self.flop_optimum, "notes": list(self.notes), "warnings": self.warnings,
                "bands": self.ranking.bands(), "tree_bands": None if self.trees is None else self.trees.bands()}

    def report(self) -> str:
        """What ``sdsl optimize`` prints (:func:`sdsl.plan.report.plan_text`)."""
        from sdsl.plan.report import plan_text

        return plan_text(self, self.to_dict())

    def stop_line(self) -> str:
        """Where speculation pays and where it stops paying, in one line (the report's and ``sdsl optimize``'s)."""
        pays, stop = self.speculation_pays, self.break_even_batch
        if not pays:
            return f"speculation pays at no batch of 1-{self.max_batch}: plain decoding is faster"
        ranges = ", ".join(f"{r['batch_min']}-{r['batch_max']}" for r in pays)
        if stop is None:
            return f"speculation pays at batch {ranges} and does not stop paying up to batch {self.max_batch}"
        return f"speculation pays at batch {ranges}; it stops paying at batch {stop}"

    def speedup_lines(self) -> dict:
        """{proposer name: {"speedup", "runnable"}}: each proposer's speed-up over plain decoding at its best k per
        ranked batch (first acceptance level), the lines of :meth:`plot`; a band's ``low``/``high`` where the
        ranking carries one."""
        r = self.ranking
        best = r.best_k_index()[:, :, 0]
        out = {}
        for i, p in enumerate(r.proposers):
            cols = np.arange(r.batches.size)
            line = {"speedup": r.tokens_per_s[i, best[i], cols, 0] / r.plain_tokens_per_s, "runnable": r.blocker(i) is None}
            for side in ("low", "high"):  # the speedup's 80% band, when the priced step carries one
                band = getattr(r.priced[i], f"speedup_{side}", None)
                if band is not None:
                    full = np.broadcast_to(np.asarray(band, dtype=float), r.tokens_per_s.shape[1:])
                    line[side] = np.where(r.gammas[best[i]] == 0, 1.0, full[best[i], cols, 0])
            out[p.name] = line
        return out

    def plot(self, ax=None):
        """Speed-up vs batch on a log axis, one line per proposer at its best k, plain decoding at 1, the pick marked
        (:func:`sdsl.plots.results.plot_speedup_lines`)."""
        from sdsl.plots.results import plot_speedup_lines

        lines = self.speedup_lines()
        b = int(np.flatnonzero(self.ranking.batches == self.batches[0])[0])
        pick = {"proposer": self.pick["proposer"], "k": self.pick["gamma"], "batch": self.batches[0],
                "speedup": float(self.ranking.tokens_per_s[self._pick_index(),
                                                           list(self.ranking.gammas).index(self.pick["gamma"]), b, 0]
                                 / self.ranking.plain_tokens_per_s[b])}
        return plot_speedup_lines(self.ranking.batches, lines, pick, ax=ax,
                                  title=f"{self.target.name} on {self.deployment.hardware.name} ({self.deployment.engine.name})")


def target_origin(spec) -> str | None:
    """For a target read from a config.json, whether it matched a catalog model (its ``source``); None otherwise."""
    source = getattr(spec, "source", "") or ""
    return source if source.startswith("Hugging Face config") else None


def _tree_pick(trees: TreeRanking, ranking: ProposerRanking, batches, tolerance: float) -> dict | None:
    """The best tree at the first batch when it is a real tree (topk > 1) that beats the chain the table deploys."""
    best_tree = trees.records(1, batches[:1])[0]
    chain_best = ranking.records(top=1, batches=batches[:1], tolerance=tolerance)[0]
    if best_tree["tokens_per_s"] > chain_best["tokens_per_s"] and best_tree["tree"][1] > 1:
        return {"proposer": best_tree["proposer"], "gamma": None, "tree": best_tree["tree"]}
    return None


def plan_speculation(target, deployment, *, proposers=None, acceptance=None, gamma_max: int = 10, batches=(1,),
                     max_batch: int = 256, trees: bool = False, export: str | None = None,
                     pretrain_tokens: float = 1e12, any_tokenizer: bool = False,
                     top: int = 10, workload: str = "chat", tolerance: float = K_TOLERANCE) -> SpeculationPlan:
    """Everything ``sdsl optimize`` reports (module docstring). ``proposers``: names or Proposers (default: the
    catalog's draft candidates, :func:`default_proposers`); ``acceptance``: one Acceptance for every proposer, a
    mapping (proposer name or kind → Acceptance; the others resolve on their own), or None (each proposer's
    own, :func:`sdsl.speculation.resolve.resolve_acceptance`: the published catalog for ``workload``, SDSL's plane
    with D = D′ = ``pretrain_tokens`` for draft models). The deployment's engine profile prices every step
    (docs/model.md §3.9), so the best k and the batch at which speculation stops paying include the engine's
    costs. k choices within ``tolerance`` of each other are one choice (:mod:`sdsl.plan.robust`); a proposer the
    target cannot run is ranked last and never picked; ``export`` is one configuration of that engine."""
    from sdsl.catalog.models import get_model
    from sdsl._checks import count, positive_int

    target = get_model(target)
    dep = deployment_for(target, Deployment.of(deployment))
    batches = tuple(dict.fromkeys(int(b) for b in np.atleast_1d(count(batches, "batches"))))  # each batch once
    max_batch, top = positive_int(max_batch, "max_batch"), positive_int(top, "top")
    if max(max_batch, *batches) > MAX_RANKED_BATCH:
        raise InvalidInputError(f"sdsl ranks batches of at most {MAX_RANKED_BATCH} sequences; got "
                                f"{max(max_batch, *batches)}.")
    max_batch = max(max_batch, *batches)  # the table covers every batch asked for, and every batch below it
    gamma_max = positive_int(gamma_max, "gamma_max", minimum=1)  # k = 0 alone would rank nothing
    if not (0 <= float(tolerance) < 1):
        raise InvalidInputError(f"tolerance is a fraction of tokens/s in [0, 1); got {tolerance!r}.")
    props = _proposers(target, proposers, any_tokenizer)
    gamma_max, cap_note = _gamma_cap(acceptance, gamma_max)
    dense = np.array(sorted({*range(1, max_batch + 1), *np.asarray(batches).tolist()}))  # np.unique would import numpy.ma
    options = {"draft_tokens": pretrain_tokens, "target_tokens": pretrain_tokens, "workload": workload}
    ranking = rank_proposers(target, props, dep, acceptance=acceptance, gammas=range(0, gamma_max + 1),
                             batches=dense, acceptance_options=options)
    pick_i, _ = ranking.pick(batches[0], tolerance=tolerance)  # the table's first runnable row
    table = ranking.k_table(pick_i, tolerance=tolerance)
    # the best runnable proposer, at its table's k at the first batch asked for: 0 where plain decoding is faster
    pick_k = next(r["k"] for r in table if r["batch_min"] <= batches[0] <= r["batch_max"])
    pick = {"proposer": ranking.proposers[pick_i].name, "gamma": pick_k, "tree": None}
    holds = holding_range(ranking.tokens_per_s[pick_i, :, :, 0], ranking.gammas, ranking.batches, pick_k, batches[0],
                          tolerance)
    tree_ranking = tree_pick = None
    if trees:
        from sdsl.plan.tree_ranking import rank_trees

        depth = range(1, max(1, min(8, gamma_max)) + 1)
        tree_ranking = rank_trees(target, props, dep, acceptance=acceptance, batches=batches, steps=depth,
                                  acceptance_options=options)
        tree_pick = _tree_pick(tree_ranking, ranking, batches, tolerance)
    engine = _export(export, target, dep, ranking, pick_i, tree_pick or pick if str(export).lower() == "sglang" else pick,
                     table, holds)
    given = acceptance if isinstance(acceptance, Acceptance) else None
    return SpeculationPlan(target, dep, ranking, batches, top, max_batch, pick, table, flop_optimum(target, pretrain_tokens),
                           given=given, trees=tree_ranking, tree_pick=tree_pick, export=engine, tolerance=float(tolerance),
                           holds=holds, notes=tuple(cap_note + workload_notes(ranking, acceptance, workload)))


def _gamma_cap(acceptance, gamma_max: int) -> tuple[int, list[str]]:
    """``gamma_max`` capped at the draft positions a given measured vector covers (it prices only those), and the
    note that says so."""
    from collections.abc import Mapping

    given = list(acceptance.values()) if isinstance(acceptance, Mapping) else [acceptance]
    covered = [int(a.max_k) for a in given if isinstance(a, Acceptance) and np.isfinite(a.max_k)]
    if not covered or min(covered) >= gamma_max:
        return gamma_max, []
    k = min(covered)
    return k, [f"k searched up to {k} only, the draft positions the given acceptance covers (gamma_max {gamma_max}); "
               "give more per-position rates to search further"]


def _proposers(target, proposers, any_tokenizer) -> list:
    """The proposers to rank, each once (where first named): the ones named, else the catalog's drafts."""
    from sdsl._checks import one_or_many
    from sdsl.speculation.proposers import Proposer, make_proposer

    given = None if proposers is None else one_or_many(proposers, (str, Proposer))
    if given is not None and not given:
        raise InvalidInputError("proposers is empty; give at least one proposer, or None for the catalog's default "
                                "candidates.")
    props = [make_proposer(p) for p in given] if given is not None else default_proposers(target, any_tokenizer=any_tokenizer)
    return list({p.name: p for p in props}.values())


def _export(export, target, dep, ranking, pick_i, engine_pick, table, holds) -> dict | None:
    """{"engine", "pick", "holds", "config"}: the pick as ONE configuration of the engine, with the batch range where
    its k holds; a pick the target cannot run is refused (one sentence)."""
    if not export:
        return None
    from sdsl.plan.export import ENGINES, export_config

    if export.lower().replace("-", "") not in ENGINES:
        raise InvalidInputError(f"Unknown engine {export!r}; expected one of {', '.join(ENGINES)}.")
    blocked = ranking.blocker(pick_i) if engine_pick["proposer"] == ranking.proposers[pick_i].name else None
    if blocked:
        raise InvalidInputError(f"{blocked}; rank a proposer {target.name} can run to export.")
    draft_tp = {"draft_tp": dep.draft_tp} if engine_pick["proposer"].startswith("draft:") and dep.draft_tp != dep.tp else {}
    holds = holds if engine_pick.get("tree") is None else None
    return {"engine": export, "pick": engine_pick, "holds": holds,
            "config": export_config(export, {**engine_pick, **draft_tp, **({"holds": holds} if holds else {})}, table)}


def deployment_for(target, dep: Deployment) -> Deployment:
    """``dep`` with the target's own weight format (a config.json's ``quantization_config``) where the deployment
    names none."""
    fmt = getattr(target, "weight_format", None)
    if fmt is None or dep.expert_dtype is not None:
        return dep
    if fmt == "mxfp4":  # gpt-oss: the routed experts in MXFP4, attention and the rest as the deployment says
        return dep.replace(expert_dtype=fmt)
    return dep if dep.weight_dtype is not None else dep.replace(weight_dtype=fmt)


def workload_notes(ranking, acceptance, workload: str) -> list[str]:
    """A note naming the proposers whose acceptance ``workload`` does not change (a given acceptance, SDSL's plane
    for a draft model); none for the default chat workload."""
    from sdsl.speculation.resolve import given_acceptance

    if workload == "chat":
        return []
    unchanged = [p.name for p, levels in zip(ranking.proposers, ranking.acceptance)
                 if given_acceptance(p, acceptance) is not None or not str(levels[0].source).startswith("catalog")]
    if not unchanged:
        return []
    return [f"--workload {workload} does not change the acceptance of {', '.join(unchanged)} (given, or SDSL's plane, "
            "which depends on the models' sizes only)"]
