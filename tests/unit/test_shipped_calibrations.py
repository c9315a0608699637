"""The refitted GPU calibrations (profiles/*.calib.json) are what `sdsl calibrate` recomputes from the
shipped Vidur data with the commands in profiles/README.md, and carry the values VALIDATION.md quotes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sdsl._paths import REPO_ROOT, data_path
from sdsl.fit.calibration import load_latency_params

NET = data_path("vidur") / "network"


@pytest.mark.parametrize("gpu, name", [("h100", "h100-sxm"), ("a100", "a100-80gb")])
def test_gpu_calibration_is_reproduced(tmp_path, gpu, name):
    from sdsl.cli import cli

    out = tmp_path / f"{name}.calib.json"
    args = ["calibrate", str(data_path("vidur") / gpu), "--hardware", name,
            "--allreduce", str(NET / f"{gpu}_dgx_all_reduce.csv"), "--no-points", "-o", str(out)]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    got = json.loads(out.read_text())["params"]
    want = json.loads((REPO_ROOT / "profiles" / f"{name}.calib.json").read_text())["params"]
    assert set(got) == set(want)
    for k, v in want.items():
        if isinstance(v, (int, float)):
            assert got[k] == pytest.approx(v, rel=1e-3, abs=1e-12), k
    assert got["m_tile"] == 128 and got["t_elementwise"] > 0 and got["allreduce_step_latency"] > 0


def test_values_quoted_in_validation():
    """VALIDATION.md quotes these fitted values of the refitted calibrations."""
    h100 = load_latency_params(REPO_ROOT / "profiles" / "h100-sxm.calib.json")
    a100 = load_latency_params(REPO_ROOT / "profiles" / "a100-80gb.calib.json")
    assert (h100.t_kernel, h100.smoothness, h100.eta_interconnect) == pytest.approx((1.1952e-6, 1.9317, 0.7505), rel=1e-3)
    assert (a100.eta_interconnect, a100.allreduce_latency, a100.smoothness) == pytest.approx((0.6188, 44.33e-6, 2.7773), rel=1e-3)
    # the all-reduce's low-latency protocol and floor (VALIDATION.md, all-reduce subsection)
    assert (h100.allreduce_ll_efficiency, h100.allreduce_floor, a100.allreduce_ll_efficiency, a100.allreduce_floor) == \
        pytest.approx((0.6500, 28.14e-6, 0.4165, 32.99e-6), rel=1e-3)
    assert h100.t_kernel == h100.t_elementwise and a100.t_kernel == a100.t_elementwise  # the launch floor
    assert a100.t_kernel == pytest.approx(1.8294e-6, rel=1e-3)
    got = [(p.eta_compute, p.eta_memory, p.tail_waves, p.t_kernel_size, p.kernel_size_bytes, p.m_tile_min) for p in (h100, a100)]
    assert got[0] == pytest.approx((0.7363, 1.0, 0.09725, 4.572e-6, 4.729e6, 64), rel=1e-3)
    assert got[1] == pytest.approx((0.7324, 0.7960, 0.04284, 4.112e-6, 5.026e6, 16), rel=1e-3)
    in_sample = [json.loads((REPO_ROOT / "profiles" / f"{n}.calib.json").read_text()) for n in ("h100-sxm", "a100-80gb")]
    got = [v for c in in_sample for v in (c["mape"], c["decode_mape"])]
    assert got == pytest.approx([0.08204, 0.06910, 0.05871, 0.04239], rel=1e-3)
