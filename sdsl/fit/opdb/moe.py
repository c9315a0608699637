"""Fit the fused MoE layer's closed form (:func:`sdsl.catalog.moe.fused_moe_layer_time`) to the measured MoE tables of
NVIDIA's operator database (aiconfigurator-core 0.12.0, Apache-2.0; read by :func:`sdsl.fit.opdb.read_opdb`).

One table row is one whole MoE layer on one GPU (routing, alignment, both grouped GEMMs, activation, the weighted
sum) for ``num_tokens`` tokens of a model shape (hidden, expert d_ff, top-k, experts) under MoE TP and EP, with the
collector's synthetic routing (``distribution``). What the closed form needs of a row — the local experts the
tokens touch and their rows — follows from that routing, reproduced here from the collector's code
(ai-dynamo/aiconfigurator ``collector/helper.py``):

- ``balanced`` (``balanced_logits``): token i picks experts (i + j·s) mod E, j < k, s = ⌈E/k⌉, when n >= s, else
  (⌊i·s/n⌋ + j·s) mod E: n·k distinct experts until they run out, each with the same rows;
- ``power_law_<α>`` (``power_law_logits_v3``): each expert's load is drawn from a power-law density ∝ x^(−α) on
  [1, 0.8·n] (n·k > E) or [0.01, 2], scaled and rounded to n·k picks; the EP rank with the most picks is the one
  measured. Reproduced by a seeded Monte-Carlo of :data:`ROUTING_DRAWS` draws (expected distinct experts and
  padded rows of the heaviest rank). Where the rounding leaves picks to place among equal (zero) loads, or gives an
  expert more picks than there are tokens (a token's k slots then repeat it and the engine's top-k fills them with
  experts of equal logit), the experts touched depend on an order the configuration does not fix: rows with more
  than :data:`ORDER_DEPENDENT_MAX` of their picks so placed are left out of every fit and check (:func:`determined`).

The fit is per GPU, engine and kernel (and weight format), on rows of 1–512 tokens and MoE TP × EP <= 8 (one node:
the deployments sdsl prices), by least squares on the relative error with a soft-L1 loss (a few whole series of
the tables are several times slower than their neighbours — kernel configurations the tables measured but no
smooth form predicts; the loss keeps them from setting the fit, the validation still counts them). The collector
replays one layer with no cache flush, so a row whose touched experts' weights fit in the GPU's L2 is timed L2-hot:
where a group has such rows the fit takes one more term, s, their weight read 1/s as long
(:attr:`sdsl.catalog.moe.FusedMoEFit.l2_speedup`, bounded 1–20), which a step never charges.
:func:`leave_one_shape_out` refits without each model shape and scores it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sdsl._evidence import monotone_floor
from sdsl.catalog.moe import TRITON_ROW_TILES, FusedMoEFit, fused_moe_layer_time, row_tile_of
from sdsl.errors import ProfileError
from sdsl.fit.opdb.collection import l2_resident

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["OPDB_MOE_GPUS", "TABLE_FORMATS", "ROUTING_DRAWS", "ORDER_DEPENDENT_MAX", "collector_routing", "moe_features",
           "determined", "fit_group",
           "fit_fused_moe", "leave_one_shape_out", "validation_rows", "write_fits", "fused_moe_fit_file",
           "fused_moe_report", "moe_kernel_validation", "GROUP"]

#: The database's GPU names -> sdsl's hardware catalog names.
OPDB_MOE_GPUS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200", "a100_sxm": "a100-80gb", "l40s": "l40s",
                 "b300_sxm": "b300", "gb200": "gb200", "gb300": "gb300", "rtx_pro_6000_server": "rtx-pro-6000"}
#: The tables' moe_dtype -> sdsl's weight format (bytes per weight with scales, :mod:`sdsl.roofline.weight_formats`).
TABLE_FORMATS = {"bfloat16": "bf16", "fp8_block": "fp8", "fp8": "fp8", "int4_wo": "int4", "w4a16_mxfp4": "mxfp4",
                 "w4a8_mxfp4_mxfp8": "mxfp4", "nvfp4": "nvfp4"}
#: Monte-Carlo draws per power-law routing configuration (seeded).
ROUTING_DRAWS = 64
#: Rows kept: at most this share of the picks' experts set by an order of equal values rather than by the
#: configuration (:func:`collector_routing`) — an uncertainty in the experts a row touched as large as the 10% goal.
ORDER_DEPENDENT_MAX = 0.10
MAX_TOKENS = 512
MAX_GPUS = 8
#: Kernels built on the Triton fused_moe kernel (its default row tile, :data:`sdsl.catalog.moe.TRITON_ROW_TILES`).
TRITON_KERNELS = ("sglang_fused_moe_triton", "vllm_fused_moe", "vllm_unquantizedfusedmoe_triton_tritonexperts",
                  "vllm_fp8moe_triton_tritonexperts")
_BOUNDS = ([0.0, 0.0, 0.05, 0.02, 0.0, 1.0], [300e-6, 50e-6, 1.0, 1.0, 5e-6, 20.0])
_START = [25e-6, 0.5e-6, 0.8, 0.5, 0.01e-6, 2.0]


def _balanced_counts(n: int, E: int, k: int) -> np.ndarray:
    """Picks per expert of the collector's ``balanced_logits`` (one configuration)."""
    stride = math.ceil(E / k)
    i = np.arange(n)[:, None]
    j = np.arange(k)[None, :]
    sel = (i + j * stride) % E if n >= stride else (np.floor(i * stride / n) + j * stride) % E
    return np.bincount(sel.astype(int).ravel(), minlength=E)


def _power_law_counts(n: int, E: int, k: int, alpha: float, rng: np.random.Generator,
                      draws: int) -> tuple[np.ndarray, np.ndarray]:
    """(picks per expert, draws × E; picks per draw on zero loads) of the collector's ``power_law_logits_v3``: loads
    drawn by the inverse CDF of x^(−α) on [1, 0.8n] (n·k > E) or [0.01, 2], scaled to n·k and rounded, the
    rounding's excess taken from the largest loads and its shortfall given to them; the second array counts the
    shortfall's picks that land on experts whose rounded load is zero, which ones set by the order a sort gives equal
    loads (kept here in index order; the collector leaves it to torch's sort)."""
    lo, hi = (1.0, n * 0.8) if n * k > E else (0.01, 2.0)
    u = rng.random((draws, E))
    a = 1.0 - alpha
    x = ((hi ** a - lo ** a) * u + lo ** a) ** (1.0 / a)
    target = n * k
    counts = np.rint(x / x.sum(axis=1, keepdims=True) * target).astype(np.int64)
    delta = target - counts.sum(axis=1)
    order = np.argsort(-counts, axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(E)[None, :], axis=1)
    add = np.where(delta[:, None] > 0, (rank < delta[:, None]).astype(np.int64), 0)
    on_zero = np.maximum(delta - (counts > 0).sum(axis=1), 0)
    counts = counts + add
    # a shortfall: the collector takes one pick at a time from the smallest non-empty experts, falling back on the
    # largest; the largest absorbs it here (the distinct count moves by at most the few experts it would empty)
    short = np.maximum(-delta, 0)
    top = order[:, 0]
    counts[np.arange(draws), top] -= short
    return counts, on_zero


def collector_routing(num_tokens, num_experts, topk, ep, distribution, *, draws: int = ROUTING_DRAWS,
                      seed: int = 0) -> dict:
    """Expected (distinct local experts, local rows, local rows padded to each Triton row tile) of the measured GPU
    for one collector routing configuration (module docstring): the first E/ep experts under ``balanced``, the
    rank with the most picks under a power law; and ``order_dependent``, the share of the n·k picks whose expert
    the configuration does not fix (set by the order a sort gives equal values; :data:`ORDER_DEPENDENT_MAX`)."""
    n, E, k, ep = int(num_tokens), int(num_experts), int(topk), int(ep)
    order_dependent = 0.0
    if distribution == "balanced":
        counts = _balanced_counts(n, E, k)[None, :E // ep]
    elif distribution.startswith("power_law_"):
        alpha = float(distribution.rsplit("_", 1)[1])
        rng = np.random.default_rng([seed, n, E, k, ep, int(alpha * 1000)])
        picks, on_zero = _power_law_counts(n, E, k, alpha, rng, draws)
        full = picks.reshape(draws, ep, E // ep)
        heaviest = np.argmax(full.sum(axis=2), axis=1)
        counts = full[np.arange(draws), heaviest]
        # picks whose expert an order of equal values sets: those the shortfall puts on zero loads (which EP rank
        # they land on; on one GPU any of them is a new expert) and the repeats within a token's k slots (the
        # collector lays the picks out expert by expert and token i takes slots i, n + i, ...: an expert with
        # c > n picks repeats in c − n of them, and the engine's top-k fills those with experts of equal logit)
        repeats = np.maximum(picks - n, 0).sum(axis=1)
        order_dependent = float(np.mean((on_zero * (ep > 1) + repeats) / (n * k)))
    else:
        raise ProfileError(f"Unknown MoE routing distribution {distribution!r} in the operator tables.")
    out = {"local_experts": float(np.mean((counts > 0).sum(axis=1))), "local_rows": float(np.mean(counts.sum(axis=1))),
           "order_dependent": order_dependent}
    for tile in TRITON_ROW_TILES:
        out[f"rows_pad{tile}"] = float(np.mean((np.ceil(counts / tile) * tile).sum(axis=1)))
    return out


def moe_features(df: "pd.DataFrame") -> "pd.DataFrame":
    """The table rows with what the closed form needs: local experts touched, weight bytes, padded rows and FLOPs
    per row, bandwidth and peak of the GPU (sdsl's catalog), from the collector's routing."""
    import pandas as pd

    from sdsl.catalog.hardware import get_hardware
    from sdsl.roofline.weight_formats import gemm_peak, get_weight_format

    keys = ["num_tokens", "num_experts", "topk", "moe_ep_size", "distribution"]
    configs = df[keys].drop_duplicates()
    routed = pd.DataFrame([{**dict(zip(keys, row)), **collector_routing(*row)} for row in configs.itertuples(index=False)])
    out = df.merge(routed, on=keys, how="left")
    inter = np.ceil(out["inter_size"].to_numpy(float) / out["moe_tp_size"].to_numpy(float))
    h = out["hidden_size"].to_numpy(float)
    fmt = out["dtype"].map(TABLE_FORMATS)
    if fmt.isna().any():
        raise ProfileError(f"MoE weight formats without an sdsl format: {sorted(set(out['dtype'][fmt.isna()]))}.")
    bpw = fmt.map(lambda f: get_weight_format(f).bytes_per_weight).to_numpy(float)
    out["weight_bytes"] = out["local_experts"] * 3.0 * h * inter * bpw  # gated: gate + up, and down
    out["flops_per_row"] = 2.0 * 3.0 * h * inter
    hw = {g: get_hardware(name) for g, name in OPDB_MOE_GPUS.items() if g in set(out["gpu"])}
    out["bandwidth"] = out["gpu"].map(lambda g: hw[g].mem_bandwidth)
    # the peak the roofline prices that format at (activations in the format's own kind where the GPU has it)
    out["peak"] = [gemm_peak(hw[g], f, "bf16") for g, f in zip(out["gpu"], fmt)]
    out["shape"] = list(zip(out["hidden_size"], out["inter_size"], out["num_experts"], out["topk"]))
    # the touched experts' weights fit in L2: timed L2-hot (sdsl.fit.opdb.collection)
    out["l2_resident"] = l2_resident(out["gpu"].to_numpy(), out["weight_bytes"].to_numpy(), hw.get)
    return out


def _decode_rows(df: "pd.DataFrame") -> "pd.DataFrame":
    keep = (df["num_tokens"] <= MAX_TOKENS) & (df["moe_tp_size"] * df["moe_ep_size"] <= MAX_GPUS)
    keep &= df["gpu"].isin(list(OPDB_MOE_GPUS))
    return df[keep].reset_index(drop=True)


def determined(feats: "pd.DataFrame") -> "pd.DataFrame":
    """The :func:`moe_features` rows whose touched experts the routing configuration fixes (``order_dependent`` at
    most :data:`ORDER_DEPENDENT_MAX`): the rows every fit and validation uses. The others (a power law's few
    tokens, where the rounding leaves picks to place among equal loads or repeats an expert in a token's slots)
    contradict any placement rule on their own: at EP 8 Qwen3-235B's layer takes 34 us for one token under the
    power law and 47 us balanced (H200, SGLang 0.5.14), one local expert, where index order puts all 8 picks on it."""
    return feats[~_order_dependent(feats)].reset_index(drop=True)


def _order_dependent(feats: "pd.DataFrame"):
    """Rows :func:`determined` leaves out (more than :data:`ORDER_DEPENDENT_MAX` of their picks order-dependent)."""
    return feats["order_dependent"] > ORDER_DEPENDENT_MAX


def _predict(p, feats, row_tile: str) -> np.ndarray:
    """The closed form at terms ``p`` (five, and s for the L2-resident rows where a sixth is given) on ``feats``."""
    fit = FusedMoEFit("", "", "", "", *p[:5], row_tile=row_tile)
    s = np.where(feats["l2_resident"].to_numpy(dtype=bool), p[5], 1.0) if len(p) > 5 else 1.0
    tile = row_tile_of(fit, feats["num_tokens"], feats["num_experts"] / feats["moe_ep_size"])
    padded = np.where(tile == TRITON_ROW_TILES[0], feats["rows_pad16"],
                      np.where(tile == TRITON_ROW_TILES[1], feats["rows_pad64"], feats["local_rows"]))
    return fused_moe_layer_time(fit, tokens=feats["num_tokens"].to_numpy(float), top_k=feats["topk"].to_numpy(float),
                                local_experts_touched=feats["local_experts"].to_numpy(float), padded_rows=padded,
                                weight_bytes=feats["weight_bytes"].to_numpy(float) / s,
                                flops_per_row=feats["flops_per_row"].to_numpy(float),
                                bandwidth=feats["bandwidth"].to_numpy(float), peak=feats["peak"].to_numpy(float))


def _solve(feats, row_tile: str) -> np.ndarray:
    from scipy.optimize import least_squares

    y = feats["time_s"].to_numpy(float)
    n = 6 if feats["l2_resident"].any() else 5  # s (an L2 read no slower than DRAM's) where some rows are resident
    scale = np.array([1e-6, 1e-6, 1.0, 1.0, 1e-6, 1.0])[:n]
    res = least_squares(lambda z: _predict(z * scale, feats, row_tile) / y - 1.0, np.array(_START[:n]) / scale,
                        bounds=(np.array(_BOUNDS[0][:n]) / scale, np.array(_BOUNDS[1][:n]) / scale), loss="soft_l1",
                        f_scale=0.1)
    return res.x * scale


def _row_tile(kernel_source: str) -> str:
    return "triton" if kernel_source in TRITON_KERNELS else "none"


def _stats(err) -> dict:
    e = np.asarray(err, dtype=float)
    a = np.abs(e)
    return {"n": int(e.size), "median_abs": float(np.median(a)), "p90_abs": float(np.quantile(a, 0.9)),
            "worst": float(e[np.argmax(a)]), "median_signed": float(np.median(e))}


def fit_group(feats: "pd.DataFrame") -> FusedMoEFit:
    """The fit of one (GPU, engine, kernel, format) group of :func:`moe_features` rows."""
    first = feats.iloc[0]
    tile = _row_tile(first["kernel_source"])
    p = _solve(feats, tile)
    return FusedMoEFit(str(first["gpu"]), str(first["engine"]), str(first["kernel_source"]), str(first["dtype"]),
                       *(float(x) for x in p[:5]), row_tile=tile, l2_speedup=float(p[5]) if len(p) > 5 else 1.0,
                       versions=tuple(sorted(set(feats["engine_version"]))), rows=len(feats),
                       shapes=feats["shape"].nunique())


GROUP = ["gpu", "engine", "kernel_source", "dtype"]
#: One measured series of a kernel: everything but the token count (whose time a monotone form cannot make fall).
SERIES = GROUP + ["engine_version", "hidden_size", "inter_size", "num_experts", "topk", "moe_tp_size", "moe_ep_size",
                  "distribution"]


def leave_one_shape_out(feats: "pd.DataFrame", min_shapes: int = 3) -> "pd.DataFrame":
    """Per group with at least ``min_shapes`` model shapes, each shape's rows priced by the fit on the others':
    the rows with ``predicted_s`` and ``error`` (predicted / measured − 1)."""
    import pandas as pd

    parts = []
    for _, g in feats.groupby(GROUP, sort=True):
        if g["shape"].nunique() < min_shapes:
            continue
        tile = _row_tile(g["kernel_source"].iloc[0])
        for shape in sorted(set(g["shape"])):
            held = g["shape"] == shape
            p = _solve(g[~held], tile)
            pred = _predict(p, g[held], tile)
            parts.append(g[held].assign(predicted_s=pred, error=pred / g.loc[held, "time_s"].to_numpy() - 1.0))
    return pd.concat(parts, ignore_index=True) if parts else feats.iloc[:0]


def validation_rows(held: "pd.DataFrame") -> list[dict]:
    """Per group (and per GPU and format over its groups): rows, shapes, median / p90 / worst / signed error."""
    rows = []
    for key, g in held.groupby(GROUP, sort=True):
        rows.append({**dict(zip(GROUP, key)), "shapes": int(g["shape"].nunique()), **_stats(g["error"])})
    return rows


def fit_fused_moe(df: "pd.DataFrame | None" = None, *, loso: bool = True) -> list[FusedMoEFit]:
    """Fit every (GPU, engine, kernel, format) group of the MoE table ``df`` (default: the shipped subset,
    :func:`sdsl.fit.opdb.read_opdb`), each with its leave-one-shape-out error where it has >= 3 shapes."""
    if df is None:
        from sdsl.fit.opdb import read_opdb

        df = read_opdb("moe")
    feats = determined(moe_features(_decode_rows(df)))
    held = leave_one_shape_out(feats) if loso else feats.iloc[:0]
    scores = {tuple(r[c] for c in GROUP): r for r in validation_rows(held)} if len(held) else {}
    fits = []
    for key, g in feats.groupby(GROUP, sort=True):
        f = fit_group(g)
        s = scores.get(key)
        fits.append(FusedMoEFit(**{**asdict(f), "versions": f.versions,
                                   "loso": {k: s[k] for k in ("median_abs", "p90_abs", "worst", "median_signed", "n")}
                                   if s else {}}))
    return fits


def fused_moe_fit_file() -> Path:
    from sdsl._paths import data_path

    return data_path("moe", "fused_moe.json")


def write_fits(fits: list[FusedMoEFit], path: str | os.PathLike | None = None) -> Path:
    """Write the fits as JSON (atomically): what :func:`sdsl.catalog.moe.fused_moe_fits` loads."""
    path = Path(path) if path is not None else fused_moe_fit_file()
    doc = {"source": "NVIDIA aiconfigurator-core 0.12.0 (Apache-2.0), systems/data/<gpu>/moe/<engine>/<version>/"
                     "moe_perf.parquet, the filtered subset sdsl/data/opdb/moe.csv.gz",
           "form": "t = t0 + per_expert*D + W/(eta_memory*BW) + padded_rows*flops_per_row/(eta_compute*peak) "
                   "+ per_pair*tokens*top_k (sdsl.catalog.moe.fused_moe_layer_time); the tables' rows whose touched "
                   "experts fit in L2 read W/l2_speedup (timed L2-hot), which a step never takes",
           "command": "python -m sdsl.fit.opdb.moe --write",
           "fits": [{**asdict(f), "versions": list(f.versions)} for f in fits]}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)
    return path


def fused_moe_report(df: "pd.DataFrame | None" = None) -> dict:
    """Leave-one-shape-out error per group and per (GPU, format) pooled over its engines' kernels."""
    if df is None:
        from sdsl.fit.opdb import read_opdb

        df = read_opdb("moe")
    held = leave_one_shape_out(determined(moe_features(_decode_rows(df))))
    pooled = [{"gpu": g, "dtype": d, "shapes": int(x["shape"].nunique()), **_stats(x["error"])}
              for (g, d), x in held.groupby(["gpu", "dtype"], sort=True)]
    return {"groups": validation_rows(held), "by_gpu_format": pooled}


def _main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="Fit the fused MoE layer's closed form to the operator tables.")
    ap.add_argument("--write", action="store_true", help="write sdsl/data/moe/fused_moe.json")
    args = ap.parse_args(argv)
    fits = fit_fused_moe()
    for f in fits:
        s = f.loso
        held = (f"held out: median {s['median_abs']:.1%}, p90 {s['p90_abs']:.1%}, worst {s['worst']:+.1%}, "
                f"signed {s['median_signed']:+.1%}") if s else "held out: < 3 shapes"
        print(f"{f.gpu:9s} {f.engine:7s} {f.kernel_source[:48]:48s} {f.dtype:16s} t0 {f.t0_s * 1e6:5.1f} us "
              f"c_e {f.per_expert_s * 1e6:5.2f} us eta_m {f.eta_memory:.2f} eta_c {f.eta_compute:.2f} "
              f"c_p {f.per_pair_s * 1e9:6.1f} ns s {f.l2_speedup:5.2f}  {held}")
    if args.write:
        print(write_fits(fits))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main())


def moe_kernel_validation(gpu: str, df: "pd.DataFrame | None" = None) -> dict:
    """For ``sdsl validate kernels``: per (engine, format, kernel) of ``gpu`` with >= 3 model shapes, and per format
    pooled over them ("all:<format>"), an entry (rows, folds, provenance, fitted terms) and its held-out errors (one
    model shape left out at a time, :func:`leave_one_shape_out`) and each row's :data:`SERIES` bound for any form
    monotone in the token count (:func:`sdsl._evidence.monotone_floor`)."""
    if df is None:
        from sdsl.fit.opdb import read_opdb

        df = read_opdb("moe", gpu=gpu)
    every = moe_features(_decode_rows(df[df["gpu"] == gpu]))
    feats = determined(every)
    held = leave_one_shape_out(feats)
    held["floor"] = monotone_floor(held, SERIES, "num_tokens")
    left = every[_order_dependent(every)]  # the rows determined() leaves out, stated per entry
    left_by = left.groupby(["engine", "kernel_source", "dtype"]).size().to_dict()
    out = {}

    def prov(g):
        return {"engine": sorted(set(g["engine"])), "engine_version": sorted(set(g["engine_version"])),
                "kernel_source": sorted(set(g["kernel_source"]))}

    for (engine, kernel, dtype), g in held.groupby(["engine", "kernel_source", "dtype"], sort=True):
        fit = fit_group(feats[(feats["engine"] == engine) & (feats["kernel_source"] == kernel) & (feats["dtype"] == dtype)])
        entry = {"rows": int(len(g)), "held_out": "model shape", "folds": int(g["shape"].nunique()), **prov(g),
                 "order_dependent_rows_left_out": int(left_by.get((engine, kernel, dtype), 0)),
                 "fitted": {k: getattr(fit, k) for k in ("t0_s", "per_expert_s", "eta_memory", "eta_compute",
                                                         "per_pair_s", "row_tile", "l2_speedup")}}
        out[f"{engine}:{dtype}:{kernel}"] = (entry, g["error"].to_numpy(), g["floor"].to_numpy())
    for dtype, g in held.groupby("dtype", sort=True):  # pooled: the engine builds in the JSON, not the listing
        entry = {"rows": int(len(g)), "held_out": "model shape", "folds": int(g["shape"].nunique()), **prov(g),
                 "order_dependent_rows_left_out": int((left["dtype"] == dtype).sum()),
                 "engine_version": [], "engine_builds": sorted(set(g["engine"] + " " + g["engine_version"]))}
        out[f"all:{dtype}"] = (entry, g["error"].to_numpy(), g["floor"].to_numpy())
    return out
