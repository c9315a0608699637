"""How NVIDIA's collectors timed the operator tables, and what of it a decode step does not share.

Every collector times an op by capturing it in one CUDA graph and replaying the graph after warm-up runs, with no
cache flush between replays (aiconfigurator's timing routine ``benchmark_with_power``); decode attention runs over one
KV cache (``collector/vllm/collect_attn.py``). A KV cache that fits in the GPU's L2 is therefore read from L2 on every
timed replay. A decode step reads each layer's cache once between all the other layers' weights and caches, so its
read comes from DRAM: the tables' L2-resident rows time a faster read than a step can get. On the GDDR GPUs the tables
show it plainly (on the L40S, whose DRAM gives 0.864 TB/s, one layer's bf16 cache between 32 MB and the 96 MB L2 reads
at a median 1.35 TB/s, beyond twice the L2 at 0.77 TB/s at most). The attention fit
(:func:`sdsl.fit.opdb.kernels.fit_attention`) prices those rows with a read 1/s as long and leaves s out of what a
step charges. The fused-MoE collector replays one layer with one routing, so the weights of the experts its tokens
touch are L2-hot wherever they fit; the MoE fit (:func:`sdsl.fit.opdb.moe.fit_group`) takes its own s on those rows'
weight read, which a step (streaming every layer's experts) never takes either.
"""

from __future__ import annotations

import numpy as np

__all__ = ["L2_REPORTED", "l2_capacity", "l2_resident"]

#: L2 capacity (bytes) of the collection GPUs whose catalog entry states none, as their driver reports it: torch's
#: ``get_device_properties`` as printed in public repositories (its ``L2_cache_size`` is in MiB); the others take the
#: catalog's datasheet figure.
L2_REPORTED = {
    "h200_sxm": (60 * 2**20, "github:ai-bot-pro/achatbot@859e21612de769164d8d1802d794ef8f87ace3c8:deploy/modal/src/llm/"
                             "vllm/vlm/skywork_r1v.py: \"_CudaDeviceProperties(name='NVIDIA H200', major=9, minor=0, "
                             "total_memory=143156MB, multi_processor_count=132, uuid=91a535d7-4157-249a-65e5-73883afa626e, "
                             "L2_cache_size=60MB)\""),
    "b200_sxm": (126 * 2**20, "github:ai-bot-pro/achatbot@859e21612de769164d8d1802d794ef8f87ace3c8:deploy/modal/src/llm/"
                              "vllm/vlm/skywork_r1v.py: \"_CudaDeviceProperties(name='NVIDIA B200', major=10, minor=0, "
                              "total_memory=182642MB, multi_processor_count=148, uuid=d186e4e8-5421-22be-0d31-ba7ed89e6a79, "
                              "L2_cache_size=126MB)\""),
    "rtx_pro_6000_server": (128 * 2**20, "github:Jessi11111/fine-tuning-InternVL-78B@49e97225d48297e81ea82671ba335f99d09e2ec6:"
                                   "README_RTX6000.md: \"_CudaDeviceProperties("
                                   "name='NVIDIA RTX PRO 6000 Blackwell Server Edition', major=12, minor=0, "
                                   "total_memory=97250MB, multi_processor_count=188, uuid=..., L2_cache_size=128MB)\""),
}


def l2_capacity(gpu: str, hardware) -> float | None:
    """L2 bytes of database GPU ``gpu`` (catalog entry ``hardware``): the datasheet's, else :data:`L2_REPORTED`'s."""
    return hardware.l2_cache or L2_REPORTED.get(gpu, (None,))[0]


def l2_resident(gpus, nbytes, hardware_of) -> np.ndarray:
    """Whether each table row's read of ``nbytes`` fits in its GPU's L2 (``gpus``: database names, one per row;
    ``hardware_of``: database name -> catalog entry): the rows the collectors time L2-hot. A GPU without an L2
    figure has none."""
    gpus = np.asarray(gpus)
    caps = {g: l2_capacity(g, hardware_of(g)) or 0.0 for g in set(gpus.tolist())}
    cap = np.select([gpus == g for g in caps], list(caps.values()), 0.0) if caps else np.zeros(gpus.shape)
    return np.asarray(nbytes, dtype=float) <= cap
