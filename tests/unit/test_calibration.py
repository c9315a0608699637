"""Calibration: recovers known parameters from the model's own data; JSON round trip; errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

from sdsl._paths import data_path

import numpy as np
import pandas as pd
import pytest

from sdsl.fit.calibration import CalibrationResult, calibrate_profiles, fit_latency, load_latency_params
from sdsl.errors import ConfigError, ProfileError
from sdsl.catalog.hardware import get_hardware
from sdsl.roofline.latency import LatencyParams, gemm_flops_bytes, op_time

VIDUR = data_path("vidur")


def _synthetic(params: LatencyParams, hw, noise: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """Vidur-like GEMM grid timed by the model itself (fp16)."""
    n = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096])
    shapes = [(4096, 12288), (4096, 4096), (4096, 22016), (11008, 4096), (8192, 1280), (1024, 8192)]
    rows = [(t, i, o) for i, o in shapes for t in n]
    df = pd.DataFrame(rows, columns=["num_tokens", "in_features", "out_features"]).assign(op="mlp_up_proj")
    f, b = gemm_flops_bytes(df.num_tokens, df.in_features, df.out_features, 2)
    t = op_time(f, b, hw.peak_flops_for("fp16"), hw.mem_bandwidth, params)
    rng = np.random.default_rng(seed)
    return df.assign(time_s=t * np.exp(noise * rng.standard_normal(len(t))), dtype="fp16")


@pytest.mark.parametrize("true", [
    LatencyParams(eta_compute=0.72, eta_memory=0.86, t_kernel=5.5e-6, smoothness=1.4),
    LatencyParams(eta_compute=0.55, eta_memory=0.65, t_kernel=2.0e-6, smoothness=3.0),
    LatencyParams(eta_compute=0.8, eta_memory=0.9, t_kernel=8.0e-6, smoothness=math.inf),
])
def test_fit_recovers_known_params_within_1pct(true):
    hw = get_hardware("h100-sxm")
    res = fit_latency(_synthetic(true, hw), hw)
    for name in ("eta_compute", "eta_memory", "t_kernel"):
        assert getattr(res.params, name) == pytest.approx(getattr(true, name), rel=0.01), name
    if math.isinf(true.smoothness):
        assert "smoothness" not in res.varied or res.params.smoothness > 20
    else:
        assert res.params.smoothness == pytest.approx(true.smoothness, rel=0.01)
    assert res.mape < 1e-3


def test_auto_smoothness_keeps_hard_max_when_data_do_not_ask():
    hw = get_hardware("a100-80gb")
    true = LatencyParams(eta_compute=0.7, eta_memory=0.8, t_kernel=4e-6, smoothness=math.inf)
    res = fit_latency(_synthetic(true, hw, noise=0.02), hw)
    assert res.varied == ("eta_compute", "eta_memory", "t_kernel")
    assert math.isinf(res.params.smoothness)
    assert "hard max kept" in res.smoothness_choice


def test_result_report_json_round_trip(tmp_path):
    hw = get_hardware("h100-sxm")
    res = fit_latency(_synthetic(LatencyParams(smoothness=2.0), hw, noise=0.03), hw, sources=("synthetic",))
    text = res.report()
    assert "eta_memory" in text and "MAPE" in text and "mlp_up_proj" in text
    path = tmp_path / "x.calib.json"
    res.to_json(path)
    back = CalibrationResult.from_json(path)
    assert back.params == res.params and back.mape == res.mape and len(back.points) == res.n_points
    assert np.allclose(back.residuals, res.residuals)
    assert load_latency_params(path) == res.params
    # a bare parameter mapping is accepted too
    (tmp_path / "bare.json").write_text(json.dumps(LatencyParams(eta_memory=0.5).to_dict()))
    assert load_latency_params(tmp_path / "bare.json").eta_memory == 0.5
    (tmp_path / "bad.json").write_text(json.dumps({"format": "sdsl-calibration"}))
    with pytest.raises(ConfigError):
        load_latency_params(tmp_path / "bad.json")


def test_plot_does_not_need_a_display(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    hw = get_hardware("h100-sxm")
    res = fit_latency(_synthetic(LatencyParams(), hw), hw)
    ax = res.plot()
    ax.figure.savefig(tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 0


def test_save_figure_is_atomic_and_rejects_unknown_formats(tmp_path):
    from matplotlib.figure import Figure

    from sdsl.errors import InvalidInputError
    from sdsl.plots._common import save_figure

    fig = Figure()
    fig.subplots().plot([0, 1], [0, 1])
    assert save_figure(fig, tmp_path / "sub" / "c") == tmp_path / "sub" / "c.png"
    assert (tmp_path / "sub" / "c.png").read_bytes()[:4] == b"\x89PNG"
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["c.png"]  # no temporary left behind
    with pytest.raises(InvalidInputError, match="Cannot save a figure as c.xyz"):
        save_figure(fig, tmp_path / "c.xyz")


def test_bad_data():
    hw = get_hardware("h100-sxm")
    with pytest.raises(ProfileError, match="lacks column"):
        fit_latency(pd.DataFrame({"num_tokens": [1]}), hw, dtype="fp16")
    df = _synthetic(LatencyParams(), hw)
    df.loc[0, "time_s"] = -1.0
    with pytest.raises(ProfileError, match="positive"):
        fit_latency(df, hw)


def test_calibrate_vidur_h100_file():
    res = calibrate_profiles([VIDUR / "h100" / "microsoft" / "phi-2" / "mlp.csv"], hardware="h100-sxm")
    assert 0.5 < res.params.eta_memory <= 1 and 0.5 < res.params.eta_compute <= 1
    assert 1e-6 < res.params.t_kernel < 2e-5
    assert res.mape < 0.15


def test_layer_rows_predicted_and_fitted(tmp_path):
    """Decoder-layer steps are priced with step_time's own formula; fit_layers fits them too."""
    from dataclasses import replace as dc_replace

    from sdsl.catalog.models import get_model
    from sdsl.roofline.deployment import Deployment
    from sdsl.fit.calibration import predict_layer_times
    from sdsl.roofline.latency import step_time

    hw = get_hardware("h100-sxm")
    spec = get_model("llama-3.1-8b")
    true = LatencyParams(eta_compute=0.6, eta_memory=0.7, t_kernel=6e-6, smoothness=2.0)
    layers = pd.DataFrame({"batch": [1, 4, 16, 64, 1, 8], "q": [1, 2, 4, 8, 8, 1], "context": [128, 512, 1024, 4096, 0, 2048]})
    pred = predict_layer_times(layers, spec, hw, true, "bf16")
    dep = Deployment(hw, dtype="bf16", params=true)
    whole = step_time(spec, dep, batch=layers.batch, q=layers.q, context=layers.context).total_s
    one = step_time(dc_replace(spec, n_layer=1), dep, batch=layers.batch, q=layers.q, context=layers.context).total_s
    assert np.allclose(whole - one, (spec.n_layer - 1) * pred)
    ops = _synthetic(true, hw).assign(dtype="bf16")
    res = fit_latency(ops, hw, layers=[(layers.assign(time_s=pred), spec)], smoothness="fit")
    assert res.layers_fitted and res.layer_mape < 1e-3
    assert res.params.eta_memory == pytest.approx(0.7, rel=0.01)


def test_layer_rows_fit_t_layer_within_1pct():
    """With decoder-layer rows the fixed per-layer cost t_layer is fitted (only layer rows see it)."""
    from sdsl.catalog.models import get_model
    from sdsl.roofline.deployment import Deployment
    from sdsl.fit.calibration import predict_layer_times

    hw = get_hardware("cpu")
    spec = get_model("llama-68m")
    true = LatencyParams(eta_compute=0.02, eta_memory=0.06, t_kernel=1.5e-6, t_layer=150e-6, smoothness=1.5)
    layers = pd.DataFrame({"batch": [1, 1, 2, 4, 4, 8, 1, 2], "q": [1, 4, 2, 1, 8, 4, 8, 1],
                           "context": [64, 256, 1024, 64, 256, 1024, 1024, 256]})
    rows = layers.assign(time_s=predict_layer_times(layers, spec, hw, true, "fp32"))
    ops = _synthetic(true, get_hardware("cpu")).assign(dtype="fp32")
    f, b = gemm_flops_bytes(ops.num_tokens, ops.in_features, ops.out_features, 4)
    ops = ops.assign(time_s=op_time(f, b, hw.peak_flops_for("fp32"), hw.mem_bandwidth, true))
    res = fit_latency(ops, hw, layers=[(rows, spec)], smoothness="fit")
    assert "t_layer" in res.varied and "t_layer" in res.report()
    for name in ("eta_compute", "eta_memory", "t_kernel", "t_layer"):
        assert getattr(res.params, name) == pytest.approx(getattr(true, name), rel=0.01), name
    fixed = fit_latency(ops, hw, layers=[(rows, spec)], smoothness="fit", fit_layer_overhead=False)
    assert "t_layer" not in fixed.varied and fixed.params.t_layer == 0.0
    no_layers = fit_latency(ops, hw, smoothness="fit")
    assert "t_layer" not in no_layers.varied and "t_layer" not in no_layers.report()


@pytest.mark.integrity('profiles/cpu.calib.json')
def test_committed_cpu_calibration_has_layer_overhead():
    """Integrity check (reads back committed measurements; nothing is re-run).
    profiles/cpu.calib.json (used by issue 4 with get_hardware("cpu"), fp32) carries a fitted t_layer."""
    path = Path(__file__).resolve().parents[2] / "profiles" / "cpu.calib.json"
    res = CalibrationResult.from_json(path)
    assert res.dtype == "fp32" and res.layers_fitted and "t_layer" in res.varied
    assert load_latency_params(path).t_layer > 0


def test_cli_calibrate_gpu_folder_with_allreduce(tmp_path):
    from click.testing import CliRunner

    from sdsl.cli import cli

    out = tmp_path / "h100.calib.json"
    r = CliRunner().invoke(cli, ["calibrate", str(VIDUR / "h100"), "--hardware", "h100-sxm", "--allreduce",
                                 str(VIDUR / "network" / "h100_pairwise_nvlink_all_reduce.csv"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    p = load_latency_params(out)
    assert p.allreduce_latency != LatencyParams().allreduce_latency and 0.7 < p.eta_memory <= 1
    r = CliRunner().invoke(cli, ["calibrate", str(tmp_path / "missing.csv")])
    assert r.exit_code == 2 and "Error:" in r.output
