"""The shipped GPU calibrations (sdsl/data/latency/*.json, what `default_params` returns) are what
`sdsl calibrate` recomputes from the shipped Vidur data with the commands in profiles/README.md, they are
one form on every GPU, and the refit carries the values VALIDATION.md quotes.

Tolerances come from tools/blas_spread.py (BENCHMARKS.md, "Fits under every BLAS kernel"): under the default,
Prescott, Haswell, Zen and SkylakeX OpenBLAS kernels every shipped parameter refits within 1e-6 relative (the GEMM
terms, written on another machine, agree to 8e-7 here), so the refit is held to 1e-5; the fit's quality (MAPE, the
all-reduce's cost) and the shipped files' predictions are asserted to the same; the values VALIDATION.md quotes to
their 4 significant digits."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from sdsl._paths import data_path
from sdsl.catalog.hardware import get_hardware
from sdsl.roofline.kernels import min_row_tile
from sdsl.roofline.latency import LatencyParams, default_params

VIDUR = data_path("vidur")
NET = VIDUR / "network"
GPUS = {"h100": "h100-sxm", "a100": "a100-80gb", "a40": "a40"}

#: The refit against the shipped files: 10x the largest spread measured across BLAS kernels and machines (8e-7).
REFIT_REL = 1e-5


@pytest.fixture(scope="module")
def refit(tmp_path_factory):
    """{catalog name: the calibration JSON that the profiles/README.md command writes, rerun now}."""
    from sdsl.cli import cli

    out = {}
    for gpu, name in GPUS.items():
        path = tmp_path_factory.mktemp("calib") / f"{name}.json"
        extra = ["--allreduce", str(NET / f"{gpu}_dgx_all_reduce.csv")] if (NET / f"{gpu}_dgx_all_reduce.csv").exists() else []
        r = CliRunner().invoke(cli, ["calibrate", str(VIDUR / gpu), "--hardware", name, *extra, "--no-points", "-o", str(path)])
        assert r.exit_code == 0, r.output
        out[name] = json.loads(path.read_text())
    return out


@pytest.mark.parametrize("name", GPUS.values())
def test_shipped_calibration_is_reproduced(refit, name):
    got, shipped = refit[name], json.loads((data_path("latency") / f"{name}.json").read_text())
    assert set(got["params"]) == set(shipped["params"]) and got["params"]["source"] == shipped["params"]["source"]
    for k, v in shipped["params"].items():
        if isinstance(v, (int, float)):
            assert got["params"][k] == pytest.approx(v, rel=REFIT_REL, abs=1e-15), k
    for k in ("mape", "decode_mape", "rms_log_error", "n_points"):
        assert got[k] == pytest.approx(shipped[k], rel=REFIT_REL), k
    assert got["varied"] == shipped["varied"]


@pytest.mark.parametrize("name", GPUS.values())
def test_default_params_is_the_one_validated_form(name):
    """The same form on every calibrated GPU: elementwise kernels (their fixed cost the launch floor), GEMMs
    with 128-row tiles and the three kernel terms; the all-reduce fitted to the DGX rows where Vidur has
    them, with a physical efficiency."""
    p = default_params(name)
    expected = LatencyParams.from_dict(json.loads((data_path("latency") / f"{name}.json").read_text())["params"])
    overlay = data_path("latency", "opdb", f"{name}.json")  # the fp8 GEMM terms measured on NVIDIA's operator tables
    if overlay.is_file():
        extra = json.loads(overlay.read_text())
        expected = expected.replace(**extra["params"], source=f"{expected.source}; {extra['source']}")
    assert p == expected
    assert p.m_tile == 128 and p.m_tile_min == min_row_tile(get_hardware(name))
    assert p.t_elementwise is not None and p.t_kernel == p.t_elementwise
    assert p.tail_waves > 0 and p.t_kernel_size > 0 and 0 < p.eta_interconnect <= 1
    if name == "a40":
        assert "all-reduce not fitted" in p.source and p.allreduce_floor == 0.0
    else:
        assert f"all-reduce fitted to {name.split('-')[0]}_dgx_all_reduce.csv" in p.source and p.allreduce_floor > 0


def test_values_quoted_in_validation(refit):
    """VALIDATION.md quotes these fitted values of the shipped calibrations (recomputed by the refit) to 4 digits."""
    h100, a100, a40 = (LatencyParams.from_dict(refit[n]["params"]) for n in GPUS.values())
    q = dict(rel=5e-4)  # half a unit of the 4th significant digit
    assert (h100.t_kernel, h100.smoothness, h100.eta_interconnect) == pytest.approx((1.1952e-6, 1.9317, 0.7486), **q)
    assert (a100.eta_interconnect, a100.allreduce_latency, a100.smoothness) == pytest.approx((0.6206, 44.51e-6, 2.7773), **q)
    # the all-reduce's low-latency protocol and floor (VALIDATION.md, all-reduce subsection)
    assert (h100.allreduce_ll_efficiency, h100.allreduce_floor, a100.allreduce_ll_efficiency, a100.allreduce_floor) == \
        pytest.approx((0.6268, 27.97e-6, 0.4167, 33.02e-6), **q)
    assert a100.t_kernel == pytest.approx(1.8294e-6, **q)
    got = [(p.eta_compute, p.eta_memory, p.tail_waves, p.t_kernel_size, p.kernel_size_bytes) for p in (h100, a100, a40)]
    assert got[0] == pytest.approx((0.7363, 1.0, 0.09725, 4.572e-6, 4.729e6), **q)
    assert got[1] == pytest.approx((0.7324, 0.7960, 0.04284, 4.112e-6, 5.026e6), **q)
    assert got[2] == pytest.approx((0.7784, 0.8591, 0.01035, 20.23e-6, 31.09e6), **q)
    assert a40.t_kernel == pytest.approx(0.8271e-6, **q)
    got = [v for n in GPUS.values() for v in (refit[n]["mape"], refit[n]["decode_mape"])]
    assert got == pytest.approx([0.08204, 0.06910, 0.05871, 0.04239, 0.07480, 0.06657], **q)


@pytest.mark.parametrize("gpu, name, cost, mape", [("h100", "h100-sxm", 33.4958, 0.09333), ("a100", "a100-80gb", 31.5653, 0.08331)])
def test_shipped_allreduce_fit_quality_and_predictions(gpu, name, cost, mape):
    """The all-reduce fit's quality (½Σ log-residual² of the hard-minimum model it prices with, MAPE) and what the
    shipped terms predict: the same as a refit now, to REFIT_REL, at every DGX message size and TP degree."""
    from sdsl.fit.allreduce import fit_allreduce, nvlink_rows, predict_allreduce, read_allreduce

    hw, rows = get_hardware(name), nvlink_rows([read_allreduce(NET / f"{gpu}_dgx_all_reduce.csv")])
    params, stats = fit_allreduce(rows, hw)
    assert (stats["cost"], stats["mape"]) == pytest.approx((cost, mape), rel=1e-4)
    np.testing.assert_allclose(predict_allreduce(rows, hw.interconnect_bandwidth, default_params(name)),
                               predict_allreduce(rows, hw.interconnect_bandwidth, params), rtol=REFIT_REL)
