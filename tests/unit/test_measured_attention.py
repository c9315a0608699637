"""Decode attention priced on its measured form (sdsl.roofline.attention): what the step charges, where it applies,
and the parameters' checks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sdsl
from sdsl.errors import InvalidInputError
from sdsl.roofline.attention import runs_table_attention, table_engine
from sdsl.roofline.latency_params import LatencyParams, default_params

LLAMA_8B = dict(n_layer=32, heads=32, kv_heads=8, head_dim=128)


def _step(hw, engine, **grid):
    return sdsl.step_time("llama-3.1-8b", sdsl.Deployment(hw, engine=engine), **grid)


@pytest.mark.parametrize("hw", ["h100-sxm", "h200", "b200"])
def test_the_step_charges_the_fitted_form_in_place_of_the_roofline_and_its_launch(hw):
    """Per layer, the measured form's time replaces the roofline's attention time and the one launch the step counted
    for it; nothing else in the step moves (same GEMM terms: an engine dated before 2026 keeps Vidur's H100 GEMMs)."""
    from sdsl.fit.opdb.kernels import AttentionFit, hardware_of, predict_attention

    measured = sdsl.Deployment(hw, engine="sglang")
    params = measured.params
    roofline = sdsl.Deployment(hw, engine="sglang", params=params.replace(attn_eta_kv=0.0))
    b, L = np.array([1.0, 8.0, 64.0, 256.0]), np.array([512.0, 4096.0, 1024.0, 8192.0])
    new = sdsl.step_time("llama-3.1-8b", measured, batch=b, context=L)
    old = sdsl.step_time("llama-3.1-8b", roofline, batch=b, context=L)
    gpu = {"h100-sxm": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm"}[hw]
    rows = pd.DataFrame({"batch_size": b, "context": L, "num_heads": 32.0, "num_key_value_heads": 8.0,
                         "head_dim": 128.0, "kv_bytes": b * L * 2 * 8 * 128 * 2})
    fit = AttentionFit.of(params)
    per_layer = predict_attention(rows, hardware_of(gpu), fit)
    # the step's attention op also writes the new token's KV (b·2·8·128 elements), which the tables' rows do not count
    write = b * 2 * 8 * 128 * 2 / (params.attn_eta_kv * measured.hardware.mem_bandwidth)
    expected = 32 * (per_layer - old.attention_s / 32 - params.t_kernel)
    np.testing.assert_allclose(new.total_s - old.total_s, expected, rtol=0.02, atol=32 * write.max())
    assert new.total_s[0] > old.total_s[0]  # at batch 1 the fixed costs the roofline missed


def test_the_measured_form_grows_with_batch_and_context_and_verifying_more_tokens_costs_more():
    t = _step("h200", "vllm-2026-03", batch=np.array([[1.0], [16.0], [128.0]]), context=np.array([256.0, 2048.0, 16384.0]))
    assert np.all(np.diff(t.attention_s, axis=0) > 0) and np.all(np.diff(t.attention_s, axis=1) > 0)
    q = _step("h200", "vllm-2026-03", batch=32, q=np.array([1.0, 4.0, 8.0]), context=4096)
    assert np.all(np.diff(q.total_s) > 0)


def test_which_engines_and_models_get_it():
    assert runs_table_attention("vllm-2026-03") and runs_table_attention("sglang-2025-10")
    assert runs_table_attention("trtllm-2025-06") and table_engine("sglang-spec-v2-2025-10") == "sglang"
    assert not runs_table_attention(None) and not runs_table_attention("hf-eager-2024-01")
    assert not runs_table_attention("llamacpp-2024-04")
    assert default_params("h100-sxm").attn_eta_kv == 0.0  # the roofline alone
    h100 = {e: default_params("h100-sxm", e) for e in ("vllm-2026-03", "sglang-2025-10", "trtllm-2025-06")}
    assert len({p.attn_t0 for p in h100.values()}) == 3  # each engine's own kernels on the H100
    b300 = {e: default_params("b300", e).attn_t0 for e in ("vllm-2026-03", "sglang-2025-10")}
    assert b300["vllm-2026-03"] == b300["sglang-2025-10"] > 0  # only vLLM's are timed on the B300: its terms
    assert "decode attention fitted" in default_params("b300", "sglang-2025-10").source
    assert default_params("mi300x", "vllm-2026-03").attn_eta_kv == 0.0  # no tables: a transferred roofline
    # MLA keeps the roofline: its step does not move with the attention terms
    dep = sdsl.Deployment("h200", tp=8, engine="sglang-2025-10")
    off = sdsl.Deployment("h200", tp=8, engine="sglang-2025-10", params=dep.params.replace(attn_eta_kv=0.0))
    a = sdsl.step_time("deepseek-v3", dep, batch=8, context=2048).total_s
    b = sdsl.step_time("deepseek-v3", off, batch=8, context=2048).total_s
    assert float(a) == pytest.approx(float(b), rel=1e-12)


def test_the_attention_parameters_are_checked_and_round_trip():
    with pytest.raises(InvalidInputError, match="attn_eta_kv"):
        LatencyParams(attn_eta_kv=1.5)
    with pytest.raises(InvalidInputError, match="attn_t0"):
        LatencyParams(attn_t0=-1e-6)
    with pytest.raises(InvalidInputError, match="attn_smoothness"):
        LatencyParams(attn_smoothness=0.5)
    p = default_params("h200", "vllm-2026-03")
    assert LatencyParams.from_dict(p.to_dict()) == p
    assert LatencyParams.from_dict(LatencyParams().to_dict()).attn_smoothness == math.inf


_POSITIVE = st.floats(1e3, 1e12, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(flops=_POSITIVE, nbytes=_POSITIVE, blocks=st.floats(1.0, 1e5), grow=st.floats(1.0, 10.0),
       t0=st.floats(0, 5e-5), t_block=st.floats(0, 1e-7), eta=st.floats(0.05, 1.0), p=st.floats(1.0, 64.0),
       block_bw=st.one_of(st.just(0.0), st.floats(1e9, 1e13)))
def test_the_measured_form_grows_with_each_input_and_holds_the_roofline(flops, nbytes, blocks, grow, t0, t_block, eta, p,
                                                                        block_bw):
    """Property: the form is non-decreasing in FLOPs, in bytes and in the batch (more sequences of one context: FLOPs,
    bytes and blocks together), at least its fixed costs plus the larger of its compute and memory times; its KV read
    is never faster than the device's rate or the blocks' (1/r = 1/(η_kv·bw) + 1/(blocks·B_blk)); and with no fixed
    costs and no per-block limit at η_kv = η_m it is the roofline's smooth maximum."""
    from sdsl.roofline.attention import measured_attention
    from sdsl.roofline.kernels import smooth_max

    params = LatencyParams(attn_t0=t0, attn_t_block=t_block, attn_eta_kv=eta, attn_smoothness=p,
                           attn_block_bandwidth=block_bw)
    peak, bw = 1e15, 3e12
    c, m, t = measured_attention(flops, nbytes, blocks, params, peak, bw)
    for more in ((flops * grow, nbytes, blocks), (flops, nbytes * grow, blocks), (flops * grow, nbytes * grow, blocks * grow)):
        assert measured_attention(*more, params, peak, bw)[2] >= t * (1 - 1e-12)
    assert t >= t0 + t_block * blocks + max(c, m) * (1 - 1e-12)
    rate = min(eta * bw, blocks * block_bw) if block_bw else eta * bw
    assert m >= nbytes / rate * (1 - 1e-12)
    if block_bw:  # more blocks over the same bytes read faster, down to the device's rate
        assert measured_attention(flops, nbytes, blocks * grow, params, peak, bw)[1] <= m * (1 + 1e-12)
    roof = LatencyParams(attn_eta_kv=params.eta_memory, attn_smoothness=p)
    expected = smooth_max(flops / (roof.eta_compute * peak), nbytes / (roof.eta_memory * bw), p)
    assert float(measured_attention(flops, nbytes, blocks, roof, peak, bw)[2]) == pytest.approx(float(expected), rel=1e-12)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(nbytes=_POSITIVE, stream=_POSITIVE, eta_kv=st.floats(0.02, 1.0), eta_stream=st.floats(0.05, 1.0),
       block_bw=st.one_of(st.just(0.0), st.floats(1e9, 1e13)))
def test_streamed_bytes_add_their_own_read_and_leave_the_kv_read_alone(nbytes, stream, eta_kv, eta_stream, block_bw):
    """Property: bytes streamed apart (an MLA call's queries and outputs) add stream/(η_s·bw) to the memory time, at
    any η_kv and per-block limit, and with η_s = 0 are ignored: the KV read is what the per-block limit bounds."""
    from sdsl.roofline.attention import attention_time

    terms = dict(t0=0.0, t_block=0.0, eta_kv=eta_kv, smoothness=2.0, eta_compute=1.0, peak=1e15, bandwidth=3e12,
                 block_bandwidth=block_bw)
    kv_only = attention_time(0.0, nbytes, 4.0, **terms)[1]
    apart = attention_time(0.0, nbytes, 4.0, stream_bytes=stream, eta_stream=eta_stream, **terms)[1]
    assert apart == pytest.approx(kv_only + stream / (eta_stream * 3e12), rel=1e-12)
    assert attention_time(0.0, nbytes, 4.0, stream_bytes=stream, eta_stream=0.0, **terms)[1] == kv_only


def test_one_long_sequence_reads_at_its_blocks_rate():
    """Decode attention of one sequence over few KV heads reads its long KV cache at the blocks' bandwidth, not the
    device's: on the H200's shipped vLLM terms one (sequence, KV head) block at 131,072 tokens costs about twice what
    the device rate gives, and 64 blocks of the same total bytes read near the device rate."""
    p = default_params("h200", "vllm-2026-03")
    assert 1e12 < p.attn_block_bandwidth < 1e13
    hw = sdsl.get_hardware("h200")
    nbytes = 131072 * 2 * 128 * 2.0
    one = measured_attention_at(p, hw, nbytes, 1.0)
    many = measured_attention_at(p, hw, nbytes, 64.0)
    device = nbytes / (p.attn_eta_kv * hw.mem_bandwidth)
    assert one > 2 * device and many < 1.1 * device
    with pytest.raises(InvalidInputError, match="attn_block_bandwidth"):
        LatencyParams(attn_block_bandwidth=-1.0)


def measured_attention_at(params, hw, nbytes, blocks):
    from sdsl.roofline.attention import measured_attention

    return float(measured_attention(0.0, nbytes, blocks, params, hw.peak_flops, hw.mem_bandwidth)[1])


def test_where_the_per_block_limit_moves_a_step():
    """VALIDATION.md "Measured kernels": one long sequence over one KV head per GPU (Llama-3.1-70B, TP 8, H200, vLLM,
    batch 1) is priced 5.4% / 19.7% slower at 32,768 / 131,072 cached tokens than without the per-block bandwidth; at
    batch 64 (64 blocks) it moves the same steps by 1.6-2.2%."""
    from sdsl._paths import REPO_ROOT

    dep = sdsl.Deployment("h200", tp=8, engine="vllm")
    off = sdsl.Deployment("h200", tp=8, engine="vllm", params=dep.params.replace(attn_block_bandwidth=0.0))
    L = np.array([32768.0, 131072.0])
    more = sdsl.step_time("llama-3.1-70b", dep, batch=1, context=L).total_s / \
        sdsl.step_time("llama-3.1-70b", off, batch=1, context=L).total_s - 1
    np.testing.assert_allclose(more, [0.054, 0.197], atol=1e-3)
    wide = sdsl.step_time("llama-3.1-70b", dep, batch=64, context=L).total_s / \
        sdsl.step_time("llama-3.1-70b", off, batch=64, context=L).total_s - 1
    np.testing.assert_allclose(wide, [0.016, 0.022], atol=1e-3)
    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    assert "is priced 5.4% slower at 32,768 cached tokens and 19.7% slower at 131,072 than without B_blk" in text
