"""Decode attention over the KV cache on the form NVIDIA's operator tables measure (docs/model.md §3.3).

A roofline prices attention as smax(FLOPs/(η_c·peak), bytes/(η_m·bandwidth)) plus one launch. The engines' decode
kernels (FlashAttention-3/4 under vLLM, FlashInfer under SGLang, XQA under TensorRT-LLM) cost more than that. The
aiconfigurator-core tables time them on H100, H200, B200 and the other GPUs they cover, and the fitted form

    t_attn = t0 + t_block · b · h_kv + smax_p( FLOPs/(η_c·peak), bytes/(η_kv·bandwidth) + bytes/(b·h_kv·B_blk) )

matches vLLM's to a median 5.4% / 5.6% / 4.7% on H100 / H200 / B200 with one model shape held out (VALIDATION.md,
"Measured kernels"; ``sdsl validate kernels --op attention --engine sglang`` or ``trtllm`` for the other engines'). Its
terms:

- t0, a fixed cost per call (8.6–11.8 µs): the collector times the whole attention forward under CUDA-graph replay,
  the KV-cache write, the attention kernel and the split-KV combine;
- t_block, a cost per (sequence, KV head) block of work (7.5–23.3 ns);
- η_kv, the fraction of the memory bandwidth the KV read reaches (0.72–0.99);
- B_blk, the bandwidth one (sequence, KV head) block's read reaches (0.3–4.1 TB/s over a bf16 cache; the
  GDDR GPUs' 0.3 and 0.4, the HBM GPUs' 2.1 and up): a decode kernel splits one block's KV over a bounded
  number of thread blocks (split-KV), so few blocks cannot draw the whole bandwidth, and the read runs at
  1/(1/(η_kv·bandwidth) + 1/(b·h_kv·B_blk)). On the H200's tables one block at 32k tokens or more reads at 0.31 of
  the bandwidth and eight at 0.82; without B_blk the shipped terms price one block
  there 40.8% too fast (VALIDATION.md, "Measured kernels"). 0 = no such limit;
- p, the smoothness of the maximum (2 in the fits, :data:`sdsl.fit.opdb.kernels.ATTENTION_SMOOTHNESS`).

The roofline form priced the tables' rows a median 65–80% too fast (H100 −79.6%, H200 −72.9%, B200 −65.3%): it
misses t0 and t_block.

The terms are fitted per GPU and per engine (:func:`sdsl.fit.opdb.defaults.attention_terms`), over a bf16 and over an
fp8 KV cache (``Deployment.kv_dtype``). They live in the ``attention`` and ``attention_fp8_kv`` sections of a GPU's
shipped calibration, and :func:`sdsl.roofline.latency_params.default_params` lays them over the calibration for the
engines whose kernels the tables time (:func:`runs_table_attention`). ``attn_eta_kv`` = 0 keeps the roofline: the
roofline alone (``ideal``), other engines, CPUs and GPUs without tables. MLA's latent attention keeps the roofline
too, a check it fails against the tables (VALIDATION.md, "Measured kernels").
"""

from __future__ import annotations

import numpy as np

from sdsl.roofline.kernels import smooth_max
from sdsl.roofline.latency_params import ATTENTION_FIELDS, TABLE_ATTENTION_ENGINES, runs_table_attention, table_engine

__all__ = ["ATTENTION_FIELDS", "TABLE_ATTENTION_ENGINES", "runs_table_attention", "table_engine", "attention_time",
           "measured_attention", "measured_share", "FP8_MLA_SLOWDOWN", "fp8_mla_warning"]
def attention_time(flops, nbytes, blocks, *, t0, t_block, eta_kv, smoothness, eta_compute, peak: float,
                   bandwidth: float, block_bandwidth: float = 0.0, stream_bytes=0.0, eta_stream: float = 0.0):
    """(compute time, memory time, attention time) of one decode-attention call on the measured form (module
    docstring) with these terms: what a step charges (:func:`measured_attention`) and what the fit on the tables
    minimises (:func:`sdsl.fit.opdb.kernels.predict_attention`). ``flops`` and ``nbytes`` as the roofline counts them
    (:func:`sdsl.roofline.step_ops.attention_op`), ``blocks`` = b·h_kv (sequences times the KV heads one GPU holds).
    ``block_bandwidth`` B_blk (bytes/s, 0 = no limit). ``stream_bytes``: the query read and output write, priced
    apart from the KV read at ``eta_stream`` of the bandwidth (the MLA fit: 128 heads' queries and outputs outweigh a
    short latent cache); with ``eta_stream`` 0 they are in ``nbytes``, read at η_kv (a step's GQA call). Broadcasts."""
    blocks = np.asarray(blocks, dtype=float)
    nbytes = np.asarray(nbytes, dtype=float)
    compute = np.asarray(flops, dtype=float) / (eta_compute * peak)
    memory = nbytes / (eta_kv * bandwidth)
    if eta_stream:
        memory = memory + np.asarray(stream_bytes, dtype=float) / (eta_stream * bandwidth)
    if block_bandwidth:  # no blocks read no bytes
        memory = memory + np.where(blocks > 0, nbytes / (np.where(blocks > 0, blocks, 1.0) * block_bandwidth), 0.0)
    return compute, memory, t0 + t_block * blocks + smooth_max(compute, memory, smoothness)


def measured_attention(flops, nbytes, blocks, params, peak: float, bandwidth: float):
    """:func:`attention_time` at the attention terms of ``params`` (a :class:`LatencyParams`)."""
    return attention_time(flops, nbytes, blocks, t0=params.attn_t0, t_block=params.attn_t_block,
                          eta_kv=params.attn_eta_kv, smoothness=params.attn_smoothness, eta_compute=params.eta_compute,
                          peak=peak, bandwidth=bandwidth, block_bandwidth=params.attn_block_bandwidth)


def measured_share(params, mla):
    """The share of a layer's attention calls ``params`` price on the measured form, whose t0 holds the call's launch:
    the GQA/MQA layers (1 − ``mla``, MLA's share of the model) where ``params`` carry the terms, else none."""
    return (1.0 - np.asarray(mla, dtype=float)) if params.attn_eta_kv else 0.0


#: SGLang 0.5.14's decode MLA over an fp8 KV cache on Hopper, measured by NVIDIA's operator tables (aiconfigurator-core
#: 0.12.0): the median, over the heads, batches and contexts of 8k tokens or more that both caches were timed at, of
#: its time over the bf16 cache's (a dequantising path; VALIDATION.md "Measured kernels"). A step prices MLA on the
#: roofline, where an fp8 cache halves the read, so it does not price this.
FP8_MLA_SLOWDOWN = {"h100-sxm": 4.0, "h200": 4.5}


def fp8_mla_warning(target, deployment) -> str | None:
    """The warning for an MLA target over an fp8 KV cache under SGLang on a GPU where :data:`FP8_MLA_SLOWDOWN` is
    measured; None elsewhere."""
    slowdown = FP8_MLA_SLOWDOWN.get(deployment.hardware.name.lower())
    if not (getattr(target, "kv_lora_rank", 0) and deployment.cache_dtype == "fp8" and slowdown
            and deployment.engine is not None and deployment.engine.engine.startswith("sglang")):
        return None
    return (f"{target.name}'s latent attention (MLA) over an fp8 KV cache is priced on the roofline, where fp8 halves "
            f"the cache read, but SGLang 0.5.14's fp8-cache MLA decode on {deployment.hardware.name} measures a median "
            f"{slowdown:.1f}x its bf16-cache time at 8k tokens or more (NVIDIA's operator tables): at long contexts "
            f"this prediction is too fast; compare with --kv-dtype bf16")
