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

from sdsl.acceptance.trees import TokenTree
from sdsl.errors import InvalidInputError
from sdsl.torch.sampling import sample

__all__ = ["TreeLayout", "tree_mask", "commit_path", "verify_tree", "sample_without_replacement"]


@dataclass(frozen=True)
class TreeLayout:
    """A token tree (:class:`sdsl.acceptance.trees.TokenTree`, the one tree type sdsl prices) laid out for the
    reference decoder: ``parents[i]`` with node 0 the root (parent -1) and ``ranks[i]`` (which of the parent's top
    candidates node ``i`` is), breadth-first, and the index tensors the decoder runs on."""

    tree: TokenTree

    @cached_property
    def parents(self) -> tuple[int, ...]:
        return (-1, *(p + 1 for p in self.tree.parents))

    @cached_property
    def ranks(self) -> tuple[int, ...]:
        return (0, *(int(r) for r in self.tree.ranks))

    @staticmethod
    def _branching(branching) -> tuple[int, ...]:
        branching = tuple(int(k) for k in branching)
        if not branching or min(branching) < 1:
            raise InvalidInputError("A tree needs at least one depth and every depth at least one child.")
        return branching

    @classmethod
    def chain(cls, gamma: int) -> "TreeLayout":
        return cls.from_branching((1,) * gamma)

    @classmethod
    def from_branching(cls, branching) -> "TreeLayout":
        """Top-k per depth: every node at depth d-1 gets ``branching[d-1]`` children (its top candidates)."""
        return cls(TokenTree.from_branching(cls._branching(branching)))

    @classmethod
    def spine(cls, branching) -> "TreeLayout":
        """:meth:`sdsl.acceptance.trees.TokenTree.spine`: a chain of rank-0 candidates with ``branching[d-1]``
        candidates at depth d, the rank-1.. ones leaves."""
        return cls(TokenTree.spine(cls._branching(branching)))

    @classmethod
    def parse(cls, text: str) -> "TreeLayout":
        """``"3x2x1"`` → :meth:`from_branching` ((3, 2, 1)); ``"chain4"`` → :meth:`chain` (4);
        ``"spine3x2x1"`` → :meth:`spine` ((3, 2, 1))."""
        text = str(text).strip().lower()
        try:
            if text.startswith("chain"):
                return cls.chain(int(text[5:]))
            if text.startswith("spine"):
                return cls.spine([int(k) for k in text[5:].split("x")])
            return cls.from_branching([int(k) for k in text.split("x")])
        except ValueError:
            raise InvalidInputError(f"Tree {text!r} is not 'chainN', 'spine3x2x1' or branching per depth like "
                                    "'3x2x1'.") from None

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

    @cached_property
    def draft_slots(self) -> torch.Tensor:
        """(N+1,) where a drafter caches each node, counted from the root's slot: the root 0, the nodes with
        children 1, 2, ... depth by depth (the order a drafter runs them in), leaves -1 (never run)."""
        inner = set(self.parents[1:]) - {0}
        depths = self.depths.tolist()
        slots = [-1] * len(self.parents)
        slots[0] = 0
        for slot, i in enumerate(sorted(inner, key=lambda i: (depths[i], i)), start=1):
            slots[i] = slot
        return torch.tensor(slots)

    @cached_property
    def level_slots(self) -> torch.Tensor:
        """(N+1,) each node's place when every node is run depth by depth (breadth-first order itself for
        the trees :meth:`from_branching` builds)."""
        order = sorted(range(len(self.parents)), key=lambda i: (int(self.depths[i]), i))
        slots = [0] * len(order)
        for place, i in enumerate(order):
            slots[i] = place
        return torch.tensor(slots)

    @cached_property
    def target_slots(self) -> torch.Tensor:
        """(N+1,) the target scores every node: node i sits i slots after the root."""
        return torch.arange(len(self.parents))

    @cached_property
    def child_lists(self) -> tuple[tuple[int, ...], ...]:
        """:attr:`children` as Python tuples (the batch-1 tree walk reads them without tensor ops)."""
        return tuple(tuple(k for k in row if k >= 0) for row in self.children.tolist())

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

    def expand_plan(self, depth: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(the nodes at ``depth`` that have children — the ones a drafter runs —, their parents)."""
        plans = self.__dict__.setdefault("_expand", {})
        if depth not in plans:
            nodes = self.level(depth)
            nodes = nodes[self.draft_slots[nodes] >= 0]
            plans[depth] = (nodes, torch.tensor(self.parents)[nodes])
        return plans[depth]

    @cached_property
    def drafts_chain(self) -> bool:
        """Whether the nodes a drafter runs form one chain (a chain, or a :meth:`spine` tree): it then
        drafts with plain causal attention, as for a chain."""
        return all(len(self.expand_plan(d)[0]) == 1 for d in range(1, self.max_depth))

    def describe(self) -> str:
        widths = [int((self.depths == d).sum()) for d in range(1, self.max_depth + 1)]
        return "chain" + str(self.size) if self.is_chain else "tree(" + "+".join(map(str, widths)) + ")"


def tree_mask(tree: TreeLayout, root: torch.Tensor, nodes: torch.Tensor, slots: torch.Tensor,
              kv_len: int) -> torch.Tensor:
    """(B, len(nodes), kv_len) bool: query node ``nodes[j]`` sees the slots before ``root`` (B,) and its
    ancestors (itself and the root included).

    ``slots`` (N+1,) places the tree in the cache: node ``i`` with ``slots[i] >= 0`` lives in slot
    ``root + slots[i]`` (:attr:`TreeLayout.target_slots` for the target, :attr:`TreeLayout.draft_slots` for a
    drafter that runs no leaf; :attr:`TreeLayout.level_slots` for a cache that holds every node, depth by
    depth). When every
    sequence has the same root slot (always at batch 1) the mask is a window of one (q, 2·pad + W)
    template built once, broadcast over the batch.
    """
    templates = tree.__dict__.setdefault("_mask_templates", {})
    key = (tuple(nodes.tolist()), tuple(slots.tolist()))
    if key not in templates or templates[key][0] < kv_len:  # built once per tree, nodes and slots
        written = torch.nonzero(slots >= 0)[:, 0]
        block = tree.ancestors[nodes][:, written[slots[written].argsort()]]  # (q, W): what each query sees
        pad = max(2 * kv_len, 256)
        template = torch.cat([torch.ones(len(nodes), pad, dtype=torch.bool), block,
                              torch.zeros(len(nodes), pad, dtype=torch.bool)], 1)
        templates[key] = (pad, template, block)
    pad, template, block = templates[key]
    low = int(root.min())
    if root.shape[0] == 1 or low == int(root.max()):  # a window of the template: ones, the block, zeros
        return template[:, pad - low:pad - low + kv_len].expand(root.shape[0], -1, -1)
    keys = torch.arange(kv_len)
    relative = keys[None, :] - root[:, None]  # (B, kv_len)
    in_tree = (relative >= 0) & (relative < block.shape[1])
    seen = block[:, relative.clamp(0, block.shape[1] - 1)].permute(1, 0, 2)  # (B, q, kv_len)
    return (relative < 0)[:, None, :] | (seen & in_tree[:, None, :])


def commit_path(cache, path: torch.Tensor, accepted: torch.Tensor, root: torch.Tensor, slots: torch.Tensor) -> None:
    """Move the accepted path's K/V into consecutive slots after the root, then roll back the rest.

    ``path`` (B, D+1) holds the node at each depth along the accepted path (column 0 the root);
    ``accepted`` (B,) how many drafted nodes were kept; ``root`` (B,) the root's slot; ``slots`` (N+1,)
    each node's slot after the root (-1: never written to this cache, a drafter's leaves). The cache keeps
    the accepted nodes that it holds (an unwritten leaf ends the path: its ancestors are all written).
    """
    if path.shape[0] == 1:  # one sequence: the same moves, worked out on Python ints
        slot = slots[path[0, 1:1 + int(accepted[0])]].tolist()
        kept = [(d, s) for d, s in enumerate(slot, start=1) if s >= 0]
        moved = [(d, s) for d, s in kept if s != d]
        if moved:
            cache.move(root[:, None] + torch.tensor([[s for _, s in moved]]), root[:, None] + torch.tensor([[d for d, _ in moved]]))
        cache.set_lengths(root + 1 + len(kept))
        return
    depth = torch.arange(1, path.shape[1])
    slot = slots[path[:, 1:]]
    keep = (depth[None, :] <= accepted[:, None]) & (slot >= 0)
    destination = root[:, None] + depth[None, :]
    source = torch.where(keep, root[:, None] + slot, destination)  # columns not kept copy onto themselves
    if bool((source != destination).any()):
        cache.move(source, destination)
    cache.set_lengths(root + 1 + keep.sum(1))


def sample_without_replacement(probs: torch.Tensor, k: int, gen: torch.Generator | None) -> torch.Tensor:
    """k distinct draws per row, in draw order (Gumbel-top-k; Kool et al. 2019). Ties past the support
    (zero-probability tokens) come last."""
    u = torch.rand(probs.shape, generator=gen).clamp_min(1e-20)
    keys = probs.log() - (-u.log()).log()
    return keys.topk(k, dim=-1).indices


def verify_tree(tree: TreeLayout, target_probs: torch.Tensor, draft_probs: torch.Tensor | None, tokens: torch.Tensor,
                greedy: bool, gen: torch.Generator | None = None, broken: bool = False):
    """Walk the tree; return (path (B, D+1) node per depth, accepted count (B,), next token (B,)).

    target_probs (B, N+1, V): the target's distribution after each node; draft_probs (B, N+1, V) the
    draft's after each node (None: greedy); tokens (B, N+1) the tree's tokens (column 0 the root).
    ``broken`` forgets to remove rejected candidates from q and the residual — a deliberately wrong rule
    that the statistical test must catch. One sequence takes :func:`_walk_one` (the same rule, the same
    draws and the same arithmetic, with the walk's control flow in Python instead of masks).
    """
    walk = _walk_one if tokens.shape[0] == 1 else _walk_batch
    return walk(tree, target_probs, draft_probs, tokens, greedy, gen, broken)


def _walk_batch(tree, target_probs, draft_probs, tokens, greedy, gen, broken):
    """:func:`verify_tree` for a batch: every sequence walks one depth per iteration, with masks."""
    batch = tokens.shape[0]
    rows = torch.arange(batch)
    current = torch.zeros(batch, dtype=torch.long)
    alive = torch.ones(batch, dtype=torch.bool)
    path = torch.zeros(batch, tree.max_depth + 1, dtype=torch.long)
    residual = target_probs[:, 0]
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
            chosen, residual = _sample_children(kids, residual, draft_probs[rows, current], tokens, alive, gen, broken)
        alive = alive & (chosen >= 0)
        current = torch.where(alive, chosen, current)
        path[:, depth] = torch.where(alive, chosen, 0)
        if not greedy:  # the next node's residual starts as its target distribution
            residual = torch.where(alive[:, None], target_probs[rows, current], residual)
    accepted = (path[:, 1:] > 0).long().cumprod(1).sum(1)
    if greedy:
        return path, accepted, target_probs[rows, current].argmax(-1)
    return path, accepted, sample(residual, gen)


def _walk_one(tree, target_probs, draft_probs, tokens, greedy, gen, broken):
    """:func:`verify_tree` for one sequence: children tried in rank order, one uniform per tried child."""
    toks, node, nodes = tokens[0].tolist(), 0, [0]
    residual = target_probs[:, 0]  # (1, V) views; every update below is out of place
    while tree.child_lists[node]:
        chosen = -1
        if greedy:
            best = int(target_probs[0, node].argmax())
            chosen = next((c for c in tree.child_lists[node] if toks[c] == best), -1)
        else:
            q = draft_probs[:, node]
            for child in tree.child_lists[node]:
                x = toks[child]
                qx = q[:, x]
                if not bool(qx > 0):
                    break
                if bool(torch.rand(1, generator=gen) * qx < residual[:, x]):
                    chosen = child
                    break
                if broken:
                    continue
                new_residual = (residual - q).clamp_min(0)
                mass = new_residual.sum(-1, keepdim=True)
                residual = new_residual / mass if bool(mass > 0) else residual
                q_without = q.scatter(1, tokens.new_tensor([[x]]), 0.0)
                q_mass = q_without.sum(-1, keepdim=True)
                q = q_without / q_mass if bool(q_mass > 0) else q
        if chosen < 0:
            break
        node = chosen
        nodes.append(node)
        residual = target_probs[:, node]
    path = torch.zeros(1, tree.max_depth + 1, dtype=torch.long)
    path[0, :len(nodes)] = torch.tensor(nodes)
    accepted = torch.tensor([len(nodes) - 1])
    if greedy:
        return path, accepted, target_probs[:, node].argmax(-1)
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
