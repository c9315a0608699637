"""Leave-one-model-out on whole forward passes: how well a CPU/GPU calibration prices a model whose
forwards it never saw (``sdsl calibrate --steps ... --holdout``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sdsl.errors import ProfileError
from sdsl.fit.calibration import fit_latency, predict_step_times

__all__ = ["forwards_leave_one_model_out"]


def forwards_leave_one_model_out(data: "pd.DataFrame", hardware, steps, *, layers=(), **fit_kwargs) -> "pd.DataFrame":
    """Held-out whole-forward MAPE per model: fit without that model's forward rows, predict them.

    ``data``, ``layers`` and ``fit_kwargs`` go to :func:`sdsl.fit.calibration.fit_latency` unchanged
    (operator and decoder-layer rows stay in every fit); ``steps`` are ``(rows, ModelSpec)`` pairs.
    Returns columns model, n, heldout_mape, in_sample_mape (the fit with every model).
    """
    steps = list(steps)
    if len(steps) < 2:
        raise ProfileError("Leave-one-model-out needs forward rows of at least two models.")
    dtype = fit_kwargs.pop("dtype", None)
    full = fit_latency(data, hardware, dtype=dtype, layers=layers, steps=steps, keep_points=False, **fit_kwargs)
    dtype = full.dtype
    rows = []
    for i, (st, spec) in enumerate(steps):
        fit = fit_latency(data, hardware, dtype=dtype, layers=layers, steps=steps[:i] + steps[i + 1:],
                          keep_points=False, **fit_kwargs)
        meas = st["time_s"].to_numpy(dtype=float)
        held = predict_step_times(st, spec, hardware, fit.params, dtype)
        ins = predict_step_times(st, spec, hardware, full.params, dtype)
        rows.append({"model": spec.name, "n": len(st), "heldout_mape": float(np.mean(np.abs(held / meas - 1))),
                     "in_sample_mape": float(np.mean(np.abs(ins / meas - 1)))})
    return pd.DataFrame(rows)
