"""The Deployment value and the (models, deployment, *, keywords) signatures."""

import numpy as np
import pytest

import sdsl
from sdsl.speculation.throughput import plain_tokens_per_s
from sdsl.roofline.deployment import Deployment
from sdsl.roofline.latency import DEFAULT_PARAMS, default_params, memory_per_gpu, step_time, step_time_s
from sdsl.errors import ConfigError, InvalidInputError, UnknownNameError


def test_resolves_hardware_and_default_params(tmp_path):
    dep = Deployment("H100-SXM")
    assert dep.hardware is sdsl.get_hardware("h100-sxm")
    assert dep.params == default_params(dep.hardware, dep.engine)
    assert (dep.tp, dep.draft_tp, dep.dtype, dep.context) == (1, 1, "bf16", 1024)
    path = tmp_path / "my-gpu.toml"
    path.write_text('name = "My-GPU"\nbf16_tflops = 100\nmem_bandwidth_gbs = 1000\nmem_gb = 24\nsource = "test"\n')
    assert Deployment(path).hardware.name == "My-GPU"
    assert Deployment(str(path)).hardware.peak_flops == pytest.approx(100e12)
    assert Deployment(dep.hardware, params=DEFAULT_PARAMS).params is DEFAULT_PARAMS


def test_the_engine_build_chooses_the_h100_gemm_source():
    """vLLM profiles from 2026 on price the H100's bf16 GEMMs on vLLM 0.24.0's measured tables, earlier profiles and
    the roofline alone on Vidur's 2024 ones; a new engine re-defaults the parameters, explicit ones are kept. Every
    vLLM profile prices decode attention on vLLM's measured kernels (sdsl.roofline.attention), the roofline alone not."""
    from sdsl.roofline.attention import ATTENTION_FIELDS

    new, old = Deployment("h100-sxm", engine="vllm"), Deployment("h100-sxm", engine="vllm:2025-07")
    assert "GEMMs fitted on its measured bf16 GEMMs" in new.params.source and new.params.eta_compute != old.params.eta_compute
    ideal = Deployment("h100-sxm", engine="ideal").params
    assert ideal == default_params("h100-sxm") and ideal.attn_eta_kv == 0.0 < old.params.attn_eta_kv
    assert old.params.replace(**{k: getattr(ideal, k) for k in ATTENTION_FIELDS}, source=ideal.source) == ideal
    assert {k: getattr(old.params, k) for k in ATTENTION_FIELDS} == {k: getattr(new.params, k) for k in ATTENTION_FIELDS}
    assert new.replace(engine="vllm:2025-07").params == old.params and old.replace(engine="vllm").params == new.params
    assert old.replace(engine="vllm", params=old.params).params == old.params
    assert Deployment("h100-sxm", engine="vllm:2025-07", params=new.params).params == new.params
    h200 = [Deployment("h200", engine=e).params for e in ("vllm", "vllm:2025-07")]
    assert h200[0] == h200[1]  # one source on the H200: the tables


def test_of_replace_and_to_dict():
    dep = Deployment("h100-sxm", tp=4, dtype="BFloat16", context=2048.0)
    assert Deployment.of(dep) is dep
    assert Deployment.of("a100-80gb").hardware.name == "A100-80GB"
    assert dep.dtype == "bfloat16"
    assert isinstance(dep.context, int) and dep.context == 2048
    assert dep.replace(tp=8).tp == 8 and dep.tp == 4
    assert dep.for_draft().tp == dep.draft_tp == 1
    d = dep.to_dict()
    assert d["hardware"] == "H100-SXM" and d["tp"] == 4 and d["params"] == dep.params.to_dict()
    assert hash(dep) == hash(Deployment("h100-sxm", tp=4, dtype="BFloat16", context=2048))
    with pytest.raises(AttributeError):
        dep.tp = 2  # frozen


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(hardware="h100-sxn"), UnknownNameError, "closest: h100-sxm"),
    (dict(hardware="missing/gpu.toml"), ConfigError, "not found"),
    (dict(hardware=3.5), InvalidInputError, "hardware must be"),
    (dict(hardware="h100-sxm", tp=0), InvalidInputError, "tp (tensor-parallel degree)"),
    (dict(hardware="h100-sxm", tp=2.0), InvalidInputError, "positive integer"),
    (dict(hardware="h100-sxm", tp=True), InvalidInputError, "positive integer"),
    (dict(hardware="h100-sxm", draft_tp=-1), InvalidInputError, "draft_tp"),
    (dict(hardware="h100-sxm", dtype="int3"), InvalidInputError, "Unknown dtype"),
    (dict(hardware="h100-sxm", context=-1), InvalidInputError, "context"),
    (dict(hardware="h100-sxm", context=float("nan")), InvalidInputError, "context"),
    (dict(hardware="h100-sxm", params={"eta_memory": 0.5}), InvalidInputError, "params"),
])
def test_bad_input_raises_typed_one_sentence_errors(kwargs, error, words):
    hardware = kwargs.pop("hardware")
    with pytest.raises(error) as exc:
        Deployment(hardware, **kwargs)
    assert words in str(exc.value) and str(exc.value).count(". ") == 0


def test_replace_validates():
    with pytest.raises(InvalidInputError):
        Deployment("h100-sxm").replace(tp=0)


def test_replace_hardware_follows_default_params_but_keeps_given_ones():
    a100 = Deployment("h100-sxm", tp=2).replace(hardware="a100-80gb")
    assert a100.params == default_params(a100.hardware) != default_params(sdsl.get_hardware("h100-sxm"))
    assert a100.tp == 2
    mine = Deployment("h100-sxm", params=DEFAULT_PARAMS.replace(eta_memory=0.5)).replace(hardware="a100-80gb")
    assert mine.params.eta_memory == 0.5


def test_everything_after_models_and_deployment_is_keyword_only():
    t, d = "llama-2-7b", "llama-160m"
    calls = [
        lambda: sdsl.predict(t, d, "h100-sxm", 4, 0.7),
        lambda: plain_tokens_per_s(t, "h100-sxm", 8),
        lambda: step_time(t, "h100-sxm", 1, 1, 1024),
        lambda: step_time_s(t, "h100-sxm", 1),
        lambda: memory_per_gpu(sdsl.get_model(t), "h100-sxm", 1),
        lambda: sdsl.evaluate_grid(t, "h100-sxm", [d]),
        lambda: sdsl.search(t, "h100-sxm", [d]),
    ]
    for call in calls:
        with pytest.raises(TypeError):
            call()


def test_serving_builders_are_keyword_only():
    from sdsl.plan.families import draft_size_sweep
    from sdsl.serving import BatchStepModel, ServingSystem, memory_budget, roofline_step_fn, serving_k_table

    with pytest.raises(TypeError):
        ServingSystem.from_catalog("llama-2-7b", "llama-160m", "h100-sxm", None)
    with pytest.raises(TypeError):
        BatchStepModel.from_catalog("llama-2-7b", "llama-160m", "h100-sxm", None)
    with pytest.raises(TypeError):
        memory_budget("llama-2-7b", "h100-sxm", "llama-160m")
    with pytest.raises(TypeError):
        roofline_step_fn("llama-2-7b", "h100-sxm", 4)
    with pytest.raises(TypeError):
        serving_k_table("llama-2-7b", "llama-160m", "h100-sxm", 0.7)
    with pytest.raises(TypeError):
        draft_size_sweep("llama-3.1-8b", "h100-sxm", None)


def test_deployment_settings_reach_the_pricing():
    t, d = sdsl.get_model("llama-3.1-70b"), sdsl.get_model("llama-3.2-1b")
    dep = Deployment("h100-sxm", tp=4, draft_tp=2, dtype="fp8", context=4096)
    p = sdsl.predict(t, d, dep, gamma=3, alpha=0.8, batch=8)
    assert float(p.t_plain_s) == pytest.approx(float(step_time_s(t, dep, batch=8)))
    assert float(p.t_draft_s) == pytest.approx(float(step_time_s(d, dep.replace(tp=2), batch=8)))
    assert float(step_time_s(t, dep, batch=8, context=0)) < float(step_time_s(t, dep, batch=8))
    assert float(p.plain_tokens_per_s) == pytest.approx(float(plain_tokens_per_s(t, dep, batch=8)))
    assert float(memory_per_gpu(t, dep)) == pytest.approx((t.weight_bytes("fp8") + 4096 * t.kv_bytes_per_token("fp8")) / 4)
    grid = sdsl.evaluate_grid(t, dep, drafts=[d], gammas=[3], batch=[8], alpha=[0.8])
    assert np.asarray(grid.prediction.tokens_per_s).item() == pytest.approx(float(p.tokens_per_s))
