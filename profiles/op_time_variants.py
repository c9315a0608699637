"""Leave-one-model-out decode MAPE of alternative op_time forms on Vidur's H100/A100 GEMMs (exploratory).

    .venv/bin/python profiles/op_time_variants.py base l2step l2fitC ramp overlap perop concave hard tile16 tile32 tile64
    .venv/bin/python profiles/op_time_variants.py --decode-weight 0.2 base tile32

Each variant is fitted on log-time with least_squares exactly like sdsl.fit.calibration (free smoothness),
on all models but one, and scored on the held-out one; prints the medians VALIDATION.md quotes
(section "Decode regime: forms tried"). None of these forms ships: sdsl.roofline.latency.op_time is unchanged.
"""
import numpy as np, pandas as pd, sys
from scipy.optimize import least_squares
from sdsl._paths import data_path
from sdsl.fit.profiles import read_vidur
from sdsl.catalog.hardware import get_hardware
d = read_vidur(data_path("vidur"))
HW = {"h100": ("h100-sxm", 50e6), "a100": ("a100-80gb", 40e6)}
OPS = ["attn_pre_proj","attn_post_proj","mlp_up_proj","mlp_down_proj"]
def smax(x, y, p):
    hi = np.maximum(x, y); lo = np.minimum(x, y)
    return hi * (1 + (lo/hi)**p)**(1/p)

def make(variant, peak, bw, C):
    # returns (names, x0, lo, hi, f(x, df)->t)
    def base(x, T, i, o, W, op):
        ec, em, tk, p = x[:4]
        fl = 2*T*i*o; by = 2*(i*o + T*(i+o))
        return fl/(ec*peak), by/(em*bw), tk, p, by
    if variant == "base":
        f = lambda x, *a: (lambda tc, tm, tk, p, by: smax(tc, tm, p) + tk)(*base(x, *a))
        return 4, [0.7,0.9,5e-6,2], [1e-3,1e-3,0,1], [1,1,1e-3,64], f
    if variant == "l2step":  # weights fit in L2 -> bandwidth k x
        def f(x, T, i, o, W, op):
            tc, tm, tk, p, by = base(x, T, i, o, W, op)
            tm = np.where(W <= C, tm / x[4], tm)
            return smax(tc, tm, p) + tk
        return 5, [0.7,0.9,5e-6,2,1.5], [1e-3,1e-3,0,1,1], [1,1,1e-3,64,20], f
    if variant == "l2frac":  # weight bytes served from L2 at k x bandwidth when W<=C, only weight part
        def f(x, T, i, o, W, op):
            tc, tm, tk, p, by = base(x, T, i, o, W, op)
            wb = 2*i*o
            tm = np.where(W <= C, (by - wb + wb / x[4]) / (by) * tm, tm)
            return smax(tc, tm, p) + tk
        return 5, [0.7,0.9,5e-6,2,1.5], [1e-3,1e-3,0,1,1], [1,1,1e-3,64,50], f
    if variant == "ramp":  # eta(bytes) = eta_m * by/(by+B) inside the roofline
        def f(x, T, i, o, W, op):
            tc, tm, tk, p, by = base(x, T, i, o, W, op)
            tm = tm * (by + x[4]) / by
            return smax(tc, tm, p) + tk
        return 5, [0.7,0.9,5e-6,2,1e6], [1e-3,1e-3,0,1,0], [1,1,1e-3,64,1e9], f
    if variant == "overlap":  # t_kernel overlapped: ((roof)^r + tk^r)^(1/r)
        def f(x, T, i, o, W, op):
            tc, tm, tk, p, by = base(x, T, i, o, W, op)
            return smax(smax(tc, tm, p), tk + 0*tm, x[4])
        return 5, [0.7,0.9,5e-6,2,1.5], [1e-3,1e-3,0,1,1], [1,1,1e-3,64,64], f
    if variant == "perop":
        def f(x, T, i, o, W, op):
            tc, tm, tk, p, by = base(x, T, i, o, W, op)
            tks = np.select([op == k for k in OPS], [x[3+j] if j else x[2] for j, k in enumerate(OPS)])
            return smax(tc, tm, p) + tks
        # x: ec, em, tk0, p, tk1, tk2, tk3
        def g(x, T, i, o, W, op):
            ec, em, tk0, p = x[:4]
            fl = 2*T*i*o; by = 2*(i*o + T*(i+o))
            tks = np.select([op == k for k in OPS], [tk0, x[4], x[5], x[6]])
            return smax(fl/(ec*peak), by/(em*bw), p) + tks
        return 7, [0.7,0.9,5e-6,2,5e-6,5e-6,5e-6], [1e-3,1e-3,0,1,0,0,0], [1,1,1e-3,64,1e-3,1e-3,1e-3], g
    if variant == "concave":  # t = roof + tk*(1-exp(-by/B)) + t0
        def f(x, T, i, o, W, op):
            tc, tm, tk, p, by = base(x, T, i, o, W, op)
            return smax(tc, tm, p) + tk + x[5]*(1-np.exp(-by/x[4]))
        return 6, [0.7,0.9,3e-6,2,2e7,3e-6], [1e-3,1e-3,0,1,1e5,0], [1,1,1e-3,64,1e10,1e-3], f
    raise KeyError(variant)

def arrays(g):
    T, i, o = (g[c].to_numpy(float) for c in ("num_tokens","in_features","out_features"))
    return T, i, o, 2*i*o, g["op"].to_numpy()

def fit(variant, g, peak, bw, C):
    n, x0, lo, hi, f = make(variant, peak, bw, C)
    a = arrays(g); ly = np.log(g.time_s.to_numpy())
    sol = least_squares(lambda x: np.log(f(x, *a)) - ly, x0, bounds=(lo, hi), x_scale="jac", max_nfev=3000)
    return sol.x, f

def lomo(variant, dmax=64):
    out = {}
    for hk, (hn, C) in HW.items():
        hw = get_hardware(hn); peak, bw = hw.peak_flops_for("fp16"), hw.mem_bandwidth
        dd = d[d.hardware == hk]; ov, dc = [], []
        for m in sorted(dd.model.unique()):
            tr, te = dd[dd.model != m], dd[dd.model == m]
            x, f = fit(variant, tr, peak, bw, C)
            ape = np.abs(f(x, *arrays(te)) / te.time_s.to_numpy() - 1)
            ov.append(ape.mean()); dc.append(ape[te.num_tokens.to_numpy() <= dmax].mean())
        xa, _ = fit(variant, dd, peak, bw, C)
        out[hk] = (np.median(ov), np.median(dc), np.round(dc, 3), np.array2string(xa, precision=3))
    return out

_make1 = make
def make(variant, peak, bw, C):
    if variant.startswith("tile"):
        m = float(variant[4:])
        def f(x, T, i, o, W, op):
            ec, em, tk, p = x[:4]
            Tp = np.ceil(T / m) * m
            fl = 2*Tp*i*o; by = 2*(i*o + T*(i+o))
            return smax(fl/(ec*peak), by/(em*bw), p) + tk
        return 4, [0.7,0.9,5e-6,2], [1e-3,1e-3,0,1], [1,1,1e-3,64], f
    if variant == "hard":
        def f(x, T, i, o, W, op):
            ec, em, tk = x[:3]
            fl = 2*T*i*o; by = 2*(i*o + T*(i+o))
            return np.maximum(fl/(ec*peak), by/(em*bw)) + tk
        return 3, [0.7,0.9,5e-6], [1e-3,1e-3,0], [1,1,1e-3], f
    return _make1(variant, peak, bw, C)
_make2 = make
def make(variant, peak, bw, C):
    if variant == "l2fitC":
        def f(x, T, i, o, W, op):
            ec, em, tk, p, k, lc = x
            fl = 2*T*i*o; by = 2*(i*o + T*(i+o))
            s = 1/(1+np.exp((np.log(W) - lc)/0.15))
            tm = by/(em*bw) / (1 + (k-1)*s)
            return smax(fl/(ec*peak), tm, p) + tk
        return 6, [0.7,0.9,5e-6,2,2,np.log(2e7)], [1e-3,1e-3,0,1,1,np.log(1e6)], [1,1,1e-3,64,50,np.log(1e9)], f
    return _make2(variant, peak, bw, C)

WD = None
if sys.argv[1:2] == ["--decode-weight"]:
    WD = float(sys.argv[2]); sys.argv[1:3] = []
    _fit0 = fit
    def fit(variant, g, peak, bw, C):  # noqa: F811  decode rows (num_tokens <= 64) get a share WD of the weight
        n, x0, lo, hi, f = make(variant, peak, bw, C)
        a = arrays(g); ly = np.log(g.time_s.to_numpy()); dec = g.num_tokens.to_numpy() <= 64
        sw = np.sqrt(np.where(dec, WD / dec.sum(), (1 - WD) / (~dec).sum()) * len(g))
        sol = least_squares(lambda x: sw * (np.log(f(x, *a)) - ly), x0, bounds=(lo, hi), x_scale="jac", max_nfev=3000)
        return sol.x, f
for v in sys.argv[1:]:
    r = lomo(v)
    print(v if WD is None else f"{v} (decode weight {WD})",
          {k: f"overall {a:.4f} decode {b:.4f} per-model-decode {c} fit-all x={x}" for k, (a, b, c, x) in r.items()}, flush=True)
