"""Default acceptance per proposer from the published catalog (``sdsl/data/acceptance/catalog.csv``).
Summary of docs/model.md §3.5; evidence in VALIDATION.md "Acceptance catalog: defaults, k and trees".

Every catalogued row with an accepted length, a known k (or tree) and greedy or unstated temperature is
turned into one number: the ``a`` of the decay form p_i = min(1, a·r^{i−1}) (:mod:`.decay`, r of the
proposer's group, :data:`.decay.GROUP_DECAY`) that reproduces its accepted length — at its k for a chain
or block, through the tree model for a tree (:func:`sdsl.acceptance.trees.sglang_tree_tau_stack`; dynamic trees
are chosen by the draft's scores, static ones by acceptance). A proposer's acceptance on a target and
workload is the median over sources of each source's median ``a`` among the rows of the first tier that
has any (:data:`TIERS`):

1. ``same-target``: the target itself, that workload;
2. ``same-family``: other targets of the target's family (Llama, Qwen, ...), that workload;
3. ``other-targets``: every other target, that workload;
4. ``same-target-any-workload``: the target itself, any workload;
5. ``any``: every target and workload.

The workload matters more than the target (within SpecForge's ten targets, a chain's accepted length is
predicted to a median 14-16% from the other targets on that task or workload, to 21% from the same target's
other workloads; VALIDATION.md), hence the order. A source weighs the same however many rows it has (SpecForge has 440).
:func:`catalog_same_target_rule` answers tier 1 (before SDSL's plane for draft models, and for a draft model
only when the catalog has that draft on that target); :func:`catalog_transfer_rule` answers tiers 2-5 for
heads and lookup. The Acceptance they return carries ``evidence``: the tier, the rows and sources used,
the decay ratio and the spread of the accepted length over the tasks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from sdsl._result import Result
from sdsl.acceptance.decay import decay_conditional, decay_tau, group_decay, solve_decay
from sdsl.acceptance.vector import Acceptance
from sdsl.errors import UnknownNameError

__all__ = ["KIND_METHODS", "TIERS", "DEFAULT_WORKLOAD", "USER_WORKLOADS", "TreeModel", "RowFit", "CatalogEstimate",
           "target_key", "target_family", "method_group", "row_is_evidence", "row_fit", "estimate",
           "estimate_for_proposer", "predict_row", "catalog_same_target_rule", "catalog_transfer_rule",
           "check_workload"]

#: sdsl proposer kind → the catalog methods that measure it (EAGLE-2 is EAGLE-1's head in a dynamic tree).
KIND_METHODS = {"eagle": ("eagle", "eagle2"), "eagle3": ("eagle3",), "medusa": ("medusa",), "mtp": ("mtp",),
                "ngram": ("ngram",), "draft": ("draft_model",)}
TIERS = ("same-target", "same-family", "other-targets", "same-target-any-workload", "any")
TIER_RULES = {"same-target": "published rows of this proposer on this target and workload",
              "same-family": "transfer: rows on other targets of this family, same workload",
              "other-targets": "transfer: rows on other targets, same workload",
              "same-target-any-workload": "rows on this target in other workloads (none catalogued for this one)",
              "any": "transfer: rows on every target and workload (none for this target or workload)"}
DEFAULT_WORKLOAD = "chat"
#: Workloads a user can ask for (the catalog's, less random-token prompts and unnamed datasets).
USER_WORKLOADS = ("chat", "code", "math", "summarization", "rag", "translation", "mixed", "other")

# Rows kept out of the level evidence, with the reason (they stay in the catalog and its k-sweeps).
NOT_LEVEL_EVIDENCE = {
    "vllm-pr24344-ngram-k5-blazedit": "counts only the steps that found an n-gram match (4.59; 2.96 over all steps)",
}
_FAMILIES = (("llama", ("llama", "meta-llama", "vicuna")), ("qwen", ("qwen",)), ("deepseek", ("deepseek",)),
             ("kimi", ("kimi",)), ("ling", ("ling",)), ("minicpm", ("minicpm",)), ("hunyuan", ("hy3", "hunyuan")),
             ("mistral", ("mistral",)), ("opt", ("opt",)), ("pythia", ("pythia",)), ("phi", ("phi",)))
_SUFFIXES = ("-instruct", "-chat", "-hf", "-it", "-fp8", "-base")


def target_key(name: str) -> str:
    """A model name reduced for matching a catalog target to sdsl's: no organisation, lower case, without
    -Instruct/-Chat/-FP8 and a trailing release date (``Qwen3-235B-A22B-Instruct-2507`` → ``qwen3-235b-a22b``,
    ``meta-llama/Llama-3.1-8B`` → ``llama-3.1-8b``, ``Meta-Llama-3-70B-Instruct`` → ``llama-3-70b``)."""
    key = str(name).strip().lower().split("/")[-1]
    key = key[len("meta-"):] if key.startswith("meta-") else key
    changed = True
    while changed:
        changed = False
        key2 = re.sub(r"-\d{4}$", "", key)
        for suffix in _SUFFIXES:
            if key2.endswith(suffix):
                key2 = key2[: -len(suffix)]
        changed, key = key2 != key, key2
    return key


def target_family(name: str, family: str | None = None) -> str:
    """The model family a name starts with (Vicuna is Llama); ``family`` (a ModelSpec's) when it names one."""
    key = target_key(name)
    for fam, prefixes in _FAMILIES:
        if key.startswith(prefixes) or (family or "").lower().startswith(prefixes):
            return fam
    return key.split("-")[0] if key != "unstated" else ""


def method_group(method: str) -> tuple:
    """The catalog methods that count as evidence for ``method`` (its sdsl kind's, else itself)."""
    return next((m for m in KIND_METHODS.values() if method in m), (method,))


def check_workload(workload: str) -> str:
    w = str(workload).strip().lower()
    if w not in USER_WORKLOADS:
        raise UnknownNameError(f"No catalogued workload {workload!r}; known: {', '.join(USER_WORKLOADS)}.")
    return w


@dataclass(frozen=True)
class TreeModel:
    """The tree model's parameters (:mod:`sdsl.acceptance.trees`): ``rank_ratio`` s and ``draft_temperature`` T of
    the draft scores dynamic trees are chosen by (None: the shipped defaults); ``draft_scores=False`` chooses
    every tree's nodes by acceptance (the model without draft scores)."""

    rank_ratio: float | None = None
    draft_temperature: float | None = None
    draft_scores: bool = True

    def selection(self, row) -> str:
        """"draft" for trees an engine builds each step from the draft's scores (EAGLE-2/3 dynamic trees,
        SGLang top-k trees), "acceptance" for static trees chosen offline (Medusa, Hydra, EAGLE-1's choices)."""
        dynamic = row.structure == "dynamic_tree" or (row.structure == "tree" and "sglang" in row.engine.lower())
        return "draft" if dynamic and self.draft_scores else "acceptance"


def row_is_evidence(row) -> str | None:
    """None when the row can price a proposer's acceptance, else why not (one phrase)."""
    if row.row_id in NOT_LEVEL_EVIDENCE:
        return NOT_LEVEL_EVIDENCE[row.row_id]
    if row.accepted_length is None:
        return "no accepted length"
    if row.temperature not in (None, 0.0):
        return f"temperature {row.temperature:g} (only greedy or unstated temperature is used)"
    if row.workload == "synthetic":
        return "random-token prompts"
    if row.structure in ("chain", "block"):
        return None if row.k is not None else "draft length not stated"
    if row.structure in ("tree", "dynamic_tree"):
        return None if None not in (row.k, row.topk, row.verify_tokens) else "tree shape not stated"
    return f"structure {row.structure} (sdsl models chains, blocks and top-k trees)"


_A_GRID = np.linspace(0.0, 1.0, 801)


def _tree_taus(row, a, r: float, tree: TreeModel) -> np.ndarray:
    from sdsl.acceptance.trees import sglang_tree_tau_stack

    a = np.atleast_1d(np.asarray(a, dtype=float))
    cond = decay_conditional(a, r, row.k)
    return sglang_tree_tau_stack(cond, row.k, min(row.topk, row.verify_tokens), row.verify_tokens,
                                 tree.rank_ratio, selection=tree.selection(row), draft_temperature=tree.draft_temperature)


def row_tau(row, a: float, r: float, tree: TreeModel = TreeModel()) -> float:
    """The accepted length the decay form (a, r) predicts for the row's own k or tree."""
    if row.structure in ("chain", "block"):
        return float(decay_tau(a, r, row.k))
    return float(_tree_taus(row, a, r, tree)[0])


@dataclass(frozen=True)
class RowFit:
    """One evidence row: the decay form's ``a`` at ratio ``r`` that reproduces its accepted length."""

    row: object
    a: float
    r: float

    def tau(self, k: int) -> float:
        return float(decay_tau(self.a, self.r, int(k)))


@lru_cache(maxsize=8192)
def _row_a(row, r: float, tree: TreeModel) -> float:
    t = row.accepted_length
    if row.structure in ("chain", "block"):
        a, r2 = solve_decay(min(t, row.k + 1.0), row.k, r)
        return float(a) if float(r2) == r else 1.0  # τ beyond what r reaches with a = 1: a saturates
    # τ(a) of a dynamic tree rises with a but can drop where the draft's scores switch nodes: take the first
    # crossing of the measured τ and interpolate inside that grid step
    taus = _tree_taus(row, _A_GRID, r, tree)
    above = np.flatnonzero(taus >= t)
    if above.size == 0:
        return 1.0
    i = int(above[0])
    if i == 0:
        return 0.0
    lo, hi = taus[i - 1], taus[i]
    return float(_A_GRID[i - 1] + (_A_GRID[i] - _A_GRID[i - 1]) * (t - lo) / (hi - lo))


def row_fit(row, ratios: dict | None = None, tree: TreeModel = TreeModel()) -> RowFit:
    r = group_decay(row.method, ratios, row.target)
    return RowFit(row, _row_a(row, r, tree), r)


@lru_cache(maxsize=None)
def _evidence_rows(methods: tuple | None = None) -> tuple:
    """The catalog rows that can price an acceptance (:func:`row_is_evidence`); only those of ``methods`` when given
    (read without the others, :func:`sdsl.acceptance.catalog.method_rows`)."""
    from sdsl.acceptance.catalog import catalog_rows, method_rows

    return tuple(r for r in (catalog_rows() if methods is None else method_rows(methods)) if row_is_evidence(r) is None)


def _tier_rows(tier: str, rows, keys: set, family: str, workload: str) -> list:
    same_w = (lambda r: r.workload == workload)
    same_t = (lambda r: target_key(r.target) in keys)
    pick = {"same-target": lambda r: same_t(r) and same_w(r),
            "same-family": lambda r: bool(family) and not same_t(r) and target_family(r.target) == family and same_w(r),
            "other-targets": lambda r: not same_t(r) and same_w(r),
            "same-target-any-workload": lambda r: same_t(r),
            "any": lambda r: True}[tier]
    return [r for r in rows if pick(r)]


def _median_over_sources(fits: list) -> float:
    """Median over sources of each source's median over its workloads of the median ``a`` of its rows there: a
    source weighs the same however many rows it has, and a workload it measured often does not outvote its others."""
    by: dict[str, dict] = {}
    for f in fits:
        by.setdefault(f.row.source_id, {}).setdefault(f.row.workload, []).append(f.a)
    return float(np.median([np.median([np.median(v) for v in w.values()]) for w in by.values()]))


def _shape(row) -> tuple:
    return (row.structure, row.k, row.topk, row.verify_tokens)


def _evidence_groups(rows, shape):
    """Evidence in order of directness: rows of the same tree shape (when a tree is predicted), then chains and
    blocks (they measure the per-position acceptance itself, at any k), then trees (through the tree model)."""
    groups = []
    if shape is not None and shape[0] in ("tree", "dynamic_tree"):
        groups.append([r for r in rows if _shape(r) == shape])
    groups.append([r for r in rows if r.structure in ("chain", "block")])
    groups.append([r for r in rows if r.structure in ("tree", "dynamic_tree") and (shape is None or _shape(r) != shape)])
    return [g for g in groups if g]


@dataclass(frozen=True, eq=False)  # a result object: equal only to itself
class CatalogEstimate(Result):
    """A proposer's acceptance from the catalog: decay form (a, r), the tier that answered and its rows."""

    methods: tuple
    target: str
    workload: str
    tier: str
    a: float
    r: float
    fits: tuple = field(repr=False)

    @property
    def sources(self) -> tuple:
        return tuple(sorted({f.row.source_id for f in self.fits}))

    @property
    def row_ids(self) -> tuple:
        return tuple(f.row.row_id for f in self.fits)

    @property
    def source(self) -> str:
        """Short provenance for tables: ``catalog[tier]:method/workload``."""
        return f"catalog[{self.tier}]:{self.methods[0]}/{self.workload}"

    def tau(self, k) -> np.ndarray:
        return decay_tau(self.a, self.r, int(k))

    def spread(self, k: int) -> dict:
        """The accepted length at k of each task behind the estimate (each row's own a, medians per task)."""
        by: dict[str, list] = {}
        for f in self.fits:
            by.setdefault(f.row.task, []).append(f.tau(k))
        tasks = {t: float(np.median(v)) for t, v in sorted(by.items())}
        vals = list(tasks.values())
        return {"k": int(k), "by_task": tasks, "min": min(vals), "max": max(vals)}

    def evidence(self, k: int | None = None) -> dict:
        k = int(np.median([f.row.k for f in self.fits])) if k is None else int(k)
        return {"rule": TIER_RULES[self.tier], "tier": self.tier, "methods": list(self.methods),
                "target": self.target, "catalog_targets": sorted({f.row.target for f in self.fits}),
                "workload": self.workload, "decay_a": self.a, "decay_ratio": self.r, "sources": list(self.sources),
                "rows": list(self.row_ids), "spread": self.spread(k)}

    def acceptance(self, k: int | None = None) -> Acceptance:
        return Acceptance((self.a,), self.r, self.source, evidence=self.evidence(k))

    def to_dict(self) -> dict:
        return self.evidence()

    def report(self) -> str:
        s = self.spread(int(np.median([f.row.k for f in self.fits])))
        return (f"{self.source}: a = {self.a:.3f}, r = {self.r:.3f}, {len(self.fits)} rows from "
                f"{len(self.sources)} sources; tau({s['k']}) over tasks {s['min']:.2f}-{s['max']:.2f}")


def estimate(methods, target_name: str, workload: str = DEFAULT_WORKLOAD, *, target_family_name: str | None = None,
             tiers=TIERS, exclude_sources=(), exclude_rows=(), ratios: dict | None = None,
             tree: TreeModel = TreeModel(), rows=None, shape: tuple | None = None,
             target_aliases=()) -> CatalogEstimate | None:
    """The acceptance of ``methods`` (catalog method names) on ``target_name`` for ``workload`` from the first
    of ``tiers`` with evidence rows (module docstring; ``target_aliases``: other names of the target, such as its
    Hugging Face id), without rows of ``exclude_sources`` (source ids) or
    ``exclude_rows`` (row ids); None when no tier has any. Chains and blocks are searched before trees, and rows
    of ``shape`` ((structure, k, topk, verify_tokens) of a tree being predicted) before both. ``ratios``
    ({group: r}) and ``tree`` replace the shipped decay ratios and tree model (a leave-one-source-out check
    refits them without the held-out source)."""
    methods = tuple(methods)
    pool = [r for r in (_evidence_rows(methods) if rows is None else rows)
            if r.method in methods and r.source_id not in exclude_sources and r.row_id not in exclude_rows]
    keys = {target_key(n) for n in (target_name, *target_aliases) if n} - {"unstated"}
    family = target_family(target_name, target_family_name)
    r_used = group_decay(methods[0], ratios, target_name) if methods else 1.0
    for group in _evidence_groups(pool, shape):
        for tier in tiers:
            chosen = _tier_rows(tier, group, keys, family, workload)
            if chosen:
                fits = tuple(row_fit(r, ratios, tree) for r in chosen)
                return CatalogEstimate(methods, str(target_name), workload, tier, _median_over_sources(fits), r_used,
                                       fits)
    return None




def estimate_for_proposer(proposer, target, workload: str = DEFAULT_WORKLOAD, *, tiers=TIERS,
                          **kwargs) -> CatalogEstimate | None:
    """:func:`estimate` for an sdsl proposer (its kind's catalog methods) on a ModelSpec or name."""
    methods = KIND_METHODS.get(getattr(proposer, "kind", ""), ())
    if not methods:
        return None
    name, family = getattr(target, "name", str(target)), getattr(target, "family", None)
    workload = check_workload(workload)
    rows = None
    if proposer.kind == "draft":  # a draft model's pair must be catalogued: the draft named in the row
        draft = target_key(getattr(getattr(proposer, "model", None), "name", ""))
        rows = [r for r in _evidence_rows(("draft_model",)) if target_key(r.draft.split(" ")[0]) == draft]
        tiers = ("same-target",)
    return estimate(methods, name, workload, target_family_name=family, tiers=tiers, rows=rows,
                    target_aliases=(getattr(target, "hf_id", None) or "",), **kwargs)


def catalog_same_target_rule(proposer, target, *, workload: str = DEFAULT_WORKLOAD, spread_k=None, **_):
    """Tier 1: the catalog's rows for this proposer on this target and workload (a draft model: that pair)."""
    est = estimate_for_proposer(proposer, target, workload, tiers=("same-target",))
    return None if est is None else est.acceptance(spread_k)


def catalog_transfer_rule(proposer, target, *, workload: str = DEFAULT_WORKLOAD, spread_k=None, **_):
    """Tiers 2-5 for heads and lookup (a draft model is SDSL's plane's): the catalog's rows on other targets
    of this workload, else the same target's other workloads, else every row of the proposer's methods."""
    if getattr(proposer, "kind", "") == "draft":
        return None
    est = estimate_for_proposer(proposer, target, workload, tiers=TIERS[1:])
    return None if est is None else est.acceptance(spread_k)


def predict_row(row, *, exclude_sources=None, ratios: dict | None = None, tree: TreeModel = TreeModel(),
                tiers=TIERS) -> dict:
    """Predict a catalogued row's accepted length from the other sources' rows (leave-one-source-out: the row's
    own source is excluded unless ``exclude_sources`` says otherwise): {row_id, measured, predicted, error,
    tier, sources, ...}, or {"row_id", "reason"} when it cannot be predicted."""
    why = row_is_evidence(row)
    if why is not None:
        return {"row_id": row.row_id, "reason": why}
    held = (row.source_id,) if exclude_sources is None else tuple(exclude_sources)
    est = estimate(method_group(row.method), row.target, row.workload, tiers=tiers, exclude_sources=held,
                   exclude_rows=(row.row_id,), ratios=ratios, tree=tree, shape=_shape(row))
    if est is None:
        return {"row_id": row.row_id, "reason": f"no other source catalogues {row.method}"}
    pred = row_tau(row, est.a, est.r, tree)
    return {"row_id": row.row_id, "source": row.source_id, "method": row.method, "target": row.target,
            "workload": row.workload, "structure": row.structure, "k": row.k, "topk": row.topk,
            "verify_tokens": row.verify_tokens, "measured": float(row.accepted_length), "predicted": pred,
            "evidence": "same tree shape" if _shape(est.fits[0].row) == _shape(row) and row.structure not in
            ("chain", "block") else est.fits[0].row.structure,
            "error": pred / float(row.accepted_length) - 1.0, "tier": est.tier, "evidence_sources": list(est.sources),
            "n_evidence_rows": len(est.fits), "decay_ratio": est.r}
