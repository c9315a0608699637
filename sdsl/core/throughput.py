"""Speedup and throughput of speculative decoding (SD) against plain autoregressive decoding.

- Leviathan, Kalman & Matias, "Fast Inference from Transformers via Speculative Decoding" (ICML 2023):
  wall-time improvement factor, Theorem 3.8: S(α, γ, c) = (1 − α^{γ+1}) / ((1 − α)(γc + 1)) = τ/(1 + γc);
  arithmetic-operations factor, Theorem 3.11: (1 − α)(γĉ + γ + 1) / (1 − α^{γ+1}) = (γĉ + γ + 1)/τ.
- SDSL (arXiv 2603.11053): cost is FLOPs, c = N/M, throughput in tokens per FLOP = S(α, γ, N/M)/(2M).
- Hardware-aware (docs/model.md §3.3): the draft runs γ single-token steps, the target verifies γ+1
  tokens per sequence, both priced by :mod:`sdsl.core.latency`:
  tokens/s = b·τ(α, γ) / (γ·T_draft(b, 1) + T_target(b, γ+1) + T_overhead).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from sdsl._result import Result
from sdsl.core.acceptance import check_alpha, check_gamma, tau
from sdsl.errors import InvalidInputError
from sdsl.core.latency import LatencyParams, step_time

__all__ = ["speedup", "work_factor", "tokens_per_flop", "SDPrediction", "predict", "plain_tokens_per_s"]


def _check_cost(c, name="c") -> np.ndarray:
    c = np.asarray(c, dtype=float)
    if np.any(~np.isfinite(c)) or np.any(c < 0):
        raise InvalidInputError(f"{name} (cost ratio) must be a finite non-negative number.")
    return c


def speedup(alpha, gamma, c) -> np.ndarray:
    """Expected wall-time speedup over plain decoding, Leviathan et al. (2023) Theorem 3.8:
    S = (1 − α^{γ+1}) / ((1 − α)(γc + 1)), c = time of a draft step / time of a target step."""
    return tau(alpha, gamma) / (1.0 + check_gamma(gamma) * _check_cost(c))


def work_factor(alpha, gamma, c_hat) -> np.ndarray:
    """Factor by which arithmetic work grows, Leviathan et al. (2023) Theorem 3.11:
    (1 − α)(γĉ + γ + 1) / (1 − α^{γ+1}), ĉ = FLOPs of a draft step / FLOPs of a target step."""
    g = check_gamma(gamma)
    return (g * _check_cost(c_hat, "c_hat") + g + 1.0) / tau(alpha, gamma)


def tokens_per_flop(alpha, gamma, draft_params, target_params) -> np.ndarray:
    """SDSL's FLOP-model throughput: S(α, γ, N/M) / (2M) tokens per FLOP (arXiv 2603.11053, §3;
    one forward costs ≈ 2·params FLOPs per token, so c = N/M)."""
    n = np.asarray(draft_params, dtype=float)
    m = np.asarray(target_params, dtype=float)
    if np.any(~(n > 0)) or np.any(~(m > 0)):
        raise InvalidInputError("Parameter counts must be positive.")
    return speedup(alpha, gamma, n / m) / (2.0 * m)


@dataclass(frozen=True)
class SDPrediction(Result):
    """Predicted SD throughput; every field is an array broadcast over the inputs (times in s).

    Follows the result protocol (:class:`sdsl._result.Result`): ``report()``, ``to_dict()``,
    ``to_json(path=None)`` and ``plot(ax=None)`` (best speedup per batch size).
    """

    tau: np.ndarray
    t_draft_s: np.ndarray  # one draft step (q = 1)
    t_verify_s: np.ndarray  # one target step over γ + 1 tokens
    t_overhead_s: np.ndarray
    t_step_s: np.ndarray  # γ·t_draft + t_verify + overhead
    t_plain_s: np.ndarray  # one plain target step (q = 1)
    tokens_per_s: np.ndarray
    plain_tokens_per_s: np.ndarray
    speedup: np.ndarray
    cost_ratio: np.ndarray  # c = t_draft / t_plain
    bound: np.ndarray  # what dominates the verification step
    tpot_s: np.ndarray  # time per output token of one sequence: t_step / τ
    t_propose_s: np.ndarray  # all drafting of one step (γ·t_draft for a draft-model chain)
    batch: np.ndarray = 1  # the batch sizes priced (as given, broadcastable to the other fields)

    def to_dict(self) -> dict:
        """Plain Python values (lists for arrays), for JSON."""
        out = {}
        for f in fields(self):
            v = np.asarray(getattr(self, f.name))
            out[f.name] = v.item() if v.ndim == 0 else v.tolist()
        return out

    def report(self) -> str:
        """One line per configuration: τ, step times (ms), tokens/s and speedup."""
        cols = {k: np.ravel(np.broadcast_to(np.asarray(getattr(self, k)), np.shape(self.tokens_per_s)))
                for k in ("tau", "t_draft_s", "t_verify_s", "t_step_s", "tokens_per_s", "speedup", "bound")}
        lines = [f"{'tau':>6} {'draft ms':>9} {'verify ms':>10} {'step ms':>9} {'tokens/s':>10} {'speedup':>8}  bound"]
        for i in range(cols["tau"].size):
            lines.append(f"{cols['tau'][i]:6.3f} {1e3 * cols['t_draft_s'][i]:9.3f} {1e3 * cols['t_verify_s'][i]:10.3f} "
                         f"{1e3 * cols['t_step_s'][i]:9.3f} {cols['tokens_per_s'][i]:10.1f} {cols['speedup'][i]:8.3f}  "
                         f"{cols['bound'][i]}")
        return "\n".join(lines)

    def plot(self, ax=None):
        """Bars of the best speedup over plain decoding per batch size (:mod:`sdsl.plots.results`)."""
        from sdsl.plots.results import plot_speedup_by_batch

        return plot_speedup_by_batch(self.batch, self.speedup, ax=ax)


def plain_tokens_per_s(target, deployment, *, batch=1) -> np.ndarray:
    """Tokens/s of plain decoding: b / T_target(b, 1, L), T from the roofline (docs/model.md §3.3)."""
    return np.asarray(batch, dtype=float) / step_time(target, deployment, batch=batch, q=1).total_s


def predict(target, draft, deployment, *, gamma, alpha, batch=1, draft_params: LatencyParams | None = None,
            overhead_s=0.0) -> SDPrediction:
    """Hardware-aware SD throughput of a draft-model chain (docs/model.md §3.3), broadcasting over gamma,
    alpha and batch: the special case of :func:`sdsl.core.speculation.price_speculation` with a
    :class:`~sdsl.core.proposers.DraftModel` and i.i.d. α (Leviathan et al. 2023, Eq. 1).

    ``deployment`` is a :class:`~sdsl.core.deployment.Deployment` or anything ``Deployment.of``
    accepts (a hardware name, file or Hardware): its hardware, tp (target), draft_tp, dtype, context
    and latency params price both models. ``draft`` is a ModelSpec, a
    :class:`~sdsl.core.latency.ModelShapes` stack, a :class:`~sdsl.core.proposers.Proposer`, or None for a
    model-free proposer (prompt lookup) whose cost is ``overhead_s``. ``draft_params`` (default: the
    deployment's params) prices the draft alone. ``overhead_s`` is any extra time per SD step (sampling,
    rejection, scheduling). γ = 0 is plain decoding (speedup 1 when overhead is 0).
    """
    from sdsl.core.proposers import DraftModel, NGramLookup, Proposer
    from sdsl.core.speculation import price_speculation

    g = check_gamma(gamma)
    if draft is None:
        proposer = NGramLookup()
    elif isinstance(draft, Proposer):
        proposer = draft
    else:
        proposer = DraftModel(draft, params=draft_params)
    out = price_speculation(target, proposer, deployment, tau_value=tau(check_alpha(alpha), g), gamma=g,
                            batch=batch, overhead_s=overhead_s)
    return SDPrediction(**{f.name: out[f.name] for f in fields(SDPrediction) if f.name != "batch"},
                        batch=np.asarray(batch))
