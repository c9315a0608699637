"""The loss every operator-table fit minimises: the squared error of log t (relative errors weigh alike) under a
soft-L1 loss of scale 5%, so that a few rows the tables themselves contradict (the same GEMM 3x slower at m = 1 than
at m = 8) do not pull the fit; each term bounded and scaled to its units."""

from __future__ import annotations

import numpy as np

__all__ = ["F_SCALE", "robust_fit"]

#: Residual (in log time) beyond which the loss grows linearly: 5%.
F_SCALE = 0.05


def robust_fit(residual, names, bounds: dict, start: dict, *, with_cost: bool = False):
    """Terms ``names`` minimising the soft-L1 loss of ``residual(terms)`` (log-time residuals), each within
    ``bounds[name]`` = (low, high, scale) from ``start[name]``; with ``with_cost`` also the final loss."""
    from scipy.optimize import least_squares

    lo = np.array([bounds[n][0] for n in names])
    hi = np.array([bounds[n][1] for n in names])
    sc = np.array([bounds[n][2] for n in names])
    x0 = np.clip(np.array([start[n] for n in names]), lo, hi) / sc
    r = least_squares(lambda x: residual(dict(zip(names, x * sc))), x0, bounds=(lo / sc, hi / sc),
                      loss="soft_l1", f_scale=F_SCALE, x_scale="jac")
    x = dict(zip(names, r.x * sc))
    return (x, float(r.cost)) if with_cost else x
