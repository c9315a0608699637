import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdsl.catalog.models import get_model
from sdsl.roofline.deployment import Deployment
from sdsl.errors import ConfigError, InvalidInputError
from sdsl.catalog.hardware import get_hardware
from sdsl.roofline.latency import (DEFAULT_PARAMS, LatencyParams, ModelShapes, default_params, memory_per_gpu, op_time,
                          smooth_max, step_time, step_time_s)

H100 = get_hardware("h100-sxm")
LLAMA7 = get_model("llama-2-7b")


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 256), st.integers(1, 16), st.integers(0, 32_768), st.integers(1, 64), st.integers(1, 8),
       st.integers(0, 4096), st.sampled_from([2.0, 4.0, math.inf]))
def test_step_time_monotone(b, q, L, db, dq, dL, p):
    dep = Deployment(H100, params=DEFAULT_PARAMS.replace(smoothness=p))
    t = step_time_s(LLAMA7, dep, batch=b, q=q, context=L)
    assert step_time_s(LLAMA7, dep, batch=b + db, q=q, context=L) >= t
    assert step_time_s(LLAMA7, dep, batch=b, q=q + dq, context=L) >= t
    assert step_time_s(LLAMA7, dep, batch=b, q=q, context=L + dL) >= t


def test_memory_bound_decode_matches_weight_streaming():
    st_ = step_time(LLAMA7, Deployment(H100, context=0, params=DEFAULT_PARAMS))
    weights = LLAMA7.weight_bytes("bf16")
    # batch 1 decode ≈ reading every weight once at η_m·bandwidth, plus launches
    assert st_.bound == "memory"
    assert float(st_.memory_s) == pytest.approx(weights / (0.8 * H100.mem_bandwidth), rel=0.05)
    # verifying 8 tokens costs about the same as 1 in the memory-bound regime
    assert step_time_s(LLAMA7, H100, q=8) / step_time_s(LLAMA7, H100, q=1) < 1.05
    # many tokens with short contexts become compute-bound (long contexts stay KV-read-bound)
    assert step_time(LLAMA7, H100, batch=64, q=8, context=128).bound == "compute"


def test_smooth_max_and_op_time():
    assert smooth_max(3.0, 4.0, 2.0) == pytest.approx(5.0)
    assert smooth_max(3.0, 4.0, math.inf) == 4.0
    assert smooth_max(0.0, 0.0, 2.0) == 0.0
    p = LatencyParams(eta_compute=0.5, eta_memory=0.5, t_kernel=1e-6)
    assert op_time(1e12, 0.0, 1e15, 1e12, p) == pytest.approx(2e-3 + 1e-6)
    assert op_time(0.0, 1e9, 1e15, 1e12, p) == pytest.approx(2e-3 + 1e-6)


def test_stacked_models_match_single():
    models = [get_model(n) for n in ("llama-68m", "llama-160m", "llama-3.2-1b")]
    shapes = ModelShapes.of(models, 1, extra_dims=1)
    b = np.array([1, 4, 32])
    stacked = step_time_s(shapes, H100, batch=b[None, :], context=512)
    for i, m in enumerate(models):
        np.testing.assert_allclose(stacked[i], step_time_s(m, H100, batch=b, context=512))


def test_tensor_parallel():
    m = get_model("llama-2-70b")
    t1 = step_time(m, Deployment(H100, tp=1, params=DEFAULT_PARAMS))  # no row-limited elementwise terms
    t4 = step_time(m, Deployment(H100, tp=4, params=DEFAULT_PARAMS))
    assert float(t4.memory_s) == pytest.approx(float(t1.memory_s) / 4, rel=0.05)
    assert float(t4.allreduce_s) > 0 and float(t1.allreduce_s) == 0
    with pytest.raises(InvalidInputError):
        step_time(m, Deployment("a10g", tp=2))  # no interconnect in catalog
    with pytest.raises(InvalidInputError):
        step_time(m, Deployment(H100, tp=3))  # 64 heads not divisible by 3


def test_memory_per_gpu():
    m = get_model("llama-3.1-70b")
    assert memory_per_gpu(m, Deployment(H100, tp=1)) > 80e9 > memory_per_gpu(m, Deployment(H100, tp=4))


def test_bad_inputs_and_params_roundtrip():
    for kw in [dict(batch=0), dict(q=0), dict(context=-1), dict(batch=np.nan)]:
        with pytest.raises(InvalidInputError):
            step_time(LLAMA7, H100, **{"batch": 1, "q": 1, "context": 0, **kw})
    with pytest.raises(InvalidInputError):
        LatencyParams(eta_compute=1.5)
    with pytest.raises(InvalidInputError):
        LatencyParams(smoothness=0.5)
    p = LatencyParams(smoothness=3.0, t_step=1e-4)
    assert LatencyParams.from_dict(p.to_dict()) == p
    assert LatencyParams.from_dict(DEFAULT_PARAMS.to_dict()) == DEFAULT_PARAMS
    with pytest.raises(ConfigError):
        LatencyParams.from_dict({"eta": 1})
    assert isinstance(default_params(H100), LatencyParams)


def test_packaged_calibrations():
    h100 = default_params(H100)
    assert "H100" in h100.source and "vidur" in h100.source.lower()
    h200 = default_params(get_hardware("h200"))
    # H200 is uncalibrated: the cross-GPU model leans on the H100 (same architecture and compute)
    assert "cross-GPU efficiency model" in h200.source and h200.eta_memory == pytest.approx(h100.eta_memory, rel=0.01)
    assert "A100" in default_params(get_hardware("a100-80gb")).source
    assert default_params(get_hardware("cpu")) == DEFAULT_PARAMS


def test_t_layer_adds_per_layer_overhead():
    base = step_time(LLAMA7, Deployment(H100, context=0, params=DEFAULT_PARAMS))
    more = step_time(LLAMA7, Deployment(H100, context=0, params=DEFAULT_PARAMS.replace(t_layer=1e-5)))
    assert float(more.total_s - base.total_s) == pytest.approx(LLAMA7.n_layer * 1e-5)


def test_the_hard_maximum_is_null_in_json_and_reads_back_as_inf():
    d = LatencyParams(smoothness=math.inf).to_dict()
    assert d["smoothness"] is None
    assert math.isinf(LatencyParams.from_dict(d).smoothness)
    assert math.isinf(LatencyParams.from_dict({**d, "smoothness": "inf"}).smoothness)  # files written before
