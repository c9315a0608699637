"""The 80% bands on predicted tokens/s, TPOT and speedup (sdsl.speculation.bands, sdsl.validation.bands): they hold
the point estimate, widen with how indirect the acceptance is and for an engine profile without validation rows,
and the coverage check is right on synthetic residuals (the CLI's JSON: tests/cli/test_bands_cli.py; the shipped file
recomputed: tests/evidence/test_bands_evidence.py; VALIDATION.md against it: tests/integrity/test_bands_document.py)."""

from __future__ import annotations

import numpy as np
import pytest

from sdsl.acceptance import Acceptance
from sdsl.speculation.bands import BAND_FIELDS, acceptance_class, combine, load_bands
from sdsl.speculation.step import price_step
from sdsl.validation.bands import Residual, class_bands, conformal_band, coverage, symmetric_band


def _width(step, name="tokens_per_s"):
    """Relative width log(high / low) of a figure's band."""
    return np.log(np.asarray(getattr(step, f"{name}_high")) / np.asarray(getattr(step, f"{name}_low")))


@pytest.mark.parametrize("target, proposer, shape, engine", [
    ("llama-3.1-8b", "eagle3", {"gamma": [0, 1, 3, 6]}, None),
    ("llama-3.1-8b", "ngram", {"gamma": 4}, "vllm-2025-07"),
    ("llama-3.1-8b", "eagle3", {"tree": "4,4,16"}, "sglang"),
    ("qwen3-30b-a3b", "eagle3", {"gamma": 3}, "sglang"),
])
def test_band_holds_the_point_estimate(target, proposer, shape, engine):
    step = price_step(target, proposer, "h100-sxm", batch=np.array([1, 8, 64])[:, None], engine=engine, **shape)
    for name in ("tokens_per_s", "plain_tokens_per_s", "speedup", "tpot_s"):
        x, lo, hi = (np.asarray(v) for v in (getattr(step, name), getattr(step, f"{name}_low"), getattr(step, f"{name}_high")))
        assert np.all(lo <= x * (1 + 1e-12)) and np.all(x <= hi * (1 + 1e-12)), name
        assert np.all(hi > lo), name


def test_moe_target_takes_the_moe_classes():
    info = price_step("qwen3-30b-a3b", "eagle3", "h100-sxm", gamma=3, engine="sglang").band
    assert info["target_class"] == "moe" and info["speculative_class"].startswith("moe_speculative")
    assert info["speedup_class"].startswith("moe_speedup") and info["plain_class"].startswith("moe_decode")
    entry = load_bands()["latency"]["moe_speculative"]  # a borrowed band says where it came from
    assert info["speculative_class"] == ("moe_speculative" if entry["own"] else f"moe_speculative -> {entry['from_class']}")


def _with_source(source):
    acc = Acceptance((0.8,), 0.9, source)
    return price_step("llama-3.1-8b", "eagle3", "h100-sxm", acceptance=acc, gamma=4, batch=[1, 32], engine="vllm-2025-07")


def test_band_widens_from_given_to_measured_to_same_target_to_transferred():
    steps = [_with_source(s) for s in ("iid", "accepted-length", "catalog[same-target]:eagle3/chat",
                                       "catalog[other-targets]:eagle3/chat")]
    assert [s.band["acceptance_class"].split(" ")[0] for s in steps] == ["given", "measured", "same-target", "transferred"]
    for name in ("tokens_per_s", "speedup", "tpot_s"):
        widths = [float(_width(s, name)[0]) for s in steps]
        assert widths == sorted(widths) and len(set(widths)) == 4, name
    assert np.allclose([float(_width(s, "plain_tokens_per_s")[0]) for s in steps], _width(steps[0], "plain_tokens_per_s")[0])


def test_transferred_band_combines_root_sum_square_in_log_space():
    bands = load_bands()
    step = _with_source("catalog[any]:eagle3/chat")
    lat = bands["latency"]["speculative:vllm"]
    acc = bands["acceptance"]["transferred"]
    low, high = combine((lat["low"], lat["high"]), (acc["low"], acc["high"]))
    assert low == pytest.approx(-np.hypot(lat["low"], acc["low"])) and high == pytest.approx(np.hypot(lat["high"], acc["high"]))
    assert np.allclose(np.log(step.tokens_per_s_high / step.tokens_per_s), high)
    assert np.allclose(np.log(step.tokens_per_s_low / step.tokens_per_s), low)
    assert np.allclose(np.log(step.tpot_s / step.tpot_s_low), high)


def test_profile_without_rows_says_so_and_gets_the_widest_band_of_its_class():
    bands = load_bands()
    assert "vllm-2026-03" not in bands["profiles_with_rows"] and "vllm-2025-07" in bands["profiles_with_rows"]
    tau = dict(tau=3.0, gamma=4)  # τ given: the step-time band alone
    with_rows = price_step("llama-3.1-8b", "eagle3", "h100-sxm", engine="vllm-2025-07", **tau)
    without = price_step("llama-3.1-8b", "eagle3", "h100-sxm", engine="vllm-2026-03", **tau)
    assert with_rows.band["profile_has_rows"] and not without.band["profile_has_rows"]
    assert float(_width(without)) >= float(_width(with_rows)) - 1e-12  # equal (to rounding) where the class borrowed the pool
    low, high = without.band["log_offsets"]["speculative"]
    for name, entry in bands["latency"].items():
        if name.startswith("speculative"):
            assert low <= entry["low"] and high >= entry["high"], name
    assert "priced no validation row" in without.report()


def test_acceptance_class_of_each_source():
    assert acceptance_class("catalog[same-target]:eagle3/chat (tree model)") == "same-target"
    assert acceptance_class("catalog[same-family]:ngram/code") == "transferred"
    assert acceptance_class("given:eagle3") == acceptance_class("accepted-length") == "measured"
    assert acceptance_class("given") is acceptance_class("iid") is None
    assert acceptance_class("sdsl-plane") == "widest"


# --- the band and its coverage check on synthetic residuals ------------------------------------------------------

def test_conformal_band_order_statistics():
    r = np.arange(1, 20) - 10.0  # -9..9, n = 19: ranks floor(0.1 * 20) = 2 and ceil(0.9 * 20) = 18
    assert conformal_band(r) == (-8.0, 8.0)
    assert conformal_band(r + 20) == (0.0, 28.0)  # widened to hold the point estimate (r = 0)
    assert conformal_band(r[:8]) is None  # under 9 residuals one side is infinite


def test_symmetric_band_is_the_absolute_residual_quantile():
    r = np.arange(1, 20) - 10.0  # |r| sorted: 0, 1, 1, ..., 9, 9; rank ceil(0.8 * 20) = 16 -> 8
    assert symmetric_band(r) == (-8.0, 8.0)
    assert symmetric_band(r + 20) == (-26.0, 26.0)  # 11..29: a one-signed class still gets both sides (the form's cost)
    assert symmetric_band(-r) == symmetric_band(r) and symmetric_band(r[:3]) is None
    rows = _rows({"A": np.arange(-9, 10), "B": [0.0] * 10, "C": [50.0] * 10})
    assert class_bands(rows, "latency", symmetric=True)["speculative"]["high"] == 50.0


def _rows(values_by_source, cls="speculative"):
    return [Residual("latency", (cls,), float(v), src, f"{src}#{i}") for src, vals in values_by_source.items()
            for i, v in enumerate(vals)]


def test_coverage_holds_each_source_out_exactly():
    rows = _rows({"A": np.arange(-9, 10), "B": [0.0] * 10, "C": [50.0] * 10})
    # A out: band of B + C = [0, 50] holds 0..9 (10 of 19); B out: [-7, 50] holds all 10; C out: [-7, 7] holds none
    cov = coverage(rows, "latency")["speculative"]
    assert (cov["inside"], cov["checked"]) == (20, 39) and cov["met"] is False
    assert class_bands(rows, "latency", exclude_source="C")["speculative"]["low"] == -7.0


def test_coverage_per_source_counts_each_source_once():
    rows = _rows({"A": np.arange(-9, 10), "B": [0.0] * 10, "C": [50.0] * 10})
    # the shares of the case above: A 10/19, B 10/10, C 0/10; each source once is their mean, not 20 of 39 rows
    cov = coverage(rows, "latency")["speculative"]
    assert cov["by_source"] == pytest.approx((10 / 19 + 1.0 + 0.0) / 3)
    assert cov["sources_checked"] == 3 and cov["met_by_source"] is None  # under 9 sources: not judged


def test_one_outlying_source_with_many_rows_sets_the_row_coverage_not_the_per_source_one():
    """Eleven sources of 8 rows from one distribution and one of 40 rows shifted beyond them all: over the rows the
    shifted source's misses pull the coverage under the goal; with each source counted once they are one source in
    twelve."""
    rng = np.random.default_rng(11)
    rows = _rows({**{f"s{i}": rng.normal(0.0, 0.1, 8) for i in range(11)}, "big": rng.normal(1.0, 0.05, 40)})
    cov = coverage(rows, "latency")["speculative"]
    assert cov["coverage"] < 0.65 and cov["met"] is False
    assert 0.7 <= cov["by_source"] <= 0.9 and cov["met_by_source"] is True and cov["sources_checked"] == 12


def test_coverage_near_the_level_without_a_source_effect_and_below_it_with_one():
    rng = np.random.default_rng(7)
    plain = _rows({f"s{i}": rng.normal(0.0, 0.1, 20) for i in range(12)})
    shifted = _rows({f"s{i}": rng.normal(rng.normal(0.0, 0.3), 0.1, 20) for i in range(12)})
    c_plain = coverage(plain, "latency")["speculative"]
    c_shift = coverage(shifted, "latency")["speculative"]
    assert 0.7 <= c_plain["coverage"] <= 0.9 and c_plain["met"]
    assert 0.7 <= c_plain["row_held_out"] <= 0.9
    assert c_shift["coverage"] < c_shift["row_held_out"]


def test_profile_check_holds_each_profile_out_with_its_sources():
    from sdsl.validation.band_checks import profile_check

    rng = np.random.default_rng(3)
    rows = [Residual("latency", ("speculative", f"speculative:{fam}"), float(v), f"{fam}-src{j}", f"{fam}{j}#{i}",
                     f"{fam}-2025")
            for fam, shift in (("a", 0.0), ("b", 0.0), ("c", 1.0)) for j in range(2)
            for i, v in enumerate(rng.normal(shift, 0.05, 10))]
    check = profile_check(rows)["speculative"]
    # c (shifted by 1) lies outside the band of a and b alone: its own rows never set its band; a, like b, lies
    # mostly inside the envelope of b's band and the pooled band of b and c
    assert check["by_profile"]["c-2025"]["inside"] == 0 and check["by_profile"]["c-2025"]["high"] < 0.5
    assert check["by_profile"]["a-2025"]["inside"] >= 15 and check["n"] == 60


def test_a_class_of_few_sources_borrows_its_parents_rows_and_says_so():
    """Sources, not rows, decide: 30 rows of one engine's two sources borrow the pooled class's rows (their own kept);
    nine sources of the pooled class give it a band of its own; a parent short of sources borrows in turn."""
    rng = np.random.default_rng(1)
    pooled = {f"s{i}": rng.normal(0.0, 0.1, 3) for i in range(9)}
    rows = [Residual("latency", ("speculative",), float(v), s, f"{s}#{i}") for s, vals in pooled.items()
            for i, v in enumerate(vals)]
    rows += [Residual("latency", ("speculative", "speculative:new"), 2.0 + 0.01 * i, f"e{i % 2}", f"e#{i}")
             for i in range(30)]
    bands = class_bands(rows, "latency")
    new, spec = bands["speculative:new"], bands["speculative"]
    assert spec["own"] and spec["pool_sources"] == 11 and not new["own"] and new["from_class"] == "speculative"
    assert (new["low"], new["high"]) == (spec["low"], spec["high"]) and new["pool_n"] == 57
    old_rule = class_bands(rows, "latency", min_sources=0)["speculative:new"]  # the row rule: 30 rows are enough
    assert old_rule["own"] and old_rule["low"] == 0.0 and old_rule["high"] > 2.0
    moe = [Residual("latency", ("moe_speculative",), 5.0, "m", f"m#{i}") for i in range(20)]
    chain = class_bands(rows[:27] + moe, "latency")["moe_speculative"]  # 1 + 9 sources: speculative's rows suffice
    assert chain["from_class"] == "speculative" and chain["pool_sources"] == 10
    short = class_bands([r for r in rows[:27] if r.source not in ("s0", "s1")] + moe, "latency")["moe_speculative"]
    assert short["from_class"] == "all" and not short["own"]  # 1 + 7 sources: up to the root


def test_the_weighted_form_counts_each_source_once():
    from sdsl.validation.bands import pooled_band

    rows = _rows({"big": [1.0] * 90, **{f"s{i}": [float(-i)] for i in range(1, 10)}})
    low, high = pooled_band(rows)
    assert (low, high) == (-8.0, 0.0)  # one source of 90 rows is a tenth of the weight, not 90% of it
    assert conformal_band([r.r for r in rows]) == (0.0, 1.0)


# --- the shipped file --------------------------------------------------------------------------

def test_shipped_bands_name_their_provenance():
    bands = load_bands()
    assert bands["level"] == 0.8 and bands["command"] == "sdsl validate bands --write"
    for kind, names in (("latency", ("decode", "speculative", "moe_decode", "moe_speculative", "moe_speedup")),
                        ("acceptance", ("catalog", "same-target", "transferred", "measured"))):
        for name in names:
            entry = bands[kind][name]
            assert entry["low"] <= 0.0 <= entry["high"] and entry["n"] == sum(entry["sources"].values()), name
            assert name in bands["coverage"][kind]


def test_a_coverage_just_outside_the_goal_never_prints_as_its_edge():
    """139 of 199 (69.85%) is below the 70% goal: printed 69.8%, not a "70%" beside "not met"; inside the goal or away
    from its edges, whole percents."""
    from sdsl.validation.bands import coverage_percent

    assert [coverage_percent(x) for x in (139 / 199, 0.704, 0.9, 0.903, 0.8955, 0.27, 1.0)] == \
        ["69.8%", "70%", "90%", "90.3%", "90%", "27%", "100%"]
