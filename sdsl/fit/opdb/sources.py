"""The two sources of measured H100 GEMMs side by side, for ``sdsl validate kernels``: Vidur's 2024 fp16 timings
(what the H100's shipped calibration is fitted on) and NVIDIA's operator tables (vLLM 0.24.0 bf16), at the (m, n, k)
both measured, and each source's fit priced on the other's rows."""

from __future__ import annotations

import numpy as np

from sdsl._evidence import error_phrase, summarize_errors as _summary

__all__ = ["vidur_vs_tables", "vidur_lines"]

#: GEMM rows up to which a GEMM is in the decode regime (weight reads dominate): the split ``sdsl validate kernels`` reports.
SMALL_M = 16
#: Tokens up to which a GEMM row is a decode step's (the shipped subset's rows beyond, 513-8192, are prefill and large
#: verify steps): the second split ``sdsl validate kernels`` reports.
DECODE_M = 512


def vidur_vs_tables() -> dict:
    """Vidur's H100 fp16 GEMMs against the tables' H100 bf16 GEMMs (vLLM), where both measured the same (m, n, k); the
    H100's Vidur calibration (what profiles before 2026 and ``ideal`` price with) on the tables' rows; and the tables'
    bf16 GEMM fit (what the newest vLLM profiles price with) on Vidur's rows of up to 512 tokens."""
    from sdsl._paths import data_path
    from sdsl.roofline.latency_params import default_params
    from sdsl.fit.opdb.kernels import gemm_rows, hardware_of, predict_gemm
    from sdsl.fit.vidur import read_vidur

    hw = hardware_of("h100_sxm")
    table = gemm_rows("h100_sxm", "vllm", "bfloat16")
    vidur = read_vidur(data_path("vidur"), hardware="h100")
    vidur = vidur.groupby(["num_tokens", "in_features", "out_features"], as_index=False)["time_s"].median()
    both = table.merge(vidur.rename(columns={"num_tokens": "m", "in_features": "k", "out_features": "n"}),
                       on=["m", "n", "k"], suffixes=("_opdb", "_vidur"))
    shipped = default_params(hw)
    e_shipped = predict_gemm(table, hw, "bf16", shipped) / table["time_s"].to_numpy() - 1.0
    m = table["m"].to_numpy()
    small = m <= SMALL_M
    by_m = {int(x): float(np.median(e_shipped[m == x])) for x in np.unique(m)}  # where the sources part: m > 64
    tables = default_params(hw, "vllm")  # the newest vLLM profile's: the tables' own bf16 GEMM fit
    own = vidur[vidur["num_tokens"] <= 512].rename(columns={"num_tokens": "m", "in_features": "k", "out_features": "n"})
    e_tables = predict_gemm(own, hw, "bf16", tables) / own["time_s"].to_numpy() - 1.0
    out = {"shipped_on_opdb": _summary(e_shipped), "shipped_on_opdb_small_m": _summary(e_shipped[small]),
           "shipped_on_opdb_median_signed_by_m": by_m, "shipped_source": shipped.source, "shared_points": int(len(both)),
           "tables_on_vidur_to_512": _summary(e_tables)}
    if len(both):
        d = both["time_s_vidur"].to_numpy() / both["time_s_opdb"].to_numpy() - 1.0
        out["vidur_vs_opdb"] = _summary(d)
        out["shared_shapes"] = sorted({f"{int(n)}x{int(k)}" for n, k in zip(both["n"], both["k"])})
        out["shared_m"] = sorted({int(m) for m in both["m"]})
    return out


def vidur_lines(v: dict | None) -> list[str]:
    """The report lines of :func:`vidur_vs_tables`' result (none without one)."""
    if not v:
        return []
    lines = []
    s = v["shipped_on_opdb"]
    lines.append(f"H100, the two sources: Vidur calibration ({v['shipped_source'][:60]}...) on the tables' bf16 GEMMs: "
                 + error_phrase(s, ("median", "median_abs"), ("worst", "worst_abs"), ("bias", "median_signed", "+")))
    t = v["tables_on_vidur_to_512"]
    lines.append("  the tables' bf16 fit (newest vLLM profiles) on Vidur's GEMMs up to 512 tokens: "
                 + error_phrase(t, ("median", "median_abs"), ("worst", "worst_abs"), ("bias", "median_signed", "+")))
    lines.append("  median signed by GEMM rows m: " + ", ".join(
        f"{m} {100 * e:+.1f}%" for m, e in v["shipped_on_opdb_median_signed_by_m"].items()))
    if "vidur_vs_opdb" in v:
        x = v["vidur_vs_opdb"]
        lines.append(f"  Vidur fp16 / tables bf16 at {v['shared_points']} shared (m, n, k): "
                     + error_phrase(x, ("median", "median_signed", "+"), ("median |diff|", "median_abs"),
                                    ("worst", "worst", "+")) + f" (shapes {', '.join(v['shared_shapes'])})")
    return lines
