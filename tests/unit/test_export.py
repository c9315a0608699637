"""Engine configurations use each engine's documented field names.

vLLM: https://docs.vllm.ai/en/v0.12.0/api/vllm/config/speculative/ (SpeculativeMethod: "ngram", "medusa",
"draft_model", "eagle", "eagle3", "mtp"; fields method, model, num_speculative_tokens).
SGLang: https://docs.sglang.io/advanced_features/speculative_decoding.html (--speculative-algorithm EAGLE |
EAGLE3 | STANDALONE | NGRAM, --speculative-num-steps, --speculative-eagle-topk, --speculative-num-draft-tokens).
TensorRT-LLM: https://nvidia.github.io/TensorRT-LLM/1.3.0rc29/llm-api/reference/AutoDecodingConfig.html
(max_draft_len, draft_len_schedule: dict[int, int]) and NVIDIA/TensorRT-LLM PR #10860 ({4: 4, 8: 2, 32: 1}:
batch 1-4 -> 4, 5-8 -> 2, 9-32 -> 1, beyond -> no speculation).
"""

from __future__ import annotations

import json

import pytest

from sdsl.plan.export import export_config
from sdsl.errors import InvalidInputError, UnknownNameError

TABLE = [{"batch_min": 1, "batch_max": 4, "k": 4}, {"batch_min": 5, "batch_max": 8, "k": 2},
         {"batch_min": 9, "batch_max": 32, "k": 1}, {"batch_min": 33, "batch_max": 256, "k": 0}]


def test_vllm_speculative_config():
    text = export_config("vllm", {"proposer": "eagle3", "gamma": 4, "tree": None}, TABLE)
    first = json.loads(text.splitlines()[0])
    assert first == {"speculative_config": {"method": "eagle3", "num_speculative_tokens": 4}}
    # ONE configuration (vLLM takes one k for the server's life) and where it holds; no per-batch schedule
    configs = [line for line in text.splitlines() if not line.startswith("#")]
    assert configs == [text.splitlines()[0]]
    assert text.splitlines()[-1].startswith("# holds at batch 1-4: k = 4")
    draft = json.loads(export_config("vllm", {"proposer": "draft:llama-3.2-1b", "gamma": 3}).splitlines()[0])
    assert draft["speculative_config"] == {"method": "draft_model", "num_speculative_tokens": 3, "model": "meta-llama/Llama-3.2-1B"}
    with pytest.raises(InvalidInputError):
        export_config("vllm", {"proposer": "eagle", "gamma": None, "tree": [8, 8, 64]})


def test_sglang_flags_chain_and_tree():
    chain = export_config("sglang", {"proposer": "eagle", "gamma": 3, "tree": None}).splitlines()[0]
    assert chain == ("--speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1 "
                     "--speculative-num-draft-tokens 4")
    tree = export_config("sglang", {"proposer": "eagle3", "gamma": None, "tree": [8, 8, 64]}).splitlines()[0]
    assert tree.endswith("--speculative-num-steps 8 --speculative-eagle-topk 8 --speculative-num-draft-tokens 64")
    assert "STANDALONE --speculative-draft-model-path meta-llama/Llama-3.2-1B" in export_config(
        "sglang", {"proposer": "draft:llama-3.2-1b", "gamma": 2})
    with pytest.raises(InvalidInputError):
        export_config("sglang", {"proposer": "medusa", "gamma": 3})


def test_every_export_of_a_plan_is_one_engine_configuration():
    """Llama-3.1-8B + EAGLE-3 on vLLM, batch 1-256: vLLM and SGLang get one config (one line that is not a comment) with
    the batch range where it holds; TensorRT-LLM one speculative_config whose schedule is the merged k table."""
    import sdsl

    for engine in ("vllm", "sglang", "trtllm"):
        plan = sdsl.plan_speculation("llama-3.1-8b", sdsl.Deployment("h100-sxm", engine="vllm"), proposers=["eagle3"],
                                     export=engine)
        text = plan.export["config"]
        if engine == "trtllm":
            schedule = json.loads(text)["speculative_config"]["draft_len_schedule"]
            assert [int(b) for b in schedule] == [r["batch_max"] for r in plan.k_table]  # one entry per range
            continue
        assert len([line for line in text.splitlines() if not line.startswith("#")]) == 1
        holds = plan.export["holds"]
        assert holds["batch_min"] == 1 and f"# holds at batch 1-{holds['batch_max']}" in text


def test_trtllm_schedule_matches_the_documented_example():
    cfg = json.loads(export_config("trtllm", {"proposer": "eagle3", "gamma": 4, "tree": None}, TABLE))
    assert cfg["speculative_config"] == {"decoding_type": "Eagle3", "max_draft_len": 4,
                                         "draft_len_schedule": {"4": 4, "8": 2, "32": 1}}


def test_unknown_engine():
    with pytest.raises(UnknownNameError):
        export_config("tgi", {"proposer": "eagle", "gamma": 2})
