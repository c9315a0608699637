"""One speculative step of any proposer, chain or tree, priced on the roofline (docs/model.md §3.3).

A step drafts (``proposer.draft_time``: γ passes for a chain, steps passes over the top-k frontier for
an SGLang-style tree, one pass for Medusa, CPU time for n-gram lookup), then the target verifies
n tokens per sequence in one forward (n = γ + 1 for a chain; n = the tree's draft tokens, root
included). A tree's tokens attend to every tree position under a mask (the kernel computes the whole
n × n block, not the causal half), priced as context L + n/2. Emitted tokens per step τ come from the
acceptance (Leviathan et al. 2023 Eq. 1 for i.i.d. α; measured accepted length for a tree):

    tokens/s = b·τ / (T_draft + T_verify(b, n) + T_worker + T_overhead),   TPOT = T_step / τ.

T_worker is what an engine's speculative worker runs besides drafting and verifying
(:meth:`Proposer.worker_time`; for EAGLE heads the draft-extend pass over the τ accepted tokens, top-k
selection per depth and the tree-verification kernels; docs/model.md §3.5).

Everything broadcasts over batch, γ and τ; γ = 0 is plain decoding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdsl.core.acceptance import check_alpha, check_gamma, tau
from sdsl.core.proposers import forward_step, forward_time, make_proposer
from sdsl.errors import InvalidInputError

__all__ = ["TreeShape", "parse_tree", "price_speculation", "tau_of", "resolve_deployment"]


@dataclass(frozen=True)
class TreeShape:
    """SGLang's (``--speculative-num-steps``, ``--speculative-eagle-topk``, ``--speculative-num-draft-tokens``):
    draft depth, branching per depth, and tokens the target verifies (root included)."""

    steps: int
    topk: int
    tokens: int

    def __post_init__(self):
        s, k, n = self.steps, self.topk, self.tokens
        if min(s, k) < 1 or n < 2:
            raise InvalidInputError(f"Tree {s},{k},{n} cannot exist: steps and topk must be >= 1 and tokens >= 2.")
        most = 1 + k + (s - 1) * k * k  # the root + every candidate the expansion scores
        if k == 1 and n > s + 1 or n > most:
            raise InvalidInputError(f"Tree {s},{k},{n} cannot exist: {s} steps of top-{k} draft at most "
                                    f"{min(most, s + 1) if k == 1 else most} tokens (root included).")

    @property
    def is_chain(self) -> bool:
        return self.topk == 1


def parse_tree(text) -> TreeShape:
    """'8,8,64' → TreeShape(8, 8, 64); anything else is a one-line InvalidInputError."""
    if isinstance(text, TreeShape):
        return text
    try:
        s, k, n = (int(v) for v in str(text).split(","))
    except ValueError:
        raise InvalidInputError(f"--tree takes STEPS,TOPK,TOKENS (three integers, e.g. 8,8,64); got {text!r}.") from None
    return TreeShape(s, k, n)


def tau_of(acceptance, gamma) -> np.ndarray:
    """τ for a chain of ``gamma`` drafts: an i.i.d. α (number/array; Leviathan Eq. 1) or an
    :class:`~sdsl.core.acceptance_vector.Acceptance` (anything with ``tau(gamma)``)."""
    if hasattr(acceptance, "tau"):
        return np.asarray(acceptance.tau(gamma), dtype=float)
    return tau(check_alpha(acceptance), gamma)


def resolve_deployment(deployment):
    """:meth:`Deployment.of <sdsl.core.deployment.Deployment.of>` (a Deployment passes through; a hardware
    name, file or Hardware gets the defaults)."""
    from sdsl.core.deployment import Deployment

    return Deployment.of(deployment)


def _chain(gamma, proposer):
    g = check_gamma(gamma)
    if np.any(g != np.round(g)):
        raise InvalidInputError("gamma must be a whole number of draft tokens.")
    if proposer.max_depth is not None and np.any(g > proposer.max_depth):
        raise InvalidInputError(f"{proposer.name} drafts at most {proposer.max_depth} tokens; got gamma={int(np.max(g))}.")
    return g, 1, g + 1.0, 0.0


def _trees(tree, proposer):
    """(steps, topk, verified tokens, extra attention context of the mask) of one tree or of arrays of trees
    (a dict with ``steps``, ``topk``, ``tokens``; each must satisfy :class:`TreeShape`'s bounds)."""
    if isinstance(tree, dict):
        s, k, n = (np.asarray(tree[key], dtype=float) for key in ("steps", "topk", "tokens"))
        bad = (s < 1) | (k < 1) | (n < 2) | (n > np.where(k == 1, s + 1, 1 + k + (s - 1) * k * k))
        if np.any(bad):
            raise InvalidInputError("A tree (steps, topk, tokens) in the grid cannot exist.")
    else:
        shape = parse_tree(tree)
        s, k, n = shape.steps, shape.topk, float(shape.tokens)
    if proposer.max_depth is not None and np.any(s > proposer.max_depth):
        raise InvalidInputError(f"{proposer.name} drafts at most {proposer.max_depth} levels; a tree has {int(np.max(s))}.")
    return s, k, n, np.where(np.asarray(k) == 1, 0.0, np.asarray(n) / 2.0)


def _distinct(price, x, y, many: bool):
    """``price(x, y)`` → (seconds, bound or None). With ``many`` (an array of trees on axis 0, shape (T, 1, ...)),
    each distinct (x, y) is priced once and gathered back: a 949-triple SGLang grid has 128 verify sizes and
    32 drafting shapes."""
    def split(out):
        return (out.total_s, out.bound) if hasattr(out, "total_s") else out

    if not many:
        return split(price(x, y))
    x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    pairs, inverse = np.unique(np.stack([x.reshape(len(x), -1)[:, 0], y.reshape(len(y), -1)[:, 0]], axis=1), axis=0,
                               return_inverse=True)
    lead = (-1,) + (1,) * (x.ndim - 1)
    total, bound = split(price(pairs[:, 0].reshape(lead), pairs[:, 1].reshape(lead)))

    def gather(a):
        if a is None:
            return None
        a = np.asarray(a)
        return np.take(np.broadcast_to(a, (len(pairs),) + a.shape[1:]), inverse.ravel(), axis=0)

    return gather(total), gather(bound)


def price_speculation(target, proposer, deployment, *, tau_value, gamma=None, tree=None, batch=1,
                      overhead_s=0.0, pass_overhead_s=0.0) -> dict:
    """Price one speculative step; see the module docstring. Returns arrays (each broadcast over the inputs it
    depends on; tokens/s, speedup, TPOT and step time over all of batch, γ or trees, and τ):
    tau, t_draft_s (one drafting pass at q = 1), t_propose_s (all drafting), t_verify_s, t_overhead_s,
    t_step_s, t_plain_s, tokens_per_s, plain_tokens_per_s, speedup, tpot_s, cost_ratio, bound, verify_tokens.

    Give ``gamma`` (chain lengths) or ``tree`` (a TreeShape, "S,K,N", or a dict of arrays steps/topk/tokens);
    ``tau_value`` is the expected emitted tokens per step. ``overhead_s`` is added once per step;
    ``pass_overhead_s`` (an engine's host time per forward, which operator-level calibration does not see) to
    the verify pass, to every separate drafting pass (:meth:`Proposer.passes`) and to the plain step.
    """
    dep = resolve_deployment(deployment)
    proposer = make_proposer(proposer)
    if (gamma is None) == (tree is None):
        raise InvalidInputError("Give a chain length gamma or a tree shape, not both.")
    steps, topk, n_verify, mask_extra = _chain(gamma, proposer) if tree is None else _trees(tree, proposer)
    t = np.asarray(tau_value, dtype=float)
    if np.any(~np.isfinite(t)) or np.any(t < 1) or np.any(t > n_verify + 1e-9):
        raise InvalidInputError(f"Expected tokens per step must lie in [1, {float(np.max(n_verify)):g}] (verified tokens).")
    overhead, per_pass = np.asarray(overhead_s, dtype=float), np.asarray(pass_overhead_s, dtype=float)
    if np.any(~np.isfinite(overhead)) or np.any(overhead < 0) or np.any(~np.isfinite(per_pass)) or np.any(per_pass < 0):
        raise InvalidInputError("Overheads (per step and per forward pass) must be finite non-negative seconds.")
    b, context = np.asarray(batch, dtype=float), dep.context
    t_plain = forward_time(target, dep, batch=b, q=1, context=context) + per_pass
    many = isinstance(tree, dict)
    verify_s, bound = _distinct(lambda n, m: forward_step(target, dep, batch=b, q=n, context=context + m),
                                n_verify, mask_extra, many)
    t_draft = proposer.step_time(target, dep, batch=b, q=1, context=context)
    t_propose, _ = _distinct(lambda s_, k_: (proposer.draft_time(target, dep, batch=b, steps=s_, topk=k_,
                                                                 context=context), None), steps, topk, many)
    worker = proposer.worker_time(target, dep, batch=b, steps=steps, topk=topk, tau=t, verify_tokens=n_verify,
                                  context=context)
    overhead = overhead + per_pass * (1.0 + proposer.passes(steps) + proposer.worker_passes())
    t_step = t_propose + verify_s + worker + overhead
    tps = b * t / t_step
    plain = b / t_plain
    return {"tau": t, "t_draft_s": t_draft, "t_propose_s": t_propose, "t_verify_s": verify_s,
            "t_worker_s": worker + 0.0 * t_step, "t_overhead_s": overhead + 0.0 * t_step, "t_step_s": t_step, "t_plain_s": t_plain, "tokens_per_s": tps,
            "plain_tokens_per_s": plain, "speedup": tps / plain, "tpot_s": t_step / t, "cost_ratio": t_draft / t_plain,
            "bound": bound, "verify_tokens": n_verify}
