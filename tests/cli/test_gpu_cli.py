"""Issue 13 on the command line: the catalog listing, GPU folders, hardware files, TP profiling under torchrun."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from sdsl._paths import data_path
from sdsl.cli import cli

VIDUR = data_path("vidur")


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def one_line_exit_2(r):
    assert r.exit_code == 2, r.output
    assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output


def test_hardware_lists_every_accelerator_with_sources():
    r = run("hardware")
    assert r.exit_code == 0
    for name in ("A40", "L4", "RTX-6000-Ada", "H100-NVL", "H20", "B200", "MI250X", "MI325X", "Gaudi3"):
        assert name in r.output
    assert r.output.count("http") >= 20
    rows = __import__("json").loads(run("hardware", "--json").output)
    assert sum(r["kind"] == "gpu" for r in rows) >= 20
    assert all("architecture" in r for r in rows if r["kind"] == "gpu")


def _gpu_folder(tmp_path, name, models=("microsoft/phi-2", "meta-llama/Llama-2-7b-hf")):
    for m in models:
        shutil.copytree(VIDUR / "h100" / m, tmp_path / name / m)
    return tmp_path


def test_validate_latency_takes_a_catalog_named_folder(tmp_path):
    r = run("validate", "latency", "--data", _gpu_folder(tmp_path, "h100-pcie"), "--json")
    assert r.exit_code == 0, r.output
    assert "h100-pcie" in __import__("json").loads(r.output)


def test_unknown_gpu_folder_is_one_line_and_a_mapping_fixes_it(tmp_path):
    data = _gpu_folder(tmp_path, "mylab-gpu")
    r = run("validate", "latency", "--data", data)
    one_line_exit_2(r)
    assert "mylab-gpu" in r.output and "--hardware" in r.output
    r = run("validate", "latency", "--data", data, "--hardware", "mylab-gpu=h100-sxm", "--json")
    assert r.exit_code == 0, r.output


def test_bad_hardware_mapping_and_missing_field_are_one_line(tmp_path):
    one_line_exit_2(run("validate", "latency", "--hardware", "nonsense"))
    bad = tmp_path / "gpu.toml"
    bad.write_text('name = "half"\nbf16_tflops = 100\nmem_gb = 24\n')
    r = run("predict", "--target", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--gamma", "4", "--alpha", "0.8",
            "--hardware", bad)
    one_line_exit_2(r)
    assert "mem_bandwidth_gbs" in r.output
    data = _gpu_folder(tmp_path, "mine")
    one_line_exit_2(run("validate", "latency", "--data", data, "--hardware", f"mine={bad}"))


def test_hardware_file_works_where_a_catalog_name_does(tmp_path):
    good = tmp_path / "gpu.toml"
    good.write_text('name = "my-h100"\nbf16_tflops = 989.4\nmem_bandwidth_gbs = 3350\nmem_gb = 80\n'
                    'interconnect_gbs = 450\narchitecture = "hopper"\nmemory_type = "HBM3"\n')
    by_file = run("predict", "--target", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--gamma", "4", "--alpha", "0.8",
                  "--hardware", good, "--json")
    assert by_file.exit_code == 0, by_file.output
    assert "my-h100" in by_file.output


def test_tp_degree_the_heads_do_not_divide_is_one_line(tmp_path):
    r = run("profile", "--device", "cpu", "--model", "llama-68m", "--tp", "5", "-o", tmp_path / "p")
    one_line_exit_2(r)
    assert "12 attention heads" in r.output


def test_torchrun_two_gloo_ranks_profile_and_calibrate(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = tmp_path / "tp2"
    pair = tmp_path / "pair.toml"  # a hardware file stands in for a catalog name all the way through
    pair.write_text('name = "cpu-pair"\nkind = "cpu"\nbf16_tflops = 1.0\nmem_bandwidth_gbs = 20\nmem_gb = 16\n'
                    'interconnect_gbs = 100\nsource = "test: two gloo ranks on one CPU"\n')
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "sdsl", "profile",
           "--tp", "2", "--device", "cpu", "--model", "llama-68m", "--dtype", "fp32", "--quick", "--no-progress",
           "--threads", "1", "--hardware", str(pair), "-o", str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ops = pd.read_csv(f"{out}.csv")
    assert set(ops["tp"]) == {2} and len(ops) == 4 * 4  # four GEMMs x the quick grid's four num_tokens
    from sdsl.catalog.models import get_model

    shards = get_model("llama-68m").linear_layers(2)  # each rank's half of every weight
    for op, g in ops.groupby("op"):
        assert (g["in_features"].iloc[0], g["out_features"].iloc[0]) == tuple(shards[op])
    ar = pd.read_csv(f"{out}.all_reduce.csv")
    assert list(ar["size"]) == [4 * n * 768 for n in (1, 4, 16, 64)] and set(ar["num_workers"]) == {2}
    assert (ar["time_stats.all_reduce.median"] > 0).all()
    ag = pd.read_csv(f"{out}.all_gather.csv")
    assert list(ag["size"]) == [4 * n * 16000 for n in (1, 4, 16, 64)]
    r = run("calibrate", out, "--allreduce", f"{out}.all_reduce.csv", "--json")  # hardware from the sidecar
    assert r.exit_code == 0, r.output
    fitted = __import__("json").loads(r.output)
    assert Path(fitted["hardware"]).resolve() == pair.resolve()  # the file, recorded as the fit's hardware
    params = fitted["params"]
    assert "all-reduce fitted to" in params["source"]
    # a ring cannot beat its link: eta_interconnect in (0, 1] (LatencyParams)
    assert 0 < params["allreduce_latency"] < 1e-3 and 1e-4 < params["eta_interconnect"] <= 1.0


def test_transfer_report_and_figure_on_two_small_gpu_folders(tmp_path):
    for gpu in ("h100", "a100"):
        shutil.copytree(VIDUR / gpu / "microsoft" / "phi-2", tmp_path / "data" / gpu / "microsoft" / "phi-2")
    fig = tmp_path / "transfer.png"
    r = run("validate", "latency", "--transfer", "--data", tmp_path / "data", "--figure", fig)
    assert r.exit_code == 0, r.output
    assert "A100 (a100-80gb): transfer MAPE" in r.output and "from: h100-sxm 1.00" in r.output
    assert fig.stat().st_size > 10_000
    shutil.rmtree(tmp_path / "data" / "a100")
    one_line_exit_2(run("validate", "latency", "--transfer", "--data", tmp_path / "data"))  # one GPU: nothing to transfer
