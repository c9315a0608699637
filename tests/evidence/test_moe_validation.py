"""Every number VALIDATION.md states about the published mixture-of-experts rows (``sdsl validate moe``),
recomputed, and the expert-union pricing held against two wrong forms that the same numbers reject.

The values are relative errors under the shipped latency calibration, on the roofline alone (no engine host time)
unless a test says it prices each row with its engine's profile (the default of ``validate_moe``); a change to the
calibration or to the step model moves them, and then VALIDATION.md's mixture-of-experts section and this file
are updated together (``sdsl validate moe --json``). Oracle input: the accepted length of every speculative row.
"""

from __future__ import annotations

import numpy as np
import pytest

import sdsl.roofline.step_ops as step_ops
from sdsl.catalog.models import get_model
from sdsl.speculation.proposers import make_proposer
from sdsl.validation.moe_validation import notes_fields, source_label, validate_moe, verify_growth

A = 2e-3  # absolute tolerance on relative errors (the values are deterministic)


@pytest.fixture(scope="module")
def result():
    return validate_moe(engine=None)  # the roofline alone


def test_row_accounting(result):
    assert len(result["rows"]) == 71 and len(result["unpriced"]) == 30  # of the 101 moe rows
    c = result["claims"]
    assert c["rows"] == 64 and c["models"] == ["llama-4-scout", "qwen3-235b-a22b", "qwen3-30b-a3b"]
    assert result["goals_met"]["coverage"]
    reasons = " ".join(u["reason"] for u in result["unpriced"])
    for why in ("A800", "RTX Pro 6000", "no accepted length", "DFlash", "the GPU is not stated", "GLM-5.2",
                "DeepSeek-V3.2", "not a tensor-parallel degree"):
        assert why in reasons
    assert result["oracle_inputs"] == ["accepted length (tau) of every speculative row"]
    assert result["model"] == "roofline, no engine host time"


def test_assumptions_are_recorded(result):
    bundle = [r for r in result["rows"] if r["source"] == "sgl-project/SpecForge:data.json"]
    assert len(bundle) == 42 and all(any(a.startswith("assumed_tp") for a in r["assumptions"]) for r in bundle)
    assert {(r["target"], r["tp"]) for r in bundle} == {("qwen3-30b-a3b", 1), ("qwen3-235b-a22b", 4),
                                                        ("llama-4-scout", 2), ("llama-3.3-70b", 2)}
    capped = [r for r in result["rows"] if any(a.startswith("batch_capped") for a in r["assumptions"])]
    assert sorted(r["row"] for r in capped) == [11, 12] and {r["batch"] for r in capped} == {20}


def test_plain_decode_claim(result):
    s = result["claims"]["plain"]
    assert s["n"] == 18
    assert s["median_abs_error"] == pytest.approx(0.2740, abs=A)
    assert s["median_signed_error"] == pytest.approx(0.0933, abs=A)
    assert s["worst_error"] == pytest.approx(4.0688, abs=5 * A)
    by = result["claims"]["plain_by_batch"]
    assert by["1"]["median_signed_error"] == pytest.approx(-0.1658, abs=A)
    assert by["2-8"]["median_abs_error"] == pytest.approx(0.2038, abs=A)
    assert by[">8"]["median_signed_error"] == pytest.approx(0.5129, abs=A)
    assert not result["goals_met"]["plain"]


def test_ratio_claim(result):
    c = result["claims"]
    assert c["ratio"]["n"] == 46
    assert c["ratio"]["median_abs_error"] == pytest.approx(0.2238, abs=A)
    assert c["ratio"]["median_signed_error"] == pytest.approx(0.0602, abs=A)
    assert c["ratio"]["worst_error"] == pytest.approx(1.2303, abs=A)
    by = c["ratio_by_source"]
    assert by["sgl-project/SpecForge:data.json"]["median_abs_error"] == pytest.approx(0.0859, abs=A)
    assert by["sgl-project/SpecForge#339"]["median_signed_error"] == pytest.approx(0.6115, abs=A)
    assert by["Tencent/AngelSlim#163"]["median_signed_error"] == pytest.approx(0.7873, abs=A)
    assert c["dense_comparison"]["ratio"]["median_abs_error"] == pytest.approx(0.3042, abs=A)
    assert not result["goals_met"]["ratio"]


def test_outcome_claim(result):
    o = result["claims"]["outcome"]
    assert (o["n"], o["right"], o["measured_losses"], o["predicted_losses"]) == (46, 31, 15, 0)
    losses = [r for r in result["rows"] if r.get("outcome") == "loses"]
    assert {r["target"] for r in losses} == {"qwen3-30b-a3b"} and {r["hardware"] for r in losses} == {"h100-sxm"}
    assert not result["goals_met"]["outcome"]


def test_verify_growth_batch_one(result):
    groups = {g["source"]: g for g in result["verify_growth"] if g["batch"] == 1}
    assert groups["sgl-project/SpecForge#339"]["slope"] == pytest.approx(0.864, abs=5 * A)
    assert groups["sgl-project/SpecForge#339"]["intercept_s"] == pytest.approx(3.67e-3, abs=5e-5)
    assert groups["Tencent/AngelSlim#163"]["slope"] == pytest.approx(0.965, abs=5 * A)
    assert groups["Tencent/AngelSlim#163"]["intercept_s"] == pytest.approx(5.08e-3, abs=5e-5)
    assert all(g["informative"] for g in groups.values())


@pytest.mark.parametrize("wrong", ["weights once per step", "every expert every step"])
def test_wrong_expert_forms_fail_the_growth_check(monkeypatch, wrong):
    """Pricing a step's experts as a 1-token step's (a dense model's 'weights once', which peers assume) or as
    every expert makes the priced step barely grow with the verified tokens: measured growth is then 4-5x the
    priced one, far outside the 0.86-0.96 of the expert-union model."""
    real = step_ops.expert_rows
    tokens_for = {"weights once per step": lambda t: 0.0 * t + 1.0, "every expert every step": lambda t: 0.0 * t + 1e6}

    def wrong_rows(shapes, tokens, params):
        distinct, _ = real(shapes, tokens_for[wrong](np.asarray(tokens, dtype=float)), params)
        return distinct, np.asarray(tokens, dtype=float) * shapes.top_k

    monkeypatch.setattr(step_ops, "expert_rows", wrong_rows)
    rows = validate_moe(engine=None)["rows"]
    slopes = [g["slope"] for g in verify_growth(rows, min_spread_s=0.0) if g["batch"] == 1]
    assert len(slopes) == 2 and min(slopes) > 3.0


def test_release_head_shapes_on_moe_targets():
    """EAGLE-3 heads on MoE targets are dense layers of the released config's width, not the expert width."""
    head = make_proposer("eagle3")
    assert head.head_spec(get_model("gpt-oss-20b")).d_ff == 17280  # the target's d_ff is the expert width, 2880
    assert head.head_spec(get_model("qwen3-30b-a3b")).d_ff == 12288
    spec = head.head_spec(get_model("llama-4-scout"))
    assert (spec.d_ff, spec.n_head, spec.n_kv_head, spec.is_moe) == (32768, 40, 8, False)
    assert head.head_spec(get_model("llama-4-maverick")).d_ff == 6 * 5120  # no released config: 6·d default
    assert head.head_spec(get_model("qwen3-8b")).d_ff == get_model("qwen3-8b").d_ff  # dense: the target's


def test_notes_and_source_labels():
    f = notes_fields("class=moe; engine=SGLang; ep=1; dataset=mtbench:20; plain=222.47 tok/s (decode.csv); "
                     "quote=«a; b=c»; free text; x=y")
    assert f == {"class": "moe", "engine": "SGLang", "ep": "1", "dataset": "mtbench:20",
                 "plain": "222.47 tok/s (decode.csv)"}
    assert source_label("github-issue:sgl-project/SpecForge#339 (description by X)") == "sgl-project/SpecForge#339"
    assert source_label("github:sgl-project/SpecForge@a6b6:docs/x/data.json (SpecBundle)") == \
        "sgl-project/SpecForge:data.json"


def test_validation_md_states_these_numbers():
    from sdsl._paths import REPO_ROOT

    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    for fragment in ("median **27.4%**, mean 60.4%, worst +406.9%, median signed +9.3%",
                     "median **22.4%**, mean 33.8%, worst +123.0%, median signed +6.0%", "**31 of 46 (67%)**",
                     "**β = 0.86, a = +3.7 ms**", "**β = 0.96, a = +5.1 ms**", "| **8.6%** (−1.9%) |",
                     "61.2% (+61.2%)", "78.7% (+78.7%)", "ratio median of 20.1% and still 31 of 46",
                     "gives 20.3% and 37 of 46 (80%), predicting 8 losses",
                     "26.1%, 16.5%, 20.8% and 29.2% instead of 8.0%, 4.0%, 25.3% and 30.4%"):
        assert " ".join(fragment.split()) in text, f"VALIDATION.md no longer says {fragment!r}"


def test_host_time_cross_checks():
    """The two host-time cross-checks VALIDATION.md states (not shipped): SGLang's sourced 1.107 ms per speculative
    step, and the 3.90 ms fitted on the development set's dense SGLang rows."""
    for host, median, right, losses in ((1.107e-3, 0.2013, 31, 0), (3.90e-3, 0.2031, 37, 8)):
        c = validate_moe(engine=None, price_options={"overhead_s": host})["claims"]
        assert c["ratio"]["median_abs_error"] == pytest.approx(median, abs=A)
        assert (c["outcome"]["right"], c["outcome"]["predicted_losses"]) == (right, losses)


def test_tp_sensitivity():
    from sdsl.validation.moe_validation import tp_sensitivity

    rows = tp_sensitivity()
    assert len(rows) == 35
    by_model = {}
    for r in rows:
        (tp, err), (tp2, err2) = r["ratio_error_by_tp"].items()
        assert tp2 == 2 * tp
        by_model.setdefault(r["target"], []).append((abs(err), abs(err2)))
    med = {m: tuple(np.median(np.array(v), axis=0)) for m, v in by_model.items()}
    expect = {"qwen3-30b-a3b": (0.080, 0.261), "qwen3-235b-a22b": (0.040, 0.165), "llama-4-scout": (0.253, 0.208),
              "llama-3.3-70b": (0.304, 0.292)}
    for m, (a, b) in expect.items():
        assert med[m] == pytest.approx((a, b), abs=1.5e-3)


def test_the_sglang_profile():
    """VALIDATION.md "With the SGLang profile the rows ran": each row priced with its SGLang build by date."""
    from sdsl._paths import REPO_ROOT

    out = validate_moe()  # the default: each row's own engine (all of them SGLang) by its date
    assert out["engine_profiles"] == ["sglang-2025-01", "sglang-2025-10"]
    assert validate_moe(engine="sglang")["claims"] == out["claims"]
    c = out["claims"]
    assert c["plain"]["median_abs_error"] == pytest.approx(0.4155, abs=A)
    assert c["plain"]["median_signed_error"] == pytest.approx(0.4155, abs=A)
    assert c["ratio"]["median_abs_error"] == pytest.approx(0.1366, abs=A)
    assert c["ratio"]["median_signed_error"] == pytest.approx(-0.1167, abs=A)
    assert c["ratio"]["worst_error"] == pytest.approx(-0.5037, abs=A)
    assert (c["outcome"]["right"], c["outcome"]["predicted_losses"]) == (44, 13)
    assert out["goals_met"] == {"plain": False, "ratio": True, "outcome": True, "coverage": True}
    by = c["ratio_by_source"]
    assert by["sgl-project/SpecForge#339"]["median_abs_error"] == pytest.approx(0.0647, abs=A)
    assert by["Tencent/AngelSlim#163"]["median_abs_error"] == pytest.approx(0.0372, abs=A)
    assert by["sgl-project/SpecForge:data.json"]["median_signed_error"] == pytest.approx(-0.1820, abs=A)
    assert c["plain_by_batch"][">8"]["median_signed_error"] == pytest.approx(0.7977, abs=A)
    steps = {(r["source"].split()[0], r["tp"]): 1e3 / r["predicted"] for r in out["rows"]
             if r["proposer"] is None and r["batch"] == 1 and r["target"] == "qwen3-30b-a3b" and r["tp"] > 1}
    assert sorted(round(v, 2) for v in steps.values()) == [3.41, 4.12]
    growth = sorted((g["source"], round(g["slope"], 2), round(1e3 * g["intercept_s"], 1)) for g in out["verify_growth"]
                    if g["batch"] == 1 and g["informative"])
    assert growth == [("Tencent/AngelSlim#163", 0.97, 4.2), ("sgl-project/SpecForge#339", 0.89, 2.6)]
    roof = validate_moe(engine=None)
    assert roof["engine_profiles"] == ["ideal"] and roof["model"] == "roofline, no engine host time"
    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    for fragment in ("median **13.7%**, worst −50.4%, median signed −11.7%", "**44 of 46 (96%)**",
                     "from 61.2% to 6.5% on SpecForge #339", "from 78.7% to 3.7% on AngelSlim #163",
                     "priced at 4.12 ms on TP 2", "β = 0.89, a = +2.6 ms and β = 0.97, a = +4.2 ms"):
        assert " ".join(fragment.split()) in text, f"VALIDATION.md no longer says {fragment!r}"


def test_a_row_whose_engine_has_no_profile_is_refused():
    import dataclasses

    from sdsl.errors import InvalidInputError
    from sdsl.validation.moe_validation import moe_rows, row_engine

    spec = dataclasses.replace(moe_rows()[0][0], engine="mlc-llm")
    with pytest.raises(InvalidInputError, match="no execution profile"):
        row_engine(spec, "row")
    assert row_engine(spec, None).name == "ideal"
