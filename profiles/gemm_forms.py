"""Held-out (leave-one-model-out) comparison of GEMM op_time forms on Vidur's H100/A100/A40 timings (exploratory).

    .venv/bin/python profiles/gemm_forms.py                 # every form below (about two minutes)
    .venv/bin/python profiles/gemm_forms.py tiles wave_hard  # some of them
    .venv/bin/python profiles/gemm_forms.py --robust kernel_terms  # fitted to the relative error, soft-L1
    .venv/bin/python profiles/gemm_forms.py --json profiles/gemm_forms.json  # every number VALIDATION.md quotes

Each form is fitted on log-time with scipy's least_squares on all models of a GPU but one and scored on
the held-out one, exactly as ``sdsl validate latency`` does; printed per GPU: pooled MAPE over every
held-out row, pooled decode MAPE (num_tokens <= 64), the worst held-out model's decode MAPE and the median
signed error at 64 < num_tokens <= 256. VALIDATION.md ("GEMM forms tried") quotes these numbers from the
committed ``profiles/gemm_forms.json`` (``--json``), which tests/integrity/test_gemm_forms.py checks the document against. ``tiles`` is the previous form (row tiles of 128);
``min_tile``, ``size``, ``tail`` add one term each; ``kernel_terms`` all three with ``t_kernel`` free;
sdsl ships that form with ``t_kernel`` fixed to the elementwise kernels' launch cost
(sdsl.roofline.latency.op_time; its held-out numbers come from ``sdsl validate latency``). The others
were tried and not kept; those after ``p_waves`` (issue 11 follow-up) each change one mechanism of the
kernel terms (VALIDATION.md says which and its source). :func:`interaction_floor` is what any form that
gets the per-num_tokens and per-shape factors right but not their interaction could reach in sample.
"""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from sdsl._paths import data_path
from sdsl.catalog.hardware import get_hardware
from sdsl.roofline.kernels import N_TILE, min_row_tile, padded_tokens, smooth_max

GPUS = {"h100": "h100-sxm", "a100": "a100-80gb", "a40": "a40"}
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


# Issue 11 follow-up: forms on top of the kernel terms (x4..x6 = t_ks, B, w_tail; x7.. their own terms).
KT = _more([3e-6, 2e7, 0.5], [0, 1e5, 0], [1e-3, 1e10, 10])


def _kt(extra0=(), elo=(), ehi=()):
    return [KT[0] + list(extra0), KT[1] + list(elo), KT[2] + list(ehi)]


def _kterms(x, a, hw, tc=None, tm=None, w=None, p=None):
    """The kernel-terms form with its compute, memory, waves or overlap exponent replaced."""
    tc0, tm0, w0, nb = _roof(x, a, hw)
    tc, tm, w = tc0 if tc is None else tc, tm0 if tm is None else tm, w0 if w is None else w
    top = smooth_max(tc * (1 + x[6] / w), tm, x[3]) if p is None else _smax(tc * (1 + x[6] / w), tm, p)
    return top + x[2] + x[4] * -np.expm1(-nb / x[5])


def _hopper_rows(a, hw, small=64, big=None):
    """Rows a Hopper kernel computes if tiles are ``small`` rows high up to 256 tokens and 256 high above ``big``."""
    T = a["T"]
    Tp = padded_tokens(T, M_TILE, hw["min_tile"])
    if hw["min_tile"] != 64:
        return Tp
    if small:
        Tp = np.where((T > M_TILE) & (T <= 256), np.ceil(T / small) * small, Tp)
    return Tp if big is None else np.where(T > big, np.ceil(T / 256) * 256, Tp)


def _padded(x, a, hw, Tp):
    return 2.0 * Tp * a["i"] * a["o"] / (x[0] * hw["peak"])


@form("k_epilogue", *_kt([512], [0], [1e5]))
def _(x, a, hw):  # fixed prologue/epilogue per output tile, as K0 extra steps of the K loop: t_c·(K + K0)/K
    return _kterms(x, a, hw, tc=_roof(x, a, hw)[0] * (a["i"] + x[7]) / a["i"])


@form("p_k_kt", *_kt([0.5], [-5], [5]))
def _(x, a, hw):  # kernel terms, overlap exponent growing with the K loop
    return _kterms(x, a, hw, p=np.maximum(x[3] + x[7] * np.log2(a["i"] / 4096), 1.0))


@form("pipe_fill", [0.7, 0.9, 3e-6, 2.0, 3e-6, 2e7, 0.5, 4.0], [1e-3, 1e-3, 0, 1, 0, 1e5, 0, 0],
      [1, 1, 1e-3, 64, 1e-3, 1e10, 10, 1e3])
def _(x, a, hw):  # max + min·min(1, S·64/K): S k-tiles of 64 loaded before the pipelined K loop overlaps them
    tc, tm, w, nb = _roof(x, a, hw)
    tc = tc * (1 + x[6] / w)
    k = np.minimum(1.0, x[7] * 64 / a["i"])
    return np.maximum(tc, tm) + k * np.minimum(tc, tm) + x[2] + x[4] * -np.expm1(-nb / x[5])


@form("wave_lat_kt", *_kt([1e-6], [0], [1e-4]))
def _(x, a, hw):  # kernel terms + a fixed latency per wave of output tiles
    return _kterms(x, a, hw) + x[7] * np.ceil(_roof(x, a, hw)[2])


@form("kepi_wlat", *_kt([512, 1e-6], [0, 0], [1e5, 1e-4]))
def _(x, a, hw):  # k_epilogue + wave_lat_kt
    tc, _, w, _ = _roof(x, a, hw)
    return _kterms(x, a, hw, tc=tc * (a["i"] + x[7]) / a["i"]) + x[8] * np.ceil(w)


@form("mtile64", *_kt())
def _(x, a, hw):  # Hopper: whole tiles of 64 rows above 128 tokens (padding and waves)
    if hw["min_tile"] != 64:
        return _kterms(x, a, hw)
    T = a["T"]
    return _kterms(x, a, hw, tc=_padded(x, a, hw, padded_tokens(T, 64, 64)),
                   w=np.ceil(T / 64) * np.ceil(a["o"] / N_TILE) / hw["sms"])


@form("ntile256", *_kt())
def _(x, a, hw):  # waves of 128×256 output tiles
    return _kterms(x, a, hw, w=np.ceil(a["T"] / M_TILE) * np.ceil(a["o"] / 256) / hw["sms"])


@form("pad64", *_kt())
def _(x, a, hw):  # Hopper: rows padded to 64 above 128 tokens, waves of 128-row tiles
    return _kterms(x, a, hw, tc=_padded(x, a, hw, padded_tokens(a["T"], 64, hw["min_tile"]))
                   if hw["min_tile"] == 64 else None)


@form("pad64_256", *_kt())
def _(x, a, hw):  # Hopper: rows padded to 64 at 129-256 tokens (64-row ping-pong tiles), 128 above
    return _kterms(x, a, hw, tc=_padded(x, a, hw, _hopper_rows(a, hw)))


@form("pad256", *_kt())
def _(x, a, hw):  # Hopper: rows padded to 256 above 512 tokens (256-row cooperative tiles)
    return _kterms(x, a, hw, tc=_padded(x, a, hw, _hopper_rows(a, hw, small=0, big=512)))


@form("pad64_256_256", *_kt())
def _(x, a, hw):  # pad64_256 + pad256
    return _kterms(x, a, hw, tc=_padded(x, a, hw, _hopper_rows(a, hw, big=512)))


def _reread(x, a, hw, extra):
    return (2.0 * (a["i"] * a["o"] + a["T"] * (a["i"] + a["o"])) + extra) / (x[1] * hw["bw"])


@form("reread", *_kt([0.1], [0], [2]))
def _(x, a, hw):  # weights re-read once per further 128-row tile, a fraction ρ from DRAM (not L2)
    return _kterms(x, a, hw, tm=_reread(x, a, hw, 2.0 * a["i"] * a["o"] * x[7] * (np.ceil(a["T"] / M_TILE) - 1)))


@form("reread_act", *_kt([0.1], [0], [2]))
def _(x, a, hw):  # activations re-read once per further 128-column tile, a fraction ρ from DRAM
    return _kterms(x, a, hw, tm=_reread(x, a, hw, 2.0 * a["T"] * a["i"] * x[7] * (np.ceil(a["o"] / N_TILE) - 1)))


@form("pad256_reread", *_kt([0.1], [0], [2]))
def _(x, a, hw):  # pad256 + reread
    return _kterms(x, a, hw, tc=_padded(x, a, hw, _hopper_rows(a, hw, small=0, big=512)),
                   tm=_reread(x, a, hw, 2.0 * a["i"] * a["o"] * x[7] * (np.ceil(a["T"] / M_TILE) - 1)))


@form("power", *_kt([0.1, 1e-3], [0, 1e-5], [2, 1]))
def _(x, a, hw):  # clocks fall under sustained tensor-core load (power cap): t_c·(1 + θ(1 − e^(−t_c/τ)))
    tc = _roof(x, a, hw)[0]
    return _kterms(x, a, hw, tc=tc * (1 + x[7] * -np.expm1(-tc / x[8])))


@form("power_kepi", *_kt([0.1, 1e-3, 512], [0, 1e-5, 0], [2, 1, 1e5]))
def _(x, a, hw):  # power + k_epilogue
    tc = _roof(x, a, hw)[0]
    return _kterms(x, a, hw, tc=tc * (1 + x[7] * -np.expm1(-tc / x[8])) * (a["i"] + x[9]) / a["i"])


def _shapes(g):
    return {k: g[c].to_numpy(float) for k, c in (("T", "num_tokens"), ("i", "in_features"), ("o", "out_features"))}


def _fit(name, g, hw, robust=False):
    """Least squares on log-time; ``robust``: then a soft-L1 fit of the relative error from there
    (scale 1%, close to least absolute relative error: the MAPE the tables report)."""
    f, x0, lo, hi = FORMS[name]
    a, y = _shapes(g), g["time_s"].to_numpy()
    ly = np.log(y)
    scale = _scale(x0, lo, hi)
    x = least_squares(lambda x: np.log(f(x, a, hw)) - ly, x0, bounds=(lo, hi), x_scale=scale, jac="3-point",
                      max_nfev=4000, **TOL).x
    if robust:
        x = least_squares(lambda x: f(x, a, hw) / y - 1.0, x, bounds=(lo, hi), x_scale=scale, jac="3-point",
                          loss="soft_l1", f_scale=0.01, max_nfev=4000, **TOL).x
    return x


#: Tolerances of every form's fit; with the fixed scales of :func:`_scale` (not ``x_scale="jac"``, which rescales
#: by the Jacobian at each step and so follows the rounding of each BLAS) the fits stop at the same point under
#: every OpenBLAS kernel (tools/blas_spread.py --research).
TOL = {"xtol": 1e-10, "ftol": 1e-10, "gtol": 1e-10}


def _scale(x0, lo, hi):
    """Each parameter's fixed scale: its start value, or a thousandth of its range where it starts at 0."""
    return np.where(x0 != 0, np.abs(x0), 1e-3 * np.where(np.isfinite(hi - lo), hi - lo, 1.0))


def _hw(gpu):
    h = get_hardware(GPUS[gpu])
    return {"peak": h.peak_flops_for("fp16"), "bw": h.mem_bandwidth, "sms": h.sm_count, "min_tile": min_row_tile(h)}


def leave_one_model_out(name: str, data: pd.DataFrame | None = None, robust: bool = False) -> dict:
    """{gpu: (pooled, decode, worst-model decode, median signed error at 64 < num_tokens <= 256)}."""
    from sdsl.fit.profiles import read_vidur

    data = read_vidur(data_path("vidur")) if data is None else data
    out = {}
    for gpu in GPUS:
        hw = _hw(gpu)
        d, parts = data[data["hardware"] == gpu], []
        for held in sorted(d["model"].unique()):
            test = d[d["model"] == held]
            x = _fit(name, d[d["model"] != held], hw, robust)
            parts.append(test.assign(rel=FORMS[name][0](x, _shapes(test), hw) / test["time_s"].to_numpy() - 1.0))
        p = pd.concat(parts)
        dec = p["num_tokens"] <= 64
        mid = (p["num_tokens"] > 64) & (p["num_tokens"] <= 256)
        out[gpu] = (float(p["rel"].abs().mean()), float(p.loc[dec, "rel"].abs().mean()),
                    float(p[dec].groupby("model")["rel"].apply(lambda r: r.abs().mean()).max()),
                    float(p.loc[mid, "rel"].median()))
    return out


def interaction_floor(data: pd.DataFrame | None = None, gpu: str = "h100") -> tuple:
    """In-sample MAPE of the kernel terms on all of ``gpu``'s models, then with the log-residual's median
    removed per num_tokens, per shape (model, op, TP) and per both (num_tokens first): what a form that
    got every num_tokens' and every shape's own factor right, but not their interaction, could reach."""
    from sdsl.fit.profiles import read_vidur

    data = read_vidur(data_path("vidur")) if data is None else data
    d, hw = data[data["hardware"] == gpu], _hw(gpu)
    lr = pd.Series(np.log(FORMS["kernel_terms"][0](_fit("kernel_terms", d, hw), _shapes(d), hw) / d["time_s"].to_numpy()),
                   index=d.index)
    shape = d["model"] + d["op"] + d["tp"].astype(str)
    by_t = lr - lr.groupby(d["num_tokens"]).transform("median")
    both = by_t - by_t.groupby(shape).transform("median")
    return tuple(float(np.mean(np.abs(np.expm1(r))))
                 for r in (lr, by_t, lr - lr.groupby(shape).transform("median"), both))


def results(data: pd.DataFrame | None = None) -> dict:
    """Every form's held-out numbers, the robust fit's and the H100 interaction floor (what ``--json`` writes)."""
    from sdsl.fit.profiles import read_vidur

    data = read_vidur(data_path("vidur")) if data is None else data
    return {"forms": {name: leave_one_model_out(name, data) for name in FORMS},
            "robust_kernel_terms": leave_one_model_out("kernel_terms", data, robust=True),
            "h100_interaction_floor": list(interaction_floor(data))}


if __name__ == "__main__":
    if "--json" in sys.argv:  # python profiles/gemm_forms.py --json profiles/gemm_forms.json
        import json

        from sdsl._io import atomic_write_text

        atomic_write_text(sys.argv[sys.argv.index("--json") + 1], json.dumps(results(), indent=1) + "\n")
        sys.exit(0)
    robust = "--robust" in sys.argv
    for name in [n for n in sys.argv[1:] if n != "--robust"] or list(FORMS):
        r = leave_one_model_out(name, robust=robust)
        print(f"{name:15s}", "  ".join(f"{g}: " + " / ".join(f"{100 * v:+.2f}%" if k == 3 else f"{100 * v:.2f}%"
                                                          for k, v in enumerate(r[g])) for g in r), flush=True)
