"""The two costs the synthetic sweep's rows pay on a CPU beyond the per-forward roofline.

1. **CPU GEMM rows.** On this CPU's fp32 BLAS (one thread), a GEMM over m = 1 row runs a GEMV that
   streams the weights once; m = 2–3 rows stream them once per row, and from m = 4 on a packed kernel
   costs two to three streams before its compute grows (``benchmarks/results/synthetic_terms.json``:
   2.1× at m = 2, 3.1× at m = 3, 2.8× at m = 4 against m = 1 on a 1024 × 65536 weight). sdsl's roofline
   prices a memory-bound GEMM nearly flat in m, and the shipped CPU calibration cannot see it: its rows'
   weights (a 256-byte vocabulary, d ≤ 768) sit in cache, where per-forward fixed costs dominate. The
   factor κ(m) = measured / priced time of one GEMM over m rows is read off GEMMs whose weight shapes
   belong to neither sweep model (``profiles/cpu-gemm-rows.json``, written by
   ``benchmarks/bench_synthetic_terms.py``: 1024 × 65536 and 2048 × 16384, fp32, DRAM-resident), median
   over the shapes, linear in m between the measured counts. Every forward's GEMMs (n_layer × the four
   layer GEMMs and the LM head, plus an EAGLE head's fc) are then priced at κ(b·q) times sdsl's price.
2. **Draft re-read.** A draft model's KV cache misses its own last draft after a fully accepted chain
   (that draft was never fed back) and the bonus token: its next first pass reads two tokens per
   sequence instead of one, in a padded batch whenever any of the b sequences accepted all γ:
   P = 1 − (1 − α^γ)^b (forced i.i.d. acceptance; Leviathan et al. 2023 §3.1 for the chain). Priced as
   P · (T_draft(q = 2) − T_draft(q = 1)), each pass with its GEMM factor on a CPU.
"""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np

__all__ = ["GEMM_ROWS_FILE", "gemm_row_table", "row_factor", "forward_extra_s", "model_extra_s", "passes_extra_s",
           "reread_probability"]

GEMM_ROWS_FILE = "cpu-gemm-rows.json"


@lru_cache(maxsize=4)
def gemm_row_table(path: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(log weight bytes, rows, κ[size, rows]) from the held-out GEMM timings; κ = measured / priced,
    the median over weight shapes of the same size."""
    from pathlib import Path

    from sdsl._paths import REPO_ROOT

    data = json.loads(Path(path or REPO_ROOT / "profiles" / GEMM_ROWS_FILE).read_text())["held_out_gemms"]
    size = {id(r): round(np.log(4.0 * r["n_in"] * r["n_out"]), 6) for r in data}
    sizes, rows = sorted(set(size.values())), sorted({r["rows"] for r in data})
    kappa = [[np.median([r["measured_s"] / r["priced_s"] for r in data if size[id(r)] == s and r["rows"] == m])
              for m in rows] for s in sizes]
    return np.asarray(sizes), np.asarray(rows, dtype=float), np.asarray(kappa)


def _bracket(x, grid: np.ndarray):
    """Lower/upper grid indices and weight of ``x`` for linear interpolation, constant beyond the grid."""
    x = np.clip(x, grid[0], grid[-1])
    if grid.size == 1:
        zero = np.zeros(np.shape(x), dtype=int)
        return zero, zero, np.zeros(np.shape(x))
    lo = np.clip(np.searchsorted(grid, x, side="right") - 1, 0, grid.size - 2)
    return lo, lo + 1, (x - grid[lo]) / (grid[lo + 1] - grid[lo])


def row_factor(tokens, weight_bytes, table=None) -> np.ndarray:
    """κ at ``tokens`` GEMM rows for a weight of ``weight_bytes``: linear in rows between measured counts
    and in log bytes between measured sizes (bilinear, constant beyond either range); broadcasts."""
    sizes, rows, kappa = table if table is not None else gemm_row_table()
    t, lb = np.broadcast_arrays(np.asarray(tokens, dtype=float), np.log(np.asarray(weight_bytes, dtype=float)))
    r0, r1, wr = _bracket(t, rows)
    s0, s1, ws = _bracket(lb, sizes)
    at = lambda s: (1 - wr) * kappa[s, r0] + wr * kappa[s, r1]  # noqa: E731
    return (1 - ws) * at(s0) + ws * at(s1)


def _gemms(shapes, tokens, lm_tokens, fc_in: float):
    """(rows, n_in, n_out, count) of one forward's GEMMs: the four per layer, the LM head (over
    ``lm_tokens`` rows), an EAGLE head's fc."""
    from sdsl.roofline.latency import GEMM_OPS

    out = [(tokens, shapes.gemm_in[op], shapes.gemm_out[op], shapes.n_layer) for op in GEMM_OPS]
    out.append((lm_tokens, shapes.lm_in, shapes.lm_out, 1))
    return out + ([(tokens, fc_in, shapes.d_model, 1)] if fc_in else [])


def forward_extra_s(shapes, deployment, tokens, table=None, fc_in: float = 0.0, lm_tokens=None) -> np.ndarray:
    """What κ adds to a forward's price: Σ over its GEMMs of (κ(rows, weight bytes) − 1) × sdsl's price
    of that GEMM (:func:`sdsl.roofline.latency.op_time`); ``lm_tokens``: the LM head's rows (default all)."""
    from sdsl.catalog.models import dtype_bytes
    from sdsl.speculation.proposers import _gemm_time

    m, width = np.asarray(tokens, dtype=float), dtype_bytes(deployment.dtype)
    total = 0.0 * m
    for rows, n_in, n_out, count in _gemms(shapes, m, m if lm_tokens is None else lm_tokens, fc_in):
        kappa = row_factor(rows, width * float(n_in) * float(n_out), table)
        total = total + count * (kappa - 1.0) * _gemm_time(rows, n_in, n_out, deployment)
    return total


def model_extra_s(spec, deployment, tokens) -> float:
    """:func:`forward_extra_s` of a whole model's forward over ``tokens`` rows (logits at every row)."""
    from sdsl.roofline.latency import ModelShapes

    return float(forward_extra_s(ModelShapes.of(spec, deployment.tp), deployment, tokens))


def passes_extra_s(proposer, target, deployment, passes, batch=1, first_logits=1.0) -> float:
    """What κ adds to a proposer's drafting passes, ``passes[i]`` rows per sequence in pass i, ``batch`` sequences.
    A draft model (a :class:`sdsl.speculation.proposers.DraftModel` or its ModelSpec) computes logits at every row; an
    EAGLE head (:class:`sdsl.speculation.proposers.EagleHead`) runs its fc too, and its first pass — the draft extend, whose
    logits draft depth 1 — computes logits at ``first_logits`` rows per sequence (1: the last accepted token)."""
    from sdsl.speculation.proposers import EagleHead

    b = float(batch)
    if not isinstance(proposer, EagleHead):
        spec = getattr(proposer, "model", proposer)
        return sum(model_extra_s(spec, deployment, b * q) for q in passes)
    head, fc_in = proposer.shapes(target, deployment.tp), proposer.fused_features * target.d_model
    return sum(float(forward_extra_s(head, deployment, b * q, fc_in=fc_in, lm_tokens=b * (first_logits if i == 0 else q)))
               for i, q in enumerate(passes))


def reread_probability(alpha, gamma, batch) -> np.ndarray:
    """P(some sequence of the batch accepted all γ drafts) = 1 − (1 − α^γ)^b."""
    a, g, b = (np.asarray(v, dtype=float) for v in (alpha, gamma, batch))
    return 1.0 - (1.0 - a ** g) ** b
