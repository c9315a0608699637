"""Whole-forward rows in the calibration: t_step/t_layer recovery, the model-steps reader, leave-one-model-out."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from sdsl.catalog.models import ModelSpec, get_model
from sdsl.fit.calibration import CalibrationResult, fit_latency, load_latency_params, predict_step_times
from sdsl.errors import ProfileError
from sdsl.catalog.hardware import get_hardware
from sdsl.roofline.deployment import Deployment
from sdsl.roofline.latency import LatencyParams, gemm_flops_bytes, op_time, step_time
from sdsl.validation.forward_holdout import forwards_leave_one_model_out as leave_one_model_out
from sdsl.fit.model_steps import read_model_steps

ROOT = Path(__file__).resolve().parents[2]
HW = get_hardware("cpu")
TRUE = LatencyParams(eta_compute=0.015, eta_memory=0.05, t_kernel=1.0e-6, t_layer=170e-6, t_step=120e-6, smoothness=1.5)


def _spec(d: int, n_layer: int) -> ModelSpec:
    return ModelSpec(name=f"toy-d{d}-l{n_layer}", family="toy", n_layer=n_layer, d_model=d, n_head=d // 32,
                     n_kv_head=1, d_ff=3 * d, vocab_size=256, head_dim=32, tied_embeddings=True, source="test")


SPECS = [_spec(64, 2), _spec(128, 4), _spec(256, 1), _spec(64, 12), _spec(192, 6)]


def _ops(params: LatencyParams) -> pd.DataFrame:
    shapes = [(64, 192), (128, 384), (256, 768), (768, 256)]
    rows = [(t, i, o) for i, o in shapes for t in (1, 2, 4, 8, 16, 64, 256)]
    df = pd.DataFrame(rows, columns=["num_tokens", "in_features", "out_features"]).assign(op="mlp_up_proj", dtype="fp32")
    f, b = gemm_flops_bytes(df.num_tokens, df.in_features, df.out_features, 4)
    return df.assign(time_s=op_time(f, b, HW.peak_flops_for("fp32"), HW.mem_bandwidth, params))


def _grid() -> pd.DataFrame:
    b, q, L = np.meshgrid([1, 8], [1, 3, 5, 9], [32, 256], indexing="ij")
    return pd.DataFrame({"batch": b.ravel(), "q": q.ravel(), "context": L.ravel()})


def _steps(params: LatencyParams):
    g = _grid()
    return [(g.assign(time_s=predict_step_times(g, s, HW, params, "fp32")), s) for s in SPECS]


def test_predict_step_times_is_step_time():
    g = _grid()
    s = SPECS[1]
    assert np.allclose(predict_step_times(g, s, HW, TRUE, "fp32"),
                       step_time(s, Deployment(HW, dtype="fp32", params=TRUE), batch=g.batch, q=g.q,
                                 context=g.context).total_s)


def test_fit_recovers_t_step_and_t_layer_within_1pct():
    res = fit_latency(_ops(TRUE), HW, dtype="fp32", steps=_steps(TRUE), smoothness="fit")
    assert {"t_step", "t_layer"} <= set(res.varied) and res.steps_fitted
    for name in ("eta_compute", "eta_memory", "t_kernel", "t_layer", "t_step", "smoothness"):
        assert getattr(res.params, name) == pytest.approx(getattr(TRUE, name), rel=0.01), name
    assert res.step_mape < 1e-3 and res.step_points == len(SPECS) * len(_grid())
    assert "t_step" in res.report() and "whole forward passes" in res.report()
    back = CalibrationResult.from_json(res.to_json())
    assert back.steps_fitted and back.step_mape == pytest.approx(res.step_mape)
    fixed = fit_latency(_ops(TRUE), HW, dtype="fp32", steps=_steps(TRUE), smoothness="fit", fit_step_overhead=False)
    assert "t_step" not in fixed.varied and fixed.params.t_step == 0.0


def test_operators_alone_cannot_see_t_step():
    """Without forward rows nothing constrains t_step: it stays at the base value (the old behaviour)."""
    res = fit_latency(_ops(TRUE), HW, dtype="fp32", smoothness="fit")
    assert "t_step" not in res.varied and res.params.t_step == 0.0 and res.step_mape is None


def test_leave_one_model_out_on_exact_data():
    tab = leave_one_model_out(_ops(TRUE), HW, _steps(TRUE), dtype="fp32", smoothness=1.5)
    assert list(tab["model"]) == [s.name for s in SPECS]
    assert (tab["heldout_mape"] < 1e-3).all() and (tab["n"] == len(_grid())).all()
    with pytest.raises(ProfileError):
        leave_one_model_out(_ops(TRUE), HW, _steps(TRUE)[:1], dtype="fp32")


def _write(tmp_path, rows: pd.DataFrame, models: dict | None):
    csv = tmp_path / "fw.csv"
    rows.to_csv(csv, index=False)
    if models is not None:
        (tmp_path / "fw.json").write_text(json.dumps({"format": "sdsl-model-steps", "hardware": "cpu", "dtype": "fp32",
                                                       "models": models}))
    return csv


def test_read_model_steps_sidecar_and_catalog(tmp_path):
    g = _grid()
    rows = pd.concat([g.assign(model=SPECS[0].name, time_s=1e-3), g.assign(model="llama-68m", time_s=2e-2)])
    csv = _write(tmp_path, rows, {SPECS[0].name: SPECS[0].to_dict()})
    pairs, meta = read_model_steps(csv)
    assert meta["dtype"] == "fp32"
    assert [s for _, s in pairs] == [SPECS[0], get_model("llama-68m")]
    assert all(len(r) == len(g) for r, _ in pairs)


def test_read_model_steps_errors(tmp_path):
    g = _grid().assign(model="no-such-model", time_s=1e-3)
    with pytest.raises(ProfileError, match="no-such-model"):
        read_model_steps(_write(tmp_path, g, None))
    bad = g.assign(model="llama-68m")
    bad.loc[3, "time_s"] = -1.0
    with pytest.raises(ProfileError, match="line 5"):
        read_model_steps(_write(tmp_path, bad, None))
    with pytest.raises(ProfileError, match="time_s"):
        read_model_steps(_write(tmp_path, g.drop(columns="time_s"), None))
    (tmp_path / "fw.json").write_text("{}")
    with pytest.raises(ProfileError, match="sidecar"):
        read_model_steps(tmp_path / "fw.csv")


def test_cli_calibrate_with_steps_and_holdout(tmp_path):
    from sdsl.cli import cli

    steps = ROOT / "profiles" / "model-forwards-cpu.csv"
    prof = ROOT / "profiles" / "cpu-byte-d64.csv"
    if not steps.exists() or not prof.exists():
        pytest.skip("committed CPU profiles absent")
    out = tmp_path / "c.json"
    r = CliRunner().invoke(cli, ["calibrate", str(prof), "--steps", str(steps), "--holdout", "--smoothness", "inf",
                                  "-o", str(out), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["steps_fitted"] and d["step_points"] > 0 and "t_step" in d["varied"]
    assert len(d["step_holdout"]["per_model"]) >= 2 and 0 < d["step_holdout"]["median_heldout_mape"] < 1
    assert load_latency_params(out).t_step > 0


@pytest.mark.integrity('profiles/cpu.calib.json')
def test_committed_cpu_calibration_fits_whole_forwards():
    """Integrity check (reads back committed measurements; nothing is re-run).
    profiles/cpu.calib.json (read by `sdsl validate decoder`) is fitted to whole forwards too."""
    res = CalibrationResult.from_json(ROOT / "profiles" / "cpu.calib.json")
    assert res.steps_fitted and res.layers_fitted and res.params.t_step > 0
    assert res.step_mape < 0.15
