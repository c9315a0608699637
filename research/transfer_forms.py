"""Which cross-GPU transfer form the held-out GPUs support (VALIDATION.md, "Cross-GPU transfer").

Every form is scored the same way as ``sdsl validate latency --transfer``: each GPU with measurements
is priced from the OTHER GPUs' own-data fits (:func:`sdsl.fit.transfer.fit_each_gpu`), so the
held-out GPU contributes no row to what prices it. Forms:

* ``architecture`` (shipped), ``kernel``, ``memory``: the rules of :mod:`sdsl.roofline.gpu_transfer`
  (nearest architecture first; the plain kernel average; same memory class first).
* ``bandwidth``: a feature trend instead of a neighbour: logit η_memory linear in log memory
  bandwidth, least squares over the calibrated GPUs, every other parameter as ``kernel``.
* ``borrow-h100``: the rule before the architecture rule, every GPU borrows the H100-SXM fit as it is
  (re-scaled only by its own datasheet peaks); not defined for H100 itself.
* ``size-as-time``: ``architecture``, with the GEMM size overhead's saturation scale B carried as the
  time its bytes take to stream (B·bw_target/bw_source) instead of bytes: the A40's fit lets the size
  overhead take up memory time (20 µs saturating at 31 MB against 4–5 µs at 5 MB on the H100/A100).
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["TRANSFER_FORMS", "compare_transfer_forms", "pairwise_transfer", "transfer_forms_report"]

TRANSFER_FORMS = ("architecture", "kernel", "memory", "bandwidth", "borrow-h100", "size-as-time")


def _bandwidth_trend(hardware, others: Mapping[str, tuple]):
    """``kernel`` parameters with η_memory from the least-squares line logit η_m = a + b·log bandwidth."""
    from sdsl.roofline.gpu_transfer import transfer_params

    base = transfer_params(hardware, others, "kernel")
    x = np.array([math.log(hw.mem_bandwidth) for hw, _ in others.values()])
    eta = np.clip([p.eta_memory for _, p in others.values()], 1e-6, 1 - 1e-6)
    b, a = np.polyfit(x, np.log(eta / (1 - eta)), 1)
    z = a + b * math.log(hardware.mem_bandwidth)
    return base.replace(eta_memory=min(1.0, 1.0 / (1.0 + math.exp(-z))))


def _form_params(form: str, hardware, others: Mapping[str, tuple]):
    """Transferred parameters of ``form`` for ``hardware``, or None where the form is undefined."""
    from sdsl.roofline.gpu_transfer import TRANSFER_RULES, transfer_params

    if form in TRANSFER_RULES:
        return transfer_params(hardware, others, form)
    if form == "bandwidth":
        return _bandwidth_trend(hardware, others)
    if form == "size-as-time":
        from sdsl.roofline.gpu_transfer import transfer_weights

        w = transfer_weights(hardware, others)
        scale = sum(v * others[k][1].kernel_size_bytes * hardware.mem_bandwidth / others[k][0].mem_bandwidth
                    for k, v in w.items() if v > 0)
        return transfer_params(hardware, others).replace(kernel_size_bytes=scale)
    borrowed = [p for hw, p in others.values() if hw.key == "h100-sxm"]
    return borrowed[0] if borrowed else None


def compare_transfer_forms(data: "pd.DataFrame", hardware: Mapping[str, Any] | None = None,
                           forms=TRANSFER_FORMS, smoothness: str | float = "auto",
                           dtype: str = "fp16", elementwise: "pd.DataFrame | None" = None,
                           gpu_form: str = "shipped") -> "pd.DataFrame":
    """One row per (form, held-out GPU): overall/decode MAPE, signed bias overall and in decode,
    worst model and the transferred η_memory; GPUs are fitted once, in the shipped form with ``elementwise``
    rows or in ``gpu_form="untiled"``, the form shipped before (:func:`sdsl.fit.transfer.fit_each_gpu`)."""
    import pandas as pd

    from sdsl.fit.calibration import predict_op_times
    from sdsl.fit.transfer import fit_each_gpu, transfer_metrics

    hw, frames, fits = fit_each_gpu(data, hardware, smoothness, dtype, elementwise, gpu_form)
    rows = []
    for form in forms:
        for g in frames:
            others = {o: (hw[o], fits[o].params) for o in frames if o != g}
            params = _form_params(form, hw[g], others)
            if params is None:
                continue
            m = transfer_metrics(frames[g], predict_op_times(frames[g], hw[g], params, dtype=dtype))
            rows.append({"form": form, "gpu": g, **{k: v for k, v in m.items() if k != "per_model"},
                         "eta_memory": float(params.eta_memory), "own_eta_memory": float(fits[g].params.eta_memory)})
    return pd.DataFrame(rows)


def pairwise_transfer(data: "pd.DataFrame", hardware: Mapping[str, Any] | None = None,
                      smoothness: str | float = "auto", dtype: str = "fp16",
                      elementwise: "pd.DataFrame | None" = None, gpu_form: str = "shipped") -> "pd.DataFrame":
    """Every GPU priced with every GPU's own fit as it is (re-scaled by its own datasheet peaks): one row
    per (``gpu`` priced, ``fit`` borrowed) with overall/decode MAPE and signed bias; the diagonal is in sample.
    ``elementwise``, ``gpu_form``: as :func:`compare_transfer_forms`."""
    import pandas as pd

    from sdsl.fit.calibration import predict_op_times
    from sdsl.fit.transfer import fit_each_gpu, transfer_metrics

    hw, frames, fits = fit_each_gpu(data, hardware, smoothness, dtype, elementwise, gpu_form)
    rows = []
    for g in frames:
        for o in frames:
            m = transfer_metrics(frames[g], predict_op_times(frames[g], hw[g], fits[o].params, dtype=dtype))
            rows.append({"gpu": g, "fit": o, **{k: v for k, v in m.items() if k != "per_model"}})
    return pd.DataFrame(rows)


def transfer_forms_report(vidur_root: str | os.PathLike | None = None) -> dict[str, dict[str, dict[str, float]]]:
    """``{form: {gpu: metrics}}`` on the shipped Vidur folders (or ``vidur_root``), JSON-ready."""
    from sdsl._paths import data_path
    from sdsl.fit.profiles import read_vidur, read_vidur_elementwise

    root = vidur_root or data_path("vidur")
    table = compare_transfer_forms(read_vidur(root), elementwise=read_vidur_elementwise(root))
    out: dict[str, dict[str, dict[str, float]]] = {}
    for r in table.to_dict("records"):
        out.setdefault(r.pop("form"), {})[r.pop("gpu")] = r
    return out


if __name__ == "__main__":  # python -m research.transfer_forms: every form, each GPU held out, as JSON
    import json

    print(json.dumps(transfer_forms_report(), indent=1, sort_keys=True))
