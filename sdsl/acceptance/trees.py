"""Token trees: shape, expected accepted length, verify/draft work, and SGLang (steps, topk, tokens) triples.
Summary of docs/model.md §3.5.

A tree holds n draft tokens below the root (the last verified token). Node i has a parent (−1 = the
root) and a *rank*: its position among its siblings in the draft's ranking (0 = the draft's top
candidate). Acceptance is per depth and per rank: P[d, r] = probability that the rank-r child at depth
d + 1 is the one accepted, given its parent was (siblings are mutually exclusive, Σ_r P[d, r] ≤ 1;
Sequoia, Chen et al. 2024, §3, measures P by rank; SpecInfer, Miao et al. ASPLOS 2024, verifies all
candidates in one pass). The expected tokens per target pass, bonus included, is

    τ = 1 + Σ_{nodes v} Π_{u on the path root→v} P[depth(u) − 1, rank(u)]        (SpecInfer/Sequoia)

A chain (every rank 0) with P[d, 0] = p_{d+1} is Leviathan et al. (2023) Eq. (1) generalised per
position (:meth:`sdsl.acceptance.Acceptance.tau`), exactly.

Which nodes are verified. A static tree (Medusa's and EAGLE-1's offline ``choices``) is chosen from measured
acceptance, so its nodes are the most probable paths (:meth:`TokenTree.sglang` with ``scores`` = P). A
dynamic tree — SGLang's EAGLE worker, EAGLE-2/3's ``topK_genrate`` — keeps the num_draft_tokens − 1
candidates with the highest *draft* score, the cumulative product of the draft's softmax probabilities
(SGLang ``select_top_k_tokens`` multiplies each candidate's ``topk_p`` into its parent's score and
``organize_draft_results`` takes ``torch.topk(score_list, num_draft_token - 1)``; sgl-project/sglang
``python/sglang/srt/speculative/spec_utils.py`` @ 2dd501d149552ea85135d4eeb7dd740c5e691091 and
``eagle_utils.py`` @ 263bc85d64baa38d82ec20f58a61f2982c78075d). The draft's scores are not its acceptance:
a head trained to match the target's distribution spreads probability over candidates that greedy
verification (only the target's argmax passes) rarely accepts, so a tree of the same budget can trade the
chain's deep nodes for siblings and accept *less* than the chain (:func:`draft_scores`; evidence in
VALIDATION.md "Acceptance catalog: defaults, k and trees").

Work: verification feeds n + 1 tokens per sequence (the root and every node) through the target with a
tree attention mask (each token attends to the context and its ancestors only; dense kernels compute the
full (n + 1)² block, :attr:`TokenTree.mask_density` is the useful fraction; pricing it on the roofline is
:mod:`sdsl.speculation.proposers`' job). Drafting runs one draft pass per depth; pass d feeds the nodes at depth
d − 1 that have children (SGLang/EAGLE-2 feed topk beams per pass).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdsl.acceptance.tau import check_alpha
from sdsl._checks import positive_int
from sdsl.errors import InvalidInputError

__all__ = ["TokenTree", "check_rank_acceptance", "rank_acceptance", "draft_scores", "tree_matrices", "sglang_pool", "sglang_candidates",
           "sglang_tree_tau", "sglang_tree_tau_stack", "DEFAULT_RANK_RATIO", "DEFAULT_DRAFT_TEMPERATURE", "TREE_SELECTIONS"]

# s of :func:`rank_acceptance`: each lower-ranked sibling is accepted with half the chance an independent
# retry would have. Not identified by the published chain/tree pairs (s = 0.1, 0.25, 0.5 and 0.55 fit them to a
# median 6.7-7.0% with their best draft temperature, s = 0.75 and 1 worse: VALIDATION.md "Acceptance catalog:
# defaults, k and trees"), so it stays at 0.5.
DEFAULT_RANK_RATIO = 0.5

# T of :func:`draft_scores`, fitted on SpecForge's 174 chain/tree pairs at equal verified-token budget
# (sdsl.fit.acceptance_fit.fit_draft_temperature; recomputed by tests/unit/test_catalog_acceptance.py).
DEFAULT_DRAFT_TEMPERATURE = 3.15

#: How a tree's nodes are chosen: "draft" (by the draft's cumulative score: SGLang, EAGLE-2/3 dynamic trees)
#: or "acceptance" (by path acceptance: static trees built offline from measured acceptance).
TREE_SELECTIONS = ("draft", "acceptance")


def check_rank_acceptance(P, depth: int) -> np.ndarray:
    """P as a (depth, ranks) float array: a (ranks,) vector is Sequoia's depth-independent form, a
    (d, ranks) matrix is per depth (the last row repeats below d). Raises InvalidInputError outside [0, 1]
    or when a depth's ranks sum above 1 (only one sibling can be accepted)."""
    P = np.atleast_1d(check_alpha(P, name="tree acceptance"))
    if P.ndim == 1:
        P = P[None, :]
    if P.ndim != 2 or P.shape[1] == 0:
        raise InvalidInputError("Tree acceptance must be a per-rank vector or a (depth, rank) matrix.")
    if np.any(P.sum(axis=1) > 1.0 + 1e-9):
        raise InvalidInputError(f"The ranks of one depth are mutually exclusive, so their acceptance must sum to at "
                                f"most 1; got {float(P.sum(axis=1).max()):.3f}.")
    rows = np.minimum(np.arange(max(int(depth), 1)), P.shape[0] - 1)
    return P[rows]


def rank_acceptance(conditional, width: int, rank_ratio: float = DEFAULT_RANK_RATIO) -> np.ndarray:
    """(depth, width) per-rank acceptance from a chain's conditional rates p_d (the top candidate's):
    P[d, r] = p_d · ((1 − p_d) · s)^r. s = 1: every sibling is an independent retry (SpecInfer's
    multi-candidate sampling with a perfectly calibrated draft); s = 0: only the top candidate counts."""
    p = np.atleast_1d(check_alpha(conditional, name="conditional acceptance"))[:, None]
    s = float(check_alpha(rank_ratio, name="rank_ratio"))
    if int(width) < 1:
        raise InvalidInputError(f"Tree width (top-k) must be at least 1; got {width}.")
    return p * ((1.0 - p) * s) ** np.arange(int(width))


def draft_scores(conditional, width: int, rank_ratio: float = DEFAULT_RANK_RATIO,
                 temperature: float = DEFAULT_DRAFT_TEMPERATURE) -> np.ndarray:
    """(depth, width) draft probabilities of the ranked candidates, the scores a dynamic tree is chosen by:
    q[d, r] = (1 − θ_d)·θ_d^r with θ_d = ((1 − p_d)·s)^(1/T). The ranks' acceptance P[d, r] ∝ ρ_d^r,
    ρ_d = (1 − p_d)·s (:func:`rank_acceptance`), raised to 1/T and normalised over the ranks: T = 1 is a
    draft whose probabilities fall by rank as its acceptance does; T > 1 a flatter draft (a head trained on
    the target's sampling distribution, verified greedily), whose siblings outscore the chain's deep nodes."""
    p = np.atleast_1d(check_alpha(conditional, name="conditional acceptance"))[:, None]
    s = float(check_alpha(rank_ratio, name="rank_ratio"))
    t = np.asarray(temperature, dtype=float)  # a number, or one per depth row (depth, 1)
    if np.any(~np.isfinite(t)) or np.any(t <= 0):
        raise InvalidInputError(f"The draft temperature must be a positive number; got {temperature}.")
    if int(width) < 1:
        raise InvalidInputError(f"Tree width (top-k) must be at least 1; got {width}.")
    theta = ((1.0 - p) * s) ** (1.0 / t)
    return (1.0 - theta) * theta ** np.arange(int(width))


def _check_selection(selection: str) -> str:
    if selection not in TREE_SELECTIONS:
        raise InvalidInputError(f"Tree selection is one of {', '.join(TREE_SELECTIONS)}; got {selection!r}.")
    return selection


@dataclass(frozen=True)
class TokenTree:
    """A token tree as a parent array (−1 = child of the root); nodes listed parents-first.
    Sibling rank = order of appearance among the children of one parent."""

    parents: tuple

    def __post_init__(self):
        par = np.asarray(self.parents, dtype=int).ravel()
        if np.any(par < -1) or np.any(par >= np.arange(par.size)):
            raise InvalidInputError("A token tree's parent array must list each node after its parent (parents[i] < i, "
                                    "-1 for the root's children).")
        object.__setattr__(self, "parents", tuple(int(x) for x in par))

    @classmethod
    def chain(cls, k: int) -> TokenTree:
        """k draft tokens in a line (a chain: γ = k)."""
        if int(k) != k or k < 0:
            raise InvalidInputError(f"A chain needs a non-negative whole number of tokens; got {k}.")
        return cls(tuple(range(-1, int(k) - 1)))

    @classmethod
    def from_branching(cls, branching) -> TokenTree:
        """Full tree with branching[d] children under every node at depth d (Medusa-style per-depth widths)."""
        b = [int(x) for x in np.atleast_1d(branching)]
        if any(x < 1 for x in b):
            raise InvalidInputError(f"Every depth needs at least one child per node; got branching {b}.")
        parents, level = [], [-1]
        for width in b:
            nxt = []
            for p in level:
                nxt.extend(range(len(parents), len(parents) + width))
                parents.extend([p] * width)
            level = nxt
        return cls(tuple(parents))

    @classmethod
    def spine(cls, branching) -> TokenTree:
        """A chain of rank-0 candidates (the spine) with ``branching[d-1]`` candidates at depth d, the rank-1.. ones
        leaves: the lopsided shape Sequoia's tree search finds for a draft whose top candidate is usually right
        (Chen et al. 2024, §3.1). A leaf costs the target one verified token and the drafter nothing (its token is a
        further candidate of a distribution already drafted). The spine is listed first (nodes 0..D-1), so that a
        fully accepted spine sits in consecutive slots."""
        b = [int(x) for x in np.atleast_1d(branching)]
        if any(x < 1 for x in b):
            raise InvalidInputError(f"Every depth needs at least one child per node; got branching {b}.")
        parents = list(range(-1, len(b) - 1))
        for depth, width in enumerate(b):
            parents += [depth - 1] * (width - 1)
        return cls(tuple(parents))

    @classmethod
    def sglang(cls, steps: int, topk: int, num_draft_tokens: int, P, scores=None) -> TokenTree:
        """The tree SGLang's EAGLE worker verifies for (--speculative-num-steps, --speculative-eagle-topk,
        --speculative-num-draft-tokens): the num_draft_tokens − 1 candidates of :func:`sglang_candidates` with
        the highest cumulative ``scores`` (the draft's probabilities, :func:`draft_scores`; default: the
        acceptance P itself, which picks the most probable paths as a static tree built from acceptance does)."""
        cand = sglang_candidates(steps, topk, P, scores)
        parent = cand["parent"]
        keep = _top_nodes(cand["score"], num_draft_tokens - 1)
        index = {old: new for new, old in enumerate(keep)}
        return cls(tuple(index.get(int(parent[i]), -1) for i in keep))

    @staticmethod
    def matrices(conditional, width: int, rank_ratio: float | None = None, selection: str = "draft"):
        """(P, scores) a tree is built and priced from: :func:`tree_matrices`."""
        return tree_matrices(conditional, width, rank_ratio, selection)

    @property
    def size(self) -> int:
        return len(self.parents)

    @property
    def depths(self) -> np.ndarray:
        """Depth of each node (1 = child of the root)."""
        d = np.zeros(self.size, dtype=int)
        for i, p in enumerate(self.parents):
            d[i] = 1 if p < 0 else d[p] + 1
        return d

    @property
    def ranks(self) -> np.ndarray:
        seen: dict[int, int] = {}
        out = np.zeros(self.size, dtype=int)
        for i, p in enumerate(self.parents):
            out[i] = seen.get(p, 0)
            seen[p] = out[i] + 1
        return out

    @property
    def depth(self) -> int:
        return int(self.depths.max()) if self.size else 0

    @property
    def width(self) -> int:
        """Most children under one node (the top-k a drafter must produce)."""
        return int(self.ranks.max()) + 1 if self.size else 0

    @property
    def verify_tokens(self) -> int:
        """Tokens per sequence in the verification pass: the root plus every node."""
        return self.size + 1

    @property
    def mask_density(self) -> float:
        """Unmasked fraction of the (n + 1)² tree-attention block: each token sees itself and its ancestors
        (a chain is causal: (n + 2) / (2(n + 1)))."""
        return float((self.depths.sum() + self.size + 1) / self.verify_tokens ** 2)

    @property
    def draft_tokens_per_pass(self) -> np.ndarray:
        """Tokens fed to the drafter in each of its `depth` passes: pass d feeds the nodes at depth d − 1
        that have children (pass 1 feeds the root)."""
        if not self.size:
            return np.zeros(0, dtype=int)
        d = np.concatenate([[0], self.depths])
        has_child = np.zeros(self.size + 1, dtype=bool)
        has_child[np.asarray(self.parents) + 1] = True
        return np.bincount(d[has_child], minlength=self.depth)[: self.depth]

    def path_probabilities(self, P) -> np.ndarray:
        """P(path root→node accepted) for every node; broadcasts over leading axes of a stack of P."""
        P = np.asarray(P, dtype=float)
        mats = check_rank_acceptance(P, self.depth) if P.ndim <= 2 else P
        if self.size and self.width > mats.shape[-1]:
            raise InvalidInputError(f"The tree has {self.width} siblings under one node but acceptance is given for "
                                    f"{mats.shape[-1]} ranks.")
        d, r = self.depths - 1, self.ranks
        edge = mats[..., np.minimum(d, mats.shape[-2] - 1), r]
        prob = np.zeros(edge.shape)
        for i, p in enumerate(self.parents):  # parents first: one pass, n <= a few hundred
            prob[..., i] = edge[..., i] * (prob[..., p] if p >= 0 else 1.0)
        return prob

    def tau(self, P) -> np.ndarray:
        """Expected tokens per target pass, bonus included: 1 + Σ_nodes P(path accepted) (SpecInfer/Sequoia).
        Summed in node order, so a chain matches :meth:`Acceptance.tau` bit for bit."""
        return self.tau_of_paths(self.path_probabilities(P))

    @staticmethod
    def tau_of_path_prefixes(prob) -> np.ndarray:
        """τ of every prefix of the nodes along the last axis (parents first): 1 + Σ of the first j path
        probabilities for j = 0 … n, summed in that order (n + 1 values; the last is :meth:`tau_of_paths`). The one
        τ sum of a token tree: :meth:`tau`, :func:`sglang_tree_tau_stack` and the SGLang grid
        (:func:`sdsl.plan.tree_search.sglang_grid`, whose prefixes are its num_draft_tokens) all read it."""
        prob = np.asarray(prob, dtype=float)
        zero = np.zeros(prob.shape[:-1] + (1,))
        return 1.0 + np.concatenate([zero, np.cumsum(prob, axis=-1)], axis=-1)

    @staticmethod
    def tau_of_paths(prob) -> np.ndarray:
        """1 + Σ of the path probabilities along the last axis, nodes parents-first, summed in that order: the τ
        of :meth:`tau`, and of :func:`sglang_tree_tau_stack` from the nodes it selects."""
        return TokenTree.tau_of_path_prefixes(prob)[..., -1]

    def to_dict(self) -> dict:
        return {"parents": list(self.parents), "size": self.size, "depth": self.depth, "width": self.width,
                "verify_tokens": self.verify_tokens, "mask_density": self.mask_density,
                "draft_tokens_per_pass": self.draft_tokens_per_pass.tolist()}


def tree_matrices(conditional, width: int, rank_ratio: float | None = None, selection: str = "draft",
                  draft_temperature: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(P, scores): per-rank acceptance (:func:`rank_acceptance`) and the scores the tree's nodes are chosen
    by — the draft's (:func:`draft_scores`) for ``selection="draft"``, P itself for ``"acceptance"``."""
    s = DEFAULT_RANK_RATIO if rank_ratio is None else rank_ratio
    P = rank_acceptance(conditional, width, s)
    if _check_selection(selection) == "acceptance":
        return P, P
    return P, draft_scores(conditional, width, s, DEFAULT_DRAFT_TEMPERATURE if draft_temperature is None
                           else draft_temperature)


def sglang_tree_tau(acceptance, steps: int, topk: int, tokens: int, rank_ratio: float | None = None, *,
                    selection: str = "draft", draft_temperature: float | None = None) -> float:
    """τ of SGLang's (steps, topk, tokens) tree from a chain's :class:`~sdsl.acceptance.Acceptance`: its
    conditional rates are the top candidate's per depth, lower ranks follow :func:`rank_acceptance` (ratio
    ``rank_ratio``, default :data:`DEFAULT_RANK_RATIO`), the verified nodes are the ``tokens`` − 1 best by the
    draft's scores (``selection="draft"``, temperature ``draft_temperature``, default
    :data:`DEFAULT_DRAFT_TEMPERATURE`) or by acceptance (``"acceptance"``, a static tree), and τ is the
    SpecInfer/Sequoia sum over that tree. A top-1 tree is the chain: ``acceptance.tau(steps)``. A number as
    ``acceptance`` is an i.i.d. α (:meth:`Acceptance.from_iid`)."""
    steps, topk = positive_int(steps, "steps"), positive_int(topk, "topk")
    positive_int(tokens, "tokens")
    if not hasattr(acceptance, "conditional_at"):
        from sdsl.acceptance.vector import Acceptance

        acceptance = Acceptance.from_iid(float(check_alpha(acceptance, name="acceptance")))
    if topk == 1:
        return float(acceptance.tau(steps))
    cond = acceptance.conditional_at(steps)
    return float(sglang_tree_tau_stack(cond[None, :], steps, topk, tokens, rank_ratio, selection=selection,
                                       draft_temperature=draft_temperature)[0])


def sglang_tree_tau_stack(conditional, steps: int, topk: int, tokens: int, rank_ratio: float | None = None, *,
                          selection: str = "draft", draft_temperature: float | None = None) -> np.ndarray:
    """τ of one SGLang (steps, topk, tokens) tree for each row of a (G, ≥ steps) stack of conditional rates,
    vectorised over the stack: the pool of :func:`sglang_candidates` and the selection of
    :meth:`TokenTree.sglang` (same ordering and ties), and τ summed by :meth:`TokenTree.tau_of_paths` over the
    selected nodes parents-first, so each row is ``TokenTree.sglang(...).tau(P)`` of its own matrices bit for bit."""
    steps, topk, n = int(steps), int(topk), int(tokens) - 1
    cond = np.asarray(check_alpha(conditional, name="conditional acceptance"), dtype=float)
    if cond.ndim != 2 or cond.shape[1] < steps or steps < 1 or topk < 1:
        raise InvalidInputError(f"Need a (stack, >= {steps}) array of conditional rates and steps, topk >= 1.")
    pool_size = topk + (steps - 1) * topk * topk
    if n < 0 or n > pool_size:
        raise InvalidInputError(f"SGLang's tree of {steps} steps and top-{topk} holds 1 to {pool_size + 1} tokens (root "
                                f"included); got {n + 1}.")
    temps = None if draft_temperature is None else np.asarray(draft_temperature, dtype=float)
    if temps is not None and temps.ndim:  # one temperature per row of the stack
        temps = np.repeat(np.broadcast_to(temps, cond.shape[:1]), steps)[:, None]
    P, S = tree_matrices(cond[:, :steps].ravel(), topk, rank_ratio, selection, temps)
    pool = _sglang_pool(P.reshape(-1, steps, topk), S.reshape(-1, steps, topk))
    prob, score = pool["prob"], pool["score"]
    keep = np.sort(np.argsort(-score, axis=1, kind="stable")[:, :n], axis=1)  # the selected nodes, parents first
    return TokenTree.tau_of_paths(np.take_along_axis(prob, keep, 1))


def _top_nodes(prob: np.ndarray, n: int) -> list[int]:
    """Indices of the n most probable pool nodes, parents-first (a child never beats its parent: ties go
    to the earlier, shallower node)."""
    if int(n) != n or n < 0:
        raise InvalidInputError(f"num_draft_tokens must be at least 1 (it counts the root); got {n + 1}.")
    if n > prob.size:
        raise InvalidInputError(f"SGLang's tree holds 1 to {prob.size + 1} tokens (root included) for these steps and "
                                f"topk; got {n + 1}.")
    order = np.argsort(-prob, kind="stable")[: int(n)]
    return sorted(int(i) for i in order)


def sglang_candidates(steps: int, topk: int, P, scores=None) -> dict:
    """Every candidate SGLang's EAGLE drafter scores for (steps, topk): pass 1 takes the root's top-k
    children; each later pass expands the top-k nodes of the previous depth (by cumulative score) into top-k
    children each (SGLang ``select_top_k_tokens``). ``scores`` (depth, rank) are the draft's probabilities
    (default: P). Returns arrays per candidate, parents first: ``prob`` (path acceptance), ``score`` (path
    score), ``parent`` (index or −1) and ``depth``. The verified tree is the num_draft_tokens − 1 candidates
    with the highest score."""
    steps, topk = int(steps), int(topk)
    if steps < 1 or topk < 1:
        raise InvalidInputError(f"SGLang trees need steps >= 1 and topk >= 1; got steps={steps}, topk={topk}.")
    mats = check_rank_acceptance(P, steps)
    smats = mats if scores is None else check_rank_acceptance(scores, steps)
    if topk > min(mats.shape[1], smats.shape[1]):
        raise InvalidInputError(f"topk {topk} needs acceptance for {topk} ranks; got {mats.shape[1]}.")
    pool = _sglang_pool(mats[None, :steps, :topk], smats[None, :steps, :topk])
    return {k: v[0] if k != "depth" else v for k, v in pool.items()}


def _sglang_pool(P: np.ndarray, S: np.ndarray) -> dict:
    """SGLang's candidate pool for each row of (G, steps, topk) stacks of acceptance P and scores S, vectorised
    over the stack: ``prob``, ``score`` and ``parent`` (G, pool), ``depth`` (pool,)."""
    G, steps, topk = P.shape
    prob, score = [P[:, 0, :]], [S[:, 0, :]]
    parent, depth = [np.full((G, topk), -1)], [np.ones(topk, dtype=int)]
    beam, offset = np.broadcast_to(np.arange(topk), (G, topk)), 0
    for d in range(1, steps):
        child = (np.take_along_axis(prob[-1], beam, 1)[:, :, None] * P[:, d, None, :]).reshape(G, topk * topk)
        child_score = (np.take_along_axis(score[-1], beam, 1)[:, :, None] * S[:, d, None, :]).reshape(G, topk * topk)
        parent.append(np.repeat(offset + beam, topk, axis=1))
        offset += prob[-1].shape[1]
        prob.append(child)
        score.append(child_score)
        depth.append(np.full(topk * topk, d + 1))
        beam = np.argsort(-child_score, axis=1, kind="stable")[:, :topk]
    return {"prob": np.concatenate(prob, axis=1), "score": np.concatenate(score, axis=1),
            "parent": np.concatenate(parent, axis=1), "depth": np.concatenate(depth)}


def sglang_pool(steps: int, topk: int, P):
    """(path probability, parent index or −1, depth) of every candidate of :func:`sglang_candidates` scored by
    the acceptance P itself."""
    cand = sglang_candidates(steps, topk, P)
    return cand["prob"], cand["parent"], cand["depth"]
