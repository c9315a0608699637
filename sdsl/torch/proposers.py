"""Proposers for :mod:`sdsl.torch.decoder`: a draft model and prompt lookup (the EAGLE-style head is in
:mod:`sdsl.torch.head`).

A proposer ``prefill``s on the prompts, ``propose``s a :class:`Draft` (a token tree whose node 0 is the
last committed token; a chain is the one-child-per-node tree) and, after verification, ``commit``s the
:class:`StepOutcome` to its own cache. Children of a node are its top candidates (greedy) or draws
without replacement from its distribution (sampling), as tree verification requires
(:func:`sdsl.torch.tree.verify_tree`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sdsl.errors import InvalidInputError
from sdsl.torch.sampling import logits_to_probs
from sdsl.torch.tree import TreeLayout, commit_path, sample_without_replacement, tree_mask

__all__ = ["Draft", "StepOutcome", "grow_tree", "DraftModel", "PromptLookup"]


@dataclass
class Draft:
    """``tokens`` (B, N+1), node 0 the root; ``probs`` (B, N+1, V) the draft distribution after each node
    (rows of leaves unused; greedy drafting stores the ranking logits instead), or None for deterministic drafts;
    ``tree`` the shape drafted this step when the proposer chose it (a dynamic tree), else None (the step's tree)."""

    tokens: torch.Tensor
    probs: torch.Tensor | None
    tree: TreeLayout | None = None


@dataclass
class StepOutcome:
    """What verification decided, for the proposer's own cache: the accepted ``path`` (B, D+1) of node
    indices, the ``accepted`` count, the ``next_token``, each sequence's ``lengths`` before the step,
    which sequences were ``active``, the tree's ``tokens`` and the target's ``features`` (or None)."""

    path: torch.Tensor
    accepted: torch.Tensor
    next_token: torch.Tensor
    lengths: torch.Tensor
    active: torch.Tensor
    tokens: torch.Tensor
    features: torch.Tensor | None


def _distribution(logits: torch.Tensor, sampling) -> torch.Tensor:
    """Greedy trees rank children by the draft's logits (greedy verification never reads q); sampling
    draws from the draft's filtered distribution."""
    if sampling.greedy:
        return logits.float()
    return logits_to_probs(logits, sampling.temperature, sampling.top_p)


def grow_tree(tree: TreeLayout, root: torch.Tensor, root_logits: torch.Tensor, expand, sampling,
              skip_leaves: bool = False) -> Draft:
    """Fill ``tree`` depth by depth: children of each node are its top candidates (greedy) or draws
    without replacement; ``expand(nodes, tokens, depth)`` returns the draft's logits after those nodes
    (with ``skip_leaves`` only the nodes with children, :meth:`TreeLayout.expand_plan`: a leaf's
    distribution is never needed; without, every node above the last depth). A dynamic tree
    (:class:`sdsl.torch.dynamic_tree.DynamicSpine`) grows itself and names the shape it chose."""
    if hasattr(tree, "grow"):
        return tree.grow(root, root_logits, expand, sampling)
    batch, vocab = root_logits.shape
    tokens = torch.zeros(batch, tree.size + 1, dtype=torch.long)
    tokens[:, 0] = root
    probs = torch.zeros(batch, tree.size + 1, vocab)
    probs[:, 0] = _distribution(root_logits, sampling)
    for depth in range(1, tree.max_depth + 1):
        nodes, parents, slot, ranks, _, width = tree.level_plan(depth)
        parent_probs = probs[:, parents]
        if sampling.greedy:
            candidates = parent_probs.topk(width, dim=-1).indices
        else:
            candidates = sample_without_replacement(parent_probs, width, sampling.generator)
        tokens[:, nodes] = candidates[:, slot, ranks]
        if depth < tree.max_depth:
            inner = tree.expand_plan(depth)[0] if skip_leaves else nodes
            probs[:, inner] = _distribution(expand(inner, tokens[:, inner], depth), sampling)
    return Draft(tokens=tokens, probs=probs)


class DraftModel:
    """Proposer backed by a small reference model with its own KV cache.

    The cache holds the committed tokens the draft has seen; each step first feeds the ones it has not
    (one or two after a chain step) and then one forward per tree depth.
    """

    needs_features = False

    def __init__(self, model, name: str = "draft"):
        self.model, self.name = model, name

    def prefill(self, prompts: torch.Tensor, capacity: int) -> None:
        self.cache = self.model.new_cache(prompts.shape[0], capacity)
        self.model(prompts[:, :-1], self.cache)  # the root (last prompt token) is fed at step 1

    def propose(self, seq: torch.Tensor, lengths: torch.Tensor, tree: TreeLayout, sampling) -> Draft:
        rows = torch.arange(seq.shape[0])
        unseen = lengths - self.cache.lengths
        width = int(unseen.max())
        index = torch.minimum(self.cache.lengths[:, None] + torch.arange(width), (lengths - 1)[:, None])
        root_logits = self.model(seq[rows[:, None], index], self.cache)[rows, unseen - 1]
        self.cache.set_lengths(lengths)

        def expand(nodes, tokens, depth):
            if tree.drafts_chain:  # one node per depth, in consecutive slots: plain causal attention
                return self.model(tokens, self.cache)
            kv_len = int(self.cache.lengths.max()) + len(nodes)
            mask = tree_mask(tree, lengths - 1, nodes, tree.draft_slots, kv_len)
            return self.model(tokens, self.cache, positions=(lengths - 1)[:, None] + depth, mask=mask)

        draft = grow_tree(tree, seq[rows, lengths - 1], root_logits, expand, sampling, skip_leaves=True)
        self.tree = draft.tree or tree  # the shape the outcome's path indexes
        return draft

    def commit(self, outcome: StepOutcome) -> None:
        commit_path(self.cache, outcome.path, outcome.accepted, outcome.lengths - 1, self.tree.draft_slots)
        self.cache.set_lengths(torch.where(outcome.active, self.cache.lengths, outcome.lengths - 1))


class PromptLookup:
    """Model-free proposer: copy what followed the latest earlier match of the trailing n-gram.

    Tries n-gram sizes ``max_ngram`` … ``min_ngram``; with no match (or a short continuation) the
    missing drafts repeat the last token. Drafts are deterministic (q one-hot); chains only.
    """

    name = "prompt-lookup"
    needs_features = False

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1):
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def prefill(self, prompts: torch.Tensor, capacity: int) -> None:
        pass

    def _one(self, s: np.ndarray, gamma: int) -> list[int]:
        n = len(s)
        for k in range(self.max_ngram, self.min_ngram - 1, -1):
            if n <= k:
                continue
            windows = np.lib.stride_tricks.sliding_window_view(s[:-1], k)  # windows ending before the last token
            hits = np.flatnonzero((windows == s[-k:]).all(1))
            if hits.size:
                start = hits[-1] + k
                continuation = s[start:start + gamma].tolist()
                return continuation + [int(s[-1])] * (gamma - len(continuation))
        return [int(s[-1])] * gamma

    def propose(self, seq: torch.Tensor, lengths: torch.Tensor, tree: TreeLayout, sampling) -> Draft:
        if not tree.is_chain:
            raise InvalidInputError("Prompt lookup drafts chains only.")
        arr = seq.numpy()
        drafts = [[int(arr[b, int(lengths[b]) - 1])] + self._one(arr[b, :int(lengths[b])], tree.size)
                  for b in range(arr.shape[0])]
        return Draft(tokens=torch.tensor(drafts, dtype=torch.long).reshape(len(drafts), tree.size + 1), probs=None)

    def commit(self, outcome: StepOutcome) -> None:
        pass
