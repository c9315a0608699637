"""Token trees: their shape, their attention mask, and lossless verification of a drafted tree.

A tree has ``N + 1`` nodes in breadth-first order; node 0 is the root (the last committed token) and
node ``i`` is the ``rank[i]``-th candidate drafted after its parent ``parent[i]``. The target scores the
whole tree in ONE forward: node ``i`` sits in cache slot ``base + i`` at RoPE position ``base +
depth[i]`` and attends to the committed prefix and to its own ancestors (:func:`tree_mask`; SpecInfer,
Miao et al. 2024, §4). After verification the accepted root-to-node path is copied into consecutive
slots (:func:`commit_path`) and the cache is rolled back past it.

Verification (:func:`verify_tree`) walks down from the root. Greedy: the child whose token is the
target's argmax is accepted. Sampling: the children were drafted without replacement from the draft
distribution ``q`` (:func:`sample_without_replacement`); each child ``x`` is accepted with probability
min(1, r(x)/q(x)); after a rejection the residual becomes r ← norm(max(r − q, 0)) and ``x`` is removed
from q (q ← norm(q with x zeroed)) — Sequoia's sampling without replacement (Chen et al. 2024,
Algorithm 2; SpecInfer's multi-step speculative sampling, Miao et al. 2024, Algorithm 2, is the same with
replacement). When no child is accepted the next token is drawn from r. The output distribution equals
the target's; a chain (one child per node) reduces to Leviathan et al.'s Algorithm 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from sdsl.errors import InvalidInputError
from sdsl.torch.sampling import sample

__all__ = ["TokenTree", "tree_mask", "commit_path", "verify_tree", "sample_without_replacement"]


@dataclass(frozen=True)
class TokenTree:
    """A static draft tree: ``parents[i]`` (node 0, the root, has parent -1) and ``ranks[i]`` (which of
    the parent's top candidates node ``i`` is), breadth-first."""

    parents: tuple[int, ...]
    ranks: tuple[int, ...]

    @classmethod
    def chain(cls, gamma: int) -> "TokenTree":
        return cls.from_branching((1,) * gamma)

    @classmethod
    def from_branching(cls, branching) -> "TokenTree":
        """Top-k per depth: every node at depth d-1 gets ``branching[d-1]`` children (its top candidates)."""
        branching = tuple(int(k) for k in branching)
        if not branching or min(branching) < 1:
            raise InvalidInputError("A tree needs at least one depth and every depth at least one child.")
        parents, ranks, level = [-1], [0], [0]
        for k in branching:
            nxt = []
            for parent in level:
                for r in range(k):
                    nxt.append(len(parents))
                    parents.append(parent)
                    ranks.append(r)
            level = nxt
        return cls(tuple(parents), tuple(ranks))

    @classmethod
    def parse(cls, text: str) -> "TokenTree":
        """``"3x2x1"`` → :meth:`from_branching` ((3, 2, 1)); ``"chain4"`` → :meth:`chain` (4)."""
        text = str(text).strip().lower()
        try:
            if text.startswith("chain"):
                return cls.chain(int(text[5:]))
            return cls.from_branching([int(k) for k in text.split("x")])
        except ValueError:
            raise InvalidInputError(f"Tree {text!r} is not 'chainN' or branching per depth like '3x2x1'.") from None

    @property
    def size(self) -> int:
        """Drafted nodes (the root excluded)."""
        return len(self.parents) - 1

    @cached_property
    def depths(self) -> torch.Tensor:
        depth = [0] * len(self.parents)
        for i, p in enumerate(self.parents[1:], start=1):
            depth[i] = depth[p] + 1
        return torch.tensor(depth)

    @cached_property
    def max_depth(self) -> int:
        return int(self.depths.max())

    @cached_property
    def is_chain(self) -> bool:
        return all(p == i for i, p in enumerate(self.parents[1:]))

    @cached_property
    def ancestors(self) -> torch.Tensor:
        """(N+1, N+1) bool: ``ancestors[i, j]`` when node j is node i or one of its ancestors."""
        n = len(self.parents)
        anc = torch.eye(n, dtype=torch.bool)
        for i, p in enumerate(self.parents[1:], start=1):
            anc[i] |= anc[p]
        return anc

    @cached_property
    def children(self) -> torch.Tensor:
        """(N+1, max children) node indices ordered by rank, -1 padded."""
        kids: list[list[int]] = [[] for _ in self.parents]
        for i in sorted(range(1, len(self.parents)), key=lambda i: self.ranks[i]):
            kids[self.parents[i]].append(i)
        width = max(1, max(len(k) for k in kids))
        return torch.tensor([k + [-1] * (width - len(k)) for k in kids])

    def level(self, depth: int) -> torch.Tensor:
        """Node indices at ``depth`` (contiguous in breadth-first order)."""
        return torch.nonzero(self.depths == depth)[:, 0]

    def level_plan(self, depth: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]:
        """(nodes at ``depth``, their distinct parents, each node's index among those parents, its rank, its
        parent, the widest sibling group), built once per depth and reused every step."""
        plans = self.__dict__.setdefault("_plans", {})
        if depth not in plans:
            nodes = self.level(depth)
            parents = torch.tensor(self.parents)[nodes]
            unique, slot = torch.unique(parents, return_inverse=True)
            ranks = torch.tensor(self.ranks)[nodes]
            plans[depth] = (nodes, unique, slot, ranks, parents, int(ranks.max()) + 1)
        return plans[depth]

    def describe(self) -> str:
        widths = [int((self.depths == d).sum()) for d in range(1, self.max_depth + 1)]
        return "chain" + str(self.size) if self.is_chain else "tree(" + "+".join(map(str, widths)) + ")"


def tree_mask(tree: TokenTree, prefix: torch.Tensor, nodes: torch.Tensor, first_node: int, kv_len: int) -> torch.Tensor:
    """(B, len(nodes), kv_len) bool: query node ``nodes[j]`` sees slots < ``prefix`` and its ancestors.

    Node ``i >= first_node`` lives in slot ``prefix + i - first_node`` (the target holds the root at
    ``first_node = 0``; a draft that already cached the root uses ``first_node = 1``).
    """
    keys = torch.arange(kv_len)
    node_of_key = keys[None, :] - prefix[:, None] + first_node  # (B, kv_len)
    in_tree = (node_of_key >= first_node) & (node_of_key < len(tree.parents))
    anc = tree.ancestors[nodes]  # (q, N+1)
    seen = anc[:, node_of_key.clamp(0, len(tree.parents) - 1)].permute(1, 0, 2)  # (B, q, kv_len)
    return (keys[None, None, :] < prefix[:, None, None]) | (seen & in_tree[:, None, :])


def commit_path(cache, path: torch.Tensor, accepted: torch.Tensor, base: torch.Tensor, first_node: int,
                written_depth: int) -> None:
    """Move the accepted path's K/V into consecutive slots after the root, then roll back the rest.

    ``path`` (B, D+1) holds the node at each depth along the accepted path (column 0 the root);
    ``accepted`` (B,) how many drafted nodes were kept; ``base`` (B,) the slot of node ``first_node``;
    only nodes with depth < ``written_depth`` were written to this cache.
    """
    depth = torch.arange(1, path.shape[1])
    keep = (depth[None, :] <= accepted[:, None]) & (depth[None, :] < written_depth)
    source = base[:, None] + path[:, 1:] - first_node
    destination = base[:, None] + depth[None, :] - first_node
    source = torch.where(keep, source, destination)  # columns not kept copy onto themselves
    if bool((source != destination).any()):
        cache.move(source, destination)
    cache.set_lengths(base + 1 - first_node + torch.minimum(accepted, torch.tensor(written_depth - 1)))


def sample_without_replacement(probs: torch.Tensor, k: int, gen: torch.Generator | None) -> torch.Tensor:
    """k distinct draws per row, in draw order (Gumbel-top-k; Kool et al. 2019). Ties past the support
    (zero-probability tokens) come last."""
    u = torch.rand(probs.shape, generator=gen).clamp_min(1e-20)
    keys = probs.log() - (-u.log()).log()
    return keys.topk(k, dim=-1).indices


def verify_tree(tree: TokenTree, target_probs: torch.Tensor, draft_probs: torch.Tensor | None, tokens: torch.Tensor,
                greedy: bool, gen: torch.Generator | None = None, broken: bool = False):
    """Walk the tree; return (path (B, D+1) node per depth, accepted count (B,), next token (B,)).

    target_probs (B, N+1, V): the target's distribution after each node; draft_probs (B, N+1, V) the
    draft's after each node (None: greedy); tokens (B, N+1) the tree's tokens (column 0 the root).
    ``broken`` forgets to remove rejected candidates from q and the residual — a deliberately wrong rule
    that the statistical test must catch.
    """
    batch = tokens.shape[0]
    rows = torch.arange(batch)
    current = torch.zeros(batch, dtype=torch.long)
    alive = torch.ones(batch, dtype=torch.bool)
    path = torch.zeros(batch, tree.max_depth + 1, dtype=torch.long)
    residual = target_probs[:, 0].clone()
    for depth in range(1, tree.max_depth + 1):
        if not bool(alive.any()):  # every sequence has rejected: the deeper levels change nothing
            break
        kids = tree.children[current]  # (B, K)
        chosen = torch.full((batch,), -1, dtype=torch.long)
        if greedy:
            best = target_probs[rows, current].argmax(-1)
            match = (kids >= 0) & (tokens[rows[:, None], kids.clamp_min(0)] == best[:, None])
            chosen = torch.where(match.any(1), kids.gather(1, match.long().argmax(1, keepdim=True))[:, 0], -1)
        else:
            chosen, residual = _sample_children(kids, residual, draft_probs[rows, current].clone(), tokens, alive,
                                                gen, broken)
        alive = alive & (chosen >= 0)
        current = torch.where(alive, chosen, current)
        path[:, depth] = torch.where(alive, chosen, 0)
        if not greedy:  # the next node's residual starts as its target distribution
            residual = torch.where(alive[:, None], target_probs[rows, current], residual)
    accepted = (path[:, 1:] > 0).long().cumprod(1).sum(1)
    if greedy:
        return path, accepted, target_probs[rows, current].argmax(-1)
    return path, accepted, sample(residual, gen)


def _sample_children(kids, residual, q, tokens, alive, gen, broken):
    """Try the node's children in draw order (Sequoia Algorithm 2); return (accepted child or -1, residual)."""
    batch = kids.shape[0]
    rows = torch.arange(batch)
    chosen = torch.full((batch,), -1, dtype=torch.long)
    for r in range(kids.shape[1]):
        child = kids[:, r]
        x = tokens[rows, child.clamp_min(0)]
        qx, rx = q[rows, x], residual[rows, x]
        trying = alive & (chosen < 0) & (child >= 0) & (qx > 0)
        if not bool(trying.any()):  # every sequence accepted an earlier sibling (or has none left)
            break
        accept = trying & (torch.rand(batch, generator=gen) * qx < rx)
        chosen = torch.where(accept, child, chosen)
        reject = (trying & ~accept)[:, None]
        if broken or not bool(reject.any()):
            continue
        new_residual = (residual - q).clamp_min(0)
        mass = new_residual.sum(-1, keepdim=True)
        new_residual = torch.where(mass > 0, new_residual / mass.clamp_min(1e-30), residual)
        residual = torch.where(reject, new_residual, residual)
        q_without = q.scatter(1, x[:, None], 0.0)
        q_mass = q_without.sum(-1, keepdim=True)
        q = torch.where(reject & (q_mass > 0), q_without / q_mass.clamp_min(1e-30), q)
    return chosen, residual
