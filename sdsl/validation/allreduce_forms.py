"""Evidence for the all-reduce sub-goal that stays missed (VALIDATION.md, "All-reduce across TP 2/4/8").

Two questions about H100 TP 2, the worst held-out TP degree:

- :func:`size_noise_ape` — how well could *any* smooth function of the message size do? Each row is
  predicted by the constant that minimises the absolute percentage error over its ±k neighbouring
  sizes of the same TP degree (the row itself excluded): the weighted median of their times with
  weights 1/time. It is fitted on the TP degree's own rows, so it bounds what a held-out model can
  reach from below (up to the smoothing): the scatter of Vidur's repeated, separately launched
  all-reduces, not a model's error.
- :func:`nvls_heldout` — does NCCL's NVLink SHARP algorithm explain why TP 4/8 mispredict TP 2?
  NCCL disables NVLS on a communicator of two or fewer GPUs (``ncclNvlsInit`` in
  ``src/transport/nvls.cc``: ``gpuCount <= 2`` returns with ``nvlsSupport = 0``) and Ampere has no
  multicast; so on H100 TP 4/8 a third algorithm, in-switch reduction, competes with the ring:
  every GPU sends its buffer to the switch once and receives the reduced one once, so its time is
  latency + bytes/(η_NVLS·bw), flat in the GPU count. Fitted with the other terms, each TP held out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sdsl.roofline.kernels import allreduce_time, smooth_max

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["size_noise_ape", "nvls_time", "fit_nvls", "nvls_heldout", "allreduce_limits", "SMALL_MESSAGE_BYTES",
           "MULTICAST_ARCHITECTURES"]


def size_noise_ape(rows: "pd.DataFrame", k: int = 5) -> np.ndarray:
    """Per row (in ``rows``' order): |error| of the APE-optimal constant over the ±``k`` neighbouring
    message sizes of the same GPU count, the row itself excluded (columns n_gpu, bytes, time_s)."""
    out = np.empty(len(rows))
    n_gpu, nbytes, time_s = (rows[c].to_numpy(float) for c in ("n_gpu", "bytes", "time_s"))
    for n in np.unique(n_gpu):
        idx = np.flatnonzero(n_gpu == n)
        idx = idx[np.argsort(nbytes[idx], kind="stable")]
        y = time_s[idx]
        win = np.lib.stride_tricks.sliding_window_view(np.pad(y, k, constant_values=np.nan), 2 * k + 1)
        v = np.sort(np.delete(win, k, axis=1), axis=1)  # NaN (beyond either end) sorts last, weighs nothing
        cw = np.cumsum(np.nan_to_num(1.0 / v), axis=1)
        best = v[np.arange(len(v)), np.argmax(cw >= cw[:, -1:] / 2.0, axis=1)]
        out[idx] = np.abs(best / y - 1.0)
    return out


#: Fitted fields: the production form's seven (sdsl.fit.allreduce) and NVLS's latency and efficiency.
#: Efficiencies in (0, 1] of the per-direction link (NVLS sends and receives each byte once).
_X0 = ([3e-5, 4.0, 1e-5, 0.3, 3e-5, 0.5, 1e-6, 2e-5, 0.5], [3e-5, 8.0, 1e-6, 0.5, 5e-5, 0.4, 1e-6, 5e-5, 0.45],
       [2e-5, 4.0, 5e-6, 0.8, 1e-5, 0.6, 3e-7, 3e-5, 0.6])
_LO = [1e-6, 1.0, 1e-6, 0.25, 1e-6, 5e-4, 0.0, 1e-6, 5e-4]  # the production fit's bounds (sdsl.fit.allreduce)
_HI = [1e-3, 50.0, 1e-3, 1.0, 1e-3, 1.0, 1e-4, 1e-3, 1.0]


def nvls_time(message_bytes, n_gpu, bandwidth: float, x) -> np.ndarray:
    """:func:`sdsl.roofline.kernels.allreduce_time` (ring Simple/LL above the floor) with NVLS competing
    for n_gpu > 2: latency + bytes/(η_NVLS·bw). ``x`` = (floor, p, LL latency, η_LL, latency, η, step
    latency, NVLS latency, η_NVLS)."""
    floor, p, ll_lat, ll_eta, lat, eta, step, nv_lat, nv_eta = map(float, x)
    n = np.asarray(n_gpu, dtype=float)
    ring = allreduce_time(message_bytes, n, bandwidth, lat, eta, step, ll_latency_s=ll_lat, ll_efficiency=ll_eta)
    nvls = nv_lat + np.asarray(message_bytes, dtype=float) / (nv_eta * bandwidth)
    return smooth_max(floor, np.where(n > 2, np.minimum(ring, nvls), ring), p)


def _nvls_blended(b, n, bandwidth, x):
    """log of :func:`nvls_time` with its minima blended over :data:`sdsl.fit.allreduce.PROTOCOL_BLEND` (the fit's
    smooth cost, as :func:`sdsl.fit.allreduce.fit_allreduce`)."""
    from sdsl.fit.allreduce import PROTOCOL_BLEND, smooth_min_log

    floor, p, ll_lat, ll_eta, lat, eta, step, nv_lat, nv_eta = map(float, x)
    simple = allreduce_time(b, n, bandwidth, lat, eta, step)
    ll = allreduce_time(b, n, bandwidth, ll_lat, ll_eta)
    ring, _ = smooth_min_log(np.log(simple), np.log(ll), PROTOCOL_BLEND)
    nvls, _ = smooth_min_log(ring, np.log(nv_lat + b / (nv_eta * bandwidth)), PROTOCOL_BLEND)
    return np.log(smooth_max(floor, np.exp(np.where(n > 2, nvls, ring)), p))


#: Fitted as logarithms (all but the step latency, in µs), as :func:`sdsl.fit.allreduce.fit_allreduce`.
_LOG = np.array([True, True, True, True, True, True, False, True, True])


def fit_nvls(rows: "pd.DataFrame", bandwidth: float) -> np.ndarray:
    """Least squares on log-time, best of three starts, the minima blended as :func:`sdsl.fit.allreduce.fit_allreduce`
    blends its protocols (3-point Jacobian, tolerances of that fit)."""
    from scipy.optimize import least_squares

    from sdsl.fit.allreduce import _TOL

    b, n, logt = (rows[c].to_numpy(float) for c in ("bytes", "n_gpu", "time_s"))
    logt = np.log(logt)
    enc = lambda v: np.where(_LOG, np.log(np.maximum(v, 1e-300)), np.asarray(v, float) * 1e6)  # noqa: E731
    dec = lambda z: np.where(_LOG, np.exp(z), z * 1e-6)  # noqa: E731
    lo, hi = enc(np.array(_LO, float)), enc(np.array(_HI, float))
    sols = [least_squares(lambda z: _nvls_blended(b, n, bandwidth, dec(z)) - logt, np.clip(enc(np.array(x0, float)), lo, hi),
                          bounds=(lo, hi), jac="3-point", x_scale=1.0, max_nfev=5000, **_TOL) for x0 in _X0]
    return dec(min(sols, key=lambda s: s.cost).x)


def nvls_heldout(rows: "pd.DataFrame", hardware) -> dict:
    """Each TP degree predicted by a fit of the NVLS form on the others (MAPE, median signed error
    per TP), and the in-sample MAPE per TP of a fit on all of them."""
    from sdsl.fit.allreduce import leave_one_tp_out

    bw = hardware.interconnect_bandwidth

    def fit_predict(train, test):
        return nvls_time(test["bytes"], test["n_gpu"], bw, fit_nvls(train, bw))

    held = leave_one_tp_out(rows, fit_predict).groupby("n_gpu")["rel"]
    x = fit_nvls(rows, bw)
    ape = np.abs(nvls_time(rows["bytes"], rows["n_gpu"], bw, x) / rows["time_s"].to_numpy(float) - 1.0)
    n_gpu = rows["n_gpu"].to_numpy()
    in_sample = {int(n): float(ape[n_gpu == n].mean()) for n in np.unique(n_gpu)}
    return {"nvls_heldout_tp_mape": {int(n): float(g.abs().mean()) for n, g in held},
            "nvls_heldout_tp_bias": {int(n): float(g.median()) for n, g in held},
            "nvls_in_sample_tp_mape": in_sample, "nvls_efficiency": float(x[8]), "nvls_latency_s": float(x[7])}


#: Architectures with NVLink multicast, which NVLS needs (NVSwitch from Hopper on; Ampere has none).
MULTICAST_ARCHITECTURES = ("hopper", "blackwell")

#: Messages up to this size (bytes) are where Vidur's repeats are bimodal (VALIDATION.md).
SMALL_MESSAGE_BYTES = 2e6


def allreduce_limits(rows: "pd.DataFrame", hardware, base=None) -> dict:
    """What bounds the held-out all-reduce error, per GPU count: the size noise floor (all rows, and
    the ≤ 2 MB rows with their share), the production form (:func:`sdsl.fit.allreduce.fit_allreduce`)
    fitted on that GPU count's rows alone, and on a GPU with NVLink multicast
    (:data:`MULTICAST_ARCHITECTURES`) the NVLS form (:func:`nvls_heldout`)."""
    from sdsl.fit.allreduce import fit_allreduce

    ape = size_noise_ape(rows)
    n_gpu, small = rows["n_gpu"].to_numpy(), rows["bytes"].to_numpy(float) <= SMALL_MESSAGE_BYTES
    counts = [int(n) for n in sorted(set(n_gpu))]
    own = {n: fit_allreduce(rows[n_gpu == n], hardware, base)[1]["mape"] for n in counts}
    return {"noise_floor_tp_mape": {n: float(ape[n_gpu == n].mean()) for n in counts},
            "noise_floor_small_tp_mape": {n: float(ape[(n_gpu == n) & small].mean()) for n in counts},
            "small_share": {n: float(small[n_gpu == n].mean()) for n in counts},
            "own_tp_fit_mape": own, **(nvls_heldout(rows, hardware) if hardware.architecture in MULTICAST_ARCHITECTURES else {})}
