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


_FIELDS = ("ids", "context", "remaining", "position", "steps", "k", "k_steps", "drawn")
_ROW = {name: i for i, name in enumerate(_FIELDS)}


def _field(name: str) -> property:
    i = _ROW[name]
    return property(lambda self: self._rows[i], doc=f"The running requests' {name} (a view: writes go through).")


class RunningBatch:
    """Running requests as one object: ids, context, remaining tokens, tape position, k_r, tallies.

    All fields are integers and live in one (fields × requests) int64 array, so admitting, advancing
    and retiring requests touch every field at once.
    """

    ids, context, remaining, position = _field("ids"), _field("context"), _field("remaining"), _field("position")
    steps, k, drawn = _field("steps"), _field("k"), _field("drawn")  # drawn: tokens produced before the output cut
    k_steps = _field("k_steps")  # Σ over steps of k_r

    def __init__(self) -> None:
        self._rows = np.zeros((len(_FIELDS), 0), np.int64)

    @property
    def size(self) -> int:
        return self._rows.shape[1]

    def admit(self, ids: np.ndarray, prompt: np.ndarray, remaining: np.ndarray, position: np.ndarray) -> None:
        """Add requests whose prefill has run (one token emitted; ``remaining`` still to decode)."""
        new = np.zeros((len(_FIELDS), ids.size), np.int64)
        new[0], new[1], new[2], new[3] = ids, prompt, remaining, position
        new[1] += 1
        self._rows = np.concatenate([self._rows, new], axis=1)

    def advance(self, steps: int, tokens: np.ndarray, kept: np.ndarray) -> None:
        """Commit ``steps`` decode steps that produced ``tokens`` per request, ``kept`` = min(tokens, remaining)
        of them before the output-length cut."""
        r = self._rows
        r[2] -= kept
        r[1] += kept
        r[3:5] += steps  # position and steps
        r[6] += r[5] * steps
        r[7] += tokens

    def retire(self) -> tuple[np.ndarray, dict] | None:
        """Remove finished requests; returns the keep-mask and their ids and tallies, or None."""
        done = self._rows[2] <= 0
        if not done.any():
            return None
        out = self._rows[:, done]
        keep = ~done
        self._rows = self._rows[:, keep]
        return keep, {name: out[_ROW[name]] for name in ("ids", "k_steps", "steps", "drawn")}
