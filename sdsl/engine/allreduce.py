"""The engine's tensor-parallel all-reduce for decode-sized messages (:attr:`EngineProfile.allreduce`,
docs/model.md §3.9): an engine's own one-shot / two-shot intra-node kernel in place of the GPU's calibrated NCCL
form (:func:`sdsl.roofline.kernels.allreduce_time`). Numpy only; everything broadcasts."""

from __future__ import annotations

import numpy as np

__all__ = ["allreduce_latencies", "custom_allreduce_time"]


def _oneshot_limit(profile, tp):
    """The largest message (bytes) the profile's custom all-reduce sends one-shot at tensor-parallel degree ``tp``."""
    two, four, eight = profile.allreduce_oneshot_bytes
    t = np.asarray(tp, dtype=float)
    return np.where(t <= 2, two, np.where(t <= 4, four, eight))


def allreduce_latencies(profile, message_bytes, tp):
    """Fixed latencies a of :data:`EngineProfile.allreduce_latency_s` one all-reduce of ``message_bytes`` pays in
    the profile's custom kernel: 1 one-shot, 2 two-shot, 0 where NCCL runs it (or under ``allreduce="nccl"``, or
    at tp = 1). Broadcasts."""
    m = np.asarray(message_bytes, dtype=float)
    if profile.allreduce != "custom" or np.all(np.asarray(tp) <= 1):
        return 0.0 * m
    custom = (m < profile.allreduce_max_bytes) & (np.asarray(tp) > 1)
    return np.where(custom, np.where(m < _oneshot_limit(profile, tp), 1.0, 2.0), 0.0)


def custom_allreduce_time(profile, message_bytes, tp, bandwidth, eta, nccl):
    """Seconds of one all-reduce of ``message_bytes`` over ``tp`` GPUs under the profile's custom kernel (module
    docstring): one-shot a + (t − 1)·M/(η·B), two-shot 2a + 2(t − 1)/t·M/(η·B), and ``nccl`` (the NCCL time of the
    same message) at and above ``allreduce_max_bytes``. Broadcasts."""
    m = np.asarray(message_bytes, dtype=float)
    t = np.asarray(tp, dtype=float)
    a = profile.allreduce_latency_s
    oneshot = a + (t - 1.0) * m / (eta * bandwidth)
    twoshot = 2.0 * a + 2.0 * (t - 1.0) / t * m / (eta * bandwidth)
    custom = np.where(m < _oneshot_limit(profile, tp), oneshot, twoshot)
    return np.where(m < profile.allreduce_max_bytes, custom, nccl)
