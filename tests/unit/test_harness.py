"""Torch profiling harness on CPU (GPU variant marked `gpu`, skipped without CUDA)."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from sdsl.catalog.models import ModelSpec  # noqa: E402
from sdsl.cli import cli  # noqa: E402
from sdsl.torch.harness import quick_grid, run_profile  # noqa: E402
from sdsl.fit.profiles import GEMM_OPS, KEY_COLUMNS, read_profile  # noqa: E402

TINY = ModelSpec(name="tiny-test", family="llama", n_layer=2, d_model=64, n_head=4, n_kv_head=2,
                 d_ff=160, vocab_size=256)


def _expected_rows(grid) -> int:
    return 4 * len(grid.num_tokens) * len(grid.tp) + len(grid.batch) * len(grid.q) * len(grid.context)


def test_cpu_profile_of_tiny_model_is_valid_and_fast(tmp_path):
    grid = quick_grid()
    t0 = time.perf_counter()
    path = run_profile(TINY, tmp_path / "tiny", device="cpu", dtype="fp32", grid=grid, progress=False)
    assert time.perf_counter() - t0 < 60
    prof = read_profile(path)
    assert len(prof.data) == _expected_rows(grid)
    assert set(prof.ops["op"]) == set(GEMM_OPS)
    layers = TINY.linear_layers(1)
    for r in prof.ops.itertuples():
        assert (r.in_features, r.out_features) == layers[r.op]
    assert set(prof.layers["q"]) == set(grid.q) and set(prof.layers["context"]) == set(grid.context)
    assert (prof.data["time_s"] > 0).all()
    meta = prof.meta
    assert meta["complete"] is True and meta["dtype"] == "fp32" and meta["model"]["name"] == "tiny-test"
    assert meta["device"]["type"] == "cpu" and meta["torch_version"] == torch.__version__
    assert meta["device"]["hardware"] == "cpu" and meta["device"]["mem_bandwidth"] > 0


def test_interrupted_run_resumes_with_every_row_once(tmp_path):
    grid = quick_grid()
    out = tmp_path / "r"
    run_profile(TINY, out, device="cpu", dtype="fp32", grid=grid, progress=False, limit=7)
    first = read_profile(out)
    assert len(first.data) == 7 and first.meta["complete"] is False
    csv_path = tmp_path / "r.csv"
    text = csv_path.read_text()
    csv_path.write_text(text[:-15])  # killed while writing the 7th row
    run_profile(TINY, out, device="cpu", dtype="fp32", grid=grid, progress=False)
    prof = read_profile(out)
    assert len(prof.data) == _expected_rows(grid)
    assert not prof.data.duplicated(list(KEY_COLUMNS)).any()
    assert prof.data.iloc[:6].equals(first.data.iloc[:6])  # earlier rows kept, not re-measured
    assert prof.meta["complete"] is True


def test_cli_profile_then_calibrate(tmp_path):
    runner = CliRunner()
    out = str(tmp_path / "cli")
    r = runner.invoke(cli, ["profile", "--device", "cpu", "--model", "llama-68m", "--dtype", "fp32", "-o", out,
                            "--quick", "--no-layers", "--num-tokens", "1,8,64", "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "12 rows" in r.output and "complete" in r.output
    r = runner.invoke(cli, ["calibrate", out, "-o", str(tmp_path / "c.json")])
    assert r.exit_code == 0, r.output
    assert "eta_memory" in r.output
    from sdsl.fit.calibration import load_latency_params

    assert load_latency_params(tmp_path / "c.json").eta_memory > 0


def test_cli_profile_errors_are_one_line(tmp_path):
    runner = CliRunner()
    r = runner.invoke(cli, ["profile", "--device", "cpu", "--model", "llama-68m", "-o", str(tmp_path / "x"),
                            "--quick", "--num-tokens", "1,a"])
    assert r.exit_code == 2 and "comma-separated integers" in r.output
    if not torch.cuda.is_available():
        r = runner.invoke(cli, ["profile", "--device", "cuda", "--model", "llama-68m", "-o", str(tmp_path / "y")])
        assert r.exit_code == 2 and "no CUDA device" in r.output


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_profile_quick(tmp_path):
    path = run_profile(TINY, tmp_path / "g", device="cuda", dtype="bf16", grid=quick_grid(), progress=False)
    prof = read_profile(path)
    assert len(prof.data) == _expected_rows(quick_grid())
    assert prof.meta["cuda_version"] and prof.meta["device"]["type"] == "cuda"
