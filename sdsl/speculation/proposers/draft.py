"""A separate small draft model (Leviathan et al., ICML 2023): one forward per drafted token, with its resync and
model-switch terms (docs/model.md §3.7)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdsl.catalog.models import ModelSpec, get_model
from sdsl.errors import InvalidInputError
from sdsl.roofline.latency import ModelShapes
from sdsl.speculation.proposers.base import Proposer, forward_time

__all__ = ["DraftModel"]


@dataclass(frozen=True, eq=False)
class DraftModel(Proposer):
    """A separate draft LM: a catalog name, ModelSpec or a stack of shapes (vectorised search);
    ``params`` prices it with other latency parameters than the target's.

    Two terms of how a decoder runs the draft, off by default (docs/model.md §3.7): ``first_pass_tokens``,
    the tokens per sequence its first drafting pass of a step feeds (1, the last verified token; 2 for a
    decoder that re-feeds the last two tokens because the draft's cache may hold a rejected draft, as sdsl's
    reference decoder does), and ``switch_ratio`` ρ ≥ 1, the warm-cache over DRAM read bandwidth when the
    target's forward evicts the draft's weights and KV cache from a cache that otherwise holds them (a CPU:
    the first pass re-reads them, :func:`sdsl.roofline.model_switch.switch_time_s`; 1 on GPUs, whose forwards
    stream weights from HBM anyway)."""

    model: object = None
    params: object = None
    first_pass_tokens: int = 1
    switch_ratio: float = 1.0
    kind = "draft"
    source = "Leviathan, Kalman & Matias, ICML 2023, Alg. 1 (one draft forward per drafted token)"

    def __post_init__(self):
        if isinstance(self.model, str):
            object.__setattr__(self, "model", get_model(self.model))
        if not hasattr(self.model, "d_model"):  # a catalog name, config.json, ModelSpec or ModelShapes stack
            raise InvalidInputError(f"DraftModel needs its draft model (a name or ModelSpec); got {type(self.model).__name__}.")
        if int(self.first_pass_tokens) != self.first_pass_tokens or self.first_pass_tokens < 1:
            raise InvalidInputError(f"first_pass_tokens must be a positive whole number; got {self.first_pass_tokens}.")
        if not (np.isfinite(self.switch_ratio) and self.switch_ratio >= 1):
            raise InvalidInputError(f"switch_ratio (cache over DRAM bandwidth) must be >= 1; got {self.switch_ratio}.")
        if self.switch_ratio != 1.0 and not isinstance(self.model, ModelSpec):
            raise InvalidInputError("switch_ratio needs one draft model (a ModelSpec), not a stack of shapes.")

    def draft_time(self, target, deployment, *, batch, steps, topk=1, context):
        """One forward per depth (:meth:`Proposer.draft_time`), plus what the first pass of a step costs beyond
        a one-token warm pass: ``first_pass_tokens`` − 1 more tokens, and the re-read at ``switch_ratio``."""
        base = super().draft_time(target, deployment, batch=batch, steps=steps, topk=topk, context=context)
        if self.first_pass_tokens == 1 and self.switch_ratio == 1.0:
            return base
        extra = 0.0
        if self.first_pass_tokens != 1:
            extra = (self.step_time(target, deployment, batch=batch, q=self.first_pass_tokens, context=context)
                     - self.step_time(target, deployment, batch=batch, q=1, context=context))
        if self.switch_ratio != 1.0:
            from sdsl.roofline.model_switch import switch_time_s

            extra = extra + switch_time_s(self.model, deployment.for_draft(self.params), batch=batch, context=context,
                                          ratio=self.switch_ratio)
        return base + np.where(np.asarray(steps, dtype=float) > 0, extra, 0.0)

    @property
    def name(self) -> str:
        return f"draft:{self.model.name}" if isinstance(self.model, ModelSpec) else "draft"

    def step_time(self, target, deployment, *, batch, q=1, context):
        return forward_time(self.model, deployment, batch=batch, q=q, context=context, draft=True, params=self.params)
