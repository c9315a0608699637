"""Step time of a serving batch with speculation: draft steps + one verification forward.

A decode step of a continuous batch of n running requests with k proposals each costs
(TurboSpec, Liu et al., arXiv 2406.14066, §3; docs/model.md §3.4):

    T(n, k, L̄) = k · T_draft(n, q=1, L̄) + T_target(n, q=k+1, L̄) · (1 + o·[k>0])

where L̄ is the mean context over the batch (KV reads and attention FLOPs are linear in it, so the
mean is exact for those terms) and o an optional speculation overhead fraction (rejection
sampling, bookkeeping; TurboSpec measures ≈5% of T_target). k = 0 is plain decoding and never
runs the draft. A prefill step over b new prompts of mean length p̄ costs T_target(b, p̄, 0) (plus
T_draft(b, p̄, 0) when a draft is loaded).

Any ``step_fn(batch, q, context) -> seconds`` can price the forwards: the roofline of
:mod:`sdsl.roofline.latency` (:func:`roofline_step_fn`), a calibrated one, or TurboSpec's linear form
(:mod:`sdsl.serving.linear_model`). :class:`BatchStepModel` evaluates the step function once on a
(batch × q × context) grid and interpolates linearly in context, so the simulator's inner loop
costs a few array lookups per step. On the roofline (:meth:`BatchStepModel.from_catalog`) the decode tables
are the shared priced step itself (:func:`priced_step_tables`, :func:`sdsl.speculation.step.price_step`), so
the simulator prices a speculative step exactly as ``sdsl predict`` and ``sdsl optimize`` do.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Callable

import numpy as np

from sdsl.errors import InvalidInputError

__all__ = [
    "StepFn",
    "roofline_step_fn",
    "priced_step_tables",
    "mixed_batch_time",
    "MemoryBudget",
    "memory_budget",
    "BatchStepModel",
]

StepFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def roofline_step_fn(model, deployment) -> StepFn:
    """``step_fn(batch, q, context)`` → seconds from :func:`sdsl.roofline.latency.step_time` (docs/model.md §3.3)
    of ``model`` on ``deployment`` (a :class:`~sdsl.roofline.deployment.Deployment` or a hardware
    name/file/Hardware; its ``tp``, ``dtype`` and latency ``params`` price the model)."""
    from sdsl.catalog.models import get_model
    from sdsl.roofline.deployment import Deployment
    from sdsl.roofline.latency import step_time

    spec = get_model(model)
    dep = Deployment.of(deployment)

    def fn(batch, q, context):
        return np.asarray(step_time(spec, dep, batch=batch, q=q, context=context).total_s, dtype=float)

    fn.__doc__ = f"Roofline step time of {spec.name} on {dep.hardware.name} (tp={dep.tp}, {dep.dtype})."
    return fn


def priced_step_tables(target, draft, deployment, *, max_batch: int, max_k: int, context_grid, draft_params=None):
    """(target[n, q, c], draft[n, c], decode[n, k, c]) for n = 1..max_batch, q = k + 1, k = 0..max_k and the contexts
    of ``context_grid``, all from one :func:`sdsl.speculation.step.price_step` call: the verify forward, one
    drafting pass and the whole speculative step of a draft-model chain (``draft`` None: the target alone, only
    k = 0 is a real step). τ does not enter a draft model's step time; it is priced at τ = 1."""
    from sdsl.catalog.models import get_model
    from sdsl.speculation.proposers import DraftModel, NGramLookup
    from sdsl.speculation.step import price_step

    proposer = DraftModel(get_model(draft), params=draft_params) if draft else NGramLookup()
    n = np.arange(1, int(max_batch) + 1, dtype=float)[:, None, None]
    k = np.arange(int(max_k) + 1, dtype=float)[None, :, None]
    c = np.asarray(context_grid, dtype=float)[None, None, :]
    step = price_step(target, proposer, deployment, tau=1.0, gamma=k, batch=n, context=c)
    full = (n.shape[0], k.shape[1], c.shape[2])
    draft_table = np.broadcast_to(step.t_draft_s, full)[:, 0, :].copy()
    return (np.broadcast_to(step.t_verify_s, full).copy(), draft_table, np.broadcast_to(step.t_step_s, full).copy())


def mixed_batch_time(target_fn: StepFn, decode_contexts, k: int = 0, prefill_tokens=(), prefill_contexts=None,
                     draft_fn: StepFn | None = None) -> float:
    """Time of one step of a mixed batch: decode requests with ``k`` proposals each plus prefill chunks.

    The batch is priced as one *equivalent uniform* forward: b = n_decode + n_prefill sequences,
    q = total new tokens / b, context = total KV tokens read / b. Linear layers (∝ tokens) and
    KV reads (∝ Σ context) are exact under this mapping; attention FLOPs are approximated (exact
    when every sequence has the same q). The draft runs ``k`` single-token steps over the decode
    requests only (prefill chunks are assumed drafted in the prefill step).
    """
    ctx = np.atleast_1d(np.asarray(decode_contexts, dtype=float))
    pre = np.atleast_1d(np.asarray(prefill_tokens, dtype=float))
    pre_ctx = np.zeros_like(pre) if prefill_contexts is None else np.atleast_1d(np.asarray(prefill_contexts, float))
    if k < 0:
        raise InvalidInputError("k (proposals per request) must be >= 0.")
    if ctx.size == 0 and pre.size == 0:
        return 0.0
    n_dec, n_pre = ctx.size, pre.size
    b = n_dec + n_pre
    tokens = n_dec * (k + 1) + pre.sum()
    kv = ctx.sum() + pre_ctx.sum()
    total = float(target_fn(np.asarray(b), np.asarray(tokens / b), np.asarray(kv / b)))
    if k > 0 and n_dec:
        if draft_fn is None:
            raise InvalidInputError("Speculation (k > 0) needs a draft step function.")
        total += k * float(draft_fn(np.asarray(n_dec), np.asarray(1.0), np.asarray(ctx.mean())))
    return total


@dataclass(frozen=True)
class MemoryBudget:
    """KV-cache budget of the GPU that holds the most per token: usable memory minus the weights on it, in bytes
    and in tokens. Every field is per GPU (the target's share of one of its ``tp`` GPUs plus, with a draft, the
    draft's share of one of its ``draft_tp`` GPUs, which are among the target's)."""

    capacity_bytes: float  # one GPU's memory
    target_weight_bytes: float  # the target's weights on that GPU
    draft_weight_bytes: float  # the draft's weights on that GPU
    kv_bytes_per_token: float  # target + draft KV cache per token on that GPU (sdsl.roofline.latency.kv_cache_bytes_per_gpu)
    mem_fraction: float

    @property
    def kv_budget_bytes(self) -> float:
        return self.capacity_bytes * self.mem_fraction - self.target_weight_bytes - self.draft_weight_bytes

    @property
    def kv_budget_tokens(self) -> int:
        return int(self.kv_budget_bytes // self.kv_bytes_per_token)

    def to_dict(self) -> dict:
        return {"capacity_bytes": self.capacity_bytes, "target_weight_bytes": self.target_weight_bytes,
                "draft_weight_bytes": self.draft_weight_bytes, "kv_bytes_per_token": self.kv_bytes_per_token,
                "mem_fraction": self.mem_fraction, "kv_budget_bytes": self.kv_budget_bytes,
                "kv_budget_tokens": self.kv_budget_tokens}


def _kv_per_token(model, dep) -> float:
    """KV bytes per cached token on one of ``dep``'s GPUs, at the deployment's context: the same per-GPU KV the step
    time reads (:func:`sdsl.roofline.latency.kv_cache_bytes_per_gpu`: ceil(n_kv_head/tp) heads, MLA's latent whole on
    every GPU, local-attention layers holding only their window), averaged over ``dep.context`` tokens."""
    from sdsl.roofline.latency import kv_cache_bytes_per_gpu

    context = max(float(dep.context), 1.0)
    return float(kv_cache_bytes_per_gpu(model, dep, batch=1, context=context)) / context


def memory_budget(target, deployment, *, draft=None, mem_fraction: float = 0.9) -> MemoryBudget:
    """KV budget per GPU: ``mem_fraction`` of one GPU's memory minus the target's weights on it
    (:func:`sdsl.roofline.latency.weight_bytes_per_gpu`) and, with a draft, the draft's on its ``draft_tp`` GPUs (among
    the target's, so one GPU holds a share of both), over the KV bytes per token both keep on that GPU.

    The draft (if any) costs its weights once and its KV cache per token, so it takes batch slots.
    """
    from sdsl.catalog.models import get_model
    from sdsl.roofline.deployment import Deployment
    from sdsl.roofline.latency import weight_bytes_per_gpu

    dep = Deployment.of(deployment)
    hw, tp = dep.hardware, dep.tp
    t = get_model(target)
    d = get_model(draft) if draft is not None else None
    draft_dep = dep.for_draft()
    budget = MemoryBudget(
        capacity_bytes=float(hw.mem_capacity),
        target_weight_bytes=float(weight_bytes_per_gpu(t, dep)),
        draft_weight_bytes=float(weight_bytes_per_gpu(d, draft_dep)) if d is not None else 0.0,
        kv_bytes_per_token=_kv_per_token(t, dep) + (_kv_per_token(d, draft_dep) if d is not None else 0.0),
        mem_fraction=float(mem_fraction),
    )
    if budget.kv_budget_bytes <= 0:
        need = (budget.target_weight_bytes + budget.draft_weight_bytes) / 2 ** 30
        have = budget.capacity_bytes * mem_fraction / 2 ** 30
        raise InvalidInputError(f"The weights on one GPU ({need:.1f} GiB) leave no KV-cache room in {have:.1f} GiB of "
                                f"{hw.name} memory (tp={tp}); raise --tp.")
    return budget


class BatchStepModel:
    """Tabulated step times of decode and prefill steps, for a batch of up to ``max_batch`` requests.

    ``target_fn``/``draft_fn``: ``step_fn(batch, q, context)`` → seconds. ``draft_fn=None`` means no
    draft is loaded (only k = 0 is allowed). Contexts beyond ``max_context`` extrapolate linearly.
    """

    def __init__(self, target_fn: StepFn, draft_fn: StepFn | None = None, *, max_batch: int = 256, max_k: int = 7,
                 max_context: int = 4096, max_prompt: int | None = None, spec_overhead_frac: float = 0.0,
                 context_points: int = 65, prompt_points: int = 48, name: str = "", tables=None) -> None:
        if max_batch < 1 or max_k < 0 or max_context < 1:
            raise InvalidInputError("max_batch and max_context must be >= 1 and max_k >= 0.")
        if spec_overhead_frac < 0:
            raise InvalidInputError("spec_overhead_frac must be >= 0.")
        self.max_batch, self.max_k, self.max_context = int(max_batch), int(max_k), int(max_context)
        self.max_prompt = int(max_prompt or max_context)
        self.spec_overhead_frac = float(spec_overhead_frac)
        self.has_draft = draft_fn is not None
        self.target_fn, self.draft_fn, self.name = target_fn, draft_fn, name
        n = np.arange(1, self.max_batch + 1, dtype=float)
        q = np.arange(1, self.max_k + 2, dtype=float)
        self.ctx_grid = np.linspace(0.0, float(self.max_context), int(context_points))
        self._inv_dctx = 1.0 / (self.ctx_grid[1] - self.ctx_grid[0])
        self._last_cell = len(self.ctx_grid) - 2
        oh = 1.0 + self.spec_overhead_frac * (np.arange(self.max_k + 1) > 0)
        # target[n-1, q-1, c]; draft[n-1, c] (q = 1); decode[n-1, k, c] = k·T_draft + T_target(q=k+1)·(1 + o·[k>0])
        ks = np.arange(self.max_k + 1, dtype=float)
        if tables is not None:  # (target, draft, step) of priced_step_tables on this grid: the step is the shared one
            self.target, self.draft, step = tables(self.max_batch, self.max_k, self.ctx_grid)
            self.decode = step + self.target * (oh - 1.0)[None, :, None]
            # what the priced step holds beyond k drafting passes and the verify forward: the engine's host time
            # and the worker's GPU work, charged to a mixed step at its largest k (decode_row)
            self.extra = step - self.target - ks[None, :, None] * self.draft[:, None, :]
        else:
            self.target = np.asarray(target_fn(n[:, None, None], q[None, :, None], self.ctx_grid[None, None, :]), float)
            self.target = np.broadcast_to(self.target, (len(n), len(q), len(self.ctx_grid))).copy()
            self.draft = np.zeros((len(n), len(self.ctx_grid))) if draft_fn is None else np.broadcast_to(
                np.asarray(draft_fn(n[:, None], 1.0, self.ctx_grid[None, :]), float), (len(n), len(self.ctx_grid))).copy()
            self.decode = ks[None, :, None] * self.draft[:, None, :] + self.target * oh[None, :, None]
            self.extra = np.zeros_like(self.decode)
        if draft_fn is None:
            self.decode[:, 1:, :] = np.inf
        self.log_p_grid = np.linspace(0.0, np.log(self.max_prompt), int(prompt_points))
        p = self._p_grid = np.exp(self.log_p_grid)
        self._p_list = p.tolist()  # for the scalar lookup of prefill_time (bisect_left == searchsorted)
        self.prefill_target = np.asarray(target_fn(n[:, None], p[None, :], 0.0), float)
        self.prefill_draft = (np.asarray(draft_fn(n[:, None], p[None, :], 0.0), float) if draft_fn is not None
                              else np.zeros_like(self.prefill_target))

    @classmethod
    def from_catalog(cls, target, draft, deployment, *, draft_params=None, **kwargs) -> "BatchStepModel":
        """Roofline step times of a target and an optional draft on ``deployment`` (the draft on its ``draft_tp``
        GPUs, priced with ``draft_params`` when given): the decode tables from the shared priced step
        (:func:`priced_step_tables`), prefill from :func:`roofline_step_fn`."""
        from sdsl.catalog.models import get_model
        from sdsl.roofline.deployment import Deployment

        dep = Deployment.of(deployment)
        t_fn = roofline_step_fn(target, dep)
        d_fn = roofline_step_fn(draft, dep.for_draft(draft_params)) if draft else None
        kwargs.setdefault("max_context", get_model(target).max_context)
        name = f"{get_model(target).name}" + (f" + {get_model(draft).name}" if draft else "")

        def tables(max_batch, max_k, context_grid):
            return priced_step_tables(target, draft, dep, max_batch=max_batch, max_k=max_k, context_grid=context_grid,
                                      draft_params=draft_params)

        return cls(t_fn, d_fn, name=name, tables=tables, **kwargs)

    def check_batch(self, n: int) -> int:
        """``n`` as an int, or an InvalidInputError when it lies outside the tabulated batch sizes."""
        n = int(n)
        if not 1 <= n <= self.max_batch:
            raise InvalidInputError(f"Batch size {n} is outside the tabulated range 1..{self.max_batch}.")
        return n

    def at_context(self, table: np.ndarray, context) -> np.ndarray:
        """Linear interpolation of ``table``'s last axis (the context grid) at ``context`` (unchecked).

        The one context interpolation of the serving code: a scalar context gives ``table[..., c]``
        interpolated; an array of contexts with a 1-d table gives one value per context. Contexts
        beyond the grid extrapolate along its last cell.
        """
        if isinstance(context, float) or np.ndim(context) == 0:  # one context: two table columns
            x = float(context) * self._inv_dctx
            i = min(int(x), self._last_cell)
            lo = table[..., i]
            return lo + (table[..., i + 1] - lo) * (x - i)
        x = np.asarray(context, dtype=float) * self._inv_dctx
        i0 = np.minimum(x.astype(np.int64), self._last_cell)
        lo = table[..., i0]
        return lo + (table[..., i0 + 1] - lo) * (x - i0)

    def decode_time(self, n: int, k, context) -> np.ndarray:
        """Seconds of one decode step of ``n`` requests with ``k`` proposals each (broadcast over k, context)."""
        n = self.check_batch(n)
        k = np.asarray(k)
        if np.any(k < 0) or np.any(k > self.max_k):
            raise InvalidInputError(f"k must lie in 0..{self.max_k}.")
        if np.any(np.asarray(context) < 0):
            raise InvalidInputError("context must be >= 0 tokens.")
        k, context = np.broadcast_arrays(k, np.asarray(context, dtype=float))
        every_k = self.at_context(self.decode[n - 1], context)  # (max_k + 1, *context.shape)
        return np.take_along_axis(every_k, k[None].astype(np.int64), axis=0)[0]

    def decode_time_all_k(self, n: int, context: float) -> np.ndarray:
        """T(n, k, L̄) for k = 0..max_k at one mean context (TurboSpec §3, docs/model.md §3.4; ``n`` unchecked)."""
        return self.at_context(self.decode[n - 1], context)

    def decode_row(self, k_r) -> np.ndarray:
        """Step time on the context grid for per-request lengths ``k_r`` (uniform k: a table row).

        The draft runs max(k_r) steps, step j over the requests with k_r >= j; the target verifies
        Σ(k_r + 1) tokens, priced at the batch's mean q (interpolated between integer q); the engine's host time
        and the worker's own work are those of a uniform step at max(k_r).
        """
        k_r = np.asarray(k_r, dtype=np.int64)
        n = self.check_batch(k_r.size)
        kmax = int(k_r.max())
        if kmax > 0 and not self.has_draft:
            raise InvalidInputError("Speculation (k > 0) needs a draft model.")
        if kmax == int(k_r.min()):
            return self.decode[n - 1, kmax]
        q_mean = float(k_r.mean()) + 1.0
        q0 = min(int(q_mean), self.max_k + 1)
        fq = q_mean - q0
        tgt = self.target[n - 1]
        row = tgt[q0 - 1] * (1.0 - fq) + tgt[min(q0, self.max_k)] * fq
        row = row * (1.0 + self.spec_overhead_frac * (kmax > 0)) + self.extra[n - 1, kmax]
        if kmax > 0:
            n_j = np.count_nonzero(k_r[:, None] >= np.arange(1, kmax + 1)[None, :], axis=0)
            row = row + self.draft[n_j - 1].sum(axis=0)
        return row

    def decode_time_mixed(self, k_r, context) -> np.ndarray:
        """Seconds of one decode step where request r proposes ``k_r`` tokens (see :meth:`decode_row`)."""
        if np.any(np.asarray(k_r) < 0) or np.any(np.asarray(k_r) > self.max_k):
            raise InvalidInputError(f"k must lie in 0..{self.max_k}.")
        return self.at_context(self.decode_row(k_r), context)

    def prefill_time(self, n_seqs: int, total_tokens: int, with_draft: bool) -> float:
        """Seconds of one prefill step of ``n_seqs`` prompts totalling ``total_tokens`` (draft too if loaded)."""
        n = self.check_batch(n_seqs)
        p = max(total_tokens / n, 1.0)
        grid = self._p_list
        j = min(max(bisect_left(grid, p) - 1, 0), len(grid) - 2)
        w = (p - grid[j]) / (grid[j + 1] - grid[j])  # linear in p, log-spaced grid
        tgt = self.prefill_target[n - 1]
        t = float(tgt[j]) * (1 - w) + float(tgt[j + 1]) * w
        if with_draft and self.has_draft:
            dft = self.prefill_draft[n - 1]
            t += float(dft[j]) * (1 - w) + float(dft[j + 1]) * w
        return float(t)
