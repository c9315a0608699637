"""The engines' custom all-reduce measured in NVIDIA's operator tables, for sdsl's dated engine profiles.

An engine profile's custom all-reduce (:func:`sdsl.engine.allreduce.custom_allreduce_time`: one-shot a + (t−1)·M/(η·B),
two-shot 2a + 2(t−1)/t·M/(η·B)) takes its fixed latency a and bandwidth fraction η from the tables' CUDA-graph rows
(decode steps replay CUDA graphs) on the Hopper NVLink GPUs the published rows run on (H100-SXM and H200, 2-8 GPUs,
messages up to 16 MiB), fitted by :func:`sdsl.fit.opdb.kernels.fit_allreduce`.

Versions: the tables hold vLLM 0.14-0.24, SGLang 0.5.6-0.5.14 and TensorRT-LLM 1.2-1.3, all newer than sdsl's
dated profiles (vLLM 2025-04 to 2026-03, SGLang 2025-01 and 2025-10, TensorRT-LLM 2025-06); each profile takes its
engine's oldest measured version with the engine's own kernel (:data:`ALLREDUCE_VERSIONS`; SGLang 0.5.6.post2's rows
are TensorRT-LLM's kernel, ``kernel_source`` TRTLLM, identical to TensorRT-LLM 1.2.0rc5's, so SGLang's own is
0.5.9's). Across the versions the tables hold, a moves by under 2% for vLLM (4.51-4.58 us); SGLang's fell from
4.5 us (0.5.9, 0.5.10) to 2.8 us (0.5.14), TensorRT-LLM's from 3.4 us (1.2.0rc5) to 2.9 us (1.3).
"""

from __future__ import annotations

__all__ = ["ALLREDUCE_VERSIONS", "ALLREDUCE_GPUS", "PROFILE_ENGINES", "measured_custom_allreduce"]

#: The measured version each engine's profiles take (module docstring).
ALLREDUCE_VERSIONS = {"vllm": "0.14.0", "sglang": "0.5.9", "trtllm": "1.2.0rc5"}
ALLREDUCE_GPUS = ("h100_sxm", "h200_sxm")
#: sdsl's engine names -> the tables' engine.
PROFILE_ENGINES = {"vllm": "vllm", "sglang": "sglang", "sglang-spec-v2": "sglang", "trtllm": "trtllm"}


def measured_custom_allreduce(engine: str, *, source="subset") -> dict:
    """{latency_s, eta, rows, version, kernel_source, heldout median}: the custom all-reduce of table engine ``engine``."""
    import numpy as np
    import pandas as pd

    from sdsl.fit.opdb import OPDB_VERSION
    from sdsl.fit.opdb.kernels import ALLREDUCE_MAX_BYTES, allreduce_rows, fit_allreduce, hardware_of, predict_allreduce

    version = ALLREDUCE_VERSIONS[engine]
    rows = pd.concat([allreduce_rows(g, engine, version, source=source) for g in ALLREDUCE_GPUS], ignore_index=True)
    rows = rows[(rows["mode"] == "graph") & (rows["message_size"] <= ALLREDUCE_MAX_BYTES)]
    hw = hardware_of(ALLREDUCE_GPUS[-1])  # both NVLink4, 450 GB/s per direction
    fit = fit_allreduce(rows, hw, "custom")
    errs = [predict_allreduce(rows[rows["num_gpus"] == t], hw, fit_allreduce(rows[rows["num_gpus"] != t], hw, "custom"))
            / rows[rows["num_gpus"] == t]["time_s"].to_numpy() - 1.0 for t in sorted(set(rows["num_gpus"]))]
    kernels = ", ".join(sorted(set(rows["kernel_source"])))
    return {"latency_s": float(fit.latency), "eta": float(fit.eta), "rows": int(len(rows)), "version": version,
            "kernel_source": kernels, "heldout_median_abs": float(np.median(np.abs(np.concatenate(errs)))),
            "source": (f"aiconfigurator-core {OPDB_VERSION} (NVIDIA, Apache-2.0): {engine} {version} custom all-reduce "
                       f"({kernels}, CUDA-graph replay) on H100-SXM and H200, 2/4/8 GPUs, messages 128 B to 16 MiB, "
                       f"{len(rows)} rows; fitted by sdsl.fit.opdb.kernels.fit_allreduce (one-/two-shot form of "
                       f"sdsl.engine.allreduce), one GPU count held out: median "
                       f"{100 * float(np.median(np.abs(np.concatenate(errs)))):.1f}%")}
