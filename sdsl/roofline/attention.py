"""Decode attention over the KV cache on the form NVIDIA's operator tables measure (docs/model.md §3.3).

A roofline prices attention as smax(FLOPs/(η_c·peak), bytes/(η_m·bandwidth)) plus one launch. The engines' decode
kernels (FlashAttention-3/4 under vLLM, FlashInfer under SGLang, XQA under TensorRT-LLM) cost more than that. The
aiconfigurator-core tables time them on H100, H200, B200 and the other GPUs they cover, and the fitted form

    t_attn = t0 + t_block · b · h_kv + smax_p( FLOPs/(η_c·peak), bytes/(η_kv·bandwidth) )

matches them to a median 5–7% with one model shape held out (VALIDATION.md, "Measured kernels"). Its terms:

- t0, a fixed cost per call (about 9–11 µs): the collector times the whole attention forward under CUDA-graph replay,
  the KV-cache write, the attention kernel and the split-KV combine;
- t_block, a cost per (sequence, KV head) block of work (7–22 ns);
- η_kv, the fraction of the memory bandwidth the KV read reaches (0.67–0.93);
- p, the smoothness of the maximum.

The roofline form priced the tables' rows a median 65–74% too fast: it misses t0 and t_block.

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

__all__ = ["ATTENTION_FIELDS", "TABLE_ATTENTION_ENGINES", "runs_table_attention", "table_engine", "measured_attention"]

#: The LatencyParams fields of the measured attention form (module docstring).
ATTENTION_FIELDS = ("attn_t0", "attn_t_block", "attn_eta_kv", "attn_smoothness")
#: sdsl's engine names whose decode-attention kernels the tables time -> the tables' engine name.
TABLE_ATTENTION_ENGINES = {"vllm": "vllm", "sglang": "sglang", "sglang-spec-v2": "sglang", "trtllm": "trtllm"}


def table_engine(engine) -> str | None:
    """The tables' engine whose attention terms price ``engine`` (an engine profile, a spec it resolves from, or
    ``None``: the roofline alone), or None where the roofline prices its attention."""
    if engine is None:
        return None
    if not hasattr(engine, "engine"):
        from sdsl.engine.profiles import resolve_engine

        engine = resolve_engine(engine)
    return TABLE_ATTENTION_ENGINES.get(engine.engine)


def runs_table_attention(engine) -> bool:
    """Whether ``engine`` prices decode attention on the measured form where its GPU's calibration has it."""
    return table_engine(engine) is not None


def measured_attention(flops, nbytes, blocks, params, peak: float, bandwidth: float):
    """(compute time, memory time, attention time) of one decode-attention call on the measured form (module
    docstring): ``flops`` and ``nbytes`` as the roofline counts them (:func:`sdsl.roofline.step_ops.attention_op`),
    ``blocks`` = b·h_kv (sequences times the KV heads one GPU holds). Broadcasts."""
    compute = np.asarray(flops, dtype=float) / (params.eta_compute * peak)
    memory = np.asarray(nbytes, dtype=float) / (params.attn_eta_kv * bandwidth)
    total = params.attn_t0 + params.attn_t_block * np.asarray(blocks, dtype=float) + smooth_max(
        compute, memory, params.attn_smoothness)
    return compute, memory, total
