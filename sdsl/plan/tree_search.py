"""Searching token trees: Sequoia's dynamic program and the grid of SGLang (steps, topk, tokens) triples.
Summary of docs/model.md §3.5.

- :func:`best_tree`: the tree of at most n draft tokens and depth ≤ D with the largest expected accepted
  length under per-depth/per-rank acceptance P (Sequoia, Chen et al. 2024, §3.1, the dynamic program
  over subtree sizes; here with depth-dependent rows). One run gives the best τ for every size ≤ n,
  so a caller can price each size's verify cost and pick the fastest.
- :func:`sglang_grid`: τ of every SGLang-style triple, one sort per (steps, topk) pair since the
  verified tree is the num_draft_tokens − 1 best-scored candidates (:func:`sdsl.acceptance.trees.sglang_candidates`:
  by the draft's scores for a dynamic tree, by acceptance when no scores are given).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdsl._result import Result
from sdsl.acceptance.trees import TokenTree, check_rank_acceptance, sglang_candidates
from sdsl.errors import InvalidInputError

__all__ = ["BestTree", "best_tree", "sglang_grid", "SGLangGrid"]


@dataclass(frozen=True)
class BestTree(Result):
    """Sequoia's optimum: the tree at ``max_nodes`` and τ of the best tree of every size 0..max_nodes."""

    tree: TokenTree
    tau: float
    tau_by_size: np.ndarray  # best τ with at most n draft tokens, n = 0..max_nodes
    max_depth: int

    def to_dict(self) -> dict:
        return {"tau": self.tau, "max_depth": self.max_depth, "tau_by_size": self.tau_by_size.tolist(),
                "tree": self.tree.to_dict()}

    def plot(self, ax=None):
        """τ of the best tree at every size up to this one."""
        from sdsl.plots.results import plot_tau_by_tree_size

        return plot_tau_by_tree_size(self.tau_by_size, ax, f"best tree up to {self.tree.size} tokens, depth ≤ {self.max_depth}")

    def report(self) -> str:
        t = self.tree
        return (f"best tree: {t.size} draft tokens, depth {t.depth}, width {t.width}, tau {self.tau:.3f} "
                f"(verify {t.verify_tokens} tokens, draft passes {t.depth})")


def _sizes_and_depth(max_nodes, max_depth) -> tuple[int, int]:
    n, d = int(max_nodes), int(max_depth)
    if n != max_nodes or n < 0 or n > 1024:
        raise InvalidInputError(f"max_nodes must be a whole number in [0, 1024]; got {max_nodes}.")
    if d != max_depth or d < 1:
        raise InvalidInputError(f"max_depth must be a positive whole number; got {max_depth}.")
    return n, min(d, max(n, 1))


def _rank_step(p: float, G_next: np.ndarray, H_next: np.ndarray):
    """One rank of the DP: H[n] = max(0, max_{1≤s≤n} p·(1 + G_next[s−1]) + H_next[n−s]) and the argmax s
    (0 = stop: no sibling of this or a lower rank)."""
    N = G_next.size - 1
    val = p * (1.0 + G_next)  # a child subtree of s nodes is worth p·(1 + G_next[s − 1])
    n = np.arange(N + 1)[:, None]
    s = np.arange(1, N + 1)[None, :]
    cand = np.where(s <= n, val[s - 1] + H_next[np.maximum(n - s, 0)], -np.inf)
    best_s = np.argmax(cand, axis=1) + 1 if N else np.zeros(1, dtype=int)
    best = cand[np.arange(N + 1), best_s - 1] if N else np.zeros(1)
    use = best > 0.0
    return np.where(use, best, 0.0), np.where(use, best_s, 0)


def best_tree(P, max_nodes: int, max_depth: int = 16) -> BestTree:
    """Sequoia's dynamic program: the tree of at most ``max_nodes`` draft tokens and depth ≤ ``max_depth``
    maximising τ = 1 + Σ_nodes P(path accepted), for per-rank acceptance ``P`` (a rank vector, or a
    (depth, rank) matrix). G_j[n] = best Σ below a node at depth j with n descendants:
    G_j[n] = H_0[n], H_r[n] = max(0, max_s P[j, r]·(1 + G_{j+1}[s − 1]) + H_{r+1}[n − s]), G_D = 0.
    Cost O(D · R · n²) vectorised over n and s: ~0.1 s at n = 64, D = 16, R = 8 (BENCHMARKS.md)."""
    N, D = _sizes_and_depth(max_nodes, max_depth)
    mats = check_rank_acceptance(P, D)
    R = min(mats.shape[1], max(N, 1))
    G = np.zeros(N + 1)
    choice = np.zeros((D, R, N + 1), dtype=int)
    for j in range(D - 1, -1, -1):  # subtree roots at depth j; their children use row j
        H = np.zeros(N + 1)
        for r in range(R - 1, -1, -1):
            H, choice[j, r] = _rank_step(float(mats[j, r]), G, H)
        G = H
    parents: list[int] = []
    _build(choice, 0, N, -1, parents)
    tree = TokenTree(tuple(parents))
    return BestTree(tree, float(tree.tau(mats)), 1.0 + G, D)


def _build(choice: np.ndarray, j: int, n: int, parent: int, parents: list[int]) -> None:
    """Rebuild the optimal subtree below ``parent`` (depth j, n descendants) from the DP's choices."""
    if j >= choice.shape[0]:
        return
    for r in range(choice.shape[1]):
        s = int(choice[j, r, n])
        if s == 0:
            return
        parents.append(parent)
        _build(choice, j + 1, s - 1, len(parents) - 1, parents)
        n -= s


@dataclass(frozen=True)
class SGLangGrid:
    """τ and work of every (steps, topk, num_draft_tokens) triple; flat arrays, one entry per triple."""

    steps: np.ndarray
    topk: np.ndarray
    num_draft_tokens: np.ndarray  # verified tokens per sequence, root included (SGLang's meaning)
    tau: np.ndarray
    draft_tokens: np.ndarray  # tokens fed to the drafter over all passes: 1 + (steps − 1)·topk

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame({"steps": self.steps, "topk": self.topk, "num_draft_tokens": self.num_draft_tokens,
                             "tau": self.tau, "draft_passes": self.steps, "draft_tokens": self.draft_tokens,
                             "verify_tokens": self.num_draft_tokens})

    def to_dict(self) -> dict:
        return {k: getattr(self, k).tolist() for k in ("steps", "topk", "num_draft_tokens", "tau", "draft_tokens")}

    def report(self, top: int = 10) -> str:
        order = np.argsort(-self.tau, kind="stable")[:top]
        lines = [f"{'steps':>5} {'topk':>4} {'tokens':>6} {'tau':>7}"]
        lines += [f"{self.steps[i]:>5} {self.topk[i]:>4} {self.num_draft_tokens[i]:>6} {self.tau[i]:>7.3f}" for i in order]
        return "\n".join(lines)


def sglang_grid(P, steps=range(1, 9), topks=(1, 2, 4, 8), max_tokens: int = 64, scores=None) -> SGLangGrid:
    """τ of every SGLang triple with steps in ``steps``, topk in ``topks`` and 2 ≤ num_draft_tokens ≤
    min(max_tokens, pool + 1); topk = 1 is a chain (num_draft_tokens = steps + 1, as SGLang requires). The
    verified nodes are the best by ``scores`` (the draft's, :func:`sdsl.acceptance.trees.draft_scores`; default P)."""
    if int(max_tokens) < 2:
        raise InvalidInputError(f"max_tokens must be at least 2 (the root and one draft); got {max_tokens}.")
    cols = {k: [] for k in ("steps", "topk", "num_draft_tokens", "tau", "draft_tokens")}
    for s in steps:
        for k in topks:
            cand = sglang_candidates(s, k, P, scores)
            prob = cand["prob"][np.argsort(-cand["score"], kind="stable")]
            hi = min(int(max_tokens), prob.size + 1)
            tokens = np.arange(2, hi + 1) if k > 1 else np.array([s + 1]) if s + 1 <= max_tokens else np.zeros(0, int)
            cols["steps"].append(np.full(tokens.size, s))
            cols["topk"].append(np.full(tokens.size, k))
            cols["num_draft_tokens"].append(tokens)
            cols["tau"].append(TokenTree.tau_of_path_prefixes(prob)[tokens - 1])
            cols["draft_tokens"].append(np.full(tokens.size, 1 + (s - 1) * k))
    return SGLangGrid(**{k: np.concatenate(v) for k, v in cols.items()})
