"""Every result object follows one protocol: report(), to_dict(), to_json(path=None), plot(ax=None)."""

import json

import numpy as np
import pytest

import sdsl
from sdsl._result import Result, plain


def _prediction():
    return sdsl.predict("llama-2-7b", "llama-160m", "h100-sxm", gamma=np.arange(0, 5)[:, None], alpha=0.7,
                        batch=np.array([1, 8, 64])[None, :])


def _step_time():
    return sdsl.step_time("llama-2-7b", "h100-sxm", batch=[1, 32], q=4)


def _grid():
    return sdsl.evaluate_grid("llama-2-7b", "h100-sxm", drafts=["llama-68m", "llama-160m"], gammas=range(0, 5),
                              batch=(1, 8, 32), alpha=[0.6, 0.8])


def _draft_law():
    return sdsl.fit_draft_law()


def _sim_result():
    from sdsl.serving import AcceptanceDist, ServingSystem, SimConfig, parse_policy, poisson_workload, simulate

    system = ServingSystem.from_catalog("llama-2-7b", "llama-160m", "h100-sxm", max_batch=16, max_context=1024)
    work = poisson_workload(40, 4.0, 64, 32, AcceptanceDist(0.7), seed=0)
    return simulate(work, system, parse_policy("k=3"), SimConfig(max_batch=16, max_k=3), seed=0, qps=4.0)


def _linear_fit():
    from sdsl.serving.linear_model import fit_linear_step_model

    rng = np.random.default_rng(0)
    b, q, L = rng.integers(1, 65, 200), rng.integers(1, 5, 200), rng.integers(64, 2049, 200)
    t = (5e-5 * b * L + 0.02 * b * q + 7.0) * 1e-3 * (1 + 0.01 * rng.standard_normal(200))
    return fit_linear_step_model(b, q, L, t, seed=0)


def _calibration():
    import pandas as pd

    from sdsl.catalog.hardware import get_hardware
    from sdsl.roofline.latency import LatencyParams, gemm_flops_bytes, op_time
    from sdsl.fit.calibration import fit_latency

    hw = get_hardware("h100-sxm")
    true = LatencyParams(eta_compute=0.6, eta_memory=0.7, t_kernel=5e-6)
    rows = []
    for op, (i, o) in {"mlp_up_proj": (4096, 28672), "attn_pre_proj": (4096, 6144)}.items():
        for n in (1, 8, 64, 512, 4096):
            rows.append({"op": op, "num_tokens": n, "in_features": i, "out_features": o, "tp": 1})
    ops = pd.DataFrame(rows)
    f, by = gemm_flops_bytes(ops.num_tokens, ops.in_features, ops.out_features, 2)
    ops["time_s"] = op_time(f, by, hw.peak_flops, hw.mem_bandwidth, true)
    return fit_latency(ops.assign(dtype="bf16"), hw, dtype="bf16")


def _acceptance():
    from sdsl.acceptance import Acceptance

    return Acceptance.from_conditional([0.9, 0.8, 0.7])


def _best_tree():
    from sdsl.plan.tree_search import best_tree
    from sdsl.acceptance.trees import rank_acceptance

    return best_tree(rank_acceptance([0.8, 0.7, 0.6], width=3), max_nodes=12, max_depth=3)


def _engine_log():
    from sdsl.fit.engine_logs import parse_acceptance_log

    return parse_acceptance_log("SpecDecoding metrics: Mean acceptance length: 2.50, Accepted throughput: 1 tokens/s, "
                            "Drafted throughput: 1 tokens/s, Accepted: 150 tokens, Drafted: 300 tokens, "
                            "Per-position acceptance rate: 0.700, 0.500, 0.300, Avg Draft acceptance rate: 50.0%")


def _kernels():
    from sdsl.validation.kernel_validation import validate_kernels

    return validate_kernels(["h200_sxm"], ops=("allreduce",))


RESULTS = [_prediction, _step_time, _grid, _draft_law, _sim_result, _linear_fit, _calibration, _acceptance,
           _best_tree, _engine_log, _kernels]


@pytest.mark.parametrize("make", RESULTS, ids=lambda f: f.__name__.strip("_"))
def test_protocol_round_trip(make, tmp_path):
    result = make()
    assert isinstance(result, Result)
    report = result.report()
    assert isinstance(report, str) and report.strip()
    d = result.to_dict()
    assert plain(d) == d  # plain Python values only
    path = tmp_path / "sub" / "result.json"
    text = result.to_json(path)
    assert json.loads(path.read_text()) == d == json.loads(text)
    assert result.to_json() == text
    assert not list(path.parent.glob(".*tmp"))  # written through a temporary file, renamed away


@pytest.mark.parametrize("make", RESULTS, ids=lambda f: f.__name__.strip("_"))
def test_plot_draws_on_the_given_axes(make):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    result = make()
    fig, ax = plt.subplots()
    try:
        assert result.plot(ax=ax) is ax
        assert ax.has_data()
    finally:
        plt.close(fig)


def test_prediction_plot_shows_best_speedup_per_batch():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = _prediction()
    fig, ax = plt.subplots()
    try:
        p.plot(ax=ax)
        heights = [bar.get_height() for bar in ax.patches]
        assert heights == pytest.approx(np.max(p.speedup, axis=0).tolist())
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "8", "64"]
    finally:
        plt.close(fig)


def test_decode_result_follows_the_protocol(tmp_path, tiny_transformer):
    from sdsl.torch.decoder import DraftModel, generate
    import torch

    target, draft = tiny_transformer(0), tiny_transformer(1)
    prompts = torch.randint(0, 256, (2, 4), generator=torch.Generator().manual_seed(0))
    res = generate(target, prompts, 8, proposer=DraftModel(draft), gamma=2, seed=0)
    assert isinstance(res, Result) and "gamma 2" in res.report()
    assert json.loads(res.to_json(tmp_path / "d.json")) == res.to_dict()


def test_json_writes_nan_and_infinity_as_null():
    from sdsl._result import finite_or_none

    assert finite_or_none({"a": [1.0, float("nan")], "b": float("inf"), "c": "inf"}) == {"a": [1.0, None], "b": None,
                                                                                        "c": "inf"}
