"""The result of pricing one speculative step: :class:`PricedStep`, what every sdsl caller reads.
Summary of docs/model.md §3.3 and §3.5; produced only by :func:`sdsl.speculation.step.price_step`.

It holds the step's parts in seconds (drafting, verification, the speculative worker's own GPU work, host
time), τ, tokens/s, plain decoding's tokens/s, speedup, TPOT, the cost ratio c, what bounds the verify
forward, the verified tokens, the target's verify and plain :class:`~sdsl.roofline.latency.StepTime` (so any
field a step time gains surfaces here), and the inputs that priced it. Every predicted tokens/s, TPOT and speedup
carries its 80% band from sdsl's held-out residuals (``tokens_per_s_low`` / ``_high`` and the others of
:data:`sdsl.speculation.bands.BAND_FIELDS`; :attr:`PricedStep.band` says which classes set it). Every array broadcasts over the
inputs it depends on (batch, γ or trees, τ, drafts stacked on a leading axis).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import cached_property

import numpy as np

from sdsl._result import Result
from sdsl.speculation.bands import BAND_FIELDS

__all__ = ["PricedStep", "ARRAY_FIELDS"]

#: The per-configuration arrays of a :class:`PricedStep`, in ``to_dict`` order.
ARRAY_FIELDS = ("tau", "t_draft_s", "t_propose_s", "t_verify_s", "t_worker_s", "t_host_s", "t_step_s",
                "t_plain_s", "tokens_per_s", "plain_tokens_per_s", "speedup", "tpot_s", "cost_ratio", "bound",
                "verify_tokens")


@dataclass(frozen=True, eq=False)  # a result object: equal only to itself
class PricedStep(Result):
    """One speculative step priced on the roofline (times in seconds; arrays broadcast over the inputs).

    Result protocol: ``report()`` (one line per configuration), ``to_dict()``, ``to_json(path=None)``,
    ``plot(ax=None)`` (best speedup per batch size). ``step["tokens_per_s"]`` reads a field by name (and
    ``"t_overhead_s"``, the earlier name of ``t_host_s``), as the dict the step function used to return.
    """

    tau: np.ndarray  # expected tokens emitted per step, bonus included
    t_draft_s: np.ndarray  # one drafting pass at q = 1
    t_propose_s: np.ndarray  # all drafting of one step
    t_verify_s: np.ndarray  # the target's forward over the verified tokens
    t_worker_s: np.ndarray  # the speculative worker's GPU work besides drafting and verifying
    t_host_s: np.ndarray  # exposed host time of one speculative step
    t_step_s: np.ndarray  # t_propose + t_verify + t_worker + t_host
    t_plain_s: np.ndarray  # one plain decoding step (q = 1), host time included
    tokens_per_s: np.ndarray  # b·τ / t_step
    plain_tokens_per_s: np.ndarray  # b / t_plain
    speedup: np.ndarray
    tpot_s: np.ndarray  # time per output token of one sequence: t_step / τ
    cost_ratio: np.ndarray  # c = t_draft / t_plain
    bound: np.ndarray  # what dominates the verify forward: memory, compute, overhead or communication
    verify_tokens: np.ndarray  # tokens per sequence the target verifies (γ + 1 for a chain)
    verify_time: object = None  # StepTime of the verify forward
    plain_time: object = None  # StepTime of the plain step's forward
    target: str = ""
    proposer: str = ""
    gamma: object = None  # chain lengths as given (None for trees)
    tree: object = None  # [steps, topk, tokens] or a dict of arrays (None for chains)
    batch: np.ndarray = 1  # the batch sizes priced, as given
    deployment: object = None  # the Deployment that priced it
    acceptance: object = None  # the Acceptance τ came from (None when τ was given)
    acceptance_source: str = "given"
    pieces: object = field(default=None, compare=False, repr=False)  # engine StepPieces (calibration)

    @property
    def engine(self):
        """The :class:`~sdsl.engine.profiles.EngineProfile` that priced the step (the deployment's)."""
        return None if self.deployment is None else self.deployment.engine

    @property
    def t_overhead_s(self) -> np.ndarray:
        """The earlier name of :attr:`t_host_s`."""
        return self.t_host_s

    @cached_property
    def _band(self) -> dict:
        from sdsl.speculation.bands import step_band

        return step_band(self)

    @property
    def band(self) -> dict:
        """Where the 80% band comes from (:func:`sdsl.speculation.bands.step_band`): level, the step-time and
        acceptance classes, whether the engine profile priced validation rows, the log-space offsets."""
        return self._band["info"]

    tokens_per_s_low = property(lambda self: self._band["tokens_per_s_low"], doc="Low end of tokens/s's 80% band.")
    tokens_per_s_high = property(lambda self: self._band["tokens_per_s_high"], doc="High end of tokens/s's 80% band.")
    plain_tokens_per_s_low = property(lambda self: self._band["plain_tokens_per_s_low"],
                                      doc="Low end of plain decoding's tokens/s 80% band.")
    plain_tokens_per_s_high = property(lambda self: self._band["plain_tokens_per_s_high"],
                                       doc="High end of plain decoding's tokens/s 80% band.")
    speedup_low = property(lambda self: self._band["speedup_low"], doc="Low end of the speedup's 80% band.")
    speedup_high = property(lambda self: self._band["speedup_high"], doc="High end of the speedup's 80% band.")
    tpot_s_low = property(lambda self: self._band["tpot_s_low"], doc="Low end of the TPOT's 80% band.")
    tpot_s_high = property(lambda self: self._band["tpot_s_high"], doc="High end of the TPOT's 80% band.")

    def __getitem__(self, key: str):
        return getattr(self, "t_host_s" if key == "t_overhead_s" else key)

    def inputs(self) -> dict:
        """What priced the step: target, proposer, γ or tree, batch, the deployment's summary, acceptance."""
        dep = self.deployment
        summary = None if dep is None else {"hardware": dep.hardware.name, "tp": dep.tp, "draft_tp": dep.draft_tp,
                                            "dtype": dep.dtype, "context": dep.context,
                                            "latency_params": dep.params.source, "engine": dep.engine.name}
        tree = self.tree if not isinstance(self.tree, dict) else {k: np.asarray(v).tolist() for k, v in self.tree.items()}
        return {"target": self.target, "proposer": self.proposer,
                "gamma": None if self.gamma is None else np.asarray(self.gamma).tolist(), "tree": tree,
                "batch": np.asarray(self.batch).tolist(), "deployment": summary,
                "acceptance_source": self.acceptance_source,
                "engine": None if dep is None else dep.engine.summary(),
                "acceptance": None if self.acceptance is None else self.acceptance.to_dict()}

    def to_dict(self) -> dict:
        """Plain Python values: every array field (lists), the 80% band of each predicted tokens/s, TPOT and speedup
        (:data:`~sdsl.speculation.bands.BAND_FIELDS`) with ``band`` (where it comes from), ``t_overhead_s`` (= ``t_host_s``), ``verify_step`` (the
        verify forward's :class:`~sdsl.roofline.latency.StepTime` parts), ``distinct_experts`` and
        ``plain_distinct_experts`` (routed experts one MoE layer reads in the verify and the plain forward; 0 for a
        dense target), the inputs."""
        out = {}
        for name in ARRAY_FIELDS:
            v = np.asarray(getattr(self, name))
            out[name] = v.item() if v.ndim == 0 else v.tolist()
        for name in BAND_FIELDS:
            v = np.asarray(getattr(self, name))
            out[name] = v.item() if v.ndim == 0 else v.tolist()
        out["band"] = self.band
        out["t_overhead_s"] = out["t_host_s"]
        if self.verify_time is not None:  # the verify forward's parts (every field its StepTime carries)
            out["verify_step"] = self.verify_time.to_dict()
            out["distinct_experts"] = out["verify_step"]["distinct_experts"]  # per MoE layer (0: a dense target)
        if self.plain_time is not None:
            out["plain_distinct_experts"] = np.asarray(self.plain_time.distinct_experts).tolist()
        return {**out, **self.inputs()}

    def take(self, index: int, **changes) -> "PricedStep":
        """The configurations at ``index`` of the leading axis (e.g. one draft of a stacked grid), as views."""
        shape = np.broadcast_shapes(*(np.shape(getattr(self, k)) for k in ARRAY_FIELDS))
        arrays = {k: np.broadcast_to(np.asarray(getattr(self, k)), shape)[index] for k in ARRAY_FIELDS}
        times = {k: _take_time(getattr(self, k), shape, index) for k in ("verify_time", "plain_time")}
        return replace(self, **arrays, **times, pieces=None, **changes)

    def report(self) -> str:
        """One line per configuration: its batch and draft length (a chain's k, a tree's verified tokens), τ, step
        times (ms), tokens/s and speedup with their 80% bands, the bound; then where the bands come from."""
        keys = ("tau", "t_draft_s", "t_verify_s", "t_step_s", "tokens_per_s", "speedup", "bound", "tokens_per_s_low",
                "tokens_per_s_high", "speedup_low", "speedup_high", "batch", "verify_tokens")
        shape = np.broadcast_shapes(*(np.shape(getattr(self, k)) for k in keys))
        cols = {k: np.ravel(np.broadcast_to(np.asarray(getattr(self, k)), shape)) for k in keys}
        chain = self.tree is None
        lines = [f"{'batch':>6} {'k' if chain else 'tokens':>6} {'tau':>6} {'draft ms':>9} {'verify ms':>10} "
                 f"{'step ms':>9} {'tokens/s':>10} {'80% band':>15} {'speedup':>8} {'80% band':>11}  bound"]
        for i in range(cols["tau"].size):
            band = f"{cols['tokens_per_s_low'][i]:.0f}-{cols['tokens_per_s_high'][i]:.0f}"
            sp_band = f"{cols['speedup_low'][i]:.2f}-{cols['speedup_high'][i]:.2f}"
            length = int(cols["verify_tokens"][i]) - (1 if chain else 0)
            lines.append(f"{int(cols['batch'][i]):6d} {length:6d} {cols['tau'][i]:6.3f} {1e3 * cols['t_draft_s'][i]:9.3f} "
                         f"{1e3 * cols['t_verify_s'][i]:10.3f} {1e3 * cols['t_step_s'][i]:9.3f} "
                         f"{cols['tokens_per_s'][i]:10.1f} {band:>15} {cols['speedup'][i]:8.3f} {sp_band:>11}  "
                         f"{cols['bound'][i]}")
        lines.append(band_note(self.band))
        return "\n".join(lines)

    def plot(self, ax=None):
        """Bars of the best speedup over plain decoding per batch size (:mod:`sdsl.plots.results`)."""
        from sdsl.plots.results import plot_speedup_by_batch

        return plot_speedup_by_batch(self.batch, self.speedup, ax=ax)


def band_note(info: dict) -> str:
    """One line on where a step's 80% band comes from (:attr:`PricedStep.band`)."""
    note = "" if info["profile_has_rows"] else (f"; engine profile {info['profile']} priced no validation row, so its "
                                                "class's widest band")
    return (f"80% band from sdsl's held-out residuals: step time {info['speculative_class']}, acceptance "
            f"{info['acceptance_class']}{note} (sdsl validate bands)")


def _take_time(step_time, shape, index):
    """``step_time`` (a StepTime or None) with every field broadcast to ``shape`` and indexed on axis 0."""
    if step_time is None:
        return None
    return replace(step_time, **{f.name: np.broadcast_to(np.asarray(getattr(step_time, f.name)),
                                                         np.broadcast_shapes(shape, np.shape(getattr(step_time, f.name))))[index]
                                 for f in fields(step_time)})
