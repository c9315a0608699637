"""Recompute every latency number README.md and VALIDATION.md state (Vidur H100/A100, leave-one-model-out),
pinned at 1e-3 relative: the full `sdsl validate latency --json` run once per module (about a minute)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from sdsl._paths import data_path
from sdsl.core.hardware import get_hardware
from sdsl.core.latency import LatencyParams
from sdsl.experiments.latency_validation import pooled_metrics

VIDUR = data_path("vidur")
REL = 1e-3


@pytest.fixture(scope="module")
def report():
    from sdsl.cli import cli

    r = CliRunner().invoke(cli, ["validate", "latency", "--data", str(VIDUR), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


# (pooled overall, pooled decode, worst-model decode, median over models overall, decode) — VALIDATION.md,
# the form with the GEMM kernel terms (smallest row tile, last wave's tail, size overhead)
GEMM = {"h100": (0.088481, 0.060447, 0.078686, 0.085854, 0.049999), "a100": (0.059319, 0.045678, 0.064087, 0.060583, 0.054638)}
WORST = {"h100": "meta-llama/Llama-2-7b-hf", "a100": "meta-llama/Meta-Llama-3-8B"}
# median signed error by num_tokens bucket
BIAS = {"h100": (0.039479, -0.002897, 0.043658, -0.022164, 0.01464), "a100": (0.020078, -0.002536, 0.004288, 0.011438, 0.00658)}
# the previous form (row tiles only, kernel_terms=False): a wrong form that misses the H100 goals
PREVIOUS = {"h100": (0.09396, 0.10951, 0.17061, 0.07603), "a100": (0.06035, 0.05339, 0.07900, 0.01131)}
PREVIOUS_BIAS = {"h100": (0.01055, 0.00417, 0.07603, 0.00016, 0.01548), "a100": (0.00836, 0.00099, 0.01131, 0.01024, 0.00593)}
PREVIOUS_MEDIANS = {"h100": (0.08801, 0.06171), "a100": (0.06058, 0.05998)}
# elementwise: per kernel, per kernel decode, per layer sum, worst model per layer
ELEMENTWISE = {"h100": (0.16274, 0.32708, 0.09232, 0.10574), "a100": (0.11817, 0.24935, 0.08758, 0.11098)}
# all-reduce: in-sample MAPE at TP 2/4/8, held-out-TP MAPE at 2/4/8
ALLREDUCE = {"h100": ((0.19564, 0.14660, 0.08320), (0.25015, 0.19213, 0.17450)),
             "a100": ((0.10505, 0.14137, 0.14118), (0.18719, 0.14918, 0.17378))}


@pytest.mark.parametrize("gpu", ["h100", "a100"])
def test_gemm_pooled_worst_and_bias(report, gpu):
    r = report[gpu]
    got = (r["pooled_overall_mape"], r["pooled_decode_mape"], r["worst_model_decode_mape"], r["overall_mape"], r["decode_mape"])
    assert got == pytest.approx(GEMM[gpu], rel=REL, abs=2e-5)
    assert r["worst_model"] == WORST[gpu]
    medians = tuple(b["median"] for b in r["bias_by_tokens"].values())
    assert medians == pytest.approx(BIAS[gpu], rel=REL, abs=2e-5)
    assert len(r["per_model"]) == {"h100": 3, "a100": 5}[gpu]


@pytest.mark.parametrize("gpu", ["h100", "a100"])
def test_elementwise_and_allreduce(report, gpu):
    r = report[gpu]
    got = (r["elementwise_mape"], r["elementwise_decode_mape"], r["elementwise_layer_mape"],
           r["elementwise_worst_model_layer_mape"])
    assert got == pytest.approx(ELEMENTWISE[gpu], rel=REL, abs=2e-5)
    ar = r["allreduce"]
    assert tuple(ar["mape_by_gpus"][k] for k in ("2", "4", "8")) == pytest.approx(ALLREDUCE[gpu][0], rel=REL, abs=2e-5)
    assert tuple(ar["heldout_tp_mape"][k] for k in ("2", "4", "8")) == pytest.approx(ALLREDUCE[gpu][1], rel=REL, abs=2e-5)


def test_turbospec_comparison(report):
    ts = report["turbospec"]
    assert ts["llama-3.1-70b"]["mean_abs_rel_diff"] == pytest.approx(0.04831, rel=REL)
    assert ts["llama-3.1-8b"]["mean_abs_rel_diff"] == pytest.approx(0.03737, rel=REL)
    assert ts["llama-3.1-70b"]["batch1"]["predicted_ms"] == pytest.approx(19.141, rel=REL)
    assert ts["llama-3.1-70b"]["batch64"]["predicted_ms"] == pytest.approx(21.453, rel=REL)
    assert ts["llama-3.1-8b"]["batch64"]["predicted_ms"] == pytest.approx(8.968, rel=REL)


def test_previous_form_fails_the_h100_goals():
    """The form without the kernel terms (row tiles only) is what the goals reject: H100 pooled 9.40% > 8%
    and decode 10.95% > 6%; the kernel terms lower every H100 number (the goals are still missed)."""
    from sdsl.experiments.latency_validation import leave_one_model_out
    from sdsl.fit.profiles import read_vidur

    table, points, _ = leave_one_model_out(read_vidur(VIDUR), kernel_terms=False)
    for gpu, want in PREVIOUS.items():
        m = pooled_metrics(points[points["hardware"] == gpu])
        got = (m["pooled_overall_mape"], m["pooled_decode_mape"], m["worst_model_decode_mape"],
               m["bias_by_tokens"]["64<n<=256"]["median"])
        assert got == pytest.approx(want, rel=REL, abs=2e-5), gpu
        medians = tuple(b["median"] for b in m["bias_by_tokens"].values())
        assert medians == pytest.approx(PREVIOUS_BIAS[gpu], rel=REL, abs=2e-5), gpu
        rows = table[(table["hardware"] == gpu) & (table["op"] == "all")]
        got = (rows["overall_mape"].median(), rows["decode_mape"].median())
        assert got == pytest.approx(PREVIOUS_MEDIANS[gpu], rel=REL, abs=2e-5), gpu
    # the evidence for the smallest row tile: held-out Llama-2-70B on H100 steps where padding doubles 32 -> 64 rows
    p70 = points[(points["hardware"] == "h100") & points["model"].str.contains("70b")]
    rel = p70["predicted_s"] / p70["measured_s"] - 1.0
    steps = [rel[(p70["num_tokens"] > lo) & (p70["num_tokens"] <= hi)].median() for lo, hi in ((16, 32), (32, 64))]
    assert steps == pytest.approx([-0.07895, 0.02361], rel=REL)
    assert PREVIOUS["h100"][0] > 0.08 and PREVIOUS["h100"][1] > 0.06
    new = GEMM["h100"]
    assert new[0] < PREVIOUS["h100"][0] and new[1] < PREVIOUS["h100"][1] and new[2] < PREVIOUS["h100"][2]
    assert BIAS["h100"][2] < PREVIOUS["h100"][3]


def test_before_numbers_without_tiles_or_elementwise_terms():
    """VALIDATION.md's "before" column: the form without GEMM row tiles, elementwise kernels charged
    t_kernel + bytes/(eta_m bw) with the held-out GEMM fit."""
    from sdsl.core.hardware import get_hardware
    from sdsl.experiments.latency_validation import (VIDUR_HARDWARE, elementwise_scores, leave_one_model_out,
                                                     pooled_metrics)
    from sdsl.fit.elementwise import predict_elementwise_times
    from sdsl.fit.profiles import read_vidur, read_vidur_elementwise

    data, ew = read_vidur(VIDUR), read_vidur_elementwise(VIDUR)
    _, points, fits = leave_one_model_out(data, m_tile=0)
    want = {"h100": (0.09949, 0.10033, 0.14933, 0.06257, 0.32710), "a100": (0.06144, 0.05999, 0.07418, 0.02602, 0.28182)}
    for gpu, expected in want.items():
        m = pooled_metrics(points[points["hardware"] == gpu])
        hw = get_hardware(VIDUR_HARDWARE[gpu])
        parts = [ew[(ew.hardware == gpu) & (ew.model == held)].reset_index(drop=True) for held in fits[gpu]]
        parts = [p.assign(pred=predict_elementwise_times(p, hw, fits[gpu][p["model"].iloc[0]].params)) for p in parts]
        e = elementwise_scores(pd.concat(parts, ignore_index=True))
        got = (m["pooled_overall_mape"], m["pooled_decode_mape"], m["worst_model_decode_mape"],
               m["bias_by_tokens"]["64<n<=256"]["median"], e["elementwise_layer_mape"])
        assert got == pytest.approx(expected, rel=REL, abs=2e-5), gpu


def test_allreduce_fit_recovers_its_own_data():
    from sdsl.fit.allreduce import fit_allreduce, predict_allreduce

    hw = get_hardware("h100-sxm")
    true = LatencyParams(allreduce_latency=8e-6, allreduce_step_latency=1.5e-6, eta_interconnect=0.8)
    n, size = np.meshgrid([2, 4, 8], np.geomspace(1e4, 1e8, 12))
    rows = pd.DataFrame({"n_gpu": n.ravel(), "bytes": size.ravel()})
    rows["time_s"] = predict_allreduce(rows, hw.interconnect_bandwidth, true)
    params, stats = fit_allreduce(rows, hw)
    for name in ("allreduce_latency", "allreduce_step_latency", "eta_interconnect"):
        assert getattr(params, name) == pytest.approx(getattr(true, name), rel=1e-3), name
    assert stats["mape"] < 1e-6


def test_nvlink_rows_keep_single_node_nvlink_only():
    from sdsl.fit.allreduce import nvlink_rows, read_allreduce

    net = VIDUR / "network"
    pair = read_allreduce(net / "a100_pairwise_nvlink_all_reduce.csv")
    dgx = read_allreduce(net / "a100_dgx_all_reduce.csv")
    rows = nvlink_rows([pair, dgx])
    assert set(rows["n_gpu"]) == {2, 4, 8} and (rows["per_node"] == rows["n_gpu"]).all()
    assert not ((rows["source"] == pair["source"].iloc[0]) & (rows["n_gpu"] == 4)).any()  # 4 GPUs cross PCIe there


def test_turbospec_lines_formula():
    from sdsl.experiments.latency_validation import TURBOSPEC_LINES, turbospec_comparison

    df = turbospec_comparison(LatencyParams(), batches=[1, 64])
    _, c = TURBOSPEC_LINES["llama-3.1-8b"]
    got = df[(df.model == "llama-3.1-8b") & (df.batch == 64)]["turbospec_s"].item()
    assert got == pytest.approx(1e-3 * (c.c_kv * 64 * 1024 + (c.c_tok + c.c_b) * 64 + c.c_0))
    assert np.all(df["predicted_s"] > 0)


def test_kernel_choice_is_not_monotone_in_tokens():
    """VALIDATION.md: Llama-2-70B's largest H100 GEMM (TP 1 mlp_up_proj) takes 711 µs at 352 tokens, 650 µs at 512."""
    from sdsl.fit.profiles import read_vidur

    d = read_vidur(VIDUR, hardware="h100")
    g = d[d["model"].str.contains("70b") & (d["tp"] == 1) & (d["op"] == "mlp_up_proj")].set_index("num_tokens")["time_s"]
    assert (g[352], g[512]) == pytest.approx((711e-6, 650e-6), rel=2e-3)


def test_sawtooth_every_128_tokens_on_h100():
    """Evidence for the row-tile term: without it the held-out H100 residual (median over rows at that
    num_tokens) climbs through each block of 128 tokens and drops just past it; with it the steps shrink."""
    from sdsl.experiments.latency_validation import leave_one_model_out
    from sdsl.fit.profiles import read_vidur

    data = read_vidur(VIDUR, hardware="h100")
    want = {0: (0.1288, -0.0044, 0.1701, -0.0426, 0.1067, -0.0656, 0.1231, -0.1577),
            128: (0.0431, 0.1295, 0.0874, 0.0432, 0.0216, 0.0028, 0.0503, -0.1018)}
    for m_tile, expected in want.items():
        _, pts, _ = leave_one_model_out(data, m_tile=m_tile, kernel_terms=False)
        med = (pts["predicted_s"] / pts["measured_s"] - 1.0).groupby(pts["num_tokens"]).median()
        got = tuple(med[t] for t in (128, 136, 256, 264, 384, 392, 512, 520))
        assert got == pytest.approx(expected, rel=2e-3, abs=1e-4), m_tile
