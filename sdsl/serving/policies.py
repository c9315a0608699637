"""Speculation policies of the serving simulator, and their parsing from CLI strings.

``none``: plain decoding (no draft loaded: its weights and KV cache do not take memory).
``k=K``: fixed speculation length K every step. ``adaptive``: TurboSpec's goodput-maximising
uniform k (re-chosen whenever the batch changes and every few steps). ``per-request``: the
goodput-optimal budget m·k* split over requests with k_r ∝ α_r.
"""

from __future__ import annotations

from dataclasses import dataclass

from sdsl.errors import InvalidInputError

__all__ = ["Policy", "parse_policy", "parse_policies", "POLICY_KINDS"]

POLICY_KINDS = ("none", "fixed", "adaptive", "per-request")
_ALIASES = {"none": "none", "off": "none", "k=0": "none", "adaptive": "adaptive", "goodput": "adaptive",
            "per-request": "per-request", "per_request": "per-request", "adaptive-pr": "per-request"}


@dataclass(frozen=True)
class Policy:
    """A speculation policy: ``kind`` in POLICY_KINDS, ``k`` for ``fixed``."""

    kind: str
    k: int = 0

    def __post_init__(self) -> None:
        if self.kind not in POLICY_KINDS:
            raise InvalidInputError(f"Unknown policy kind {self.kind!r}; use one of {', '.join(POLICY_KINDS)}.")
        if self.kind == "fixed" and not 1 <= self.k <= 15:
            raise InvalidInputError(f"A fixed speculation length must be in 1..15, got {self.k}.")

    @property
    def name(self) -> str:
        return f"k={self.k}" if self.kind == "fixed" else self.kind

    @property
    def uses_draft(self) -> bool:
        return self.kind != "none"

    @property
    def adaptive(self) -> bool:
        return self.kind in ("adaptive", "per-request")

    def __str__(self) -> str:
        return self.name


def parse_policy(text: str | Policy) -> Policy:
    """``none`` | ``k=3`` | ``adaptive`` | ``per-request`` → :class:`Policy` (``k=0`` is ``none``)."""
    if isinstance(text, Policy):
        return text
    s = str(text).strip().lower()
    if s in _ALIASES:
        return Policy(_ALIASES[s])
    if s.startswith("k="):
        try:
            return Policy("fixed", int(s[2:]))
        except ValueError:
            pass
    raise InvalidInputError(f"Unknown policy {text!r}; use none, k=N (N in 1..15; k=0 is none), adaptive or per-request.")


def parse_policies(text: str) -> list[Policy]:
    """Comma-separated policies, e.g. ``none,k=3,adaptive``; a policy named twice is simulated once."""
    items = [p for p in str(text).split(",")]
    if not any(p.strip() for p in items):
        raise InvalidInputError("Give at least one policy.")
    if not all(p.strip() for p in items):
        raise InvalidInputError(f"The policy list {text!r} has an empty entry; give e.g. none,k=3,adaptive.")
    unique: dict[str, Policy] = {}
    for p in items:  # each policy once, in the order given ("none,k=0" is one policy)
        policy = parse_policy(p)
        unique.setdefault(policy.name, policy)
    return list(unique.values())
