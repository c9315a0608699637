"""What a speculative step's time goes to, and what speculation adds over plain decoding: the parts of a
:class:`~sdsl.speculation.priced_step.PricedStep` by cause, and the cause that grows most (``sdsl optimize``'s "why").

Parts of a forward (:class:`~sdsl.roofline.latency.StepTime`; docs/model.md §3.3, §3.8), each a share of its
``total_s``: the routed experts' weight reads (``expert-weights``), attention over the KV cache (``attention/KV``),
the other memory-bound kernels — dense weights, LM head, activations, elementwise — (``weights``), the
compute-bound kernels (``compute``), kernel launches and fixed costs (``overhead``), tensor/expert-parallel
communication (``communication``). A speculative step adds its drafting and the worker's own GPU work
(``drafting``) and the engine host time charged to it (``engine host``). The cost driver of a configuration is
the part whose time grows most from the plain step to the speculative one.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PARTS", "forward_parts", "step_parts", "cost_driver"]

PARTS = ("expert-weights", "attention/KV", "weights", "compute", "overhead", "communication", "drafting",
         "engine host")


def forward_parts(time) -> dict:
    """One forward's parts (seconds, arrays): the six causes of :data:`PARTS` a forward has (no drafting or host)."""
    experts = np.asarray(time.expert_weights_s, dtype=float)
    attention = np.asarray(time.attention_s, dtype=float)
    compute = np.asarray(time.compute_bound_s, dtype=float)
    overhead, comm = np.asarray(time.overhead_s, dtype=float), np.asarray(time.allreduce_s, dtype=float)
    weights = np.asarray(time.total_s, dtype=float) - overhead - comm - compute - experts - attention
    return {"expert-weights": experts, "attention/KV": attention, "weights": weights, "compute": compute,
            "overhead": overhead, "communication": comm}


def step_parts(step) -> tuple[dict, dict]:
    """(speculative step's parts, plain step's parts) of a PricedStep, every cause of :data:`PARTS`."""
    spec = forward_parts(step.verify_time)
    spec["drafting"] = np.asarray(step.t_propose_s, dtype=float) + np.asarray(step.t_worker_s, dtype=float)
    spec["engine host"] = np.asarray(step.t_host_s, dtype=float)
    plain = forward_parts(step.plain_time)
    plain["drafting"] = 0.0 * plain["overhead"]
    plain["engine host"] = np.asarray(step.t_plain_s, dtype=float) - np.asarray(step.plain_time.total_s, dtype=float)
    return spec, plain


def cost_driver(step) -> np.ndarray:
    """Per configuration, the cause (:data:`PARTS`) whose time grows most from the plain step to the speculative
    step of ``step`` (a PricedStep); broadcasts over its grid."""
    spec, plain = step_parts(step)
    growth = np.stack(np.broadcast_arrays(*(spec[k] - plain[k] for k in PARTS)))
    return np.array(PARTS)[np.argmax(growth, axis=0)]
