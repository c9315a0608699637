"""Batch-size → speculation-length tables and speedup-vs-batch sweeps (TurboSpec, docs/model.md §3.4).

A serving engine with dynamic speculation (e.g. a vLLM config that maps batch-size ranges to a
speculation length) needs one k per batch size. :func:`serving_k_table` is the table ``sdsl optimize``
prints and exports (:meth:`sdsl.plan.ranking.ProposerRanking.k_table`: the draft ranked at every batch size
1..max_batch, equal neighbours merged into ranges); with a custom :class:`BatchStepModel` it takes the
goodput controller's choice on that model's table instead. :func:`speedup_vs_batch` tabulates the throughput of each fixed k and
of the goodput-optimal k relative to plain decoding (k = 0).
"""

from __future__ import annotations

import numpy as np

from sdsl.acceptance import check_alpha
from sdsl.errors import InvalidInputError
from sdsl.serving.step_model import BatchStepModel

__all__ = ["best_k_by_batch", "serving_k_table", "speedup_vs_batch"]


def _check_alpha(alpha) -> np.ndarray:
    """α in [0, 1]: the best k is an argmax over 0..max_k, defined at both ends (τ(1, k) = k + 1, τ(0, k) = 1)."""
    return np.atleast_1d(check_alpha(alpha))


def _throughput(step_model: BatchStepModel, alpha: np.ndarray, context: float, max_k: int) -> np.ndarray:
    """tokens/s[a, b, k] = b·τ(α_a, k) / T(b, k, context) for b = 1..max_batch, k = 0..max_k."""
    from sdsl.acceptance import tau

    ks = np.arange(max_k + 1)
    T = step_model.at_context(step_model.decode[:, : max_k + 1], context)
    b = np.arange(1, step_model.max_batch + 1, dtype=float)
    return b[None, :, None] * tau(alpha[:, None, None], ks[None, None, :]) / T[None, :, :]


def best_k_by_batch(step_model: BatchStepModel, alpha, *, context: float = 1024.0, max_k: int | None = None) -> np.ndarray:
    """Goodput-optimal uniform k for every batch size 1..max_batch (rows: each α given); TurboSpec's
    argmax_k G(k)/T(k) (Liu et al., arXiv 2406.14066, Eq. 2)."""
    max_k = step_model.max_k if max_k is None else int(max_k)
    if not 0 <= max_k <= step_model.max_k:
        raise InvalidInputError(f"max_k must lie in 0..{step_model.max_k}.")
    if context < 0:
        raise InvalidInputError("context must be >= 0 tokens.")
    return np.argmax(_throughput(step_model, _check_alpha(alpha), context, max_k), axis=2)


def serving_k_table(target, draft, deployment, *, alpha: float = 0.7, max_batch: int = 256, max_k: int = 7,
                    draft_params=None, step_model: BatchStepModel | None = None) -> list[dict]:
    """``[{"batch_min", "batch_max", "k"}, …]``: the goodput-optimal k for each batch-size range.

    Ranges cover 1..max_batch without gaps; k = 0 means "do not speculate at this batch size".
    The deployment's ``context`` is the mean tokens per sequence in the KV cache the table is tuned for.
    Without ``step_model`` this is ``sdsl optimize``'s table for the draft (:mod:`sdsl.plan.ranking`).
    """
    from sdsl.roofline.deployment import Deployment
    from sdsl.speculation.proposers import DraftModel
    from sdsl.plan.ranking import k_ranges, rank_proposers

    a = _check_alpha(alpha)
    if a.size != 1:
        raise InvalidInputError("serving_k_table takes one acceptance rate.")
    dep = Deployment.of(deployment)
    if step_model is None:
        ranking = rank_proposers(target, [DraftModel(draft, params=draft_params)], dep, acceptance=float(a[0]),
                                 gammas=range(0, int(max_k) + 1), batches=range(1, int(max_batch) + 1))
        return ranking.k_table(0)
    ks = best_k_by_batch(step_model, a, context=float(dep.context), max_k=max_k)[0][:max_batch]
    return k_ranges(ks, np.arange(1, ks.size + 1))


def speedup_vs_batch(step_model: BatchStepModel, alphas, batches, *, ks=(1, 3, 5, 7), context: float = 1024.0,
                     max_k: int | None = None):
    """DataFrame: tokens/s and speedup over k = 0 of each fixed k and of the goodput-optimal k.

    Columns: alpha, batch, policy ("k=K" or "adaptive"), k, tokens_per_s, speedup. Analytic
    (known α, mean context ``context``); the simulator measures the same with online α.
    """
    import pandas as pd

    max_k = step_model.max_k if max_k is None else int(max_k)
    a = _check_alpha(alphas)
    batches = np.asarray(batches, dtype=np.int64)
    if np.any(batches < 1) or np.any(batches > step_model.max_batch):
        raise InvalidInputError(f"batches must lie in 1..{step_model.max_batch}.")
    if any(k < 0 or k > max_k for k in ks):
        raise InvalidInputError(f"ks must lie in 0..{max_k}.")
    tput = _throughput(step_model, a, context, max_k)[:, batches - 1, :]  # (A, B, K+1)
    base = tput[:, :, 0]
    best = tput.argmax(axis=2)
    frames = []
    for label, kk in [(f"k={k}", np.full(best.shape, k)) for k in ks] + [("adaptive", best)]:
        tp = np.take_along_axis(tput, kk[:, :, None], axis=2)[:, :, 0]
        frames.append(pd.DataFrame({"alpha": np.repeat(a, batches.size), "batch": np.tile(batches, a.size),
                                    "policy": label, "k": kk.ravel(), "tokens_per_s": tp.ravel(),
                                    "speedup": (tp / base).ravel()}))
    return pd.concat(frames, ignore_index=True)
