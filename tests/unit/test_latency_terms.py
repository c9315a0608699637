"""The latency model's newer terms: GEMM row tiles, elementwise kernels, the ring all-reduce on
per-direction bandwidth, the fp32 peak, prefill's LM head and memory with the draft."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from sdsl.catalog.models import get_model
from sdsl.roofline.deployment import Deployment
from sdsl.catalog.hardware import get_hardware
from sdsl.roofline.latency import (DEFAULT_PARAMS, LatencyParams, allreduce_time, compute_peak, default_params, elementwise_time,
                               gemm_flops_bytes, memory_per_gpu, memory_with_draft_per_gpu, padded_tokens,
                               prefill_time_s, smooth_max, step_time)

H100 = get_hardware("h100-sxm")


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5000), st.sampled_from([64, 128, 256]))
def test_padded_tokens_covers_and_is_tight(t, tile):
    p = float(padded_tokens(t, tile))
    assert t <= p < max(2 * t, t + tile)  # never fewer rows, less than one extra tile (or a doubling)
    assert p == tile * np.ceil(p / tile) or p < tile
    assert float(padded_tokens(t, 0)) == t


def test_padded_tokens_steps_every_tile():
    assert padded_tokens(np.array([1, 3, 64, 65, 128, 129, 256, 257]), 128).tolist() == [1, 4, 64, 128, 128, 256, 256, 384]
    f, _ = gemm_flops_bytes(129, 4096, 4096, 2, 128)
    assert f == 2 * 256 * 4096 * 4096


def test_elementwise_row_limit_and_bandwidth_limit():
    p = LatencyParams(t_elementwise=2e-6, eta_norm=0.5, row_norm=1e-9)
    bw = 1e12
    one = elementwise_time("norm", 1, 8192, 2 * 8192, 2, bw, p)
    assert float(one) == pytest.approx(2e-6 + 8192e-9)  # one block streams its row
    many = elementwise_time("norm", 4096, 8192, 2 * 8192, 2, bw, p)
    assert float(many) == pytest.approx(2e-6 + 4096 * 2 * 8192 * 2 / (0.5 * bw))
    flat = elementwise_time("norm", 1, 8192, 2 * 8192, 2, bw, p, row_limited=False)
    assert float(flat) == pytest.approx(2e-6 + 2 * 8192 * 2 / (0.5 * bw))
    # uncalibrated: priced like a memory-bound GEMM-like kernel
    old = elementwise_time("norm", 16, 8192, 2 * 8192, 2, bw, DEFAULT_PARAMS)
    assert float(old) == pytest.approx(DEFAULT_PARAMS.t_kernel + 16 * 2 * 8192 * 2 / (0.8 * bw))


def test_elementwise_launches_in_the_overhead():
    """Uncalibrated (t_elementwise None) the six elementwise kernels are charged t_kernel each, as before;
    calibrated they are charged t_elementwise."""
    m = get_model("llama-2-7b")
    dep = Deployment(H100, params=DEFAULT_PARAMS)
    t = step_time(m, dep, batch=4, q=2, context=512)
    assert float(t.overhead_s) == pytest.approx((m.n_layer * 11 + 3) * DEFAULT_PARAMS.t_kernel)
    p = default_params("h100-sxm")  # shipped: t_elementwise set
    p = p.replace(t_kernel_size=0.0)  # the GEMMs' size overhead is checked in test_gemm_kernel_terms.py
    calibrated = step_time(m, Deployment(H100, params=p), batch=4, q=2, context=512)
    assert float(calibrated.overhead_s) == pytest.approx(m.n_layer * (5 * p.t_kernel + 6 * p.t_elementwise) + 3 * p.t_kernel)


def test_ring_allreduce_per_direction_and_step_latency():
    t = allreduce_time(1e9, 8, 450e9, 1e-5, 1.0, 2e-6)
    assert float(t) == pytest.approx(1e-5 + 14 * 2e-6 + 14 / 8 * 1e9 / 450e9)
    assert H100.interconnect_bandwidth == 450e9 and get_hardware("a100-80gb").interconnect_bandwidth == 300e9
    with pytest.raises(Exception):
        LatencyParams(eta_interconnect=2.5)


@settings(max_examples=60, deadline=None)
@given(size=st.floats(1e3, 1e10), n=st.sampled_from([2, 4, 8]), floor=st.floats(1e-6, 1e-4),
       p=st.floats(1.0, 20.0), ll_eff=st.floats(0.05, 1.5))
def test_allreduce_two_protocols_and_floor(size, n, floor, p, ll_eff):
    """NCCL runs the faster protocol (tuning.cc: min over latency + bytes/bw), and a measured all-reduce
    lasts at least the floor; without LL and floor the form is the plain ring."""
    args = (size, n, 450e9, 2e-5, 1.2, 1e-6)
    ring = float(allreduce_time(*args))
    ll = 5e-6 + 2 * (n - 1) / n * size / 450e9 / ll_eff
    both = float(allreduce_time(*args, ll_latency_s=5e-6, ll_efficiency=ll_eff))
    assert both == pytest.approx(min(ring, ll), rel=1e-12)
    floored = float(allreduce_time(*args, ll_latency_s=5e-6, ll_efficiency=ll_eff, floor_s=floor, floor_smoothness=p))
    assert max(floor, both) <= floored * (1 + 1e-12) and floored <= (floor + both) * (1 + 1e-12)
    assert float(allreduce_time(*args, floor_s=0.0, floor_smoothness=p)) == ring
    with pytest.raises(Exception):
        LatencyParams(allreduce_floor_smoothness=float("inf"))


def test_non_gated_activation_priced_as_a_native_kernel():
    """A gated activation is the fused one-block-per-token kind ``act``; GELU (phi-2, OPT, Pythia) a flat
    native kernel priced with the ``add`` kind's terms (VALIDATION.md): changing eta_act moves only the
    gated model, changing eta_add moves both."""
    from sdsl.roofline.latency import ModelShapes, layer_elementwise_time

    p = default_params("h100-sxm")
    shapes = ModelShapes.of([get_model("phi-2"), get_model("llama-2-7b")])
    base = layer_elementwise_time(shapes, 4096.0, 2, H100.mem_bandwidth, p)
    slow_act = layer_elementwise_time(shapes, 4096.0, 2, H100.mem_bandwidth, p.replace(eta_act=p.eta_act / 2))
    slow_add = layer_elementwise_time(shapes, 4096.0, 2, H100.mem_bandwidth, p.replace(eta_add=p.eta_add / 2))
    assert slow_act[0] == base[0] and slow_act[1] > base[1]
    assert slow_add[0] > base[0] and slow_add[1] > base[1]
    s = ModelShapes.of(get_model("phi-2"))
    bw, d, qk, ff = H100.mem_bandwidth, s.d_model, s.q_width + s.kv_width, s.ff_width
    want = (s.norms * elementwise_time("norm", 4096.0, d, 2 * d, 2, bw, p)
            + elementwise_time("rope", 4096.0, qk, 2 * qk, 2, bw, p)
            + elementwise_time("add", 4096.0, ff, 2 * ff, 2, bw, p, row_limited=False)
            + 2 * elementwise_time("add", 4096.0, d, 3 * d, 2, bw, p, row_limited=False))
    assert base[0] == pytest.approx(float(want), rel=1e-12)


def test_fp32_priced_on_fp32_units():
    assert compute_peak(H100, "fp32") == pytest.approx(H100.peak_flops / 16)  # no fp32 field: fallback
    assert compute_peak(get_hardware("cpu"), "fp32") == pytest.approx(get_hardware("cpu").peak_flops / 2)
    assert compute_peak(H100, "bf16") == H100.peak_flops

    class WithField:
        peak_flops, kind, peak_flops_fp32 = 989e12, "gpu", 67e12

    assert compute_peak(WithField(), "fp32") == 67e12


def test_prefill_prices_lm_head_on_last_tokens():
    m = get_model("llama-3.1-8b")
    dep = Deployment(H100, params=DEFAULT_PARAMS)
    assert float(prefill_time_s(m, dep, batch=3, prompt=1)) == pytest.approx(float(step_time(m, dep, batch=3, q=1, context=0).total_s))
    full = float(step_time(m, dep, batch=2, q=512, context=0).total_s)
    pre = float(prefill_time_s(m, dep, batch=2, prompt=512))
    i, o = m.linear_layers(1)["lm_head"]

    def lm(tokens):
        f, b = gemm_flops_bytes(tokens, i, o, 2)
        return max(f / (0.7 * H100.peak_flops), b / (0.8 * H100.mem_bandwidth))

    assert full - pre == pytest.approx(lm(1024) - lm(2), rel=1e-9)


def test_fits_in_memory_counts_the_draft():
    t, d = get_model("llama-3.1-70b"), get_model("llama-3.1-8b")
    dep = Deployment(H100, tp=2, context=1024)
    alone = float(memory_per_gpu(t, dep))
    both = float(memory_with_draft_per_gpu(t, d, dep))
    assert both == pytest.approx(alone + float(memory_per_gpu(d, dep.for_draft())))
    assert alone < H100.mem_capacity < both
    from sdsl.cli import cli

    r = CliRunner().invoke(cli, ["optimize", "--target", "llama-3.1-70b", "--hardware", "h100", "--tp", "2",
                                 "--drafts", "llama-3.1-8b", "--batch", "1", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["configs"][0]["gamma"] > 0 and out["fits_in_memory"] is False


def test_default_params_docstring_promises_no_cpu_calibration():
    assert default_params(get_hardware("cpu")) == DEFAULT_PARAMS
    assert "No CPU\n    calibration ships" in default_params.__doc__ or "No CPU calibration ships" in " ".join(default_params.__doc__.split())
    assert dataclasses.asdict(default_params("h100-sxm"))["m_tile"] == 128
