"""Held-out (leave-one-model-out) comparison of GEMM op_time forms on Vidur's H100/A100 timings (exploratory).

    .venv/bin/python profiles/gemm_forms.py                 # every form below (about a minute)
    .venv/bin/python profiles/gemm_forms.py tiles wave_hard  # some of them

Each form is fitted on log-time with scipy's least_squares on all models of a GPU but one and scored on
the held-out one, exactly as ``sdsl validate latency`` does; printed per GPU: pooled MAPE over every
held-out row, pooled decode MAPE (num_tokens <= 64), the worst held-out model's decode MAPE and the median
signed error at 64 < num_tokens <= 256. VALIDATION.md ("GEMM forms tried") quotes these numbers and
tests/unit/test_gemm_forms.py recomputes them. ``tiles`` is the previous form (row tiles of 128);
``min_tile``, ``size``, ``tail`` add one term each; ``kernel_terms`` all three with ``t_kernel`` free;
sdsl ships that form with ``t_kernel`` fixed to the elementwise kernels' launch cost
(sdsl.core.latency.op_time; its held-out numbers come from ``sdsl validate latency``). The others
were tried and not kept.
"""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from sdsl._paths import data_path
from sdsl.core.hardware import get_hardware
from sdsl.core.kernels import N_TILE, min_row_tile, padded_tokens, smooth_max

GPUS = {"h100": "h100-sxm", "a100": "a100-80gb"}
M_TILE = 128
FORMS = {}


def form(name, x0, lo, hi):
    """Register ``f(x, shapes, hw) -> seconds`` with its start point and bounds (x0..x3 = η_c, η_m, t_kernel, p)."""
    def deco(f):
        FORMS[name] = (f, np.array(x0, float), np.array(lo, float), np.array(hi, float))
        return f
    return deco


def _roof(x, a, hw, min_tile=True):
    """(compute s, memory s, waves, bytes) of the padded GEMMs."""
    T, i, o = a["T"], a["i"], a["o"]
    Tp = padded_tokens(T, M_TILE, hw["min_tile"] if min_tile else 0)
    nbytes = 2.0 * (i * o + T * (i + o))
    waves = np.ceil(T / M_TILE) * np.ceil(o / N_TILE) / hw["sms"]
    return 2.0 * Tp * i * o / (x[0] * hw["peak"]), nbytes / (x[1] * hw["bw"]), waves, nbytes


B4 = ([0.7, 0.9, 5e-6, 2.0], [1e-3, 1e-3, 0, 1], [1, 1, 1e-3, 64])


def _more(x0, lo, hi):
    return [[0.7, 0.9, 3e-6, 2.0] + x0, B4[1] + lo, B4[2] + hi]


def _smax(x, y, p):
    """smooth_max with an array p."""
    hi, lo = np.maximum(x, y), np.minimum(x, y)
    return hi * (1 + (lo / hi) ** p) ** (1 / p)


@form("tiles", *B4)
def _(x, a, hw):
    tc, tm, _, _ = _roof(x, a, hw, min_tile=False)
    return smooth_max(tc, tm, x[3]) + x[2]


@form("min_tile", *B4)
def _(x, a, hw):
    tc, tm, _, _ = _roof(x, a, hw)
    return smooth_max(tc, tm, x[3]) + x[2]


@form("size", *_more([3e-6, 2e7], [0, 1e5], [1e-3, 1e10]))
def _(x, a, hw):
    tc, tm, _, nb = _roof(x, a, hw)
    return smooth_max(tc, tm, x[3]) + x[2] + x[4] * -np.expm1(-nb / x[5])


@form("tail", *_more([0.5], [0], [10]))
def _(x, a, hw):
    tc, tm, w, _ = _roof(x, a, hw)
    return smooth_max(tc * (1 + x[4] / w), tm, x[3]) + x[2]


@form("kernel_terms", *_more([3e-6, 2e7, 0.5], [0, 1e5, 0], [1e-3, 1e10, 10]))
def _(x, a, hw):
    tc, tm, w, nb = _roof(x, a, hw)
    return smooth_max(tc * (1 + x[6] / w), tm, x[3]) + x[2] + x[4] * -np.expm1(-nb / x[5])


@form("wave_hard", *B4)
def _(x, a, hw):  # full wave quantisation: every partial wave costs a whole one
    tc, tm, w, _ = _roof(x, a, hw)
    return smooth_max(tc * np.ceil(w) / w, tm, x[3]) + x[2]


@form("wave_overhead", *_more([1e-6], [0], [1e-4]))
def _(x, a, hw):  # a fixed cost per wave of output tiles
    tc, tm, w, _ = _roof(x, a, hw, min_tile=False)
    return smooth_max(tc, tm, x[3]) + x[2] + x[4] * np.ceil(w)


@form("p_weights", *_more([0.1], [-5], [5]))
def _(x, a, hw):  # overlap exponent growing with the weight bytes
    tc, tm, _, _ = _roof(x, a, hw, min_tile=False)
    return _smax(tc, tm, np.maximum(x[3] + x[4] * np.log2(a["i"] * a["o"] / 2**25), 1.0)) + x[2]


@form("p_k", *_more([0.5], [-5], [5]))
def _(x, a, hw):  # overlap exponent growing with the K loop
    tc, tm, _, _ = _roof(x, a, hw, min_tile=False)
    return _smax(tc, tm, np.maximum(x[3] + x[4] * np.log2(a["i"] / 4096), 1.0)) + x[2]


@form("size_k", *_more([3e-6, 4000, 0.5], [0, 10, 0], [1e-3, 1e6, 10]))
def _(x, a, hw):  # kernel terms with the overhead saturating in K instead of bytes
    tc, tm, w, _ = _roof(x, a, hw)
    return smooth_max(tc * (1 + x[6] / w), tm, x[3]) + x[2] + x[4] * -np.expm1(-a["i"] / x[5])


@form("split_k", *_more([3e-6, 2e7, 0.1, 1e-6], [0, 1e5, 0, 0], [1e-3, 1e10, 10, 1e-4]))
def _(x, a, hw):  # kernel terms + a split-K reduction cost when the output has fewer tiles than SMs
    tc, tm, w, nb = _roof(x, a, hw)
    return (smooth_max(tc * (1 + x[6] / w), tm, x[3]) + x[2] + x[4] * -np.expm1(-nb / x[5])
            + x[7] * np.log1p(np.clip(1 / w, 1, None) - 1))


@form("overlap_linear", [0.7, 0.9, 3e-6, 0.3, 3e-6, 2e7, 0.5], [1e-3, 1e-3, 0, 0, 0, 1e5, 0],
      [1, 1, 1e-3, 1, 1e-3, 1e10, 10])
def _(x, a, hw):  # kernel terms with max + κ·min in place of the smooth maximum
    tc, tm, w, nb = _roof(x, a, hw)
    tc = tc * (1 + x[6] / w)
    return np.maximum(tc, tm) + x[3] * np.minimum(tc, tm) + x[2] + x[4] * -np.expm1(-nb / x[5])


@form("p_waves", *_more([3e-6, 2e7, 0.5, 0.0], [0, 1e5, 0, -3], [1e-3, 1e10, 10, 3]))
def _(x, a, hw):  # kernel terms with p growing with the waves of output tiles
    tc, tm, w, nb = _roof(x, a, hw)
    p = np.maximum(x[3] * w ** x[7], 1.0)
    return _smax(tc * (1 + x[6] / w), tm, p) + x[2] + x[4] * -np.expm1(-nb / x[5])


def _shapes(g):
    return {k: g[c].to_numpy(float) for k, c in (("T", "num_tokens"), ("i", "in_features"), ("o", "out_features"))}


def _fit(name, g, hw):
    f, x0, lo, hi = FORMS[name]
    a, ly = _shapes(g), np.log(g["time_s"].to_numpy())
    sol = least_squares(lambda x: np.log(f(x, a, hw)) - ly, x0, bounds=(lo, hi), x_scale="jac", max_nfev=4000)
    return sol.x


def leave_one_model_out(name: str, data: pd.DataFrame | None = None) -> dict:
    """{gpu: (pooled, decode, worst-model decode, median signed error at 64 < num_tokens <= 256)}."""
    from sdsl.fit.profiles import read_vidur

    data = read_vidur(data_path("vidur")) if data is None else data
    out = {}
    for gpu, hw_name in GPUS.items():
        h = get_hardware(hw_name)
        hw = {"peak": h.peak_flops_for("fp16"), "bw": h.mem_bandwidth, "sms": h.sm_count, "min_tile": min_row_tile(h)}
        d, parts = data[data["hardware"] == gpu], []
        for held in sorted(d["model"].unique()):
            test = d[d["model"] == held]
            x = _fit(name, d[d["model"] != held], hw)
            parts.append(test.assign(rel=FORMS[name][0](x, _shapes(test), hw) / test["time_s"].to_numpy() - 1.0))
        p = pd.concat(parts)
        dec = p["num_tokens"] <= 64
        mid = (p["num_tokens"] > 64) & (p["num_tokens"] <= 256)
        out[gpu] = (float(p["rel"].abs().mean()), float(p.loc[dec, "rel"].abs().mean()),
                    float(p[dec].groupby("model")["rel"].apply(lambda r: r.abs().mean()).max()),
                    float(p.loc[mid, "rel"].median()))
    return out


if __name__ == "__main__":
    for name in sys.argv[1:] or list(FORMS):
        r = leave_one_model_out(name)
        print(f"{name:15s}", "  ".join(f"{g}: " + " / ".join(f"{100 * v:+.2f}%" if k == 3 else f"{100 * v:.2f}%"
                                                          for k, v in enumerate(r[g])) for g in r), flush=True)
