"""The Python twins of ``sdsl predict`` and ``sdsl optimize``: the same arguments, the same defaults (the catalog's
acceptance for the workload, the newest vLLM engine profile, context 1024, batch 1), and the result objects the
CLI prints (``report()`` is its text, ``to_json()`` its ``--json``).

    >>> import sdsl
    >>> p = sdsl.predict("llama-3.1-8b", "eagle3", "h100-sxm", gamma=4)
    >>> plan = sdsl.optimize("llama-3.1-8b", "h100-sxm", proposers=["eagle3"], engine="vllm")
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from sdsl.roofline.deployment import Deployment, precision_options
from sdsl.roofline.step_ops import expert_provenance
from sdsl.speculation.priced_step import PricedStep
from sdsl.errors import InvalidInputError

__all__ = ["Prediction", "predict", "optimize", "deployment_of"]


@dataclass(frozen=True, eq=False)  # a result object: equal only to itself
class Prediction(PricedStep):
    """A priced configuration with what ``sdsl predict`` reports beside it: the memory check, the warnings and
    notes, and where the target came from. ``report()`` is ``sdsl predict``'s text, ``to_dict()`` its JSON
    (docs/json.md); every :class:`~sdsl.speculation.priced_step.PricedStep` field is here too."""

    warnings: tuple = ()
    notes: tuple = ()
    memory: dict | None = None  # memory_per_gpu_bytes, memory_capacity_bytes, fits_in_memory (at the largest batch)
    proposer_source: str = ""
    draft: str | None = None  # a separate draft model's name
    target_origin: str | None = None  # a config.json target: the file and whether it matched a catalog model
    moe_experts: str | None = None  # an MoE target: the measured fused-MoE kernel pricing its experts, or "transferred"

    def to_dict(self) -> dict:
        """``sdsl predict --json``: the priced step's fields and the inputs (docs/json.md)."""
        step = super().to_dict()
        dep, acc = self.deployment, self.acceptance
        chain = self.tree is None
        k = None if self.gamma is None else np.asarray(self.gamma)
        alpha = {} if not chain or acc is None else {
            "alpha": None if k is None or not np.all(k) else np.asarray(acc.iid_alpha(k)).tolist(),
            "alpha_source": "given" if acc.is_iid and acc.source != "sdsl-plane" else acc.source}
        values = {key: v for key, v in step.items() if key not in ("gamma", "tree", "batch", "deployment", "acceptance",
                                                                  "target", "proposer", "engine")}
        return {"target": self.target, "target_origin": self.target_origin, "draft": self.draft, **alpha,
                "proposer": self.proposer, "proposer_source": self.proposer_source, "hardware": dep.hardware.name,
                "gamma": None if k is None else k.tolist(), "tree": self._tree_list(), "batch": step["batch"],
                "context": dep.context, "tp": dep.tp, "ep": dep.ep, "dtype": dep.dtype, "weight_dtype": dep.weight_dtype,
                "expert_dtype": dep.expert_dtype, "kv_dtype": dep.cache_dtype,
                **values, "engine": dep.engine.name, "engine_profile": dep.engine.summary(),
                "latency_params": dep.params.to_dict(), "moe_experts": self.moe_experts, **(self.memory or {}),
                "acceptance": None if acc is None else acc.to_dict(int(k) if k is not None and k.ndim == 0
                                                                    and k <= acc.max_k else None),
                "notes": list(self.notes), "warnings": list(self.warnings)}

    def _tree_list(self):
        """The tree as [steps, topk, tokens] (a dict of lists for a grid of trees; None for a chain)."""
        if self.tree is None or isinstance(self.tree, dict):
            return None if self.tree is None else {k: np.asarray(v).tolist() for k, v in self.tree.items()}
        return [int(x) for x in (self.tree if not hasattr(self.tree, "steps") else
                                 (self.tree.steps, self.tree.topk, self.tree.tokens))]

    def report(self) -> str:
        """``sdsl predict``'s text for one configuration; one line per configuration for arrays."""
        if np.size(self.tokens_per_s) != 1:
            lines = [super().report(), *(f"  note: {n}" for n in self.notes), *(f"  warning: {w}" for w in self.warnings)]
            if self.memory:
                from sdsl.plan.report import memory_text

                lines.append(f"  memory per GPU at batch {int(np.max(self.batch))}: {memory_text(self.memory).strip()}")
            return "\n".join(lines)
        from sdsl.plan.report import prediction_text

        return prediction_text(self.to_dict())


def deployment_of(hardware="h100-sxm", *, tp=1, ep=1, draft_tp=1, dtype="bf16", context=1024, params=None,
                  engine=None, kv_dtype=None) -> Deployment:
    """A :class:`~sdsl.roofline.deployment.Deployment` from the CLI's deployment options; a Deployment passed as
    ``hardware`` gets the options that differ from their defaults; ``params``: LatencyParams (a calibration,
    ``sdsl.load_latency_params``), default the hardware's."""
    if isinstance(hardware, Deployment):
        changed = {k: v for k, v, d in (("tp", tp, 1), ("ep", ep, 1), ("draft_tp", draft_tp, 1),
                                        ("context", context, 1024), ("engine", engine, None), ("params", params, None),
                                        ("kv_dtype", kv_dtype, None))
                   if v is not d and v != d}
        if dtype != "bf16":
            changed.update(precision_options(dtype))
        return hardware.replace(**changed) if changed else hardware
    return Deployment(hardware, tp=tp, ep=ep, draft_tp=draft_tp, context=context, params=params, engine=engine,
                      kv_dtype=kv_dtype, **precision_options(dtype))


def _proposer(proposer, draft_params=None):
    """A Proposer from a kind name, ``draft:<model>``, a catalog model name or spec (a separate draft), or None
    (prompt lookup)."""
    from sdsl.catalog.models import ModelSpec
    from sdsl.speculation.proposers import PROPOSER_KINDS, DraftModel, NGramLookup, Proposer, make_proposer

    if isinstance(proposer, (list, tuple)):
        raise InvalidInputError("predict prices one draft per call (one proposer); use rank_proposers or sdsl.optimize "
                                "to compare several.")
    if proposer is None:
        return NGramLookup()
    if isinstance(proposer, Proposer):
        return proposer
    if isinstance(proposer, ModelSpec) or (isinstance(proposer, str) and ":" not in proposer
                                           and proposer.lower() not in PROPOSER_KINDS):
        return DraftModel(proposer, params=draft_params)
    made = make_proposer(proposer)
    return DraftModel(made.model, params=draft_params) if draft_params is not None and made.kind == "draft" else made


def _acceptance_args(proposer, gamma, tree, alpha, accepted_length, accepted_at, acceptance) -> dict:
    """price_step's τ arguments from the acceptance options (the CLI's): an i.i.d. α, an accepted length fitted with
    the proposer's decay ratio (the one rule across k, :func:`sdsl.acceptance.group_decay`), a measured tree τ, an
    Acceptance; nothing: the proposer's own (the catalog for the workload, SDSL's plane for a draft model)."""
    from sdsl._checks import numbers
    from sdsl.acceptance import Acceptance, check_alpha, group_decay

    given = [n for n, v in (("alpha", alpha), ("accepted_length", accepted_length), ("acceptance", acceptance))
             if v is not None]
    if len(given) > 1:
        raise InvalidInputError(f"Give at most one of {', '.join(given)}: each sets the acceptance.")
    if alpha is not None:
        return {"acceptance": check_alpha(numbers(alpha, "alpha"))}
    if accepted_length is not None:
        if tree is not None and accepted_at is None and gamma is None:
            return {"tau": float(accepted_length), "tau_source": "accepted-length of this tree (measured)"}
        at = accepted_at if accepted_at is not None else gamma
        if at is None:
            raise InvalidInputError("An accepted length needs the draft length it was measured at (accepted_at).")
        return {"acceptance": Acceptance.from_accepted_length(float(accepted_length), int(at),
                                                              decay=group_decay(proposer.kind))}
    if accepted_at is not None:
        raise InvalidInputError("accepted_at only qualifies accepted_length; give both or neither.")
    if acceptance is not None:
        return {"acceptance": acceptance if isinstance(acceptance, Acceptance) else Acceptance.from_dict(acceptance)}
    return {"acceptance": None}


def predict(target, proposer="eagle3", hardware="h100-sxm", *, gamma=None, tree=None, batch=1, alpha=None,
            accepted_length=None, accepted_at=None, acceptance=None, workload: str = "chat", tp: int = 1, ep: int = 1,
            draft_tp: int = 1, dtype: str = "bf16", context=1024, engine=None, params=None, draft_params=None,
            overhead_s=0.0, kv_dtype=None) -> Prediction:
    """``sdsl predict`` in Python: price one configuration (or arrays of them: gamma, alpha and batch broadcast).

    ``proposer``: a kind (eagle | eagle3 | medusa | mtp | ngram), ``draft:<model>``, a catalog model name or spec
    (a separate draft model), a Proposer, or None (prompt lookup). ``hardware``: a catalog name, file or a
    Deployment. ``gamma`` (a chain) or ``tree`` ("STEPS,TOPK,TOKENS" or a TreeShape). Acceptance: ``alpha``
    (i.i.d.), ``accepted_length`` at ``accepted_at`` (default ``gamma``), ``acceptance`` (an Acceptance), else the
    proposer's own for ``workload``. The deployment options are the CLI's; ``draft_params`` prices a separate draft
    alone, ``overhead_s`` adds host time per step. Returns a :class:`Prediction`."""
    from sdsl._checks import draft_length
    from sdsl.catalog.models import get_model
    from sdsl.plan.plan import deployment_for, target_origin
    from sdsl.speculation.step import TreeShape, parse_tree, price_step

    if gamma is None and tree is None:
        raise InvalidInputError("Give gamma (a chain) or tree (STEPS,TOPK,TOKENS).")
    if tree is not None and gamma is not None and accepted_length is None:
        raise InvalidInputError("Give gamma or tree, not both (with a tree, gamma is only the k an accepted length "
                                "was measured at).")
    spec = get_model(target)
    dep = deployment_for(spec, deployment_of(hardware, tp=tp, ep=ep, draft_tp=draft_tp, dtype=dtype, context=context,
                                             params=params, engine=engine, kv_dtype=kv_dtype))
    prop = _proposer(proposer, draft_params)
    if dep.draft_tp != 1 and prop.kind != "draft":
        raise InvalidInputError(f"draft_tp applies to a separate draft model only; {prop.name} runs on the target's "
                                "GPUs (its tensor parallelism is tp).")
    shape = None if tree is None else tree if isinstance(tree, TreeShape) else parse_tree(tree)
    g = None if gamma is None else draft_length(gamma).astype(int)
    taus = _acceptance_args(prop, g if shape is None else gamma, shape, alpha, accepted_length, accepted_at, acceptance)
    spread_k = int(np.max(g)) if g is not None and np.size(g) and np.max(g) > 0 else (shape.steps if shape else None)
    step = price_step(spec, prop, dep, gamma=None if shape else g, tree=shape, batch=batch, overhead_s=overhead_s,
                      acceptance_options={"workload": workload, "spread_k": spread_k}, **taus)
    memory, least = _memory(step, prop, spec)
    return Prediction(**{f.name: getattr(step, f.name) for f in fields(PricedStep)},
                      warnings=tuple(_prediction_warnings(spec, step, prop, g, least)),
                      notes=tuple(_workload_note(step, prop, taus, workload)), memory=memory,
                      proposer_source=prop.source, draft=getattr(getattr(prop, "model", None), "name", None),
                      target_origin=target_origin(spec), moe_experts=expert_provenance(spec, dep))


def _memory(step, proposer, target) -> tuple[dict, float]:
    """Bytes the most loaded GPU holds at the largest batch (the target's weights and KV cache, a draft model's beside
    them; a head's own weights are not counted) and whether they fit in the GPU's memory; beside it the bytes at the
    smallest batch (what the warning that nothing fits reads)."""
    from sdsl.roofline.latency import memory_with_draft_per_gpu

    dep = step.deployment
    draft = getattr(proposer, "model", None)
    need = float(memory_with_draft_per_gpu(target, draft, dep, batch=int(np.max(step.batch))))
    least = need if np.size(step.batch) == 1 else \
        float(memory_with_draft_per_gpu(target, draft, dep, batch=int(np.min(step.batch))))
    return {"memory_per_gpu_bytes": need, "memory_capacity_bytes": float(dep.hardware.mem_capacity),
            "fits_in_memory": need <= dep.hardware.mem_capacity}, least


def _prediction_warnings(target, step, proposer, gamma, least_bytes: float) -> list[str]:
    """The plan's warnings for one proposer, a k beyond the measured k, and a k = 0 step that still pays for the
    drafter."""
    from sdsl.plan.report import proposer_warnings
    from sdsl.plan.robust import beyond_measured
    from sdsl.roofline.latency import memory_remedies

    out = proposer_warnings(target, step.deployment, [proposer])
    dep = step.deployment
    if least_bytes > dep.hardware.mem_capacity:  # priced, but never silently: no batch asked for fits
        out.append(f"{target.name} does not fit: {least_bytes / 2**30:.4g} GiB per GPU (weights and KV cache at batch "
                   f"{int(np.min(step.batch))}, context {dep.context}) against {dep.hardware.mem_capacity / 2**30:.0f} GiB "
                   f"on {dep.hardware.name}; {memory_remedies(target, dep, batch=int(np.min(step.batch)), need=least_bytes)}")
    if gamma is not None and np.size(gamma):
        beyond = beyond_measured(proposer.name, step.acceptance, int(np.max(gamma)))
        if beyond:
            out.append(beyond)
    if gamma is not None and np.ndim(gamma) == 0 and gamma == 0 and np.all(step.t_step_s > step.t_plain_s * (1 + 1e-9)):
        out.append("k = 0 with speculation enabled: the engine still runs the drafter (docs/model.md, drafter tax); "
                   "'plain' is decoding with speculation off")
    return out


def _workload_note(step, proposer, taus, workload) -> list[str]:
    """A note when ``workload`` (not the default chat) does not change the proposer's acceptance."""
    if workload == "chat" or str(step.acceptance_source).startswith("catalog"):
        return []
    why = "the acceptance was given" if taus.get("acceptance") is not None or "tau" in taus else (
        "SDSL's plane depends on the models' sizes only")
    return [f"--workload {workload} does not change {proposer.name}'s acceptance ({why})"]


def optimize(target="llama-3.1-70b", hardware="h100-sxm", *, proposers=None, batch=1, acceptance=None,
             workload: str = "chat", gamma_max: int = 10, max_batch: int = 256, trees: bool = False,
             export: str | None = None, pretrain_tokens: float = 1e12, any_tokenizer: bool = False, top: int = 10,
             tp: int = 1, ep: int = 1, draft_tp: int = 1, dtype: str = "bf16", context=1024, engine=None,
             params=None, tolerance: float | None = None, kv_dtype=None):
    """``sdsl optimize`` in Python: rank proposers × k over batch sizes and pick (a
    :class:`~sdsl.plan.plan.SpeculationPlan`; :func:`sdsl.plan.plan.plan_speculation` with the CLI's deployment
    options). ``proposers``: names (``"all"`` expands as on the CLI) or None for the catalog's draft models;
    ``batch``: an int, a list or "1,8"; ``acceptance``: an Acceptance, an i.i.d. α, or {proposer: Acceptance}."""
    from sdsl.plan.plan import plan_speculation
    from sdsl.plan.robust import K_TOLERANCE

    dep = deployment_of(hardware, tp=tp, ep=ep, draft_tp=draft_tp, dtype=dtype, context=context,
                        params=params, engine=engine, kv_dtype=kv_dtype)
    if isinstance(acceptance, (int, float)) and not isinstance(acceptance, bool):
        from sdsl.acceptance import Acceptance

        acceptance = Acceptance.from_iid(float(acceptance))
    from sdsl.plan.search import expand_proposers

    names = expand_proposers(target, [proposers] if isinstance(proposers, str) else proposers)
    batches = [int(b) for b in str(batch).split(",")] if isinstance(batch, str) else batch
    return plan_speculation(target, dep, proposers=names or None, acceptance=acceptance, gamma_max=gamma_max,
                            batches=batches, max_batch=max_batch, trees=trees, export=export,
                            pretrain_tokens=pretrain_tokens, any_tokenizer=any_tokenizer, top=top, workload=workload,
                            tolerance=K_TOLERANCE if tolerance is None else tolerance)


