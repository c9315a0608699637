"""The MLA attention block a decode step prices, against the whole MLA module NVIDIA's operator tables time.

vLLM's and TensorRT-LLM's collectors time DeepSeek-V3's decode attention module as one op (the ``mla_module`` table,
``mla_generation_module_perf``: the fused q_a/kv_a projection, the q_a and kv_a norms, the query up-projection,
RoPE, the absorbed key and value up-projections, latent attention over the KV cache and the output projection, for
the query heads one GPU holds; no all-reduce: ai-dynamo/aiconfigurator ``collector/vllm/collect_mla_module.py``,
"Profiles the complete attention module forward pass (projections + attention + output)", built from vLLM's own
``DeepseekV2MLAAttention``). A step prices those pieces apart: the projections as GEMMs
(:func:`sdsl.roofline.step_ops.gemm_op`, with a weight format's terms), the two norms and RoPE as elementwise kernels,
the latent attention on the roofline of its FLOPs and KV bytes plus one launch (no engine's MLA kernel is priced on
its measured form: :mod:`sdsl.roofline.attention`), and :data:`~sdsl.roofline.step_ops.MLA_EXTRA_GEMM_KERNELS`
launches. :func:`step_mla_block` sums exactly those terms of :func:`sdsl.roofline.latency.step_time` for a table
row; :func:`mla_module_check` compares them. A check, not a fit: nothing here is shipped into a step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MLA_MODULE_GPUS", "mla_module_rows", "step_mla_block", "mla_module_check", "mla_module_lines", "model_heads"]

#: Database GPU -> catalog hardware of the GPUs whose module rows the shipped subset keeps.
MLA_MODULE_GPUS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200"}
#: The tables' GEMM type -> the weight format a deployment prices it in (None: the activation dtype, bf16).
GEMM_FORMATS = {"bfloat16": None, "fp8_block": "fp8"}
#: The catalog model the collectors' module is (its query heads split over TP = heads / heads per GPU).
MODEL = "deepseek-v3"


def model_heads() -> int:
    """DeepSeek-V3's query heads (the catalog's), which a row's heads per GPU divide into its TP degree."""
    from sdsl.catalog.models import get_model

    return get_model(MODEL).n_head


def mla_module_rows(gpu: str, engine: str, gemm_type: str = "fp8_block") -> "pd.DataFrame":
    """The shipped module rows of one GPU, engine (``vllm`` or ``trtllm``) and GEMM type over a bf16 KV cache."""
    from sdsl.fit.opdb import read_opdb

    df = read_opdb("mla_module", gpu=gpu, engine=engine, latest=True)
    return df[(df["gemm_type"] == gemm_type) & (df["kv_cache_dtype"] == "bfloat16")].reset_index(drop=True)


def step_mla_block(rows: "pd.DataFrame", hardware: str, engine: str, gemm_type: str) -> np.ndarray:
    """Seconds a step prices DeepSeek-V3's MLA block at each row's batch, KV length and heads per GPU (TP = its
    :func:`model_heads` / heads) on ``hardware`` under ``engine``'s profile, its linear layers in the row's GEMM type."""
    from sdsl.roofline import latency as lat
    from sdsl.roofline.deployment import Deployment
    from sdsl.roofline.kernels import elementwise_time
    from sdsl.roofline.step_ops import MLA_EXTRA_GEMM_KERNELS, layer_ops, precision_of, roofline_sums

    rows = rows.reset_index(drop=True)
    out = np.zeros(len(rows))
    for heads, idx in rows.groupby("num_heads").groups.items():  # one deployment per TP degree
        part = rows.loc[idx]
        dep = Deployment(hardware, tp=model_heads() // int(heads), engine=engine, weight_dtype=GEMM_FORMATS[gemm_type])
        shapes, params, prec = lat._shapes(MODEL, dep), dep.params, precision_of(dep)
        b, L = part["batch_size"].to_numpy(float), part["context"].to_numpy(float)
        ops, _, _ = layer_ops(shapes, b, 1.0, L, prec, params, dep.hardware.sm_count, fused_experts=True)
        # the fused q_a/kv_a and output projections (GEMM_OPS[0:2]), attention, and the MLA GEMMs (after attention)
        block = [ops[0], ops[1]] + [op for op in ops if op.attention] + ops[len(lat.GEMM_OPS) + 1:][:len(lat.MLA_OPS)]
        _, _, roof_c, roof_m, size, _, _ = roofline_sums(block, params, lat.compute_peak(dep.hardware, dep.dtype),
                                                         dep.hardware.mem_bandwidth)
        bw = dep.hardware.mem_bandwidth
        norms = shapes.extra_norms * elementwise_time("norm", b, shapes.extra_norm_width, 2.0 * shapes.extra_norm_width,
                                                      prec.dt, bw, params)
        rope = elementwise_time("rope", b, shapes.rope_width, 2.0 * shapes.rope_width, prec.dt, bw, params)
        launches = (2 + 1 + MLA_EXTRA_GEMM_KERNELS) * params.t_kernel  # the block's GEMMs and attention
        formats = (2 + len(lat.MLA_OPS)) * prec.layer_extra_s
        out[np.asarray(idx)] = roof_c + roof_m + size + norms + rope + launches + formats + 0.0 * b
    return out


def mla_module_check(gpu: str, gemm_type: str = "fp8_block") -> dict:
    """Per engine of ``gpu``: the module rows, the step's price of each, and measured minus priced (µs), median per
    batch and KV-length band, with the median signed error of the price over all rows."""
    hardware = MLA_MODULE_GPUS[gpu]
    out = {}
    for engine in ("vllm", "trtllm"):
        rows = mla_module_rows(gpu, engine, gemm_type)
        priced = step_mla_block(rows, hardware, engine, gemm_type)
        measured = rows["time_s"].to_numpy(float)
        gap = 1e6 * (measured - priced)
        bands = {}
        for name, (b_lo, b_hi, l_lo, l_hi) in {"batch 1-16, KV 1K-8K": (1, 16, 1024, 8192),
                                              "batch 32-128, KV 1K-8K": (32, 128, 1024, 8192),
                                              "batch 32-128, KV 16K-64K": (32, 128, 16384, 65536)}.items():
            sel = rows["batch_size"].between(b_lo, b_hi) & rows["context"].between(l_lo, l_hi)
            bands[name] = float(np.median(gap[sel.to_numpy()])) if sel.any() else None
        out[engine] = {"rows": int(len(rows)), "kernel_source": sorted(set(rows["kernel_source"])),
                       "engine_version": sorted(set(rows["engine_version"])),
                       "median_signed": float(np.median(priced / measured - 1.0)), "gap_us": bands}
    return out


def mla_module_lines(checks: dict | None) -> list[str]:
    """The report's lines of :func:`mla_module_check` results keyed by GPU."""
    lines = []
    for gpu, check in (checks or {}).items():
        for engine, c in check.items():
            gaps = ", ".join(f"{k} {v:+.1f} us" for k, v in c["gap_us"].items() if v is not None)
            lines.append(f"{gpu} MLA block as a step prices it vs the measured module, {engine} "
                         f"{'/'.join(c['engine_version'])} ({'/'.join(c['kernel_source'])}, {c['rows']} rows): median "
                         f"{100 * c['median_signed']:+.1f}%; measured minus priced per layer: {gaps}")
    return lines
