"""The engine execution model (sdsl.engine.profiles, docs/model.md §3.9): each term's form, checked against hand
arithmetic on price_step's own GPU parts (relative checks: nothing here depends on the shipped latency values), the
profile selection, the catalog's provenance, and that every output names its profile."""

from __future__ import annotations

import json

import numpy as np
import pytest

import sdsl
from sdsl.roofline.deployment import Deployment
from sdsl.engine.profiles import (IDEAL, EngineProfile, forward_kernels, engine_profiles, padded_batch, resolve_engine)
from sdsl.roofline.latency import padded_step_time, step_time
from sdsl.errors import ConfigError, InvalidInputError, UnknownNameError

TARGET = "llama-3.1-8b"
H, S, D = 0.7e-3, 1.1e-3, 0.3e-3  # host per step, per speculative step, per separate forward


def _dep(engine, **kw):
    return sdsl.Deployment("h100-sxm", context=512, engine=engine, **kw)


def _gpu(step):
    return step.t_propose_s + step.t_verify_s + step.t_worker_s


def test_ideal_is_the_roofline_alone():
    k = np.arange(0, 6)
    step = sdsl.price_step(TARGET, "eagle", _dep("ideal"), tau=np.minimum(2.4, k + 1), gamma=k, batch=4)
    np.testing.assert_allclose(step.t_host_s, 0.0, atol=0)
    np.testing.assert_allclose(step.t_step_s, _gpu(step), rtol=1e-15)
    plain = step_time(TARGET, _dep("ideal"), batch=4, q=1).total_s
    np.testing.assert_allclose(step.t_plain_s, plain, rtol=1e-15)
    assert IDEAL.is_ideal and not resolve_engine("vllm").is_ideal


def test_without_overlap_host_terms_add_to_the_gpu_time():
    eng = IDEAL.replace(name="t", host_step_s=H, spec_step_s=S, draft_pass_s=D)
    k = np.arange(1, 7)
    step = sdsl.price_step(TARGET, "eagle", _dep(eng), tau=2.0, gamma=k, batch=1)
    passes = (k - 1) + 1  # EAGLE: k - 1 drafting passes after the draft extend, which is a worker pass
    np.testing.assert_allclose(step.t_step_s - _gpu(step), H + S + D * passes, rtol=1e-12)
    plain = step_time(TARGET, _dep("ideal"), batch=1, q=1).total_s
    np.testing.assert_allclose(step.t_plain_s, plain + H, rtol=1e-12)


def test_overlap_hides_the_per_step_host_time_behind_the_gpu_and_nothing_else():
    eng = IDEAL.replace(name="t", host_step_s=H, spec_step_s=S, draft_pass_s=D, overlap_plain=True, overlap_spec=True)
    step = sdsl.price_step(TARGET, "eagle", _dep(eng), tau=2.0, gamma=3, batch=1)
    assert float(step.t_step_s - _gpu(step)) == pytest.approx(S + 3 * D, rel=1e-12)  # H < GPU step: hidden
    big = eng.replace(host_step_s=0.02)  # longer than the GPU step: max(0, H - GPU) is exposed
    step = sdsl.price_step(TARGET, "eagle", _dep(big), tau=2.0, gamma=3, batch=1)
    assert float(step.t_step_s) == pytest.approx(0.02 + S + 3 * D, rel=1e-12)
    assert float(step.t_plain_s) == pytest.approx(0.02, rel=1e-12)


def test_a_zero_sync_build_hides_the_speculative_host_work_with_the_step_and_exposes_only_the_excess():
    eng = IDEAL.replace(name="t", host_step_s=H, spec_step_s=S, draft_pass_s=D, overlap_plain=True, overlap_spec=True,
                        zero_sync_spec=True)
    step = sdsl.price_step(TARGET, "eagle", _dep(eng), tau=2.0, gamma=3, batch=1)
    assert H + S + 3 * D < float(_gpu(step))  # all of it shorter than the GPU step: nothing exposed
    assert float(step.t_step_s) == pytest.approx(float(_gpu(step)), rel=1e-12)
    big = eng.replace(spec_step_s=0.02)  # longer than the GPU step: max(0, H + S + d·passes - GPU)
    step = sdsl.price_step(TARGET, "eagle", _dep(big), tau=2.0, gamma=3, batch=1)
    assert float(step.t_step_s) == pytest.approx(H + 0.02 + 3 * D, rel=1e-12)
    plain = sdsl.price_step(TARGET, "eagle", _dep(eng.replace(zero_sync_spec=False)), tau=2.0, gamma=3, batch=1)
    assert float(plain.t_plain_s) == float(step.t_plain_s)  # a plain step has no S or d to hide
    no_overlap = eng.replace(overlap_spec=False)  # without overlap nothing runs ahead: H + S + d summed
    step = sdsl.price_step(TARGET, "eagle", _dep(no_overlap), tau=2.0, gamma=3, batch=1)
    assert float(step.t_step_s - _gpu(step)) == pytest.approx(H + S + 3 * D, rel=1e-12)
    draft = sdsl.price_step(TARGET, "draft:llama-3.2-1b", _dep(eng), tau=2.0, gamma=3, batch=1)  # the V1 runner's
    assert float(draft.t_step_s - _gpu(draft)) == pytest.approx(S + D * float(draft.pieces.passes), rel=1e-12)


def test_a_one_graph_proposer_pays_a_plain_steps_host_time_and_no_speculative_terms():
    eng = IDEAL.replace(name="t", host_step_s=H, spec_step_s=S, draft_pass_s=D, in_graph_kinds=("mtp",))
    dep = sdsl.Deployment("h200", tp=8, context=512, engine=eng)
    mtp = sdsl.price_step("deepseek-v3", "mtp", dep, tau=1.9, gamma=2, batch=1)
    assert float(mtp.t_step_s - _gpu(mtp)) == pytest.approx(H, rel=1e-12)  # no overlap: H, as a plain step pays
    assert float(mtp.t_plain_s - step_time("deepseek-v3", dep.replace(engine="ideal"), batch=1, q=1).total_s) == \
        pytest.approx(H, rel=1e-12)
    overlapped = sdsl.price_step("deepseek-v3", "mtp", dep.replace(engine=eng.replace(overlap_plain=True)), tau=1.9,
                                 gamma=2, batch=1)
    assert float(overlapped.t_step_s) == pytest.approx(float(_gpu(overlapped)), rel=1e-12)  # H < GPU: hidden
    eagle = sdsl.price_step(TARGET, "eagle", _dep(eng), tau=2.0, gamma=3, batch=1)  # other kinds keep S and d
    assert float(eagle.t_step_s - _gpu(eagle)) == pytest.approx(H + S + 3 * D, rel=1e-12)
    with pytest.raises(InvalidInputError, match="in_graph_kinds"):
        IDEAL.replace(name="t", in_graph_kinds=("ngram",))


def test_tensorrt_llms_mtp_runs_in_one_graph_and_its_eagle3_keeps_the_fitted_host_time():
    trt = resolve_engine("trtllm")
    assert trt.in_graph_kinds == ("mtp",) and "one graph" in trt.sources["in_graph_kinds"]["quote"]
    dep = sdsl.Deployment("b200", tp=8, context=2048, engine=trt)
    mtp = sdsl.price_step("deepseek-r1", "mtp", dep, tau=1.92, gamma=1, batch=1)
    assert float(mtp.t_host_s) == pytest.approx(float(mtp.t_step_s - _gpu(mtp)), abs=1e-12)
    assert float(mtp.t_step_s - _gpu(mtp)) < 1e-6  # overlapped plain host (H = 0), no spec_step_s
    eagle3 = sdsl.price_step("llama-3.1-70b", "eagle3", sdsl.Deployment("h200", tp=8, context=512, engine=trt),
                             tau=2.5, gamma=3, batch=4)
    assert float(eagle3.t_step_s - _gpu(eagle3)) >= trt.spec_step_s


def test_k0_is_plain_for_a_draft_model_and_pays_the_drafter_tax_for_a_head():
    eng = IDEAL.replace(name="t", host_step_s=H, spec_step_s=S, draft_pass_s=D)
    draft = sdsl.price_step(TARGET, "draft:llama-3.2-1b", _dep(eng), tau=1.0, gamma=0, batch=2)
    assert float(draft.t_step_s) == pytest.approx(float(draft.t_plain_s), rel=1e-12)
    head = sdsl.price_step(TARGET, "eagle", _dep(eng), tau=1.0, gamma=0, batch=2)
    assert float(head.t_step_s - _gpu(head)) == pytest.approx(H + S + D, rel=1e-12)  # the draft-extend pass still runs


def test_eager_forwards_add_launches_counted_from_the_model():
    assert forward_kernels("hf", 32) == 42 * 32 + 14 + 15
    assert forward_kernels("hf", 32, grouped_kv=True, loop_step=False) == 44 * 32 + 14
    assert forward_kernels("fused", 80, tp=8, loop_step=False) == 12 * 80 + 4
    assert forward_kernels("gpt-fast", 32) == 48 * 32 + 12 + 11
    launch = 5e-6
    eager = IDEAL.replace(name="e", graphs_target=False, launch_s=launch, kernels="hf")
    plain = sdsl.price_step("llama-2-7b", "ngram", _dep(eager), tau=1.0, gamma=0, batch=1)
    roof = step_time("llama-2-7b", _dep("ideal"), batch=1, q=1).total_s
    assert float(plain.t_plain_s) == pytest.approx(roof + launch * (42 * 32 + 29), rel=1e-12)
    verify = sdsl.price_step("llama-2-7b", "ngram", _dep(eager), tau=1.0, gamma=3, batch=1)
    assert float(verify.t_step_s - verify.t_verify_s) == pytest.approx(launch * (42 * 32 + 14), rel=1e-12)


def test_verify_is_padded_to_the_next_captured_size_and_runs_eagerly_above_the_largest():
    eng = IDEAL.replace(name="p", capture_sizes=(1, 2, 4, 8), capture_unit="tokens", launch_s=5e-6)
    b, pad = padded_batch(eng, np.array([1, 1, 3]), np.array([3, 5, 3]))
    np.testing.assert_allclose(b, [4 / 3, 8 / 5, 3])
    np.testing.assert_array_equal(pad, [False, False, True])  # 9 tokens > 8: eager
    step = sdsl.price_step(TARGET, "ngram", _dep(eng), tau=1.0, gamma=4, batch=1)
    want = padded_step_time(TARGET, _dep("ideal"), batch=8 / 5, q=5, context=512 * 5 / 8).total_s
    assert float(step.t_verify_s) == pytest.approx(float(want), rel=1e-12)
    above = sdsl.price_step(TARGET, "ngram", _dep(eng), tau=1.0, gamma=4, batch=2)  # 10 tokens: eager, unpadded
    assert float(above.t_verify_s) == pytest.approx(float(step_time(TARGET, _dep("ideal"), batch=2, q=5).total_s),
                                                    rel=1e-12)
    assert float(above.t_host_s) == pytest.approx(5e-6 * forward_kernels("fused", 32, grouped_kv=True,
                                                                          loop_step=False), rel=1e-12)
    reqs = IDEAL.replace(name="r", capture_sizes=(1, 2, 4), capture_unit="requests")
    np.testing.assert_allclose(padded_batch(reqs, np.array([3]), np.array([6]))[0], [4])


def test_rejection_probabilities_are_a_memory_term_of_the_verified_positions():
    k, tau = np.array([0, 4]), np.array([1.0, 2.0])
    base = sdsl.price_step(TARGET, "eagle", _dep("ideal"), tau=tau, gamma=k, batch=16)
    probs = sdsl.price_step(TARGET, "eagle", _dep(IDEAL.replace(name="r", rejection_probs=True)), tau=tau, gamma=k,
                            batch=16)
    extra = probs.t_worker_s - base.t_worker_s
    assert extra[0] == 0.0  # nothing drafted, nothing to reject
    dep = _dep("ideal")
    nbytes = 16 * 5 * 128256 * 4.0
    bw = dep.params.eta_memory * dep.hardware.mem_bandwidth
    assert extra[1] > 2 * nbytes / bw  # written and read once, at the calibrated bandwidth, plus two launches


def test_selection_by_engine_month_name_and_file(tmp_path):
    assert resolve_engine("vllm").name == max((p for p in engine_profiles().values() if p.engine == "vllm"),
                                              key=lambda p: p.date).name
    assert resolve_engine("vllm:2025-04").name == "vllm-2025-04"
    assert resolve_engine("vllm:2025-06").name == "vllm-2025-04"
    assert resolve_engine("vllm:2025-07").name == "vllm-2025-07"
    assert resolve_engine("VLLM-2025-07").name == "vllm-2025-07"
    assert resolve_engine("ideal") is IDEAL
    with pytest.raises(UnknownNameError, match="No vllm profile"):
        resolve_engine("vllm:2024-01")
    with pytest.raises(UnknownNameError, match="Unknown engine"):
        resolve_engine("tgi")
    with pytest.raises(InvalidInputError, match="YYYY-MM"):
        resolve_engine("vllm:2025-13")
    with pytest.raises(InvalidInputError, match="YYYY-MM-DD"):
        resolve_engine("vllm:2026-02-30")
    # a day resolves within its month: MRV2's profile is dated 2026-03-24
    assert resolve_engine("vllm:2026-03").name == resolve_engine("vllm:2026-03-24").name == "vllm-2026-03"
    assert resolve_engine("vllm:2026-03-01").name == "vllm-2026-01"
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(resolve_engine("sglang").replace(name="mine", spec_step_s=2e-3).to_dict()))
    mine = resolve_engine(str(path))
    assert mine.name == "mine" and mine.spec_step_s == 2e-3 and mine.overlap_plain
    path.write_text(json.dumps({"name": "x", "spec_step_s": -1}))
    with pytest.raises(InvalidInputError, match="non-negative"):
        resolve_engine(str(path))
    path.write_text(json.dumps({"name": "x", "warp_speed": 1}))
    with pytest.raises(ConfigError, match="unknown engine profile key"):
        resolve_engine(str(path))


def test_deployment_carries_the_engine_and_every_output_names_it():
    assert sdsl.Deployment("h100-sxm").engine.name == resolve_engine("vllm").name  # the newest vLLM profile
    assert sdsl.Deployment("cpu").engine is IDEAL  # sdsl's reference decoder: host times given explicitly
    dep = sdsl.Deployment("h100-sxm", engine="vllm:2025-04")
    assert dep.engine.name == "vllm-2025-04" and dep.replace(tp=2).engine.name == "vllm-2025-04"
    assert dep.replace(engine="ideal").engine is IDEAL
    step = sdsl.price_step(TARGET, "eagle", dep, tau=2.0, gamma=3)
    assert step.engine.name == "vllm-2025-04" and step.to_dict()["engine"]["name"] == "vllm-2025-04"
    assert dep.to_dict()["engine"]["name"] == "vllm-2025-04"
    assert sdsl.price_step(TARGET, "eagle", dep, tau=2.0, gamma=3, engine="sglang").engine.engine == "sglang"


def test_engine_pricing_is_vectorised():
    dep = _dep("vllm:2025-07")
    k, b = np.arange(0, 7)[:, None], np.array([1, 8, 64])[None, :]
    grid = sdsl.price_step(TARGET, "eagle3", dep, tau=np.minimum(1.5, k + 1.0) + 0.0 * b, gamma=k, batch=b)
    for i in (0, 3, 6):
        for j, bb in enumerate((1, 8, 64)):
            one = sdsl.price_step(TARGET, "eagle3", dep, tau=min(1.5, i + 1.0), gamma=i, batch=bb)
            assert float(grid.t_step_s[i, j]) == pytest.approx(float(one.t_step_s), rel=1e-12)


def test_the_catalog_states_where_every_value_comes_from():
    """Integrity check of sdsl/data/engines/profiles.json: every non-zero time term and every structural choice that
    differs from the roofline names a source and quote, a fit on published rows, an inheritance, or a note."""
    for name, p in engine_profiles().items():
        if name == "ideal":
            continue
        assert p.date and p.build
        for term in ("host_step_s", "spec_step_s", "draft_pass_s", "launch_s"):
            src = p.sources.get(term) or {}
            if getattr(p, term):
                assert src.get("quote") or src.get("fit") == "published" or "inherit" in src, (name, term)
            if "inherit" in src:
                parent = engine_profiles()[src["inherit"]]
                assert getattr(p, term) == pytest.approx(getattr(parent, term) * src.get("scale", 1.0), abs=1e-9)
        for flag in ("overlap_spec", "capture_sizes"):
            if getattr(p, flag):
                assert p.sources.get(flag), (name, flag)


def test_profile_validation_is_one_sentence():
    with pytest.raises(InvalidInputError, match="kernels must be one of"):
        EngineProfile(name="x", kernels="tensorrt")
    with pytest.raises(InvalidInputError, match="increasing"):
        EngineProfile(name="x", capture_sizes=(4, 2))
    with pytest.raises(InvalidInputError, match="YYYY-MM-DD"):
        EngineProfile(name="x", date="2025-02-30")


def test_the_counts_the_documents_quote():
    """docs/model.md §3.9 and VALIDATION.md quote these kernel counts and launch times."""
    assert forward_kernels("fused", 32, loop_step=False) == 324  # vLLM PR #1440's Llama-2-7B: 1.5 ms / 324 = 4.6 us
    assert 1.5e-3 / 324 == pytest.approx(4.6e-6, abs=0.05e-6)
    assert forward_kernels("hf", 40) == 1709  # the EAGLE repository's Llama-2-13B baseline
    assert forward_kernels("gpt-fast", 32) == 1559  # the blog's eager Llama-2-7B: 1559 x 5 us = 7.8 ms
    assert (1 / 25.5 - 0.009816) / 1559 == pytest.approx(18.9e-6, abs=0.05e-6)  # what would fit that row
    from sdsl.engine.profiles import proposer_kernels
    from sdsl.speculation.proposers import make_proposer

    target = sdsl.get_model("llama-3.1-8b")
    draft, extend = proposer_kernels(make_proposer("eagle3"), target, "fused")
    assert (draft, extend) == (14, 14)
    assert 5e-6 * (324 + 7 * draft + extend) == pytest.approx(2.18e-3, abs=0.005e-3)  # SGLang EAGLE-3, 8 steps, graphs off


# -- the engine's all-reduce -------------------------------------------------------------------------------------


def test_custom_allreduce_one_shot_two_shot_and_nccl_above_the_kernel_size():
    """One-shot a + (t-1)M/(eta B) below the one-shot limit, two-shot 2a + 2(t-1)/t M/(eta B) above it, NCCL from the
    kernel's largest size (vLLM's rule: one-stage below 512 KiB at tp <= 4, 256 KiB at tp <= 8; 8 MiB to NCCL)."""
    from sdsl.engine.profiles import allreduce_latencies, custom_allreduce_time

    vllm = resolve_engine("vllm-2025-07")
    a, bw, eta = vllm.allreduce_latency_s, 450e9, vllm.allreduce_eta  # both measured (NVIDIA's operator tables)
    assert 0.2 < eta < 0.4 and 3e-6 < a < 6e-6
    m = np.array([8192.0, 300 * 1024.0, 600 * 1024.0, 9 * 2 ** 20])
    nccl = np.full(m.shape, 1.0)
    for t in (2, 4, 8):
        got = custom_allreduce_time(vllm, m, t, bw, 0.75, nccl)  # the profile's own eta, not the GPU's 0.75
        one = a + (t - 1) * m / (eta * bw)
        two = 2 * a + 2 * (t - 1) / t * m / (eta * bw)
        limit = {2: 8 * 2 ** 20, 4: 512 * 1024, 8: 256 * 1024}[t]
        want = np.where(m >= 8 * 2 ** 20, 1.0, np.where(m < limit, one, two))
        np.testing.assert_allclose(got, want, rtol=1e-12)
        np.testing.assert_array_equal(allreduce_latencies(vllm, m, t), np.where(m >= 8 * 2 ** 20, 0, np.where(m < limit, 1, 2)))
    assert np.all(allreduce_latencies(IDEAL, m, 8) == 0) and np.all(allreduce_latencies(vllm, m, 1) == 0)


def test_the_engine_all_reduce_prices_tp_steps_and_leaves_tp1_alone():
    from sdsl.roofline.latency import step_time

    ideal = Deployment("a100-80gb", tp=8, engine="ideal")
    fast = ideal.replace(engine="gpt-fast")
    s_nccl = step_time("llama-2-7b", ideal, batch=1, q=1)
    s_custom = step_time("llama-2-7b", fast, batch=1, q=1)
    eng = resolve_engine("gpt-fast")
    per_call = eng.allreduce_latency_s + 7 * 8192.0 / (ideal.params.eta_interconnect * ideal.hardware.interconnect_bandwidth)
    assert float(s_custom.allreduce_s) == pytest.approx(64 * per_call, rel=1e-12)  # 2 per layer x 32 layers
    assert float(s_nccl.allreduce_s) > 2 * float(s_custom.allreduce_s)
    assert float(s_custom.total_s - s_custom.allreduce_s) == pytest.approx(float(s_nccl.total_s - s_nccl.allreduce_s))
    one = Deployment("a100-80gb", engine="ideal")
    assert float(step_time("llama-2-7b", one.replace(engine="gpt-fast"), batch=1, q=1).total_s) == pytest.approx(
        float(step_time("llama-2-7b", one, batch=1, q=1).total_s), rel=1e-12)


@pytest.mark.parametrize("proposer, kw", [("eagle3", {"gamma": 3}), ("eagle", {"tree": "4,4,16"}),
                                          (None, {"gamma": 0})])
def test_a_changed_all_reduce_latency_is_the_repriced_step(proposer, kw):
    """The fits move a through the step's counted latencies (StepPieces.allreduce_step): exact against repricing."""
    from sdsl.engine.profiles import host_seconds
    from sdsl.speculation.step import price_step

    trt = resolve_engine("trtllm-2025-06")
    dep = Deployment("h200", tp=8, engine=trt)
    base = price_step("llama-3.1-70b", proposer or "ngram", dep, tau=2.0 if proposer else 1.0, batch=4, **kw)
    moved = price_step("llama-3.1-70b", proposer or "ngram", dep.replace(engine=trt.replace(allreduce_latency_s=2e-5)),
                       tau=2.0 if proposer else 1.0, batch=4, **kw)
    hs, hp = host_seconds(trt, base.pieces, allreduce_latency_s=2e-5)
    assert float(base.pieces.gpu_step_s + hs) == pytest.approx(float(moved.t_step_s), rel=1e-9)
    assert float(base.pieces.gpu_plain_s + hp) == pytest.approx(float(moved.t_plain_s), rel=1e-9)
    assert float(base.pieces.allreduce_plain) == 160.0  # 2 x 80 layers, one-shot


@pytest.mark.parametrize("data", [{}, {"name": "x"}, {"profile": {"name": "x", "build": "b"}}])
def test_an_engine_file_without_terms_is_not_the_ideal_profile(tmp_path, data):
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="holds no engine profile terms"):
        resolve_engine(str(path))
