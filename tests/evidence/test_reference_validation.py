"""`sdsl validate decoder`: leak-free pricing, the max_new accounting, and the committed result recomputed."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")

RESULT = "benchmarks/results/validate_decoder.json"
PRICED = {"pred_speedup", "speedup_error", "pred_speedup_in_sample", "pred_speedup_pooled_alpha", "pred_steps"} | {
    f"{k}_{m}" for k in ("pred_speedup", "speedup_error") for m in ("base", "finish", "full", "switch", "rows")}  # what price_rows adds


def test_fit_plane_recovers_a_plane():
    from sdsl.validation.decoder.validation import fit_plane

    rng = np.random.default_rng(0)
    pts = [{"ppl_draft": x, "ppl_target": y, "alpha": -0.02 * x + 0.03 * y + 0.7}
           for x, y in rng.uniform(3, 9, size=(12, 2))]
    f = fit_plane(pts)
    assert f["A"] == pytest.approx(-0.02) and f["B"] == pytest.approx(0.03) and f["R2"] == pytest.approx(1.0)
    assert f["signs_match_paper"]


def test_run_counts_only_the_first_max_new_tokens(tiny_transformer):
    """Overshoot past max_new and idle batch members cost time but add no tokens; steps are the batch's."""
    from sdsl.validation.decoder.validation import _run
    from sdsl.torch.decoder import DraftModel

    target, draft = tiny_transformer(0), tiny_transformer(1, scale=0.5)
    prompts = np.random.default_rng(0).integers(0, 256, size=(4, 8))
    import torch

    out = _run(target, DraftModel(draft), 4, 2, torch.as_tensor(prompts), 9, 1.0, seed=0, repeats=2)
    assert out["tokens"] == 4 * 9 and out["overshoot"] >= 0 and out["repeats"] == 2
    assert out["chunk_sizes"] == [2, 2] and sum(out["chunk_steps"]) == out["steps"]
    assert out["tokens_per_s"] == pytest.approx(out["tokens"] / out["decode_s"])
    assert out["steps"] >= 2 * int(np.ceil(9 / 5))  # at most γ + 1 = 5 tokens per step


def test_validate_decoder_cli_json_tiny(tmp_path):
    from click.testing import CliRunner

    from sdsl.cli import cli
    from sdsl.torch.checkpoint import CHECKPOINT_DIR

    if not (CHECKPOINT_DIR / "byte-d96.safetensors").exists():
        pytest.skip("no committed checkpoints")
    cache = tmp_path / "rows.json"
    args = ["validate", "decoder", "--targets", "byte-d96", "--drafts", "byte-d64", "--gammas", "1,2", "--batches", "1,2",
            "--prompts", "2", "--max-new", "6", "--repeats", "2", "--no-plane", "--in-sample", "--cache", str(cache), "--json"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert {"rows", "median_speedup_error", "median_signed_error", "share_over_predicted", "best_speedup",
            "best_config", "optimizer_regret", "models"} <= set(out)
    rows = out["rows"]
    assert len(rows) == 2 * 2 * 2  # (draft + prompt lookup) x gamma x batch
    for r in rows:
        assert r["tokens"] == r["plain_tokens"] == 2 * 6 and r["repeats"] == r["plain_repeats"] == 2
        assert r["speedup"] == pytest.approx(r["tokens_per_s"] / r["plain_tokens_per_s"])
        assert r["pred_speedup"] == r["pred_speedup_in_sample"]  # --in-sample prices with the committed calibration
    err = np.array([r["pred_speedup"] / r["speedup"] - 1 for r in rows])
    assert out["median_speedup_error"] == pytest.approx(np.median(np.abs(err)))
    assert out["median_signed_error"] == pytest.approx(np.median(err))
    assert out["share_over_predicted"] == pytest.approx((err > 0).mean())
    best = max(rows, key=lambda r: r["speedup"])
    same = [r for r in rows if r["target"] == best["target"] and r["batch"] == best["batch"]]
    pick = max(same, key=lambda r: r["pred_speedup_pooled_alpha"])
    assert out["optimizer_regret"] == pytest.approx(1 - pick["speedup"] / best["speedup"])
    again = CliRunner().invoke(cli, args)  # served from the cache: identical
    assert json.loads(again.output)["rows"] == rows


def test_heldout_fit_drops_every_row_of_both_models():
    """The pair's operator/layer profiles (same name or layer width) and forwards are gone from its fit."""
    from sdsl.validation.decoder.pricing import heldout_inputs, heldout_params
    from sdsl.validation.decoder.validation import model_spec
    from sdsl.torch.checkpoint import CHECKPOINT_DIR, list_checkpoints, load_checkpoint

    if not list_checkpoints(CHECKPOINT_DIR):
        pytest.skip("no committed checkpoints")
    spec = {p.stem: model_spec(load_checkpoint(p)[1]["spec"]) for p in list_checkpoints(CHECKPOINT_DIR)}
    ops, layers, steps = inputs = heldout_inputs()
    seen = []
    import sdsl.fit.calibration as cal

    real = cal.fit_latency

    def spy(data, hw, *, layers=(), steps=(), **kw):
        seen.append((set(data.columns), [sp for _, sp in layers], [sp.name for _, sp in steps]))
        return real(data, hw, layers=layers, steps=steps, **kw)

    cal.fit_latency = spy
    try:
        params, dropped = heldout_params(("byte-deep", "byte-d192"), spec, inputs)
    finally:
        cal.fit_latency = real
    (_, kept_layers, kept_steps), = seen
    assert {sp.d_model for sp in kept_layers}.isdisjoint({64, 192})  # byte-deep shares byte-d64's layer width
    assert "byte-deep" not in kept_steps and "byte-d192" not in kept_steps and "byte-d288" in kept_steps
    assert dropped["forward_rows"] == sum(len(r) for r, sp in steps if sp.name in ("byte-deep", "byte-d192")) > 0
    assert dropped["layer_rows"] > 0 and dropped["operator_rows"] > 0
    assert params.t_step > 0


def _committed(repo_root):
    path = repo_root / RESULT
    if not path.exists():
        pytest.skip("no committed decoder validation")
    return json.loads(path.read_text())


def _reprice(data):
    """Re-price the committed measured rows with the committed held-out fits (deterministic), and summarise."""
    from sdsl.roofline.latency import LatencyParams
    from sdsl.validation.decoder.pricing import price_rows
    from sdsl.validation.decoder.validation import _summarise, calibrated_params, model_spec
    from sdsl.torch.checkpoint import CHECKPOINT_DIR, list_checkpoints, load_checkpoint

    spec = {p.stem: model_spec(load_checkpoint(p)[1]["spec"]) for p in list_checkpoints(CHECKPOINT_DIR)}
    fits = {(f["target"], f["draft"]): (LatencyParams(**f["params"]), f) for f in data["heldout_fits"]}
    rows = [{k: v for k, v in r.items() if k not in PRICED} for r in data["rows"]]
    s = data["settings"]
    price_rows(rows, spec, s["context_for_prediction"], s["max_new"], fits, calibrated_params()[0])
    return _summarise(rows, None)


def test_committed_decoder_validation_recomputes(repo_root):
    """Every headline of benchmarks/results/validate_decoder.json (VALIDATION.md, README) from its measured rows."""
    data = _committed(repo_root)
    out = _reprice(data)
    for key in ("median_speedup_error", "median_signed_error", "mean_signed_error", "pooled_speedup_error",
                "worst_speedup_error", "share_over_predicted", "optimizer_regret", "best_speedup"):
        assert out[key] == pytest.approx(data[key], rel=1e-3, abs=1e-9), key
    for name in ("base", "finish", "full", "switch", "rows", "step_times"):
        for key, value in data["models"][name].items():
            assert out["models"][name][key] == pytest.approx(value, rel=1e-3, abs=1e-9), (name, key)
    assert out["steps_to_finish_error"] == pytest.approx(data["steps_to_finish_error"], rel=1e-3)
    for key, value in data["evidence"].items():
        assert out["evidence"][key] == pytest.approx(value, rel=1e-3), key
    for b, st in data["by_batch"].items():
        assert out["by_batch"][b] == pytest.approx(st, rel=1e-3), b
    assert out["sdsl_pick"]["draft"] == data["sdsl_pick"]["draft"] and out["sdsl_pick"]["gamma"] == data["sdsl_pick"]["gamma"]


def test_committed_rows_are_leak_free_and_count_max_new(repo_root):
    data = _committed(repo_root)
    s = data["settings"]
    assert s["repeats_plain"] == s["repeats"] and "refitted per pair" in s["latency_params"]
    for r in data["rows"]:
        assert r["tokens"] == r["plain_tokens"] == s["n_prompts"] * s["max_new"]
        assert r["repeats"] == r["plain_repeats"] == s["repeats"]
    for f in data["heldout_fits"]:
        held = set(f["held_out"])
        assert held == ({f["target"]} if f["draft"] == "prompt-lookup" else {f["target"], f["draft"]})
        assert f["forward_rows"] > 0 and not held & set(f["profiles_kept"])


def test_the_model_without_the_step_terms_fails_the_bias_check(repo_root):
    """The pre-issue-11 model (τ per step, no overshoot or batch tail) is biased optimistic on the same rows
    (VALIDATION.md: +4.5%, 64% over-predicted); the finish term (sdsl.speculation.finish) brings the median signed
    error inside ±3% (−2.9%), and the resync forward takes the full model just past it (−3.4%)."""
    data = _committed(repo_root)
    base, finish, full = data["models"]["base"], data["models"]["finish"], data["models"]["full"]
    assert base["median_signed"] > 0.03 and base["share_over"] > 0.6
    assert abs(finish["median_signed"]) <= 0.03 and finish["share_over"] < 0.5
    assert -0.04 < full["median_signed"] < -0.03
    # the finish term's own evidence, free of timing: predicted vs measured steps to finish every chunk
    assert data["steps_to_finish_error"]["median_abs"] < 0.03


def test_committed_decoder_validation_headline_numbers(repo_root):
    """VALIDATION.md / README, decoder headline: every number pinned at 1e-3 on the summary re-priced from the
    committed measured rows and held-out fits (not on the summary stored beside them), the goals still missed."""
    data = _reprice(_committed(repo_root))
    pin = lambda value, expected: value == pytest.approx(expected, rel=1e-3, abs=1e-4)  # noqa: E731
    head = {"median_speedup_error": 0.1350, "median_signed_error": -0.0598, "mean_signed_error": -0.0362,
            "pooled_speedup_error": 0.1481, "worst_speedup_error": 0.5476, "share_over_predicted": 0.3333,
            "optimizer_regret": 0.0, "best_speedup": 1.6314}
    for key, expected in head.items():
        assert pin(data[key], expected), (key, data[key])
    table = {"base": (0.1006, 0.0445, 0.0762, 0.1327, 0.5583, 0.6389), "finish": (0.1208, -0.0295, -0.0053, 0.1441, 0.5476, 0.3889),
             "full": (0.1286, -0.0343, -0.0103, 0.1459, 0.5476, 0.3611), "switch": (0.1350, -0.0598, -0.0362, 0.1481, 0.5476, 0.3333),
             "rows": (0.1132, -0.0676, -0.0164, 0.1294, 0.5573, 0.4167),
             "in_sample": (0.1353, -0.0650, -0.0447, 0.1548, 0.5489, 0.2917),
             "step_times": (0.2132, 0.2132, 0.2519, 0.2550, 0.7508, 0.9444)}
    keys = ("median_abs", "median_signed", "mean_signed", "pooled_abs", "worst_abs", "share_over")
    for name, values in table.items():
        for key, expected in zip(keys, values):
            assert pin(data["models"][name][key], expected), (name, key, data["models"][name][key])
    for b, values in {"1": (0.1132, -0.0148, 0.0446, 0.1577, 0.5476, 0.4722),
                      "8": (0.1378, -0.1309, -0.1171, 0.1385, 0.3233, 0.1944)}.items():
        for key, expected in zip(keys, values):
            assert pin(data["by_batch"][b][key], expected), (b, key)
    assert data["median_speedup_error"] > 0.10 and data["median_signed_error"] < -0.03  # both goals missed (visible)


def test_switch_term_helps_batch_1_and_exposes_the_batch_8_miss(repo_root):
    """The switch term (sdsl.roofline.model_switch) adds the draft's re-read to every speculative step: at batch 1
    the model without it is worse (median |error| 13.3% vs 11.3%), at batch 8 the verification that the held-out
    fits over-price is no longer offset (−10.0% -> −13.1%)."""
    data = _committed(repo_root)

    def stats(name, b):
        e = np.array([r[f"speedup_error_{name}"] for r in data["rows"] if r["batch"] == b])
        return np.median(np.abs(e)), np.median(e)

    (full1, _), (switch1, signed1) = stats("full", 1), stats("switch", 1)
    assert full1 == pytest.approx(0.1335, abs=5e-4) and switch1 == pytest.approx(0.1132, abs=5e-4)
    assert switch1 < full1 - 0.015 and abs(signed1) < 0.03
    (_, full8), (_, switch8) = stats("full", 8), stats("switch", 8)
    assert full8 == pytest.approx(-0.0998, abs=5e-4) and switch8 == pytest.approx(-0.1309, abs=5e-4)
    for r in data["rows"]:  # the term only ever adds cost, and never to prompt lookup
        if r["draft"] == "prompt-lookup":
            assert r["pred_speedup_switch"] == r["pred_speedup_full"]
        else:
            assert r["pred_speedup_switch"] < r["pred_speedup_full"]


def test_rows_term_prices_the_cpu_gemm_row_factor_from_held_out_shapes(repo_root):
    """κ(rows) (sdsl.validation.decoder.synthetic_terms, issue 10) in the family pricing: measured on weight shapes of
    no family model; it costs a q ≥ 2 target step more than a plain one; on the committed rows it lowers the
    median |error| (13.5% -> 11.3%, batch 8 signed −13.1% -> −9.3%) but not the median signed error
    (−6.0% -> −6.8%), so ``switch`` stays the default (VALIDATION.md, "GEMM row factor")."""
    from sdsl.roofline.deployment import Deployment
    from sdsl.validation.decoder.pricing import DEFAULT_MODEL, MODELS, _rows_extra_s
    from sdsl.validation.decoder.validation import model_spec
    from sdsl.validation.decoder.synthetic_terms import gemm_row_table
    from sdsl.torch.checkpoint import CHECKPOINT_DIR, list_checkpoints, load_checkpoint

    spec = {p.stem: model_spec(load_checkpoint(p)[1]["spec"]) for p in list_checkpoints(CHECKPOINT_DIR)}
    family_bytes = {4.0 * n_in * n_out for s in spec.values()
                    for n_in, n_out in ((s.d_model, s.d_ff), (s.d_ff, s.d_model), (s.d_model, 3 * s.d_model))}
    sizes, _, _ = gemm_row_table()
    assert np.exp(sizes).min() > 2 * max(family_bytes)  # κ's shapes: none of the validated models'
    assert MODELS["rows"] == MODELS["switch"] + ("rows",) and DEFAULT_MODEL == "switch"
    dep = Deployment("cpu", dtype="fp32", context=64)
    step, plain = _rows_extra_s(spec["byte-d288"], None, dep, 1, 1, resync=False)
    assert step > plain  # two rows (γ = 1 verification) cost more than one
    step_d, _ = _rows_extra_s(spec["byte-d288"], spec["byte-wide"], dep, 1, 1, resync=True)
    assert step_d > step  # the draft's resync pass over two rows adds its own factor
    data = _committed(repo_root)
    m, b8 = data["models"], [r["speedup_error_rows"] for r in data["rows"] if r["batch"] == 8]
    assert m["rows"]["median_abs"] < m["switch"]["median_abs"] and m["rows"]["median_signed"] < m["switch"]["median_signed"]
    assert np.median(b8) == pytest.approx(-0.0927, abs=5e-4)


def test_committed_cpu_calibration_refits(repo_root):
    """profiles/cpu.calib.json's fit quality (VALIDATION.md) is what a refit of the committed profiles gives."""
    from sdsl.catalog.hardware import get_hardware
    from sdsl.fit.calibration import fit_latency
    from sdsl.fit.calibration_result import CalibrationResult
    from sdsl.validation.decoder.pricing import heldout_inputs

    ops, layers, steps = heldout_inputs()
    fit = fit_latency(ops.drop(columns=["model", "d_model"]), get_hardware("cpu"), dtype="fp32", layers=layers,
                      steps=steps, keep_points=False)
    committed = CalibrationResult.from_json(repo_root / "profiles" / "cpu.calib.json")
    for key in ("mape", "layer_mape", "step_mape"):
        assert getattr(fit, key) == pytest.approx(getattr(committed, key), rel=1e-3), key
    # VALIDATION.md, "CPU profile of this machine": forwards 13.0%, layers 20.1%, GEMMs 40.9%
    assert committed.step_mape == pytest.approx(0.1296, abs=5e-4) and committed.layer_mape == pytest.approx(0.2008, abs=5e-4)
    assert committed.mape == pytest.approx(0.4089, abs=5e-4)


def test_batch_8_diagnosis_numbers(repo_root):
    """VALIDATION.md, "Batch 8": the held-out fits' forward prices of each target against the run's own
    forward microbenchmarks (JSON t_target_s): too low overall, T(8, 1) far too low, growth q 1 -> 5 about right."""
    from sdsl.roofline.deployment import Deployment
    from sdsl.roofline.latency import LatencyParams, step_time_s
    from sdsl.validation.decoder.validation import model_spec
    from sdsl.torch.checkpoint import CHECKPOINT_DIR, list_checkpoints, load_checkpoint

    data = _committed(repo_root)
    spec = {p.stem: model_spec(load_checkpoint(p)[1]["spec"]) for p in list_checkpoints(CHECKPOINT_DIR)}
    fits = {(f["target"], f["draft"]): LatencyParams(**f["params"]) for f in data["heldout_fits"]}
    ctx = data["settings"]["context_for_prediction"]

    def pred(t, b, q):
        dep = Deployment("cpu", dtype="fp32", context=ctx, params=fits[(t, "prompt-lookup")])
        return 1e3 * float(step_time_s(spec[t], dep, batch=b, q=q))

    def meas(t, b, q):
        return 1e3 * next(r for r in data["rows"] if r["target"] == t and r["batch"] == b)["t_target_s"][str(q)]

    expected = {"byte-d192": ((-0.463, -0.165, -0.290), (2.904, 4.585), (2.267, 2.213), (2.563, 2.003), (0.283, 0.931)),
                "byte-d288": ((-0.429, -0.110, -0.389), (6.204, 10.708), (6.803, 5.895), (3.196, 2.080), (0.850, 1.491))}
    for t, (err_range, t81, growth8, ratio8, growth1) in expected.items():
        err = [pred(t, b, q) / meas(t, b, q) - 1 for b in (1, 8) for q in range(1, 10)]
        assert (min(err), max(err), np.median(err)) == pytest.approx(err_range, abs=1e-3), t
        assert (pred(t, 8, 1), meas(t, 8, 1)) == pytest.approx(t81, abs=1e-3), t
        assert (pred(t, 8, 5) - pred(t, 8, 1), meas(t, 8, 5) - meas(t, 8, 1)) == pytest.approx(growth8, abs=1e-3), t
        assert (pred(t, 8, 9) / pred(t, 8, 1), meas(t, 8, 9) / meas(t, 8, 1)) == pytest.approx(ratio8, abs=1e-3), t
        assert (pred(t, 1, 5) - pred(t, 1, 1), meas(t, 1, 5) - meas(t, 1, 1)) == pytest.approx(growth1, abs=1e-3), t
