"""The GEMM kernel terms (smallest row tile, tail of the last wave, size overhead; VALIDATION.md "GEMM
kernel terms"): formulas, bounds, their place in the step time, and the evidence pinned from Vidur's data."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdsl._paths import data_path
from sdsl.catalog.models import get_model
from sdsl.roofline.deployment import Deployment
from sdsl.catalog.hardware import get_hardware
from sdsl.roofline.kernels import N_TILE, gemm_waves, kernel_size_overhead, min_row_tile, padded_tokens
from sdsl.roofline.latency import GEMM_OPS, LatencyParams, ModelShapes, default_params, gemm_flops_bytes, op_time, step_time
from sdsl.errors import InvalidInputError

H100, A100 = get_hardware("h100-sxm"), get_hardware("a100-80gb")
TERMS = LatencyParams(m_tile=128, m_tile_min=64, tail_waves=0.1, t_kernel_size=5e-6, kernel_size_bytes=4e6,
                      t_kernel=1.5e-6, smoothness=2.0)


def test_min_row_tile_by_architecture():
    assert min_row_tile(H100) == 64 and min_row_tile(get_hardware("b200")) == 64  # wgmma / tcgen05 m64
    assert min_row_tile(A100) == 16 and min_row_tile(get_hardware("cpu")) == 0


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5000), st.sampled_from([0, 16, 64]))
def test_padded_tokens_with_a_smallest_tile(t, mn):
    p = float(padded_tokens(t, 128, mn))
    assert p >= max(t, mn if t <= 128 else 0) and (p <= 128 or p % 128 == 0)
    if t > 128:
        assert p == float(padded_tokens(t, 128))  # whole tiles above one tile
    assert float(padded_tokens(t, 0, mn)) == t  # no tiles, no padding


def test_gemm_waves():
    assert float(gemm_waves(1, 4096, 128, 132)) == pytest.approx(32 / 132)
    assert float(gemm_waves(129, 57344, 128, 132)) == pytest.approx(2 * 448 / 132)
    assert N_TILE == 128 and gemm_waves(1, 4096, 0, 132) is None and gemm_waves(1, 4096, 128, None) is None


@settings(max_examples=100, deadline=None)
@given(st.floats(1e3, 1e10), st.floats(1e3, 1e10))
def test_size_overhead_rises_and_saturates(a, b):
    lo, hi = sorted((a, b))
    s_lo, s_hi = float(kernel_size_overhead(lo, TERMS)), float(kernel_size_overhead(hi, TERMS))
    assert 0.0 <= s_lo <= s_hi <= TERMS.t_kernel_size
    assert float(kernel_size_overhead(hi, TERMS.replace(t_kernel_size=0.0))) == 0.0


def test_op_time_adds_the_tail_to_compute_only():
    flops, nbytes = 2 * 128 * 8192 * 8192, 2 * 8192 * 8192
    w = float(gemm_waves(128, 8192, 128, 132))
    base = TERMS.replace(tail_waves=0.0)
    tc = flops / (base.eta_compute * 989.4e12)
    tm = nbytes / (base.eta_memory * 3350e9)
    want = float(np.hypot(tc * (1 + 0.1 / w), tm))  # smooth maximum with p = 2
    got = float(op_time(flops, nbytes, 989.4e12, 3350e9, TERMS, waves=w))
    assert got == pytest.approx(want + 1.5e-6 + 5e-6 * -np.expm1(-nbytes / 4e6), rel=1e-12)
    assert float(op_time(flops, nbytes, 989.4e12, 3350e9, TERMS)) < got  # without waves: no tail


def test_step_time_charges_the_size_overhead_per_gemm():
    m = get_model("llama-2-7b")
    p = default_params("h100-sxm")
    assert p.t_kernel_size > 0 and p.tail_waves > 0 and p.m_tile_min == 64
    with_size = step_time(m, Deployment(H100, params=p), batch=4, q=2, context=512).overhead_s
    without = step_time(m, Deployment(H100, params=p.replace(t_kernel_size=0.0)), batch=4, q=2, context=512).overhead_s
    s = ModelShapes.of(m)
    per_layer = sum(kernel_size_overhead(gemm_flops_bytes(8, s.gemm_in[op], s.gemm_out[op], 2)[1], p) for op in GEMM_OPS)
    lm = kernel_size_overhead(gemm_flops_bytes(8, s.lm_in, s.lm_out, 2)[1], p)
    assert float(with_size - without) == pytest.approx(float(m.n_layer * per_layer + lm), rel=1e-9)


def test_bad_kernel_terms_are_refused():
    for bad in ({"kernel_size_bytes": 0.0}, {"tail_waves": -0.1}, {"t_kernel_size": float("nan")}, {"m_tile_min": -1}):
        with pytest.raises(InvalidInputError):
            LatencyParams(**bad)
    assert LatencyParams(m_tile_min=40.4).m_tile_min == 40  # averaged across GPUs


def test_one_token_overhead_grows_with_bytes_on_h100():
    """The evidence for the size overhead: at one token, measured time − bytes/bandwidth on Vidur's H100
    GEMMs (VALIDATION.md): 2.7 µs at 4.2 MB, 3.5 µs at 8.4 MB, median 4.0 µs at 10–20 MB, 6.5 µs at 20–140 MB."""
    from sdsl.fit.profiles import read_vidur

    d = read_vidur(data_path("vidur"), hardware="h100")
    d = d[d["num_tokens"] == 1]
    nb = 2.0 * (d["in_features"] * d["out_features"] + d["in_features"] + d["out_features"])
    extra = d["time_s"] - nb / H100.mem_bandwidth
    got = [float(np.median(extra[(nb > lo) & (nb <= hi)])) for lo, hi in ((0, 5e6), (5e6, 1e7), (1e7, 2e7), (2e7, 1.4e8))]
    assert got == pytest.approx([2.745e-6, 3.493e-6, 3.986e-6, 6.478e-6], rel=1e-3)


def test_kernel_terms_fit_needs_tiles_and_sms():
    import dataclasses

    import pandas as pd

    from sdsl.fit.calibration import fit_latency

    rows = pd.DataFrame({"num_tokens": [1, 64, 512, 4096] * 2, "in_features": [4096] * 8,
                         "out_features": [4096] * 4 + [11008] * 4})
    rows["time_s"] = op_time(*gemm_flops_bytes(rows["num_tokens"], rows["in_features"], rows["out_features"], 2, 128, 64),
                             989.4e12, 3350e9, TERMS, waves=gemm_waves(rows["num_tokens"], rows["out_features"], 128, 132))
    no_sms = dataclasses.replace(H100, sm_count=None)
    with pytest.raises(InvalidInputError):
        fit_latency(rows, no_sms, dtype="fp16", m_tile=128, kernel_terms=True)
    res = fit_latency(rows, H100, dtype="fp16", m_tile=128, kernel_terms=True, smoothness=2.0, keep_points=False)
    assert res.params.m_tile_min == 64 and {"tail_waves", "t_kernel_size", "kernel_size_bytes"} <= set(res.varied)
