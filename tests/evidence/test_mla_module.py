"""VALIDATION.md "Measured kernels", the MLA block: what a decode step prices for DeepSeek-V3's attention block against
the whole MLA module vLLM's and TensorRT-LLM's collectors time (sdsl.fit.opdb.mla_module). A failed check, kept
visible: the step prices the block too fast on every GPU and engine."""

from __future__ import annotations

import pandas as pd
import pytest

from sdsl.fit.opdb.mla_module import mla_module_check, step_mla_block

GAPS = {  # GPU: engine -> median measured minus priced, µs per layer: batch 1-16 / 32-128 at KV 1K-8K / 32-128 at 16K-64K
    "h100_sxm": {"vllm": (62.3, 76.5, 60.3), "trtllm": (10.3, 16.0, 19.6)},
    "h200_sxm": {"vllm": (55.2, 68.4, 46.9), "trtllm": (11.9, 18.3, -3.2)},
    "b200_sxm": {"vllm": (14.0, 34.0, 61.8), "trtllm": (10.6, 23.6, 55.2)},
}
SIGNED = {"h100_sxm": {"vllm": -0.426, "trtllm": -0.090}, "h200_sxm": {"vllm": -0.430, "trtllm": -0.133},
          "b200_sxm": {"vllm": -0.193, "trtllm": -0.119}}


def test_the_block_isolated_is_the_steps_attention_and_projections():
    """The block's price grows with the KV length exactly as the whole step's does per layer (attention is the only
    op that reads the cache), and with the block-fp8 GEMMs' format terms it costs more at one token than in bf16."""
    from sdsl.roofline.deployment import Deployment
    from sdsl.roofline.latency import step_time

    rows = pd.DataFrame({"num_heads": [16, 16], "batch_size": [8, 8], "context": [1024, 16384]})
    block = step_mla_block(rows, "b200", "trtllm", "fp8_block")
    dep = Deployment("b200", tp=8, engine="trtllm", weight_dtype="fp8")
    step = [float(step_time("deepseek-v3", dep, batch=8, context=c).total_s) for c in (1024, 16384)]
    assert block[1] - block[0] == pytest.approx((step[1] - step[0]) / 61, rel=1e-9)
    one = pd.DataFrame({"num_heads": [16], "batch_size": [1], "context": [1024]})
    assert step_mla_block(one, "b200", "trtllm", "fp8_block")[0] > step_mla_block(one, "b200", "trtllm", "bfloat16")[0]


@pytest.mark.parametrize("gpu", sorted(GAPS))
def test_the_step_prices_the_measured_module_too_fast(gpu):
    """Median signed error of the priced block over each engine's rows (block-fp8 GEMMs, bf16 KV cache, batch up to
    512, DeepSeek's heads per GPU at TP 1-8) and the gap per batch and KV-length band, as VALIDATION.md states them."""
    check = mla_module_check(gpu)
    for engine, (small, large, long) in GAPS[gpu].items():
        got = check[engine]
        assert got["rows"] > 600 and got["median_signed"] < -0.05
        assert got["median_signed"] == pytest.approx(SIGNED[gpu][engine], abs=2e-3), engine
        bands = got["gap_us"]
        assert [bands["batch 1-16, KV 1K-8K"], bands["batch 32-128, KV 1K-8K"], bands["batch 32-128, KV 16K-64K"]] == \
            pytest.approx([small, large, long], abs=0.1), engine
    assert check["vllm"]["kernel_source"] == (["FLASHINFER_MLA"] if gpu == "b200_sxm" else ["FLASH_ATTN_MLA"])


def test_validation_md_states_the_check():
    from sdsl._paths import REPO_ROOT

    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    for fragment in ("TensorRT-LLM 1.3.0rc20: 10.3 / 11.9 / 10.6 µs per layer", "vLLM 0.24.0 on B200 14.0 µs",
                     "a median −9.0% / −13.3% / −11.9% (TensorRT-LLM) and −42.6% / −43.0% / −19.3% (vLLM)",
                     "23.6–61.8 µs on B200"):
        assert " ".join(fragment.split()) in text, fragment
    readme = " ".join((REPO_ROOT / "README.md").read_text().split())
    assert ("priced 10–15 µs per layer below NVIDIA's measured module (TensorRT-LLM on H100, H200, B200; vLLM on B200) at "
            "batch 1–16 and up to 62 µs") in readme
    gaps = [g[engine][0] for g in GAPS.values() for engine in g if engine == "trtllm"] + [GAPS["b200_sxm"]["vllm"][0]]
    assert 10 <= min(gaps) and max(gaps) <= 15 and round(max(g[e][2] for g in GAPS.values() for e in g)) == 62
