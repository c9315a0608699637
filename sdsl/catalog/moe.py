"""Routing math of mixture-of-experts layers: how many distinct experts a batch touches, and how many rows
each touched expert's GEMM computes (numpy only; docs/model.md §3.8).

A token's router picks ``k`` of ``E`` experts (top-k gating; Shazeer et al., ICLR 2017; Fedus et al., JMLR
2022). When ``n`` tokens are routed in one forward — in a speculative step n = batch × verified tokens —
the layer reads the weights of every expert at least one token picked. With each token picking expert i
with probability π_i (Σ π_i = k, π_i ≤ 1) independently of the others,

    E[distinct experts] = Σ_i 1 − (1 − π_i)^n,

which for a uniform router (π_i = k/E) is E·(1 − (1 − k/E)^n). Tokens of one sequence's draft are treated
as independent (no published evidence measures their expert overlap). A skewed router is given as a
measured expert-load histogram (the share of token-expert assignments each expert receives) or a
rank power law h_i ∝ i^(−α) (Zipf-like popularity; ai-dynamo/aiconfigurator's MoE collector instead draws
each expert's load from a power-law density with α = 1.01 or 1.2, collector/helper.py ``sample_power_law``,
so its exponents are not this α); either becomes π = k·h, capped at 1 (a token picks an expert at most
once) with the excess spread over the others in proportion.
"""

from __future__ import annotations

import numpy as np

from sdsl.errors import InvalidInputError

__all__ = ["expected_distinct_experts", "selection_probabilities", "distinct_experts_from_probabilities",
           "expected_expert_rows"]


def _check_router(n_experts, top_k):
    E = np.asarray(n_experts, dtype=float)
    k = np.asarray(top_k, dtype=float)
    if np.any(E < 1) or np.any(k < 1) or np.any(k > E):
        raise InvalidInputError("A router needs 1 <= experts per token <= experts.")
    return E, k


def expected_distinct_experts(n_experts, top_k, tokens) -> np.ndarray:
    """Expected distinct experts ``tokens`` tokens touch when each picks ``top_k`` of ``n_experts`` uniformly:
    E·(1 − (1 − k/E)^n) (each expert is missed by one token with probability 1 − k/E). Broadcasts; 0 tokens
    touch 0 experts, k = E touches all of them."""
    E, k = _check_router(n_experts, top_k)
    n = np.asarray(tokens, dtype=float)
    if np.any(n < 0):
        raise InvalidInputError("The number of routed tokens must be non-negative.")
    with np.errstate(divide="ignore", invalid="ignore"):
        missed = np.where(k >= E, np.where(n > 0, 0.0, 1.0), np.exp(n * np.log1p(-k / E)))
    return E * (1.0 - missed)


def selection_probabilities(n_experts: int, top_k: int, *, load=None, skew: float = 0.0) -> np.ndarray:
    """Probability π_i that one token picks expert i (Σ π = k, each at most 1), from a measured expert-load
    histogram ``load`` (any non-negative weights, one per expert: the share of assignments each receives) or
    a power-law popularity h_i ∝ i^(−skew) (``skew`` 0: uniform). Shares that would exceed 1 are capped and
    the excess spread over the other experts in proportion to their shares."""
    E, k = int(n_experts), int(top_k)
    _check_router(E, k)
    if load is not None:
        h = np.asarray(load, dtype=float).ravel()
        if h.size != E or np.any(~np.isfinite(h)) or np.any(h < 0) or h.sum() <= 0:
            raise InvalidInputError(f"An expert-load histogram needs {E} non-negative shares, not all zero.")
        if np.count_nonzero(h) < k:
            raise InvalidInputError(f"An expert-load histogram needs at least {k} experts with a positive share.")
    else:
        if not (np.isfinite(skew) and skew >= 0):
            raise InvalidInputError("The routing skew (a power-law exponent) must be a non-negative number.")
        h = np.arange(1, E + 1, dtype=float) ** (-float(skew))
    p = k * h / h.sum()
    capped = np.zeros(E, dtype=bool)
    for _ in range(E):  # water-filling over at most E experts (a model's size, not a configuration loop)
        over = (p > 1.0) & ~capped
        if not over.any():
            break
        capped |= over
        free = ~capped
        p[capped] = 1.0
        p[free] = h[free] * (k - capped.sum()) / h[free].sum()
    return np.minimum(p, 1.0)


def distinct_experts_from_probabilities(probabilities, tokens) -> np.ndarray:
    """Σ_i 1 − (1 − π_i)^n over the last axis of ``probabilities`` (zeros pad a shorter expert list), with
    ``tokens`` broadcasting against the leading axes."""
    p = np.asarray(probabilities, dtype=float)
    n = np.asarray(tokens, dtype=float)[..., None]
    return np.sum(_touched(p, n), axis=-1)


def _touched(p, n) -> np.ndarray:
    """P(at least one of n tokens picks an expert picked with probability p) = 1 − (1 − p)^n."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(p >= 1.0, np.where(n > 0, 1.0, 0.0), -np.expm1(n * np.log1p(-np.minimum(p, 1.0 - 1e-16))))


def expected_expert_rows(tokens, *, n_experts=None, top_k=None, probabilities=None, pad=None):
    """(distinct experts, GEMM rows) of one MoE layer for ``tokens`` routed tokens: the expected number of
    experts touched and Σ over them of ``pad``(their token count) — the rows a grouped GEMM computes when it
    tiles each expert's tokens separately (vLLM ``moe_align_block_size`` pads every expert's count to the
    kernel's row block). Uniform routing (``n_experts``, ``top_k``): D·pad(n·k/D). A routing distribution
    (``probabilities``, last axis): Σ_i P_i·pad(n·π_i/P_i), each touched expert at its expected count given
    that it is touched (P_i = 1 − (1 − π_i)^n). ``pad`` None: rows = n·k, no padding. Broadcasts."""
    n = np.asarray(tokens, dtype=float)
    pad = pad or (lambda rows: rows)
    if probabilities is None:
        distinct = expected_distinct_experts(n_experts, top_k, n)
        with np.errstate(divide="ignore", invalid="ignore"):
            per_expert = np.where(distinct > 0, n * np.asarray(top_k, dtype=float) / distinct, 0.0)
        return distinct, np.where(distinct > 0, distinct * pad(np.maximum(per_expert, 1.0)), 0.0)
    p = np.asarray(probabilities, dtype=float)
    nn = n[..., None]
    touched = _touched(p, nn)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_expert = np.where(touched > 0, nn * p / touched, 0.0)
    rows = np.where(touched > 0, touched * pad(np.maximum(per_expert, 1.0)), 0.0)
    return np.sum(touched, axis=-1), np.sum(rows, axis=-1)
