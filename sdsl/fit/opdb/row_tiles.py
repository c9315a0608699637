"""GEMM row tiles on NVIDIA's operator tables: where a GEMM's time steps one row past a tile edge, measured and priced.

The tables time each GEMM at m and m + 1 rows for m = 64, 128, 192, 256, 512 and 1024 (the shipped subset keeps those
pairs). A kernel that tiles its rows in blocks of r computes whole tiles, so its time steps where m + 1 starts a new
tile; how far it steps tells the tile. For each GPU and format, :func:`row_tile_steps` gives the measured median step
t(m + 1)/t(m) over the shapes, and for each candidate tile the fitted form's step and its in-sample median error: the
fit (:func:`sdsl.fit.opdb.kernels.fit_gemm`) keeps the tile of the lower loss.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = ["TILE_EDGES", "row_tile_steps", "row_tile_lines"]

#: GEMM rows m whose next row m + 1 the tables also time.
TILE_EDGES = (64, 128, 192, 256, 512, 1024)
_FORMATS = {"bfloat16": "bf16", "fp8": "fp8"}


def _steps(rows, times) -> np.ndarray:
    """t(m + 1)/t(m) for every (n, k, m) in ``rows`` with m in :data:`TILE_EDGES` and m + 1 timed too."""
    t = rows[["n", "k", "m"]].assign(t=np.asarray(times, dtype=float))
    both = t[t["m"].isin(TILE_EDGES)].merge(t.assign(m=t["m"] - 1), on=["n", "k", "m"], suffixes=("", "_next"))
    return (both["t_next"] / both["t"]).to_numpy()


@lru_cache(maxsize=None)
def row_tile_steps(gpu: str, engine: str = "vllm") -> dict:
    """Per format (bf16, fp8) of ``gpu`` (a database name): ``measured_step`` (median t(m + 1)/t(m) at the tile
    edges), per candidate tile the fitted form's median step (``step``), final loss (``loss``) and in-sample median
    |error| (``median_abs``), and the tile the fit keeps, the lowest loss (``chosen``)."""
    from sdsl.fit.opdb.kernels import best_tile, fit_gemm_tiles, gemm_rows, hardware_of, predict_gemm

    hw = hardware_of(gpu)
    bf16 = gemm_rows(gpu, engine, "bfloat16")
    base = None
    out = {}
    for dtype, fmt in _FORMATS.items():
        rows = bf16 if dtype == "bfloat16" else gemm_rows(gpu, engine, dtype)
        if rows.empty:
            continue
        y = rows["time_s"].to_numpy(dtype=float)
        fits = fit_gemm_tiles(rows, hw, fmt, base)
        chosen = best_tile(fits)
        entry = {"measured_step": float(np.median(_steps(rows, y))), "rows": int(len(rows)), "chosen": int(chosen),
                 "tiles": {}}
        for tile, (cost, p) in fits.items():
            pred = predict_gemm(rows, hw, fmt, p)
            entry["tiles"][tile] = {"step": float(np.median(_steps(rows, pred))), "loss": cost,
                                    "median_abs": float(np.median(np.abs(pred / y - 1.0)))}
        out[dtype] = entry
        if dtype == "bfloat16":
            base = fits[chosen][1]
    return out


def row_tile_lines(data: dict | None) -> list[str]:
    """Report lines of :func:`row_tile_steps` per GPU (``data``: {gpu: its result})."""
    lines = []
    for gpu, res in (data or {}).items():
        for dtype, e in res.items():
            alts = "; ".join(f"{t}-row tiles {100 * (v['step'] - 1):+.1f}% (median |e| {100 * v['median_abs']:.1f}%, "
                             f"loss {v['loss']:.2f})" for t, v in e["tiles"].items())
            lines.append(f"{gpu} {dtype} GEMM one row past a tile edge (m = {', '.join(map(str, TILE_EDGES))}): measured "
                         f"{100 * (e['measured_step'] - 1):+.1f}%; {alts}; fitted: {e['chosen']}")
    return lines
