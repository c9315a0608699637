"""Speedup and throughput of speculative decoding (SD) against plain autoregressive decoding. Summary of
docs/model.md §3.1–§3.3.

- Leviathan, Kalman & Matias, "Fast Inference from Transformers via Speculative Decoding" (ICML 2023):
  wall-time improvement factor, Theorem 3.8: S(α, γ, c) = (1 − α^{γ+1}) / ((1 − α)(γc + 1)) = τ/(1 + γc);
  arithmetic-operations factor, Theorem 3.11: (1 − α)(γĉ + γ + 1) / (1 − α^{γ+1}) = (γĉ + γ + 1)/τ.
- SDSL (arXiv 2603.11053): cost is FLOPs, c = N/M, throughput in tokens per FLOP = S(α, γ, N/M)/(2M).
- Hardware-aware (docs/model.md §3.3): the draft runs γ single-token steps, the target verifies γ+1
  tokens per sequence, both priced by :mod:`sdsl.roofline.latency`:
  tokens/s = b·τ(α, γ) / (γ·T_draft(b, 1) + T_target(b, γ+1) + T_overhead).
"""

from __future__ import annotations

import numpy as np

from sdsl.acceptance import check_alpha, check_gamma, tau
from sdsl._checks import broadcast_shapes, count, draft_length, numbers
from sdsl.roofline.latency import LatencyParams
from sdsl.speculation.priced_step import PricedStep
from sdsl.errors import InvalidInputError

__all__ = ["speedup", "work_factor", "tokens_per_flop", "SDPrediction", "predict", "plain_tokens_per_s"]


def _check_cost(c, name="c") -> np.ndarray:
    c = numbers(c, name)
    if np.any(~np.isfinite(c)) or np.any(c < 0):
        raise InvalidInputError(f"{name} (cost ratio) must be a finite non-negative number.")
    return c


def speedup(alpha, gamma, c) -> np.ndarray:
    """Expected wall-time speedup over plain decoding, Leviathan et al. (2023) Theorem 3.8:
    S = (1 − α^{γ+1}) / ((1 − α)(γc + 1)), c = time of a draft step / time of a target step. γ is real here
    (the continuous relaxation S* = S(γ*) is defined on; :func:`predict` and ``price_step`` take whole drafts)."""
    a, g, c = check_alpha(alpha), check_gamma(gamma), _check_cost(c)
    broadcast_shapes(alpha=a, gamma=g, c=c)
    return tau(a, g) / (1.0 + g * c)


def work_factor(alpha, gamma, c_hat) -> np.ndarray:
    """Factor by which arithmetic work grows, Leviathan et al. (2023) Theorem 3.11:
    (1 − α)(γĉ + γ + 1) / (1 − α^{γ+1}), ĉ = FLOPs of a draft step / FLOPs of a target step; γ real, as in
    :func:`speedup`."""
    a, g, c = check_alpha(alpha), check_gamma(gamma), _check_cost(c_hat, "c_hat")
    broadcast_shapes(alpha=a, gamma=g, c_hat=c)
    return (g * c + g + 1.0) / tau(a, g)


def tokens_per_flop(alpha, gamma, draft_params, target_params) -> np.ndarray:
    """SDSL's FLOP-model throughput: S(α, γ, N/M) / (2M) tokens per FLOP (arXiv 2603.11053, §3;
    one forward costs ≈ 2·params FLOPs per token, so c = N/M)."""
    n, m = numbers(draft_params, "draft_params"), numbers(target_params, "target_params")
    if np.any(~(n > 0)) or np.any(~(m > 0)):
        raise InvalidInputError("Parameter counts must be positive.")
    return speedup(alpha, gamma, n / m) / (2.0 * m)


SDPrediction = PricedStep
""":func:`predict`'s result: the priced step every caller shares (:class:`~sdsl.speculation.priced_step.PricedStep`)."""


def plain_tokens_per_s(target, deployment, *, batch=1, context=None) -> np.ndarray:
    """Tokens/s of plain decoding under the deployment's engine: b / (T_target(b, 1, L) + the engine's host time of a
    plain step), T from the roofline (docs/model.md §3.3, §3.9) — the plain side of
    :func:`sdsl.speculation.step.price_step`, so a speedup computed against it is the one price_step reports.
    With ``engine="ideal"`` it is the roofline alone."""
    from sdsl.speculation.step import price_step

    # the plain half of a priced step does not depend on the proposer; prompt lookup has no model to price
    return price_step(target, "ngram", deployment, gamma=0, tau=1.0, batch=batch, context=context).plain_tokens_per_s


def predict(target, draft, deployment, *, gamma, alpha, batch=1, draft_params: LatencyParams | None = None,
            overhead_s=0.0) -> PricedStep:
    """Hardware-aware SD throughput of a draft-model chain (docs/model.md §3.3), broadcasting over gamma,
    alpha and batch: :func:`sdsl.speculation.step.price_step` with a :class:`~sdsl.speculation.proposers.DraftModel`
    and i.i.d. α (Leviathan et al. 2023, Eq. 1).

    ``deployment`` is a :class:`~sdsl.roofline.deployment.Deployment` or anything ``Deployment.of``
    accepts (a hardware name, file or Hardware): its hardware, tp (target), draft_tp, dtype, context
    and latency params price both models. ``draft`` is a ModelSpec, a
    :class:`~sdsl.roofline.latency.ModelShapes` stack, a :class:`~sdsl.speculation.proposers.Proposer`, or None for a
    model-free proposer (prompt lookup) whose cost is ``overhead_s``. ``draft_params`` (default: the
    deployment's params) prices the draft alone. ``overhead_s`` is any extra host time per SD step (sampling,
    rejection, scheduling). γ = 0 is plain decoding (speedup 1 when overhead is 0).
    """
    from sdsl.speculation.proposers import DraftModel, NGramLookup, Proposer
    from sdsl.speculation.step import price_step

    g, a = draft_length(gamma), check_alpha(numbers(alpha, "alpha"))
    broadcast_shapes(gamma=g, alpha=a, batch=count(batch))
    if isinstance(draft, (list, tuple)):
        raise InvalidInputError("predict prices one draft per call; use rank_proposers to compare several.")
    if draft is None:
        proposer = NGramLookup()
    elif isinstance(draft, Proposer):
        proposer = draft
    else:
        proposer = DraftModel(draft, params=draft_params)
    _check_fits(target, proposer, deployment, batch)
    return price_step(target, proposer, deployment, acceptance=a, gamma=g, batch=batch,
                      overhead_s=overhead_s)


def _check_fits(target, proposer, deployment, batch) -> None:
    """Refuse a prediction of which no configuration fits the deployment's memory (weights and KV cache per GPU,
    :func:`~sdsl.roofline.latency.memory_with_draft_per_gpu`, as ``sdsl predict`` reports DOES NOT FIT): a speed of a
    deployment that cannot run is not an answer."""
    from sdsl.catalog.models import get_model
    from sdsl.roofline.deployment import Deployment
    from sdsl.roofline.latency import memory_remedies, memory_with_draft_per_gpu

    dep = Deployment.of(deployment)
    spec = target if hasattr(target, "d_model") else get_model(target)
    need = np.asarray(memory_with_draft_per_gpu(spec, getattr(proposer, "model", None), dep, batch=batch), dtype=float)
    cap = float(dep.hardware.mem_capacity)
    if np.all(need > cap):
        raise InvalidInputError(f"{spec.name} does not fit: {float(np.min(need)) / 2**30:.4g} GiB per GPU (weights and "
                                f"KV cache at batch {float(np.min(np.asarray(batch, dtype=float))):g}, context "
                                f"{dep.context:g}) of {cap / 2**30:.4g} GiB on {dep.hardware.name}; "
                                f"{memory_remedies(spec, dep, batch=batch, need=float(np.min(need)), also=('use a larger GPU',))}.")
