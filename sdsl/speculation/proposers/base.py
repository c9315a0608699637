"""What every proposer shares: the forward of a model on the target's roofline (:func:`forward_step`), a lone GEMM
or weight read, and :class:`Proposer`, the interface the one step pricing (:func:`sdsl.speculation.step.price_step`)
calls: ``step_time``, ``draft_time``, ``worker_time``, ``passes``."""

from __future__ import annotations

import numpy as np

from sdsl.catalog.models import ModelSpec, dtype_bytes
from sdsl.roofline.latency import ModelShapes, gemm_flops_bytes, op_time, padded_step_time

__all__ = ["Proposer", "forward_step", "forward_time", "SELECT_KERNELS", "VERIFY_KERNELS"]


def forward_step(model, deployment, *, batch, q, context, draft=False, params=None):
    """One forward pass of ``model`` (ModelSpec or ModelShapes) priced by :func:`sdsl.roofline.latency.step_time`:
    on the deployment itself (target, heads) or, with ``draft``, on :meth:`Deployment.for_draft` (draft_tp
    GPUs, ``params`` when given). The single place speculation calls the roofline; returns the StepTime."""
    dep = deployment.for_draft(params) if draft else deployment
    return padded_step_time(model, dep, batch=batch, q=q, context=context)


def forward_time(model, deployment, *, batch, q, context, draft=False, params=None) -> np.ndarray:
    """Total seconds of :func:`forward_step`."""
    return forward_step(model, deployment, batch=batch, q=q, context=context, draft=draft, params=params).total_s


def _gemm_time(tokens, n_in, n_out, deployment) -> np.ndarray:
    """One GEMM kernel on the roofline (:func:`sdsl.roofline.latency.op_time`)."""
    hw, params = deployment.hardware, deployment.params
    flops, nbytes = gemm_flops_bytes(tokens, n_in, n_out, dtype_bytes(deployment.dtype))
    return op_time(flops, nbytes, hw.peak_flops_for(deployment.dtype), hw.mem_bandwidth, params)


SELECT_KERNELS = 2  # per drafting depth: softmax over the draft vocabulary, top-k (SGLang draft_forward)
VERIFY_KERNELS = 2  # per step: tree build, greedy tree verification (SGLang eagle_utils)


def _read_time(nbytes, deployment) -> np.ndarray:
    """One memory-bound kernel reading ``nbytes`` (:func:`sdsl.roofline.latency.op_time` with no FLOPs)."""
    hw = deployment.hardware
    return op_time(0.0, nbytes, hw.peak_flops_for(deployment.dtype), hw.mem_bandwidth, deployment.params)


class Proposer:
    """Base class. ``step_time`` prices one drafting pass over ``q`` tokens per sequence;
    ``draft_time`` the drafting of a chain (topk = 1) or an SGLang-style tree (steps × topk)."""

    kind = "proposer"
    max_depth: int | None = None  # deepest draft it can propose (Medusa: its number of heads)
    source = ""

    def step_time(self, target: ModelSpec, deployment, *, batch, q=1, context) -> np.ndarray:
        raise NotImplementedError

    def draft_time(self, target: ModelSpec, deployment, *, batch, steps, topk=1, context) -> np.ndarray:
        """Autoregressive drafting (EAGLE-2 / SGLang tree expansion): the first depth drafts from one
        token per sequence, each further depth from the ``topk`` frontier tokens. ``steps`` broadcasts."""
        s = np.asarray(steps, dtype=float)
        first = self.step_time(target, deployment, batch=batch, q=1, context=context)
        later = first if np.all(np.asarray(topk) == 1) else self.step_time(
            target, deployment, batch=batch, q=topk, context=context)
        return np.where(s > 0, first + np.maximum(s - 1.0, 0.0) * later, 0.0)

    def passes(self, steps) -> np.ndarray:
        """Separate drafting forwards per step (each pays an engine's per-pass host overhead): one per depth."""
        return np.asarray(steps, dtype=float)

    def worker_time(self, target, deployment, *, batch, steps, topk, tau, verify_tokens, context) -> np.ndarray:
        """Work an engine's speculative worker does per step beyond drafting and the target's forward
        (none for the base proposer; see :meth:`EagleHead.worker_time`)."""
        return 0.0 * np.asarray(steps, dtype=float)

    def worker_passes(self) -> float:
        """Separate forwards :meth:`worker_time` launches per step (each pays ``pass_overhead_s``)."""
        return 0.0

    @property
    def name(self) -> str:
        return self.kind

    def to_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "source": self.source}
