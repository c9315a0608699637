"""Recompute every latency number README.md and VALIDATION.md state (Vidur H100/A100, leave-one-model-out),
held at 1e-3 relative: the full `sdsl validate latency --json` run once per module (about a minute). These are errors
of fits, not fitted parameters: under the default, Prescott, Haswell, Zen and SkylakeX OpenBLAS kernels each of them
spreads by at most a few 1e-6 relative (tools/blas_spread.py; BENCHMARKS.md, "Fits under every BLAS kernel"), so 1e-3
leaves a margin of 100x for other machines and still fails a changed form or data set, which move them by percent."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from sdsl._paths import data_path
from sdsl.catalog.hardware import get_hardware
from sdsl.roofline.latency import LatencyParams
from sdsl.validation.latency_validation import pooled_metrics

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
GEMM = {"h100": (0.088685, 0.060163, 0.078037, 0.085854, 0.049999), "a100": (0.059311, 0.045744, 0.064426, 0.060565, 0.054638)}
WORST = {"h100": "meta-llama/Llama-2-7b-hf", "a100": "meta-llama/Meta-Llama-3-8B"}
# median signed error by num_tokens bucket
BIAS = {"h100": (0.039034, -0.003856, 0.043608, -0.022108, 0.014643), "a100": (0.020106, -0.002813, 0.00435, 0.011445, 0.006592)}
# the previous form (row tiles only, kernel_terms=False): a wrong form that misses the H100 goals
PREVIOUS = {"h100": (0.09396, 0.10951, 0.17061, 0.07603), "a100": (0.06035, 0.05339, 0.07900, 0.01131)}
PREVIOUS_BIAS = {"h100": (0.01055, 0.00417, 0.07603, 0.00016, 0.01548), "a100": (0.00836, 0.00099, 0.01131, 0.01024, 0.00593)}
PREVIOUS_MEDIANS = {"h100": (0.08801, 0.06171), "a100": (0.06058, 0.05998)}
# elementwise: per kernel, per kernel decode, per layer sum, worst model per layer, worst model per kernel,
# median and mean signed error per kernel
ELEMENTWISE = {"h100": (0.13454, 0.21646, 0.07383, 0.08559, 0.25533, 0.03887, 0.03651),
               "a100": (0.11052, 0.18969, 0.07823, 0.10112, 0.24213, -0.01871, 0.00683)}
# the same with the previous accounting (phi-2's add timer one kernel, GELU priced as the fused activation)
ELEMENTWISE_PREVIOUS = {"h100": (0.16274, 0.32708, 0.09232, 0.10574, 0.31841, 0.04245, 0.05692),
                        "a100": (0.11817, 0.24935, 0.08758, 0.11098, 0.30019, -0.02225, 0.00832)}


def _previous_accounting(ew):
    from sdsl.fit.profiles import VIDUR_ELEMENTWISE

    return ew.assign(kernels=1.0, kind=ew["op"].map(VIDUR_ELEMENTWISE))


def _ew_tuple(r):
    return (r["elementwise_mape"], r["elementwise_decode_mape"], r["elementwise_layer_mape"],
            r["elementwise_worst_model_layer_mape"], r["elementwise_worst_model_mape"], r["elementwise_bias"]["median"],
            r["elementwise_bias"]["mean"])
# all-reduce (DGX rows): in-sample MAPE at TP 2/4/8; held-out-TP MAPE at 2/4/8; held-out median signed error;
# (pooled held-out MAPE, its median signed error, worst TP); pairwise node predicted (MAPE, median signed error);
# the previous form (ring only) held out on the same rows; the previous protocol (pairwise rows pooled in)
ALLREDUCE = {"h100": ((0.14984, 0.070318, 0.059827),
                      (0.18432, 0.093738, 0.084403),
                      (-0.12432, 0.050387, -0.036943),
                      (0.12082, -0.026257, 0.18432),
                      (0.32956, -0.24792),
                      (0.17808, 0.097173, 0.09654),
                      (0.29097, 0.1894, 0.0917)),
             "a100": ((0.078726, 0.10133, 0.069872),
                      (0.098891, 0.11766, 0.076014),
                      (-0.063623, 0.032849, -0.0074967),
                      (0.097521, -0.0074135, 0.11766),
                      (0.126, 0.064567),
                      (0.095844, 0.1438, 0.13605),
                      (0.090601, 0.11364, 0.075044))}


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
    assert _ew_tuple(r) == pytest.approx(ELEMENTWISE[gpu], rel=REL, abs=2e-5)
    ar = r["allreduce"]
    tp = ("2", "4", "8")
    want = ALLREDUCE[gpu]
    for key, i in (("mape_by_gpus", 0), ("heldout_tp_mape", 1), ("heldout_tp_bias", 2), ("ring_only_heldout_tp_mape", 5),
                   ("heldout_tp_mape_with_pairwise", 6)):
        assert tuple(ar[key][k] for k in tp) == pytest.approx(want[i], rel=REL, abs=2e-5), key
    got = (ar["heldout_pooled_mape"], ar["heldout_pooled_bias"], ar["heldout_worst_tp_mape"])
    assert got == pytest.approx(want[3], rel=REL, abs=2e-5)
    assert (ar["pairwise_mape"], ar["pairwise_bias"]) == pytest.approx(want[4], rel=REL, abs=2e-5)


def test_turbospec_comparison(report):
    ts = report["turbospec"]
    assert ts["llama-3.1-70b"]["mean_abs_rel_diff"] == pytest.approx(0.038017, rel=REL)
    assert ts["llama-3.1-8b"]["mean_abs_rel_diff"] == pytest.approx(0.038430, rel=REL)
    assert ts["llama-3.1-70b"]["batch1"]["predicted_ms"] == pytest.approx(19.982, rel=REL)
    assert ts["llama-3.1-70b"]["batch64"]["predicted_ms"] == pytest.approx(22.359, rel=REL)
    assert ts["llama-3.1-8b"]["batch64"]["predicted_ms"] == pytest.approx(8.940, rel=REL)


def test_previous_form_fails_the_h100_goals():
    """The form without the kernel terms (row tiles only) is what the goals reject: H100 pooled 9.40% > 8%
    and decode 10.95% > 6%; the kernel terms lower every H100 number (the goals are still missed)."""
    from sdsl.validation.latency_validation import leave_one_model_out
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
    from sdsl.catalog.hardware import get_hardware
    from sdsl.validation.latency_validation import (VIDUR_HARDWARE, elementwise_scores, leave_one_model_out,
                                                     pooled_metrics)
    from sdsl.fit.elementwise import predict_elementwise_times
    from sdsl.fit.profiles import read_vidur, read_vidur_elementwise

    data, ew = read_vidur(VIDUR), _previous_accounting(read_vidur_elementwise(VIDUR))
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


@pytest.mark.parametrize("gpu, name", [("h100", "h100-sxm"), ("a100", "a100-80gb")])
def test_elementwise_previous_accounting(gpu, name):
    """VALIDATION.md's previous elementwise row: the same fit and held-out protocol with phi-2's add timer
    read as one kernel and its GELU priced as Sarathi's fused activation."""
    from sdsl.validation.latency_validation import elementwise_leave_one_model_out
    from sdsl.fit.calibration import GPU_M_TILE, fit_latency
    from sdsl.fit.profiles import read_vidur, read_vidur_elementwise

    hw = get_hardware(name)
    data, ew = read_vidur(VIDUR / gpu), read_vidur_elementwise(VIDUR, hardware=gpu)
    res = fit_latency(data, hw, dtype="fp16", keep_points=False, m_tile=GPU_M_TILE)
    got = elementwise_leave_one_model_out(_previous_accounting(ew), hw, res.params)
    assert _ew_tuple(got) == pytest.approx(ELEMENTWISE_PREVIOUS[gpu], rel=REL, abs=2e-5)


def test_elementwise_rows_follow_what_vidur_times():
    """vidur/profiling/mlp/mlp_impl.py: phi-2 (no post-attention norm) times attn + mlp + residual, two adds,
    under one timer, and its torch.nn.GELU is a flat native kernel; Llama's add is one kernel, its
    activation Sarathi's fused SiluAndMul."""
    from sdsl.fit.profiles import read_vidur_elementwise

    ew = read_vidur_elementwise(VIDUR, hardware="h100")
    phi, llama = ew[ew.model == "microsoft/phi-2"], ew[ew.model == "meta-llama/Llama-2-7b-hf"]
    assert set(phi.loc[phi.op == "add", "kernels"]) == {2.0} and set(llama.loc[llama.op == "add", "kernels"]) == {1.0}
    assert set(phi.loc[phi.op == "mlp_act", "kind"]) == {"add"} and set(llama.loc[llama.op == "mlp_act", "kind"]) == {"act"}
    assert set(phi.loc[phi.op != "add", "kernels"]) == {1.0}
    assert (ew["num_tokens"] <= 64).mean() == pytest.approx(0.04215, abs=5e-5)  # VALIDATION.md: decode is 4% of rows


def test_allreduce_fit_recovers_its_own_data():
    """Data drawn from the two-protocol form with a floor: the fit (best of three starts) recovers every term."""
    from sdsl.fit.allreduce import fit_allreduce, predict_allreduce

    hw = get_hardware("h100-sxm")
    true = LatencyParams(allreduce_latency=2e-5, allreduce_step_latency=1.5e-6, eta_interconnect=0.6,
                         allreduce_ll_latency=6e-6, allreduce_ll_efficiency=0.3, allreduce_floor=9e-6,
                         allreduce_floor_smoothness=6.0)
    n, size = np.meshgrid([2, 4, 8], np.geomspace(1e4, 3e8, 40))
    rows = pd.DataFrame({"n_gpu": n.ravel(), "bytes": size.ravel()})
    rows["time_s"] = predict_allreduce(rows, hw.interconnect_bandwidth, true)
    params, stats = fit_allreduce(rows, hw)
    for name in ("allreduce_latency", "allreduce_step_latency", "eta_interconnect", "allreduce_ll_efficiency"):
        assert getattr(params, name) == pytest.approx(getattr(true, name), rel=2e-2), name
    assert stats["mape"] < 2e-3
    ring, ring_stats = fit_allreduce(rows, hw, ring_only=True)  # the previous form cannot follow the LL regime
    assert ring.allreduce_ll_efficiency == 0 and ring.allreduce_floor == 0 and ring_stats["mape"] > 0.1


def test_switch_rows_drop_the_pairwise_node():
    from sdsl.fit.allreduce import read_allreduce, switch_rows

    net = VIDUR / "network"
    rows = switch_rows([read_allreduce(net / "h100_pairwise_nvlink_all_reduce.csv"),
                        read_allreduce(net / "h100_dgx_all_reduce.csv")])
    assert set(rows["source"]) == {"h100_dgx_all_reduce.csv"} and set(rows["n_gpu"]) == {2, 4, 8}
    # VALIDATION.md: the two nodes' 2-GPU algorithm bandwidth at the largest message (67 MB), GB/s
    algbw = []
    for name in ("h100_dgx_all_reduce.csv", "h100_pairwise_nvlink_all_reduce.csv"):
        df = read_allreduce(net / name)
        top = df[(df["n_gpu"] == 2) & (df["per_node"] == 2)].nlargest(1, "bytes")
        algbw.append(float(top["bytes"].iloc[0] / top["time_s"].iloc[0] / 1e9))
    assert algbw == pytest.approx([273.9, 190.7], abs=0.1)


def test_allreduce_floor_is_measured_bimodality():
    """Evidence for the floor term: in one DGX file the same message size measures both ~7 us and ~40 us
    within its three repeats (min vs max), which no size-dependent protocol choice can produce."""
    df = pd.read_csv(VIDUR / "network" / "h100_dgx_all_reduce.csv")
    small = df[(df["num_workers"] == 2) & (df["size"] <= 2 ** 18)]  # bytes
    lo, hi = small["time_stats.all_reduce.min"], small["time_stats.all_reduce.max"]
    both = (lo <= 0.010) & (hi >= 0.035)
    assert (int(both.sum()), len(small)) == (12, 32)  # VALIDATION.md: 12 of the 32 sizes up to 256 KB


def test_what_is_left_of_the_h100_tp2_allreduce_error():
    """VALIDATION.md's breakdown of the held-out H100 TP 2 error: small messages (<= 2 MB) and the
    large messages that TP 4/8 predict too fast."""
    from sdsl.validation.latency_validation import _leave_one_tp_out
    from sdsl.fit.allreduce import read_allreduce, switch_rows

    rows = switch_rows([read_allreduce(VIDUR / "network" / "h100_dgx_all_reduce.csv")])
    held = _leave_one_tp_out(rows, get_hardware("h100-sxm"), LatencyParams())
    tp2 = held[held["n_gpu"] == 2]
    small, big = tp2["bytes"] <= 2e6, tp2["bytes"] >= 32e6
    got = (small.mean(), tp2["rel"][small].abs().mean(), tp2["rel"][small].abs().sum() / tp2["rel"].abs().sum(),
           tp2["rel"][big].median())
    assert got == pytest.approx((0.15895, 0.56568, 0.48784, -0.15992), rel=REL, abs=2e-5)


def test_nvlink_rows_keep_single_node_nvlink_only():
    from sdsl.fit.allreduce import nvlink_rows, read_allreduce

    net = VIDUR / "network"
    pair = read_allreduce(net / "a100_pairwise_nvlink_all_reduce.csv")
    dgx = read_allreduce(net / "a100_dgx_all_reduce.csv")
    rows = nvlink_rows([pair, dgx])
    assert set(rows["n_gpu"]) == {2, 4, 8} and (rows["per_node"] == rows["n_gpu"]).all()
    assert not ((rows["source"] == pair["source"].iloc[0]) & (rows["n_gpu"] == 4)).any()  # 4 GPUs cross PCIe there


def test_turbospec_lines_formula():
    from sdsl.validation.latency_validation import TURBOSPEC_LINES, turbospec_comparison

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
    from sdsl.validation.latency_validation import leave_one_model_out
    from sdsl.fit.profiles import read_vidur

    data = read_vidur(VIDUR, hardware="h100")
    want = {0: (0.1288, -0.0044, 0.1701, -0.0426, 0.1067, -0.0656, 0.1231, -0.1577),
            128: (0.0431, 0.1295, 0.0874, 0.0432, 0.0216, 0.0028, 0.0503, -0.1018)}
    for m_tile, expected in want.items():
        _, pts, _ = leave_one_model_out(data, m_tile=m_tile, kernel_terms=False)
        med = (pts["predicted_s"] / pts["measured_s"] - 1.0).groupby(pts["num_tokens"]).median()
        got = tuple(med[t] for t in (128, 136, 256, 264, 384, 392, 512, 520))
        assert got == pytest.approx(expected, rel=2e-3, abs=1e-4), m_tile


# What bounds the held-out all-reduce error (VALIDATION.md "What bounds TP 2"), per TP 2/4/8:
# size noise floor, its <= 2 MB rows, the production form fitted on that TP alone; H100 also the NVLS form
# held out and in sample.
LIMITS = {"h100": {"noise_floor_tp_mape": (0.084452, 0.017332, 0.019854),
                   "noise_floor_small_tp_mape": (0.406663, 0.081927, 0.098124),
                   "own_tp_fit_mape": (0.128848, 0.041099, 0.037264),
                   "nvls_heldout_tp_mape": (0.185814, 0.125572, 0.164723),
                   "nvls_heldout_tp_bias": (-0.118664, 0.107278, -0.147342),
                   "nvls_in_sample_tp_mape": (0.142499, 0.082282, 0.043325)},
          "a100": {"noise_floor_tp_mape": (0.048812, 0.032064, 0.029244),
                   "noise_floor_small_tp_mape": (0.215674, 0.121147, 0.142309),
                   "own_tp_fit_mape": (0.060905, 0.086704, 0.058222)}}


@pytest.mark.parametrize("gpu", ["h100", "a100"])
def test_allreduce_limits(report, gpu):
    lim = report[gpu]["allreduce"]["limits"]
    for key, want in LIMITS[gpu].items():
        assert tuple(lim[key][k] for k in ("2", "4", "8")) == pytest.approx(want, rel=REL, abs=2e-5), key
    assert ("nvls_heldout_tp_mape" in lim) == (gpu == "h100")  # Ampere has no NVLink SHARP
    assert lim["small_share"]["2"] == pytest.approx(0.15895, rel=REL)


def test_size_noise_floor_sees_scatter_not_shape():
    """A smooth curve of any shape has a floor of about one size step's growth (≈ 1% at Vidur's 994 sizes,
    the floor's own resolution); the same curve with bimodal repeats (7 vs 40 us, as Vidur's small H100
    all-reduces) does not."""
    from sdsl.validation.allreduce_forms import size_noise_ape

    nbytes = np.geomspace(4e3, 1.3e8, 994)
    smooth = 2e-5 + nbytes / 4e11 + 1e-5 * np.sin(np.log(nbytes))
    rows = pd.DataFrame({"n_gpu": 2, "bytes": nbytes, "time_s": smooth})
    assert size_noise_ape(rows).mean() < 0.006
    rng = np.random.default_rng(0)
    bimodal = rows.assign(time_s=np.where(rng.random(994) < 0.3, 4e-5, 7e-6) + nbytes / 4e11)
    assert size_noise_ape(bimodal).mean() > 0.1
    # per GPU count, in the rows' own order: shuffling the rows permutes the errors with them
    both = pd.concat([rows, bimodal.assign(n_gpu=4)], ignore_index=True)
    perm = rng.permutation(len(both))
    np.testing.assert_allclose(size_noise_ape(both.iloc[perm])[np.argsort(perm)], size_noise_ape(both))


def test_nvls_competes_only_above_two_gpus():
    from sdsl.roofline.kernels import allreduce_time, smooth_max
    from sdsl.validation.allreduce_forms import nvls_time

    x = (1e-5, 4.0, 5e-6, 0.4, 2e-5, 1.2, 1e-6, 3e-5, 0.9)
    nbytes, bw = np.geomspace(4e3, 1.3e8, 50), 450e9
    ring2 = smooth_max(1e-5, allreduce_time(nbytes, 2, bw, 2e-5, 1.2, 1e-6, ll_latency_s=5e-6, ll_efficiency=0.4), 4.0)
    np.testing.assert_allclose(nvls_time(nbytes, 2, bw, x), ring2)
    nvls8 = nvls_time(nbytes, 8, bw, x)
    assert np.all(nvls8 <= nvls_time(nbytes, 8, bw, x[:7] + (1.0, 0.9)) + 1e-15)  # a slow NVLS never wins
    assert nvls8[-1] == pytest.approx(3e-5 + nbytes[-1] / (0.9 * bw), rel=1e-3)  # large messages: NVLS, flat in t


def test_h100_tp2_form_on_its_own_rows():
    """VALIDATION.md: the production form fitted on H100 TP 2 alone, split at 2 MB (48.9% / 6.2%)."""
    from sdsl.fit.allreduce import fit_allreduce, predict_allreduce, read_allreduce, switch_rows

    hw = get_hardware("h100-sxm")
    rows = switch_rows([read_allreduce(VIDUR / "network" / "h100_dgx_all_reduce.csv")])
    tp2 = rows[rows["n_gpu"] == 2]
    params, stats = fit_allreduce(tp2, hw)
    ape = np.abs(predict_allreduce(tp2, hw.interconnect_bandwidth, params) / tp2["time_s"].to_numpy() - 1.0)
    small = tp2["bytes"].to_numpy() <= 2e6
    assert (stats["mape"], ape[small].mean(), ape[~small].mean()) == pytest.approx((0.128848, 0.489173, 0.060748), rel=REL)


# the shipped defaults' own error on every row (key `shipped`): pooled all / decode / worst model decode, elementwise
# per kernel / per layer sum, all-reduce TP 2/4/8 and pooled (DGX rows; None on the A40: no Vidur all-reduce)
SHIPPED = {"h100": ((0.082041, 0.069101, 0.090514), (0.122871, 0.068106), (0.149838, 0.070318, 0.059827, 0.093328)),
           "a100": ((0.058710, 0.042387, 0.058632), (0.108575, 0.077574), (0.078726, 0.101333, 0.069872, 0.083310)),
           "a40": ((0.074804, 0.066570, 0.073714), (0.101475, 0.059884), None)}


@pytest.mark.parametrize("gpu", ["h100", "a100", "a40"])
def test_shipped_defaults_measured_on_every_row(report, gpu):
    """What `default_params` returns is the validated form (its parameters are this run's all-model fit) and its
    own error on every row is reported beside the held-out one; README.md and VALIDATION.md quote both."""
    from sdsl.roofline.latency import default_params
    from sdsl.validation.latency_validation import VIDUR_HARDWARE

    s = report[gpu]["shipped"]
    # 1e-5: the refit reproduces the shipped parameters to 8e-7 on another machine and to 1e-6 under every OpenBLAS
    # kernel type (tools/blas_spread.py); a different form or data set moves them by percent.
    assert s["max_rel_diff_to_fit"] < 1e-5 and s["source"] == default_params(VIDUR_HARDWARE[gpu]).source
    gemm, ew, ar = SHIPPED[gpu]
    assert (s["pooled_overall_mape"], s["pooled_decode_mape"], s["worst_model_decode_mape"]) == pytest.approx(gemm, rel=REL)
    assert (s["elementwise_mape"], s["elementwise_layer_mape"]) == pytest.approx(ew, rel=REL)
    if ar is None:
        assert s["allreduce"] is None
    else:
        a = s["allreduce"]
        assert tuple(a["tp_mape"][k] for k in ("2", "4", "8")) + (a["pooled_mape"],) == pytest.approx(ar, rel=REL)
    name = {"h100": "H100", "a100": "A100", "a40": "A40"}[gpu]
    from sdsl._paths import REPO_ROOT

    readme = " ".join((REPO_ROOT / "README.md").read_text().split())
    assert f"{name} {100 * gemm[0]:.2f}% / {100 * gemm[1]:.2f}%" in readme  # the shipped files, in sample
