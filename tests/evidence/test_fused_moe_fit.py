"""The fused MoE layer's fit on the shipped operator-table subset (sdsl.fit.opdb.moe), held out one model shape at a
time: error bounds per GPU and format (VALIDATION.md, "The fused MoE layer, measured"), not parameters."""

from __future__ import annotations

import numpy as np
import pytest

from sdsl.catalog.moe import fused_moe_fits
from sdsl.fit.opdb import moe as opdb_moe


@pytest.fixture(scope="module")
def held_out():
    from sdsl.fit.opdb import read_opdb

    df = read_opdb("moe", gpu=["h100_sxm", "h200_sxm", "b200_sxm"])
    keep = df["kernel_source"].isin(["sglang_fused_moe_triton", "moe_torch_flow_cutlass"]) & \
        df["dtype"].isin(["bfloat16", "fp8_block"])
    feats = opdb_moe.moe_features(opdb_moe._decode_rows(df[keep]))
    return opdb_moe.leave_one_shape_out(feats)


def test_leave_one_shape_out_quality(held_out):
    """Each model shape priced by the fit on the others (1-512 tokens, MoE TP × EP <= 8, three routings): the median
    error within 12% per GPU and format, the signed bias within 5%, 80% of rows within 30%. (The worst rows are
    whole series several times off their neighbours, VALIDATION.md; not bounded here.)"""
    for (gpu, dtype), g in held_out.groupby(["gpu", "dtype"]):
        a = np.abs(g["error"].to_numpy())
        assert np.median(a) < 0.12, (gpu, dtype, np.median(a))
        assert abs(np.median(g["error"])) < 0.05, (gpu, dtype)
        assert np.quantile(a, 0.8) < 0.30, (gpu, dtype)
    assert set(held_out["gpu"]) == {"h100_sxm", "h200_sxm", "b200_sxm"}


def test_a_form_without_the_expert_term_fails(held_out):
    """The per-GPU medians need the touched-expert weight reads: a constant layer time per group (its median) errs
    by far more on the same rows."""
    for _, g in held_out.groupby(opdb_moe.GROUP):
        y = g["time_s"].to_numpy()
        flat = np.median(np.abs(np.median(y) / y - 1.0))
        assert flat > 2 * np.median(np.abs(g["error"]))


def test_shipped_fits_cover_the_measured_gpus_and_state_their_error():
    fits = fused_moe_fits()
    assert {f.gpu for f in fits} >= {"h100_sxm", "h200_sxm", "b200_sxm", "a100_sxm"}
    for f in fits:
        assert 0 < f.eta_memory <= 1.0 and 0 < f.eta_compute <= 1.0 and f.t0_s > 0 and f.versions
        if f.shapes >= 3:
            assert f.loso and f.loso["median_abs"] < 0.30




_GPUS = {"h100_sxm": "H100-SXM", "h200_sxm": "H200", "b200_sxm": "B200", "a100_sxm": "A100-SXM"}
_FORMATS = {"bfloat16": "bf16", "fp8": "fp8 (per-tensor)", "fp8_block": "fp8 block-scaled", "int4_wo": "int4 weight-only",
            "nvfp4": "nvfp4"}


def _features(gpu):
    from sdsl.fit.opdb import read_opdb

    df = read_opdb("moe", gpu=gpu)
    return opdb_moe.moe_features(opdb_moe._decode_rows(df[df["gpu"] == gpu]))


@pytest.fixture(scope="module")
def determined_held():
    """{gpu: the determined rows of every kernel, each model shape priced by the fit on the others}."""
    return {gpu: opdb_moe.leave_one_shape_out(opdb_moe.determined(_features(gpu))) for gpu in _GPUS}


def _text():
    from sdsl._paths import REPO_ROOT

    return " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())


@pytest.mark.slow
def test_the_order_dependent_rows_and_what_they_did_to_the_fit():
    """VALIDATION.md "The fused MoE layer, measured", rows left out: 5.6-5.8% of each GPU's rows; kept, the fit priced them
    15-17% fast on one GPU and 17-26% slow at EP 8, and every GPU's and format's worst row was one of them; the
    table's contradiction (34 us for one token under the power law at EP 8 against 47 us balanced)."""
    counts, ep1, ep8, worsts = {}, [], [], []
    for gpu in ("h100_sxm", "h200_sxm", "b200_sxm"):
        feats = _features(gpu)
        left = feats["order_dependent"] > opdb_moe.ORDER_DEPENDENT_MAX
        counts[gpu] = (int(left.sum()), len(feats))
        kept = opdb_moe.leave_one_shape_out(feats)  # the fit with every row in, as before
        out = kept[kept["order_dependent"] > opdb_moe.ORDER_DEPENDENT_MAX]
        ep1.append(out[out["moe_ep_size"] == 1]["error"].median()), ep8.append(out[out["moe_ep_size"] == 8]["error"].median())
        worst = kept.loc[kept.groupby("dtype")["error"].apply(lambda e: e.abs().idxmax())]
        assert (worst["order_dependent"] > opdb_moe.ORDER_DEPENDENT_MAX).all(), gpu
        worsts += list(worst[worst["dtype"].isin(["bfloat16", "fp8", "fp8_block"])]["error"])
        assert set(feats[left]["distribution"]) == {"power_law_1.01", "power_law_1.2"}
        spans = feats[left].groupby(["num_experts", "topk"])["num_tokens"].agg(["min", "max"])
        assert {key: tuple(v) for key, v in spans.iterrows()} == {
            (8, 2): (1, 4), (16, 1): (1, 2), (32, 4): (1, 1), (128, 1): (1, 16), (128, 4): (1, 4), (128, 8): (1, 2),
            (160, 8): (1, 2), (256, 8): (1, 4), (384, 8): (1, 4)}, gpu
    # Mixtral-8x7B/8x22B, Scout, gpt-oss-20b, Maverick, gpt-oss-120b, Qwen3 MoE, Qwen3-Coder-480B, DeepSeek, Kimi-K2
    assert counts == {"h100_sxm": (2088, 36261), "h200_sxm": (2283, 40392), "b200_sxm": (2720, 48854)}
    assert all(0.0556 < n / total < 0.0576 for n, total in counts.values())
    assert (min(ep1), max(ep1)) == pytest.approx((-0.172, -0.153), abs=1e-3)
    assert (min(ep8), max(ep8)) == pytest.approx((0.171, 0.257), abs=1e-3)
    assert (min(worsts), max(worsts)) == pytest.approx((3.354, 5.875), abs=5e-3)  # "+335 … +587%"
    h200 = _features("h200_sxm")
    one = h200[(h200["hidden_size"] == 4096) & (h200["num_experts"] == 128) & (h200["moe_ep_size"] == 8)
               & (h200["moe_tp_size"] == 1) & (h200["num_tokens"] == 1) & (h200["dtype"] == "bfloat16")
               & (h200["kernel_source"] == "sglang_fused_moe_triton")].set_index("distribution")
    assert set(one["engine_version"]) == {"0.5.14"}
    assert 1e6 * one.loc["power_law_1.01", "time_s"] == pytest.approx(34, abs=0.5)
    assert 1e6 * one.loc["balanced", "time_s"] == pytest.approx(47, abs=0.5)
    assert one.loc["balanced", "local_experts"] == 1 and one.loc["power_law_1.01", "local_experts"] == 8
    text = _text()
    for fragment in ("5.6–5.8% of each GPU's rows (2,088 of 36,261 on H100, 2,283 of 40,392 on H200, 2,720 of 48,854 on B200)",
                     "priced a median 15–17% too fast on one GPU and 17–26% too slow at EP 8",
                     "the worst row of every GPU and format was one of them (+335 … +587%",
                     "takes 34 µs for one token under the power law and 47 µs balanced",
                     "1–16 of Maverick's 128 experts (top-1), 1–2 of the 128-expert top-8 shapes and of Qwen3-Coder-480B's "
                     "160, 1–4 of DeepSeek's 256, of Kimi-K2's 384 and of gpt-oss-120b's 128 (top-4), 1 of gpt-oss-20b's 32, "
                     "1–4 of the Mixtrals' 8, 1–2 of Scout's 16"):
        assert " ".join(fragment.split()) in text, fragment


@pytest.mark.slow
def test_the_validation_table_and_the_biases_by_routing(determined_held):
    """VALIDATION.md's table (one model shape held out, pooled per GPU and format over the kernels measured on >= 3
    shapes), recomputed row by row; the median signed error by routing at EP 1; SGLang's H200 bf16 kernel with memory
    and compute summed (the shipped form) and with their maximum."""
    from unittest import mock

    from sdsl.fit.opdb import read_opdb

    text, bias = _text(), {}
    for gpu, name in _GPUS.items():
        held = determined_held[gpu]
        for dtype, g in held.groupby("dtype"):
            if gpu == "a100_sxm" and dtype != "bfloat16":
                continue
            e = g["error"].to_numpy()
            a = np.abs(e)
            goal = "median met, worst **not met**" if np.median(a) <= 0.10 else "**not met**"
            signed = lambda x, f: format(100 * x, f).replace("-", "−") + "%"  # noqa: E731
            row = (f"| {name} | {_FORMATS[dtype]} | {len(e)} | {100 * np.median(a):.1f}% | {100 * np.quantile(a, 0.9):.1f}% "
                   f"| {100 * np.mean(a <= 0.25):.0f}% | {signed(e[np.argmax(a)], '+.0f')} | {signed(np.median(e), '+.1f')} "
                   f"| {goal} |")
            assert row in text, row
        if gpu != "a100_sxm":
            bias[gpu] = held[held["moe_ep_size"] == 1].groupby("distribution")["error"].median()
    balanced = [b["balanced"] for b in bias.values()]
    skewed = [b[d] for b in bias.values() for d in ("power_law_1.01", "power_law_1.2")]
    assert (min(balanced), max(balanced)) == pytest.approx((0.042, 0.065), abs=1e-3)
    assert (min(skewed), max(skewed)) == pytest.approx((-0.038, -0.021), abs=1e-3)

    def maximum(fit, *, tokens, top_k, local_experts_touched, padded_rows, weight_bytes, flops_per_row, bandwidth, peak):
        d = np.asarray(local_experts_touched, dtype=float)
        t = (fit.t0_s + fit.per_expert_s * d + np.maximum(np.asarray(weight_bytes) / (fit.eta_memory * bandwidth),
                                                          np.asarray(padded_rows) * flops_per_row / (fit.eta_compute * peak))
             + fit.per_pair_s * np.asarray(tokens) * np.asarray(top_k))
        return np.where(d > 0, t, 0.0)

    df = read_opdb("moe", gpu="h200_sxm")
    sglang = opdb_moe.determined(opdb_moe.moe_features(opdb_moe._decode_rows(
        df[(df["kernel_source"] == "sglang_fused_moe_triton") & (df["dtype"] == "bfloat16")])))
    summed = np.median(np.abs(opdb_moe.leave_one_shape_out(sglang)["error"]))
    with mock.patch.object(opdb_moe, "fused_moe_layer_time", maximum):
        most = np.median(np.abs(opdb_moe.leave_one_shape_out(sglang)["error"]))
    assert (summed, most) == pytest.approx((0.104, 0.113), abs=1e-3)
    for fragment in ("(median signed +4.2 to +6.5% at EP 1) and the power-law ones under-predicted (−2.1 to −3.8%)",
                     "the sum gives a 10.4% held-out median, the maximum 11.3%"):
        assert " ".join(fragment.split()) in text, fragment


@pytest.mark.slow
def test_the_other_gpus_fused_moe_pools():
    """VALIDATION.md "More GPUs": the fused MoE pools of L40S, B300, GB200, GB300 and RTX PRO 6000 (median, worst,
    signed)."""
    got = {}
    for gpu in ("l40s", "b300_sxm", "gb200", "gb300", "rtx_pro_6000_server"):
        for key, (_, err, _) in opdb_moe.moe_kernel_validation(gpu).items():
            a = np.abs(err)
            got[gpu, key] = (f"{100 * np.median(a):.1f}%", f"{100 * err[np.argmax(a)]:+.0f}%".replace("-", "−"),
                             f"{100 * np.median(err):+.1f}%".replace("-", "−"))
    fragment = (f"L40S bf16 {got['l40s', 'all:bfloat16'][0]} ({got['l40s', 'all:bfloat16'][1]}, "
                f"{got['l40s', 'all:bfloat16'][2]}), fp8 {got['l40s', 'all:fp8'][0]}; B300 bf16 "
                f"{got['b300_sxm', 'all:bfloat16'][0]} ({got['b300_sxm', 'all:bfloat16'][1]}, {got['b300_sxm', 'all:bfloat16'][2]}), "
                f"fp8 block-scaled {got['b300_sxm', 'all:fp8_block'][0]}, nvfp4 {got['b300_sxm', 'all:nvfp4'][0]}; GB200 bf16 "
                f"{got['gb200', 'all:bfloat16'][0]} ({got['gb200', 'all:bfloat16'][1]}, {got['gb200', 'all:bfloat16'][2]}), nvfp4 "
                f"{got['gb200', 'all:nvfp4'][0]}; GB300 bf16 {got['gb300', 'all:bfloat16'][0]} ({got['gb300', 'all:bfloat16'][1]}, "
                f"{got['gb300', 'all:bfloat16'][2]}), nvfp4 {got['gb300', 'all:nvfp4'][0]}; RTX PRO 6000 bf16 "
                f"{got['rtx_pro_6000_server', 'all:bfloat16'][0]} ({got['rtx_pro_6000_server', 'all:bfloat16'][1]}, "
                f"{got['rtx_pro_6000_server', 'all:bfloat16'][2]}), fp8 {got['rtx_pro_6000_server', 'all:fp8'][0]}, "
                f"fp8 block-scaled {got['rtx_pro_6000_server', 'all:fp8_block'][0]}, nvfp4 "
                f"{got['rtx_pro_6000_server', 'all:nvfp4'][0]}.")
    assert " ".join(fragment.split()) in _text(), fragment
    assert f"GB200's nvfp4 MoE ({got['gb200', 'all:nvfp4'][0]})" in _text()


@pytest.mark.slow
def test_sglang_kernels_drift_with_ep_and_the_others_do_not(determined_held):
    """VALIDATION.md "Where it fails": SGLang's Triton and Marlin layers go from slow at EP 1 to fast at EP 8, every other
    kernel stays within 4% at every EP; padding every touched expert's rows over all ranks overshoots."""
    sglang = ("sglang_fused_moe_triton", "sglang_marlin_moe")
    at_ep8, at_ep1, others = {}, [], []
    for gpu in ("h100_sxm", "h200_sxm", "b200_sxm"):
        held = determined_held[gpu]
        mine = held[held["kernel_source"].isin(sglang)]
        by_ep = mine.groupby(["kernel_source", "dtype", "moe_ep_size"])["error"].median()
        for (kernel, dtype, ep), v in by_ep.items():
            if ep == 8:
                at_ep8[gpu, kernel, dtype] = round(100 * v, 1)
            if ep == 1:
                at_ep1.append(v)
        rest = held[~held["kernel_source"].isin(sglang + ("vllm_marlin_int4_moe",))]
        others += list(rest.groupby("moe_ep_size")["error"].median())
    assert at_ep8 == {("h100_sxm", "sglang_fused_moe_triton", "bfloat16"): -12.3,
                      ("h100_sxm", "sglang_fused_moe_triton", "fp8_block"): -4.5,
                      ("h100_sxm", "sglang_marlin_moe", "int4_wo"): -23.7,
                      ("h200_sxm", "sglang_fused_moe_triton", "bfloat16"): -15.7,
                      ("h200_sxm", "sglang_fused_moe_triton", "fp8_block"): -4.8,
                      ("h200_sxm", "sglang_marlin_moe", "int4_wo"): -23.3,
                      ("b200_sxm", "sglang_fused_moe_triton", "bfloat16"): -37.8}
    assert (min(at_ep1), max(at_ep1)) == pytest.approx((0.013, 0.082), abs=1e-3)
    assert max(abs(v) for v in others) < 0.04
    for fragment in ("priced a median +1.3 … +8.2% slow at EP 1 and 4.5–37.8% fast at EP 8",
                     "Triton bf16 −12.3% / −15.7% / −37.8%, block fp8 −4.5% / −4.8%, Marlin int4 −23.7% / −23.3% at EP 8"):
        assert " ".join(fragment.split()) in _text(), fragment


@pytest.mark.slow
def test_padding_every_rank_overshoots_at_ep():
    """The alternative VALIDATION.md rules out: SGLang's Triton bf16 layer on H200 priced with every touched expert's
    rows padded over all ranks (not the timed rank's only) errs +41.8% at EP 8."""
    feats = _features("h200_sxm")
    feats = opdb_moe.determined(feats[(feats["kernel_source"] == "sglang_fused_moe_triton") & (feats["dtype"] == "bfloat16")])
    keys = ["num_tokens", "num_experts", "topk", "moe_ep_size", "distribution"]

    def padded(n, e, k, ep, distribution, tile):
        if distribution == "balanced":
            counts = opdb_moe._balanced_counts(n, e, k)[None, :]
        else:
            alpha = float(distribution.rsplit("_", 1)[1])
            rng = np.random.default_rng([0, n, e, k, ep, int(alpha * 1000)])
            counts, _ = opdb_moe._power_law_counts(n, e, k, alpha, rng, opdb_moe.ROUTING_DRAWS)
        return float(np.mean((np.ceil(counts / tile) * tile).sum(axis=1)))

    configs = feats[keys].drop_duplicates()
    for tile in (16, 64):
        configs[f"rows_pad{tile}"] = [padded(*row, tile) for row in configs[keys].itertuples(index=False)]
    everywhere = feats.drop(columns=["rows_pad16", "rows_pad64"]).merge(configs, on=keys)
    held = opdb_moe.leave_one_shape_out(everywhere)
    assert held[held["moe_ep_size"] == 8]["error"].median() == pytest.approx(0.418, abs=2e-3)
    assert "(H200 bf16: +41.8% at EP 8)" in _text()
