"""Step pricing of MoE, MLA and local-attention models (docs/model.md §3.8): formulas and relative behaviour.

Every deployment here prices with the uncalibrated DEFAULT_PARAMS, so nothing depends on a shipped fit.
"""

from dataclasses import replace

import numpy as np
import pytest

from sdsl.catalog.models import get_model
from sdsl.roofline.deployment import Deployment
from sdsl.catalog.hardware import get_hardware, list_hardware
from sdsl.roofline.kernels import allreduce_time_with
from sdsl.roofline.latency import (DEFAULT_PARAMS, LatencyParams, ModelShapes, all_to_all_time, expert_reads,
                               kv_cache_bytes_per_gpu, memory_per_gpu, step_time, weight_bytes_per_gpu)
from sdsl.catalog.moe import ROUTING_LOCALITY, expected_distinct_experts, selection_probabilities
from sdsl.roofline.weight_formats import WEIGHT_FORMATS, gemm_peak, get_weight_format
from sdsl.errors import InvalidInputError
from sdsl.validation.moe_validation import roofline_experts

H100, H200, B200 = (get_hardware(n) for n in ("h100-sxm", "h200", "b200"))
TILED = LatencyParams(m_tile=128, m_tile_min=64, tail_waves=0.5)  # row tiles and waves on, otherwise defaults


def dep(hw=H100, **kw):
    # the roofline's formulas (NCCL all-reduce): the engine profile's own all-reduce is tested in test_engine.py
    return Deployment(hw, params=kw.pop("params", DEFAULT_PARAMS), engine=kw.pop("engine", "ideal"), **kw)


def test_step_time_reports_the_distinct_experts_it_priced():
    m = get_model("qwen3-30b-a3b")
    b, q = np.array([1, 4, 32])[:, None], np.array([1, 2, 4, 8])[None, :]
    st = step_time(m, dep(tp=4), batch=b, q=q, context=512)
    assert np.asarray(st.distinct_experts).shape == (3, 4)
    routed = b * (1 + (q - 1) * (1 - ROUTING_LOCALITY))  # a sequence's consecutive positions share experts
    np.testing.assert_allclose(st.distinct_experts, expected_distinct_experts(128, 8, routed), rtol=1e-12)
    assert np.all(np.asarray(st.distinct_experts)[:, 1:] < expected_distinct_experts(128, 8, b * q)[:, 1:])
    independent = step_time(replace(m, routing_locality=0.0), dep(tp=4), batch=b, q=q, context=512)
    np.testing.assert_allclose(independent.distinct_experts, expected_distinct_experts(128, 8, b * q), rtol=1e-12)
    assert float(step_time(m, dep(), batch=1, q=1).distinct_experts) == pytest.approx(8.0)
    assert st.to_dict()["distinct_experts"][0][0] == pytest.approx(8.0)
    assert "distinct experts/layer" in st.report()
    dense = step_time("qwen3-8b", dep(), batch=b, q=q)
    assert np.all(np.asarray(dense.distinct_experts) == 0) and "distinct" not in dense.report()
    assert set(np.unique(dense.bound)) <= {"memory", "compute", "overhead", "communication"}


@pytest.mark.parametrize("params", [DEFAULT_PARAMS, TILED])
def test_expert_weight_bytes_are_distinct_experts_times_expert_bytes(params):
    from sdsl.roofline.step_ops import layer_ops as _layer_ops, precision_of as _precision

    m = get_model("qwen3-30b-a3b")
    d = dep(tp=2, params=params)
    tokens = np.array([1.0, 3.0, 16.0, 200.0])
    reads = expert_reads(m, d, batch=tokens, q=1)
    per_expert = m.expert_params / 2  # each expert tensor-split over tp = 2 (no biases in Qwen3-MoE experts)
    np.testing.assert_allclose(reads["weight_bytes_per_gpu"], reads["distinct_experts"] * per_expert * 2, rtol=1e-12)
    np.testing.assert_allclose(reads["distinct_experts"], expected_distinct_experts(128, 8, tokens), rtol=1e-12)
    # the step time reads exactly those weight bytes in its grouped GEMMs (plus the rows' activations)
    shapes = ModelShapes.of(m, 2)
    ops, distinct, active = _layer_ops(shapes, tokens, 1.0, 0.0, _precision(d), params, H100.sm_count)
    expert_ops = [op for op in ops if op.experts]
    assert len(expert_ops) == 2
    activations = 2 * active * (shapes.d_model + shapes.expert_up + shapes.expert_down_in + shapes.d_model)
    np.testing.assert_allclose(sum(op.nbytes for op in expert_ops), reads["weight_bytes_per_gpu"] + activations,
                               rtol=1e-12)


def test_grouped_gemm_rows_pad_each_expert_to_the_row_tile():
    m = get_model("qwen3-30b-a3b")
    one = expert_reads(m, dep(params=TILED), batch=1, q=1)
    assert float(one["rows_per_gpu"]) == 8 * 64  # 8 experts of 1 token, each padded to Hopper's 64-row tile
    big = expert_reads(m, dep(params=TILED), batch=4096, q=1)  # every expert, 256 tokens each: 2 tiles of 128
    assert float(big["rows_per_gpu"]) == pytest.approx(128 * 256, rel=1e-6)
    flat = expert_reads(m, dep(), batch=5, q=3)  # no tiles: rows are the routed tokens, n·k
    assert float(flat["rows_per_gpu"]) == pytest.approx(5 * 3 * 8)


def test_verifying_more_tokens_costs_an_moe_target_more_than_a_dense_one():
    # MoESD / Cascade: the k+1 verified tokens route to different experts, so the weights read grow with them
    q = np.array([1, 2, 4, 8])
    moe = np.asarray(step_time("qwen3-30b-a3b", dep(), batch=1, q=q, context=1024).total_s)
    dense = np.asarray(step_time("qwen3-4b", dep(), batch=1, q=q, context=1024).total_s)
    assert np.all(np.diff(moe) > 0)
    assert np.all(moe[1:] / moe[0] > 3 * (dense[1:] / dense[0] - 1) + 1)
    assert moe[-1] / moe[0] > 1.5 and dense[-1] / dense[0] < 1.1
    st = step_time("qwen3-30b-a3b", dep(), batch=1, q=np.array([1, 16]), context=1024)
    assert st.bound[-1] == "expert-weights"


def test_skewed_routing_touches_fewer_experts():
    m = get_model("qwen3-30b-a3b")
    tokens = np.array([2, 8, 64, 512])
    uniform = np.asarray(step_time(m, dep(), batch=tokens, q=1).distinct_experts)
    skewed = replace(m, routing_skew=1.2)
    d_skew = np.asarray(step_time(skewed, dep(), batch=tokens, q=1).distinct_experts)
    assert np.all(d_skew < uniform) and np.all(np.diff(d_skew) > 0)
    grouped = roofline_experts(dep())  # the roofline's grouped GEMMs: fewer experts is never slower
    t_u = np.asarray(step_time(m, grouped, batch=tokens, q=1).total_s)
    t_s = np.asarray(step_time(skewed, grouped, batch=tokens, q=1).total_s)
    assert np.all(t_s <= t_u * (1 + 1e-12))
    # the measured fused kernel pads each expert's rows to its row tile: at 512 tokens the skewed router's heavy
    # experts cost more padded rows than it saves in weight reads; below that, fewer experts is faster
    t_u = np.asarray(step_time(m, dep(), batch=tokens, q=1).total_s)
    t_s = np.asarray(step_time(skewed, dep(), batch=tokens, q=1).total_s)
    assert np.all(t_s[:3] < t_u[:3]) and t_s[3] > t_u[3]
    # a flat measured histogram is the uniform router
    flat = replace(m, expert_load=tuple([1.0] * 128))
    np.testing.assert_allclose(step_time(flat, dep(), batch=tokens, q=1).distinct_experts, uniform, rtol=1e-9)
    p = selection_probabilities(128, 8, skew=1.2)
    assert p.sum() == pytest.approx(8) and p.max() <= 1.0 and p[0] == 1.0


def test_a_stack_of_mixed_models_prices_each_as_alone():
    names = ["qwen3-8b", "qwen3-30b-a3b", "gpt-oss-20b", "llama-2-7b", "mixtral-8x7b", "llama-4-scout"]
    specs = [get_model(n) for n in names] + [replace(get_model("qwen3-30b-a3b"), routing_skew=1.2),
                                             replace(get_model("gpt-oss-20b"), expert_load=tuple(range(1, 33)))]
    b, q, L = np.array([1, 8])[:, None, None], np.array([1, 4])[None, :, None], np.array([100, 5000])[None, None, :]
    groups = [(specs, 2, H100), ([get_model(n) for n in ("deepseek-v3", "llama-3.3-70b", "qwen3-235b-a22b")], 8, H200)]
    for (group, tp, hw), params in [(g, p) for g in groups for p in (DEFAULT_PARAMS, TILED)]:
        d = dep(hw=hw, tp=tp, params=params)
        stack = step_time(ModelShapes.of(group, tp, extra_dims=3), d, batch=b, q=q, context=L)
        for i, s in enumerate(group):
            alone = step_time(s, d, batch=b, q=q, context=L)
            np.testing.assert_allclose(np.asarray(stack.total_s)[i], alone.total_s, rtol=1e-12)
            np.testing.assert_allclose(np.asarray(stack.distinct_experts)[i], alone.distinct_experts, rtol=1e-12)
            assert np.array_equal(np.asarray(stack.bound)[i], alone.bound)


@pytest.mark.parametrize("name, kw", [("deepseek-v3", dict(hw=H200, tp=8, weight_dtype="fp8")),
                                      ("gpt-oss-120b", dict(tp=2, expert_dtype="mxfp4")),
                                      ("llama-4-scout", dict(tp=4)), ("glm-4.5-air", dict(tp=4)),
                                      ("qwen3-235b-a22b", dict(hw=H200, tp=8, ep=8))])
def test_memory_per_gpu_counts_the_kv_the_step_reads(name, kw):
    # the property of tests/unit/test_kv_memory.py on MLA (replicated latent), windows and chunks, MoE
    m, d = get_model(name), dep(**kw)
    hw = kw.get("hw", H100)
    for b, L in ((1, 3000), (16, 20_000)):
        kv_memory = memory_per_gpu(m, d, batch=b, context=L) - memory_per_gpu(m, d, batch=b, context=0)
        st_l, st_0 = (step_time(m, d, batch=b, q=1, context=c) for c in (L, 0))
        read = (np.asarray(st_l.memory_s) - np.asarray(st_0.memory_s)) * d.params.eta_memory * hw.mem_bandwidth
        assert float(kv_memory) == pytest.approx(float(read), rel=1e-9)


def test_mla_latent_is_replicated_across_tensor_parallel_gpus():
    # vLLM and SGLang keep the whole latent on every TP rank (one "KV head"): tp does not shrink the cache
    m = get_model("deepseek-v3")
    one = float(kv_cache_bytes_per_gpu(m, dep(hw=H200, tp=1), batch=2, context=1000))
    assert one == 2 * 1000 * 61 * 576 * 2
    assert float(kv_cache_bytes_per_gpu(m, dep(hw=H200, tp=8), batch=2, context=1000)) == one
    gqa = get_model("llama-3.3-70b")
    assert float(kv_cache_bytes_per_gpu(gqa, dep(tp=8), context=1000)) == pytest.approx(
        float(kv_cache_bytes_per_gpu(gqa, dep(tp=1), context=1000)) / 8)


def test_local_layers_read_only_their_window():
    m = get_model("gpt-oss-20b")
    short = np.asarray(step_time(m, dep(), batch=8, q=1, context=np.array([64, 128])).memory_s)
    long_ = np.asarray(step_time(m, dep(), batch=8, q=1, context=np.array([10_000, 20_000])).memory_s)
    full = replace(m, sliding_window=0, local_layers=0)
    long_full = np.asarray(step_time(full, dep(), batch=8, q=1, context=np.array([10_000, 20_000])).memory_s)
    # above the window, the cost per cached token is half the full-attention model's (12 of 24 layers global)
    assert (long_[1] - long_[0]) == pytest.approx((long_full[1] - long_full[0]) / 2, rel=1e-9)
    assert (short[1] - short[0]) > 0


def test_expert_parallelism_and_dispatch():
    m = get_model("qwen3-235b-a22b")
    tp_only, ep = dep(hw=H200, tp=8), dep(hw=H200, tp=8, ep=8)
    a2a = dep(hw=H200, tp=8, ep=8, expert_dispatch="all-to-all")
    assert float(memory_per_gpu(m, ep, context=0)) == pytest.approx(float(memory_per_gpu(m, tp_only, context=0)))
    b = np.array([1, 16, 128])
    r_tp, r_ep = expert_reads(m, tp_only, batch=b), expert_reads(m, ep, batch=b)
    np.testing.assert_allclose(r_ep["experts_per_gpu"], r_tp["experts_per_gpu"] / 8, rtol=1e-12)
    np.testing.assert_allclose(r_ep["weight_bytes_per_gpu"], r_tp["weight_bytes_per_gpu"], rtol=1e-12)
    s_ep, s_a2a = step_time(m, ep, batch=b), step_time(m, a2a, batch=b)
    np.testing.assert_allclose(s_ep.allreduce_s, step_time(m, tp_only, batch=b).allreduce_s, rtol=1e-12)
    tokens, d, k = b * 1.0, m.d_model, m.experts_per_token
    one = allreduce_time_with(tokens * d * 2, 8, H200.interconnect_bandwidth, a2a.params)
    move = all_to_all_time(tokens / 8 * k * d * 2, 8, H200.interconnect_bandwidth, a2a.params)
    np.testing.assert_allclose(s_a2a.allreduce_s, m.n_layer * one + m.n_dense_layers * one + 2 * m.n_moe_layers * move,
                               rtol=1e-12)
    with pytest.raises(InvalidInputError, match="divide"):
        Deployment("h200", tp=8, ep=3)
    with pytest.raises(InvalidInputError, match="expert_dispatch"):
        Deployment("h200", tp=8, ep=8, expert_dispatch="broadcast")
    assert ep.for_draft().ep == 1 and ep.to_dict()["ep"] == 8 and "ep" not in tp_only.to_dict()


def test_weight_formats_bytes_and_rates():
    bpw = {f: get_weight_format(f).bytes_per_weight for f in WEIGHT_FORMATS}
    assert bpw["bf16"] == 2 and bpw["fp8"] == 1 + 4 / 16384 and bpw["int4"] == 0.5 + 2.5 / 128
    assert bpw["mxfp4"] == 0.5 + 1 / 32 and bpw["nvfp4"] == 0.5 + 1 / 16
    for hw in list_hardware():
        bf16 = gemm_peak(hw, "bf16", "bf16")
        assert gemm_peak(hw, "fp8", "bf16") == (hw.peak_flops_fp8 or bf16)
        assert gemm_peak(hw, "int4", "bf16") == bf16 == gemm_peak(hw, "mxfp4", "bf16")
        assert gemm_peak(hw, "nvfp4", "bf16") == (hw.peak_flops_fp4 or bf16)
    assert B200.peak_flops_fp4 == 2 * B200.peak_flops_fp8 == 9000e12
    assert get_hardware("a100-80gb").peak_flops_fp4 is None and H100.peak_flops_fp4 is None
    with pytest.raises(InvalidInputError):
        Deployment("h100-sxm", weight_dtype="int3")


def test_weight_formats_shrink_what_a_memory_bound_step_reads():
    m = get_model("gpt-oss-120b")
    bf16 = weight_bytes_per_gpu(m, dep())
    mx = weight_bytes_per_gpu(m, dep(expert_dtype="mxfp4"))
    experts = m.n_moe_layers * m.n_experts * m.expert_params
    assert bf16 - mx == pytest.approx(experts * (2 - 0.53125))
    t_bf16 = float(step_time(m, dep(), batch=1, q=8).memory_s)
    t_mx = float(step_time(m, dep(expert_dtype="mxfp4"), batch=1, q=8).memory_s)
    assert t_mx < 0.5 * t_bf16
    dense = get_model("llama-3.1-8b")
    np.testing.assert_allclose(step_time(dense, dep(weight_dtype="bf16"), batch=4, q=2).total_s,
                               step_time(dense, dep(), batch=4, q=2).total_s, rtol=1e-12)
    fp8 = step_time(dense, dep(weight_dtype="fp8"), batch=512, q=4)  # compute-bound: fp8 tensor cores
    assert float(fp8.compute_s) < 0.6 * float(step_time(dense, dep(), batch=512, q=4).compute_s)
    int4 = weight_bytes_per_gpu(dense, dep(weight_dtype="int4"))  # the embeddings and LM head stay in bf16
    head = (dense.embedding_params + dense.lm_head_params) * 2
    assert int4 == pytest.approx(head + (dense.total_params - head / 2) * (0.5 + 2.5 / 128))


def test_mismatched_expert_parallel_shapes_are_refused():
    shapes = ModelShapes.of(get_model("qwen3-30b-a3b"), 4, ep=1)
    with pytest.raises(InvalidInputError, match="ep=1"):
        step_time(shapes, dep(tp=4, ep=4))
    with pytest.raises(InvalidInputError, match="divide"):
        ModelShapes.of(get_model("qwen3-30b-a3b"), 4, ep=3)


def test_mtp_on_deepseek_v3_is_its_own_moe_mla_layer():
    # DeepSeek-V3 §2.2: one MTP module = M_k (2d -> d) + one Transformer block, embedding and head shared;
    # the checkpoint's MTP block is an MoE layer with MLA attention
    from sdsl.speculation.proposers import EagleHead, MTPLayers

    target = get_model("deepseek-v3")
    head = MTPLayers().head_spec(target)
    assert head.is_moe and head.is_mla and head.n_moe_layers == 1 and head.n_layer == 1
    own = head.total_params - head.embedding_params - head.lm_head_params  # embedding and head are the target's
    assert own == target.params_per_moe_layer + target._norm_params  # one MoE block and the final norm
    d = dep(hw=H200, tp=8, weight_dtype="fp8")
    b = np.array([1, 16])
    mtp = MTPLayers().step_time(target, d, batch=b, q=1, context=2048)
    dense_stand_in = EagleHead().step_time(target, d, batch=b, q=1, context=2048)
    assert np.all(mtp > dense_stand_in)  # a dense stand-in misses the expert reads and MLA's extra GEMMs
    st = step_time(MTPLayers().shapes(target, 8), d, batch=b, q=1, context=2048)
    np.testing.assert_allclose(st.distinct_experts, expected_distinct_experts(256, 8, b), rtol=1e-12)
    from sdsl.catalog.heads import dense_head_spec

    dense = get_model("llama-3.1-8b")  # on a dense target the MTP block keeps EAGLE-1's shape
    assert MTPLayers().head_spec(dense) == dense_head_spec(dense, 1, dense.vocab_size, "mtp")
