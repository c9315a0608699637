"""The fused MoE layer's closed form (sdsl.catalog.moe.fused_moe_layer_time) and its use by the roofline: properties a
wrong form fails, the collector routing the fit reads the tables with, the measured term on measured GPUs and the
grouped GEMMs elsewhere (the fit's held-out quality: tests/evidence/test_fused_moe_fit.py)."""

from __future__ import annotations

import numpy as np
import pytest

from sdsl.catalog.models import get_model
from sdsl.roofline.deployment import Deployment
from sdsl.roofline.latency import step_time
from sdsl.catalog.moe import FusedMoEFit, fused_moe_provenance, row_tile_of, select_fused_moe_fit
from sdsl.roofline.shapes import ModelShapes
from sdsl.roofline.step_ops import fused_moe_fit_of, fused_moe_time, precision_of
from sdsl.validation.moe_validation import roofline_experts
from sdsl.fit.opdb import moe as opdb_moe

TOKENS = np.array([1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 129, 192, 256, 384, 512, 4096, 65536])


def _layer(model, dep):
    shapes = ModelShapes.of(get_model(model), dep.tp, ep=dep.ep)
    fit = fused_moe_fit_of(shapes, dep)
    prec = precision_of(dep)
    peak = prec.expert_peak or dep.hardware.peak_flops
    return shapes, fit, prec, peak


@pytest.mark.parametrize("model,tp,ep,engine,fmt", [("qwen3-30b-a3b", 1, 1, "sglang-2025-10", None),
                                                    ("qwen3-235b-a22b", 8, 1, "sglang-2025-10", "fp8"),
                                                    ("deepseek-v3", 8, 8, "vllm-2026-01", "fp8"),
                                                    ("mixtral-8x7b", 2, 1, "trtllm-2025-06", None),
                                                    ("llama-4-scout", 4, 2, "ideal", None)])
def test_closed_form_properties(model, tp, ep, engine, fmt):
    """Monotone in the tokens (through the row-tile switch at M = E/ep too), above its floor, and above the weight-read
    bound of every local expert once the batch touches them all; a 1-token layer far below that."""
    for hw in ("h100-sxm", "h200", "b200"):
        dep = Deployment(hw, tp=tp, ep=ep, engine=engine, expert_dtype=fmt)
        shapes, fit, prec, peak = _layer(model, dep)
        assert fit is not None
        t = fused_moe_time(shapes, fit, TOKENS, prec, dep.hardware, peak)
        assert np.all(np.diff(t) >= 0) and np.all(t > fit.t0_s)
        wb = prec.expert_bytes or prec.dt
        all_local = wb * shapes.n_experts / shapes.ep * shapes.d_model * (shapes.expert_up + shapes.expert_down_in)
        bound = all_local / (fit.eta_memory * dep.hardware.mem_bandwidth)
        assert np.all(t[-3:] > bound)  # the weight-read bound holds once every expert is touched
        assert t[0] < 0.5 * t[-3]  # a 1-token layer reads top-k experts' worth, far from all of them


def test_distinct_expert_limits_set_the_weight_reads():
    """Zeroing the compute and per-pair terms leaves floor + c_e·D + W(D)/(η·BW): exactly linear in the distinct
    experts sdsl's router touches, k/ep at one token, E/ep when every expert is hit."""
    dep = Deployment("h200", tp=8, engine="sglang-2025-10", expert_dtype="fp8")
    shapes, fit, prec, peak = _layer("qwen3-235b-a22b", dep)
    pure = FusedMoEFit("h200_sxm", "sglang", "k", "fp8_block", 10e-6, 0.5e-6, 0.8, 1e9, 0.0)
    t = fused_moe_time(shapes, pure, np.array([1, 10 ** 6]), prec, dep.hardware, peak)
    per_expert = prec.expert_bytes * shapes.d_model * (shapes.expert_up + shapes.expert_down_in)
    expect = 10e-6 + np.array([8.0, 128.0]) * (0.5e-6 + per_expert / (0.8 * dep.hardware.mem_bandwidth))
    np.testing.assert_allclose(t, expect, rtol=1e-6)


def test_triton_row_tile_switch():
    fit = FusedMoEFit("g", "sglang", "sglang_fused_moe_triton", "bfloat16", 0, 0, 1, 1, 0, row_tile="triton")
    assert list(row_tile_of(fit, [1, 128, 129], 128)) == [16, 16, 64]
    assert list(row_tile_of(fit.__class__(**{**fit.__dict__, "row_tile": "none"}), [1, 512], 128)) == [1, 1]


def test_collector_routing_reproduces_balanced_and_skews_fewer():
    for n, E, k in ((1, 128, 8), (4, 128, 8), (16, 128, 8), (64, 256, 8), (3, 16, 1)):
        r = opdb_moe.collector_routing(n, E, k, 1, "balanced")
        assert r["local_experts"] == min(E, n * k) and r["local_rows"] == n * k
        assert r["rows_pad16"] >= r["local_rows"] and r["rows_pad64"] >= r["rows_pad16"]
    ep = opdb_moe.collector_routing(32, 128, 8, 4, "balanced")
    assert ep["local_experts"] == 32 and ep["local_rows"] == 64
    for n in (4, 32, 256):
        skew = opdb_moe.collector_routing(n, 128, 8, 1, "power_law_1.2")
        assert skew["local_experts"] < min(128, n * 8) and skew["local_rows"] == n * 8


def test_order_dependent_picks_of_the_collector_routing():
    """The share of a row's picks whose expert the routing configuration does not fix: none balanced; every pick of
    one token over 128 experts (all loads round to zero) when the EP rank they land on matters, none on one GPU
    (each lands on a new expert whatever the order); repeats within a token's slots when an expert gets more picks
    than there are tokens (Mixtral's 8 experts, top-2, one token)."""
    assert opdb_moe.collector_routing(1, 128, 8, 8, "balanced")["order_dependent"] == 0.0
    assert opdb_moe.collector_routing(1, 128, 8, 8, "power_law_1.01")["order_dependent"] == 1.0
    assert opdb_moe.collector_routing(1, 128, 8, 1, "power_law_1.01")["order_dependent"] == 0.0
    assert opdb_moe.collector_routing(1, 8, 2, 1, "power_law_1.2")["order_dependent"] > 0.1
    assert opdb_moe.collector_routing(256, 128, 8, 8, "power_law_1.2")["order_dependent"] < 0.01
    import pandas as pd

    rows = pd.DataFrame({"order_dependent": [0.0, 0.1, 0.11, 1.0], "x": range(4)})
    assert list(opdb_moe.determined(rows)["x"]) == [0, 1]


def test_roofline_uses_the_measured_layer_on_h200():
    """Qwen3-235B's MoE layer on H200 at TP 8 in fp8 under SGLang: the step prices the fitted layer (about 33, 55 and
    102 us at 1, 4 and 32 tokens in SGLang 0.5.10's table), far above the roofline's grouped GEMMs at one token."""
    dep = Deployment("h200", tp=8, dtype="bf16", expert_dtype="fp8", engine="sglang-2025-10")
    model = get_model("qwen3-235b-a22b")
    fit = select_fused_moe_fit(dep.hardware, dep.engine, "fp8")
    assert (fit.gpu, fit.engine, fit.kernel_source, fit.dtype) == ("h200_sxm", "sglang", "sglang_fused_moe_triton",
                                                                   "fp8_block")
    b = np.array([1, 4, 32])
    per_layer = step_time(model, dep, batch=b, q=1).expert_weights_s / model.n_moe_layers
    np.testing.assert_allclose(per_layer, [33e-6, 55e-6, 102e-6], rtol=0.2)
    before = step_time(model, roofline_experts(dep), batch=b, q=1).expert_weights_s / model.n_moe_layers
    assert per_layer[0] > 2 * before[0]
    assert fused_moe_provenance(dep.hardware, dep.engine, "fp8").startswith("measured: sglang_fused_moe_triton")


def test_engines_pick_their_own_kernel():
    pick = lambda hw, eng: select_fused_moe_fit(Deployment(hw).hardware, Deployment(hw, engine=eng).engine, "bf16")  # noqa: E731
    assert pick("h200", "sglang-2025-10").engine == "sglang"
    assert pick("h200", "vllm-2026-01").engine == "vllm"
    assert pick("h200", "trtllm-2025-06").engine == "trtllm"
    assert pick("h200", "ideal").engine == "vllm"  # no tables of its own: the first measured default
    assert select_fused_moe_fit(Deployment("h200").hardware, None, "fp32") is None


def test_an_unmeasured_gpu_keeps_the_grouped_gemms_and_says_transferred():
    dep = Deployment("mi300x", tp=8, engine="sglang-2025-10")
    shapes = ModelShapes.of(get_model("qwen3-235b-a22b"), 8)
    assert fused_moe_fit_of(shapes, dep) is None
    assert fused_moe_provenance(dep.hardware, dep.engine, "bf16").startswith("transferred")
    same = roofline_experts(dep)  # setting the tables aside changes nothing where there are none
    b = np.array([1, 8, 64])
    np.testing.assert_allclose(step_time("qwen3-235b-a22b", dep, batch=b).total_s,
                               step_time("qwen3-235b-a22b", same, batch=b).total_s, rtol=1e-12)
    # and a dense model never uses the MoE term
    assert fused_moe_fit_of(ModelShapes.of(get_model("qwen3-8b"), 1), Deployment("h200")) is None
