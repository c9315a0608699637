"""The running batch of the serving simulator, and the acceptance draws its requests consume.

:class:`RunningBatch` holds one row per running request (its id, context, remaining output,
position on its acceptance tape, speculation length and per-request tallies) and changes only
through :meth:`~RunningBatch.admit`, :meth:`~RunningBatch.advance` and :meth:`~RunningBatch.retire`,
so the rows can never fall out of step.

:class:`AcceptanceTape` draws every request's acceptances once, before the run: the j-th decode
step of request r accepts min(G_rj, k) proposals, G_rj ~ Geometric with P(G >= i) = α_r^i
(Leviathan et al. 2023, §3: i.i.d. acceptance per token). A request emits at least one token per
step, so ``output − 1`` draws cover all its steps. Because the draws belong to the request and not
to the order the simulator visits them in, a run is identical for every chunking of its steps.
"""

from __future__ import annotations

import numpy as np

__all__ = ["AcceptanceTape", "RunningBatch"]


class AcceptanceTape:
    """G_rj for every request r and decode step j, capped at ``max_k`` (int8; one flat array)."""

    def __init__(self, alpha: np.ndarray, output_tokens: np.ndarray, max_k: int, rng: np.random.Generator,
                 pad: int) -> None:
        steps = np.maximum(np.asarray(output_tokens, np.int64) - 1, 0)
        self.start = np.concatenate([[0], np.cumsum(steps)[:-1]]).astype(np.int64)
        total = int(steps.sum())
        inv_log_alpha = np.repeat(1.0 / np.log(np.asarray(alpha, float)), steps)
        u = rng.random(total)
        np.log1p(-u, out=u)
        u *= inv_log_alpha
        np.minimum(u, max_k, out=u)
        self.draws = np.concatenate([u.astype(np.int8), np.zeros(pad, np.int8)])  # floor: u >= 0

    def window(self, position: np.ndarray, steps: int) -> np.ndarray:
        """(n, steps) draws starting at each request's ``position`` (rows past a request's end are unused)."""
        return self.draws[position[:, None] + np.arange(steps)]


class RunningBatch:
    """Running requests as one object: ids, context, remaining tokens, tape position, k_r, tallies."""

    def __init__(self) -> None:
        self.ids = np.zeros(0, np.int64)
        self.context = np.zeros(0)
        self.remaining = np.zeros(0, np.int64)
        self.position = np.zeros(0, np.int64)
        self.k = np.zeros(0, np.int64)
        self.k_steps = np.zeros(0, np.int64)  # Σ over steps of k_r
        self.steps = np.zeros(0, np.int64)
        self.drawn = np.zeros(0, np.int64)  # tokens the steps produced before the output-length cut

    @property
    def size(self) -> int:
        return self.ids.size

    def admit(self, ids: np.ndarray, prompt: np.ndarray, remaining: np.ndarray, position: np.ndarray) -> None:
        """Add requests whose prefill has run (one token emitted; ``remaining`` still to decode)."""
        m = ids.size
        zeros = np.zeros(m, np.int64)
        self.ids = np.concatenate([self.ids, ids])
        self.context = np.concatenate([self.context, prompt + 1.0])
        self.remaining = np.concatenate([self.remaining, remaining])
        self.position = np.concatenate([self.position, position])
        self.k = np.concatenate([self.k, zeros])
        self.k_steps = np.concatenate([self.k_steps, zeros])
        self.steps = np.concatenate([self.steps, zeros])
        self.drawn = np.concatenate([self.drawn, zeros])

    def advance(self, steps: int, tokens: np.ndarray) -> None:
        """Commit ``steps`` decode steps that produced ``tokens`` per request (cut at the output length)."""
        kept = np.minimum(tokens, self.remaining)
        self.remaining -= kept
        self.context += kept
        self.position += steps
        self.steps += steps
        self.k_steps += self.k * steps
        self.drawn += tokens

    def retire(self) -> tuple[np.ndarray, dict] | None:
        """Remove finished requests; returns the keep-mask and their ids and tallies, or None."""
        done = self.remaining <= 0
        if not done.any():
            return None
        out = {"ids": self.ids[done], "k_steps": self.k_steps[done], "steps": self.steps[done],
               "drawn": self.drawn[done]}
        keep = ~done
        for name in ("ids", "context", "remaining", "position", "k", "k_steps", "steps", "drawn"):
            setattr(self, name, getattr(self, name)[keep])
        return keep, out
