"""Prompt lookup / n-gram matching (Saxena 2023; vLLM ``method="ngram"``): no GPU work, a settable CPU time per step."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdsl.errors import InvalidInputError
from sdsl.speculation.proposers.base import Proposer

__all__ = ["NGramLookup"]


@dataclass(frozen=True, eq=False)
class NGramLookup(Proposer):
    """Prompt lookup: no GPU work; ``cpu_s`` seconds of host time per speculative step (default 0,
    an assumption: set it from a measurement of your engine)."""

    cpu_s: float = 0.0
    kind = "ngram"
    source = "Saxena (2023) Prompt Lookup Decoding; vLLM speculative_config method 'ngram'"

    def __post_init__(self):
        if not (np.isfinite(self.cpu_s) and self.cpu_s >= 0):
            raise InvalidInputError("The n-gram proposer's CPU time per step must be a non-negative number of seconds.")

    def step_time(self, target, deployment, *, batch, q=1, context):
        return np.zeros(np.shape(np.asarray(batch, dtype=float)))

    def draft_time(self, target, deployment, *, batch, steps, topk=1, context):
        s = np.asarray(steps, dtype=float) + 0.0 * np.asarray(batch, dtype=float)
        return np.where(s > 0, self.cpu_s, 0.0)

    def passes(self, steps) -> np.ndarray:
        return 0.0 * np.asarray(steps, dtype=float)  # no GPU forward
