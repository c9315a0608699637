"""The committed held-out CPU fits are what a refit of the committed profiles gives: every fitted parameter,
not only the quality numbers. A refit that drifts (a changed fit, a changed profile) fails here, not in a
number read back from the file it wrote."""

from __future__ import annotations

import json

import numpy as np
import pytest

#: Fitted fields compared (the rest are the base values the fit never moves).
FITTED = ("eta_compute", "eta_memory", "t_kernel", "t_layer", "t_step", "smoothness")


def _close(got: dict, want: dict, where: str) -> None:
    for k in FITTED:
        g, w = float(got[k]), float(want[k])
        if abs(w) < 1e-9 and abs(g) < 1e-9:  # a time fitted to zero (t_kernel on this CPU)
            continue
        assert g == pytest.approx(w, rel=1e-3), f"{where}: {k}"


def test_leak_free_decoder_fits_refit(repo_root):
    """benchmarks/results/validate_decoder.json's held-out fits (each (target, proposer) priced by a CPU fit
    without any row of its models, VALIDATION.md "Headline (leak-free, 72 rows)"): four of the twelve,
    drawn with a fixed seed, are refitted from profiles/ and compared field by field, with the rows dropped."""
    from sdsl.validation.decoder.pricing import heldout_inputs, heldout_params
    from sdsl.validation.decoder.validation import model_spec
    from sdsl.torch.checkpoint import CHECKPOINT_DIR, list_checkpoints, load_checkpoint

    fits = json.loads((repo_root / "benchmarks" / "results" / "validate_decoder.json").read_text())["heldout_fits"]
    assert len(fits) == 12
    spec = {p.stem: model_spec(load_checkpoint(p)[1]["spec"]) for p in list_checkpoints(CHECKPOINT_DIR)}
    inputs = heldout_inputs()
    for i in sorted(np.random.default_rng(0).choice(len(fits), 4, replace=False)):
        f = fits[i]
        params, dropped = heldout_params(f["held_out"], spec, inputs)
        _close(params.to_dict(), f["params"], f"{f['target']}/{f['draft']}")
        assert {k: f[k] for k in dropped} == dropped


def test_committed_cpu_calibration_refits_field_by_field(repo_root):
    """profiles/cpu.calib.json is the profiles/README.md command, rerun: every fitted parameter and the
    fit's quality (operators, whole layers, whole forwards)."""
    from click.testing import CliRunner

    from sdsl.cli import cli

    prof = repo_root / "profiles"
    args = ["calibrate", *(str(prof / f"cpu-{n}.csv") for n in ("byte-d128", "byte-d288", "byte-d64", "llama-68m")),
            "--fit-layers", "--steps", str(prof / "model-forwards-cpu.csv"), "--json"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    want = json.loads((prof / "cpu.calib.json").read_text())
    _close(got["params"], want["params"], "cpu.calib.json")
    for key in ("mape", "decode_mape", "layer_mape", "step_mape"):
        assert got[key] == pytest.approx(want[key], rel=1e-3), key
    assert got["varied"] == want["varied"] and got["n_points"] == want["n_points"]
