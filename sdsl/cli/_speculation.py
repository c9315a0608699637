"""Options shared by `sdsl predict` and `sdsl optimize` for proposers, trees and measured acceptance.

Acceptance here is an object with ``tau(k)``: i.i.d. α (Leviathan Eq. 1), a conditional per-position
vector (τ = 1 + Σ Π p_i), or a mean accepted length measured at k (exact at that k; elsewhere the i.i.d.
α that reproduces it).
"""

from __future__ import annotations

import click

__all__ = ["proposer_option", "tree_option", "measured_acceptance_options", "resolve_acceptance"]

proposer_option = click.option(
    "--proposer", "proposers", multiple=True,
    help="draft:<model> | eagle | eagle3 | medusa | mtp | ngram (repeat to compare; default: draft:<--draft>).")
tree_option = click.option("--tree", default=None, help="Token tree STEPS,TOPK,TOKENS (SGLang's num-steps, eagle-topk, "
                                                        "num-draft-tokens), e.g. 8,8,64.")


def measured_acceptance_options(command):
    """--accepted-length / --accepted-at / --acceptance (the --alpha option stays the command's own)."""
    command = click.option("--acceptance", default=None,
                           help="Conditional per-position acceptance p1,p2,... (P(i accepted | 1..i-1 accepted)).")(command)
    command = click.option("--accepted-at", type=int, default=None,
                           help="Draft length k the --accepted-length was measured at (default: --gamma).")(command)
    return click.option("--accepted-length", type=float, default=None,
                        help="Mean accepted length per step, bonus token included (as vLLM/SGLang print it).")(command)


class _Acceptance:
    def __init__(self, kind, value, at=None):
        self.kind, self.value, self.at = kind, value, at

    def tau(self, k):
        import numpy as np

        from sdsl.core.acceptance import tau
        from sdsl.core.speculation import chain_tau_from_accepted_length
        from sdsl.errors import InvalidInputError

        k = np.asarray(k, dtype=float)
        if self.kind == "alpha":
            return tau(self.value, k)
        if self.kind == "accepted_length":
            return chain_tau_from_accepted_length(self.value, self.at, k)
        p = np.asarray(self.value, dtype=float)
        if np.any(k > p.size):
            raise InvalidInputError(f"--acceptance gives {p.size} positions; k = {int(np.max(k))} needs more.")
        cum = np.concatenate([[1.0], 1.0 + np.cumsum(np.cumprod(p))])  # τ(k) = 1 + Σ_{j≤k} Π_{i≤j} p_i
        return cum[k.astype(int)]


def resolve_acceptance(*, alpha=None, accepted_length=None, accepted_at=None, acceptance=None, gamma=None):
    """The acceptance the user gave (at most one kind), or None."""
    from sdsl.core.acceptance import check_alpha
    from sdsl.errors import InvalidInputError

    given = [n for n, v in (("--alpha", alpha), ("--accepted-length", accepted_length), ("--acceptance", acceptance))
             if v is not None]
    if len(given) > 1:
        raise InvalidInputError(f"Give at most one of {', '.join(given)}: each sets the acceptance.")
    if alpha is not None:
        return _Acceptance("alpha", float(check_alpha(alpha, open_interval=True)))
    if accepted_length is not None:
        at = accepted_at if accepted_at is not None else gamma
        if at is None or at < 1:
            raise InvalidInputError("--accepted-length needs --accepted-at K >= 1, the draft length it was measured at.")
        if not 1.0 <= accepted_length <= at + 1:
            raise InvalidInputError(f"--accepted-length must lie in [1, {at + 1}] for k = {at}; got {accepted_length:g}.")
        return _Acceptance("accepted_length", float(accepted_length), int(at))
    if acceptance is not None:
        try:
            values = [float(v) for v in str(acceptance).split(",") if v.strip()]
        except ValueError:
            raise InvalidInputError(f"--acceptance takes comma-separated numbers like 0.8,0.6; got {acceptance!r}.") from None
        if not values:
            raise InvalidInputError("--acceptance is empty.")
        check_alpha(values, name="--acceptance")
        return _Acceptance("positional", values)
    return None
