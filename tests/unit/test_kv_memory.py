"""The KV cache that memory_per_gpu counts is the KV cache the step time reads, under GQA and tensor parallelism."""

import numpy as np
import pytest

from sdsl.catalog.models import get_model
from sdsl.roofline.deployment import Deployment
from sdsl.catalog.hardware import get_hardware
from sdsl.roofline.latency import kv_cache_bytes_per_gpu, memory_per_gpu, step_time

H100 = get_hardware("h100-sxm")


def _kv_bytes_the_step_reads(model, dep, batch, context):
    """KV bytes a decode step reads, recovered from its pure memory time: only attention's KV read grows with
    the context, so (memory_s(L) - memory_s(0)) * eta * bandwidth is exactly those bytes (eta: the KV read's
    measured bandwidth fraction where the engine's attention is priced on its measured form, else eta_m; with the
    measured form's per-block limit the read runs at 1/(1/(eta·bandwidth) + 1/(blocks·B_blk)), blocks = batch ×
    the KV heads one GPU holds)."""
    st_l = step_time(model, dep, batch=batch, q=1, context=context)
    st_0 = step_time(model, dep, batch=batch, q=1, context=0)
    p = dep.params
    rate = (p.attn_eta_kv or p.eta_memory) * H100.mem_bandwidth
    if p.attn_eta_kv and p.attn_block_bandwidth:
        blocks = batch * -(-model.n_kv_head // dep.tp)
        rate = 1.0 / (1.0 / rate + 1.0 / (blocks * p.attn_block_bandwidth))
    return (np.asarray(st_l.memory_s) - np.asarray(st_0.memory_s)) * rate


@pytest.mark.parametrize("name, tp", [("qwen2.5-1.5b", 1), ("qwen2.5-1.5b", 2), ("qwen2.5-1.5b", 4),
                                      ("llama-3.1-8b", 4), ("llama-3.1-70b", 8), ("llama-2-7b", 2),
                                      ("qwen2.5-14b", 4), ("opt-125m", 4)])
@pytest.mark.parametrize("batch, context", [(1, 1000), (7, 333), (64, 8192)])
def test_memory_per_gpu_counts_the_kv_bytes_the_step_time_reads(name, tp, batch, context):
    m, dep = get_model(name), Deployment(H100, tp=tp)
    kv_memory = memory_per_gpu(m, dep, batch=batch, context=context) - memory_per_gpu(m, dep, batch=batch, context=0)
    assert float(kv_memory) == pytest.approx(float(_kv_bytes_the_step_reads(m, dep, batch, context)), rel=1e-9)
    assert float(kv_memory) == pytest.approx(float(kv_cache_bytes_per_gpu(m, dep, batch=batch, context=context)),
                                             rel=1e-12)


def test_gqa_kv_heads_fewer_than_tp_are_replicated():
    # qwen2.5-1.5b has 2 KV heads: at TP 4 each GPU keeps ceil(2/4) = 1 of them, half the cache, not a quarter
    m = get_model("qwen2.5-1.5b")
    one = float(kv_cache_bytes_per_gpu(m, Deployment(H100, tp=1), batch=3, context=500))
    assert one == 3 * 500 * m.kv_bytes_per_token("bf16")
    assert float(kv_cache_bytes_per_gpu(m, Deployment(H100, tp=2), batch=3, context=500)) == pytest.approx(one / 2)
    assert float(kv_cache_bytes_per_gpu(m, Deployment(H100, tp=4), batch=3, context=500)) == pytest.approx(one / 2)
    # 8 KV heads over TP 4: a quarter each
    m8 = get_model("llama-3.1-8b")
    full = float(kv_cache_bytes_per_gpu(m8, Deployment(H100, tp=1), context=100))
    assert float(kv_cache_bytes_per_gpu(m8, Deployment(H100, tp=4), context=100)) == pytest.approx(full / 4)


def test_memory_capacity_is_binary():
    # "80 GB" of HBM is 80 GiB; nvidia-smi reports 81559 MiB on an H100 80GB and 81920 MiB on an A100 80GB
    assert H100.mem_capacity == 80 * 2**30
    assert H100.mem_capacity == pytest.approx(81559 * 2**20, rel=0.005)
    assert get_hardware("a100-80gb").mem_capacity == 81920 * 2**20


def test_serving_kv_budget_is_per_gpu():
    """The serving simulator's KV budget (memory_budget) uses the per-GPU KV the step time reads: equal to the old
    all-GPU count where KV heads divide TP and there is no draft; MLA's latent and too few KV heads stay whole on
    every GPU; local-attention layers hold only their window; a TP-1 draft binds the GPU it lives on."""
    from sdsl.roofline.latency import weight_bytes_per_gpu
    from sdsl.serving.step_model import memory_budget

    dep = Deployment(H100, tp=4, context=1024)
    dense = get_model("llama-3.1-70b")
    budget = memory_budget(dense, dep)
    total = (4 * H100.mem_capacity * 0.9 - dense.weight_bytes("bf16")) // dense.kv_bytes_per_token("bf16")
    assert abs(budget.kv_budget_tokens - int(total)) <= 1
    assert budget.kv_bytes_per_token == pytest.approx(dense.kv_bytes_per_token("bf16") / 4, rel=1e-12)
    moe = get_model("qwen3-30b-a3b")  # 4 KV heads on 8 GPUs: one head on each, as vLLM replicates them
    b8 = memory_budget(moe, Deployment(H100, tp=8, context=1024))
    assert b8.kv_bytes_per_token == pytest.approx(moe.kv_bytes_per_token("bf16") / 4, rel=1e-12)
    v3 = get_model("deepseek-v3")  # MLA: every GPU keeps the whole latent and RoPE key
    h200 = Deployment("h200", tp=8, dtype="bf16", weight_dtype="fp8", context=1024)
    bv3 = memory_budget(v3, h200)
    assert bv3.kv_bytes_per_token == pytest.approx(float(kv_cache_bytes_per_gpu(v3, h200, batch=1, context=1)), rel=1e-12)
    assert bv3.target_weight_bytes == pytest.approx(weight_bytes_per_gpu(v3, h200), rel=1e-12)
    oss = get_model("gpt-oss-20b")  # half its layers slide over 128 tokens
    at_8k = memory_budget(oss, Deployment(H100, context=8192)).kv_bytes_per_token
    assert at_8k < 0.52 * oss.kv_bytes_per_token("bf16")
    with_draft = memory_budget(dense, Deployment(H100, tp=4, draft_tp=1, context=1024), draft="llama-3.2-1b")
    draft = get_model("llama-3.2-1b")
    assert with_draft.draft_weight_bytes == pytest.approx(draft.weight_bytes("bf16"), rel=1e-12)
    assert with_draft.kv_bytes_per_token == pytest.approx(dense.kv_bytes_per_token("bf16") / 4
                                                          + draft.kv_bytes_per_token("bf16"), rel=1e-12)
