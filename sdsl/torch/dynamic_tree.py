"""Dynamic spine trees: the rank-0 chain of a fixed depth, with a rank-1 side leaf only where the draft is
unsure (EAGLE-2, Li et al. 2024, arXiv 2406.16858, §4: a context-aware dynamic draft tree, grown where the
draft's confidence says a node is likely to be accepted).

A static :meth:`~sdsl.torch.tree.TreeLayout.spine` tree puts its side leaves at fixed depths. With a draft
that accepts ~0.88 per position a leaf is needed only when the spine's candidate at its depth is rejected,
so on average it adds little τ for one more verified token. :class:`DynamicSpine` drafts the rank-0 chain
(one drafter forward per depth, as a chain) and, at each depth d, adds the parent's rank-1 candidate as a
leaf only when the draft is unsure there:

* rule ``"top1"`` (``"dspine6@0.7"``): when the draft's top-1 probability at the parent, max q_{d-1},
  is below the threshold (the leaf is then needed far more often than on average);
* rule ``"value"`` (``"vspine6@0.05"``): when the leaf's EAGLE-2 value — the product of the draft's
  probabilities of the spine tokens above it times its own, Π_{j<d} q_{j-1}(x_j) · q_{d-1}(y_d)
  (Li et al. 2024, §4.1, Eq. for V_i) — is at least the threshold.

Steps where no depth qualifies verify a plain chain (no tree mask, no tree walk). The shape is a function
of the draft's distributions only (never of the target's), decided before verification, so Sequoia's
sampling-without-replacement verification stays lossless for each drafted shape (Chen et al. 2024,
Algorithm 2); at batch > 1 a depth gets its leaf when any sequence asks for one (one shape per step).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import torch

from sdsl.errors import InvalidInputError
from sdsl.torch.proposers import Draft, _distribution
from sdsl.torch.tree import TreeLayout, sample_without_replacement

__all__ = ["DynamicSpine", "parse_tree"]

RULES = {"dspine": "top1", "vspine": "value"}


@dataclass(frozen=True)
class DynamicSpine:
    """A rank-0 chain of ``depth`` with a rank-1 leaf at the depths where ``rule`` (``"top1"``: top-1
    probability below ``threshold``; ``"value"``: EAGLE-2 value at least ``threshold``) asks for one."""

    depth: int
    threshold: float
    rule: str = "top1"
    _shapes: dict = field(default_factory=dict, repr=False, compare=False)
    stats: dict = field(default_factory=lambda: {"steps": 0, "leaves": 0}, repr=False, compare=False)

    def __post_init__(self):
        if self.depth < 1 or not 0.0 <= self.threshold <= 1.0 or self.rule not in RULES.values():
            raise InvalidInputError(f"A dynamic spine needs depth >= 1, a threshold in [0, 1] and a rule in "
                                    f"{sorted(RULES.values())}; got {self.depth}, {self.threshold}, {self.rule!r}.")

    @classmethod
    def parse(cls, text: str) -> "DynamicSpine":
        """``"dspine6@0.7"`` (top-1 rule) or ``"vspine6@0.05"`` (EAGLE-2 value rule)."""
        text = str(text).strip().lower()
        try:
            depth, threshold = text[6:].split("@")
            return cls(int(depth), float(threshold), RULES[text[:6]])
        except (KeyError, ValueError):
            raise InvalidInputError(f"Dynamic spine {text!r} is not like 'dspine6@0.7' or 'vspine6@0.05'.") from None

    # What generate() reads before any step: the largest shape (a leaf at every depth) bounds the buffers.
    @cached_property
    def chain(self) -> TreeLayout:
        return TreeLayout.chain(self.depth)

    @property
    def size(self) -> int:
        return 2 * self.depth

    @property
    def max_depth(self) -> int:
        return self.depth

    is_chain = False
    drafts_chain = True  # the drafter runs the spine only: plain causal attention, as for a chain

    def expand_plan(self, depth: int):
        return self.chain.expand_plan(depth)

    def describe(self) -> str:
        return f"{'dspine' if self.rule == 'top1' else 'vspine'}{self.depth}@{self.threshold:g}"

    def shape(self, leaf_depths: tuple[int, ...]) -> TreeLayout:
        """The spine with a rank-1 leaf at each of ``leaf_depths`` (built once per set, reused)."""
        if leaf_depths not in self._shapes:
            self._shapes[leaf_depths] = TreeLayout.spine([2 if d in leaf_depths else 1
                                                         for d in range(1, self.depth + 1)])
        return self._shapes[leaf_depths]

    def wants_leaf(self, parent_q: torch.Tensor, candidates: torch.Tensor, value: torch.Tensor) -> bool:
        """Whether depth d gets its leaf: ``parent_q`` (B, V) the draft's distribution at the parent,
        ``candidates`` (B, 2) its rank-0 and rank-1 candidates, ``value`` (B,) Π q(spine token) above."""
        if self.rule == "top1":
            return bool((parent_q.max(-1).values < self.threshold).any())
        leaf_q = parent_q.gather(1, candidates[:, 1:2])[:, 0]
        return bool((value * leaf_q >= self.threshold).any())

    def grow(self, root: torch.Tensor, root_logits: torch.Tensor, expand, sampling) -> Draft:
        """Draft the spine depth by depth (``expand`` as in :func:`sdsl.torch.proposers.grow_tree`), keep
        each parent's rank-1 candidate, and return the :class:`Draft` of the chosen shape (``Draft.tree``)."""
        batch, vocab = root_logits.shape
        tokens = torch.zeros(batch, self.depth + 1, dtype=torch.long)
        tokens[:, 0] = root
        probs = torch.zeros(batch, self.size + 1, vocab)
        probs[:, 0] = _distribution(root_logits, sampling)
        value, leaves = torch.ones(batch), []
        for depth in range(1, self.depth + 1):
            parent = probs[:, depth - 1]
            # greedy drafting ranks by logits; the rules read the draft's distribution (softmax of them)
            q = parent.softmax(-1) if sampling.greedy else parent
            candidates = (parent.topk(2, dim=-1).indices if sampling.greedy
                          else sample_without_replacement(parent, 2, sampling.generator))
            tokens[:, depth] = candidates[:, 0]
            if self.wants_leaf(q, candidates, value):
                leaves.append((depth, candidates[:, 1]))
            value = value * q.gather(1, candidates[:, :1])[:, 0]
            if depth < self.depth:
                node = torch.tensor([depth])
                probs[:, node] = _distribution(expand(node, tokens[:, node], depth), sampling)
        tree = self.shape(tuple(d for d, _ in leaves))
        self.stats["steps"] += 1  # drafted shapes, for reports: leaves per step, steps that verify a tree
        self.stats["leaves"] += len(leaves)
        self.stats["tree_steps"] = self.stats.get("tree_steps", 0) + bool(leaves)
        if leaves:
            tokens = torch.cat([tokens, torch.stack([t for _, t in leaves], 1)], 1)
        return Draft(tokens=tokens, probs=probs[:, :tree.size + 1], tree=tree)


def parse_tree(text: str):
    """A :class:`TreeLayout` (``"chain4"``, ``"3x2x1"``, ``"spine3x1"``) or a :class:`DynamicSpine`
    (``"dspine6@0.7"``, ``"vspine6@0.05"``) from its name."""
    text = str(text).strip().lower()
    if text[:6] in RULES:
        return DynamicSpine.parse(text)
    return TreeLayout.parse(text)
