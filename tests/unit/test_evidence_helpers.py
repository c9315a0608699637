"""The helpers every fit check and validation shares (sdsl._evidence): the published-row loader, the
leave-one-group-out loop, the error summary and its report text, and the floor a monotone form cannot go below."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdsl._evidence import error_phrase, leave_one_group_out, published_rows, summarize_errors


def test_summary_keeps_the_sign_and_the_worst_case():
    s = summarize_errors([0.1, -0.3, 0.05, 0.2])
    assert s["n"] == 4 and s["worst"] == -0.3 and s["worst_abs"] == 0.3
    assert s["median_abs"] == pytest.approx(0.15) and s["pooled_abs"] == pytest.approx(0.1625)
    assert s["median_signed"] == pytest.approx(0.075) and s["share_over"] == 0.75
    assert summarize_errors([]) == {"n": 0}


def test_summary_under_a_reports_own_names():
    s = summarize_errors([0.1, -0.3, 0.05, 0.2], {"median_abs_error": "median_abs", "worst_error": "worst"})
    assert s == {"n": 4, "median_abs_error": pytest.approx(0.15), "worst_error": -0.3}
    assert summarize_errors([], {"median_abs_error": "median_abs"}) == {"n": 0}


def test_leave_one_group_out_holds_each_group_out_once():
    x = np.array([1.0, 2.0, 3.0, 10.0, 11.0])
    g = np.array(["a", "a", "a", "b", "b"])
    # predict a group's mean from the other group's: the held-out group's rows never enter its fit
    out = leave_one_group_out(g, lambda held: float(x[g != held].mean() - x[g == held].mean()))
    assert list(out) == ["a", "b"] and out["a"] == pytest.approx(8.5) and out["b"] == pytest.approx(-8.5)


def test_published_rows_filter_by_row_set():
    every = published_rows("speculative")
    dev = published_rows("speculative", ("dev",))
    assert 0 < len(dev) < len(every) and all((r.get("row_set") or "dev") == "dev" for r in dev)


def test_error_phrase_prints_percent_with_the_sign_where_asked():
    s = summarize_errors([0.1, -0.3, 0.05, 0.2])
    assert error_phrase(s, ("median", "median_abs"), ("worst", "worst", "+"), ("bias", "median_signed", "+")) == \
        "median 15.0%, worst -30.0%, bias +7.5%"


def test_monotone_floor_is_zero_for_a_non_decreasing_series_and_exact_for_one_drop():
    import pandas as pd

    from sdsl._evidence import monotone_floor

    df = pd.DataFrame({"s": [1, 1, 1, 2, 2], "m": [4, 1, 2, 1, 2], "time_s": [3.0, 2.1, 1.0, 1.0, 2.0]})
    got = monotone_floor(df, ["s"], "m")
    # series 1 measures 2.1 at m = 1 and 1.0 at m = 2: (2.1 - 1.0) / (2.1 + 1.0); series 2 only rises
    assert got == pytest.approx([1.1 / 3.1] * 3 + [0.0, 0.0])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(1e-6, 1e-3), min_size=2, max_size=12), st.lists(st.floats(0.0, 1e-3), min_size=12,
                                                                          max_size=12))
def test_no_prediction_monotone_in_the_work_beats_the_floor(times, steps):
    """The bound holds for every non-decreasing prediction: its worst |p/t - 1| is never below it."""
    import pandas as pd

    from sdsl._evidence import monotone_floor

    df = pd.DataFrame({"s": 0, "m": np.arange(len(times)), "time_s": times})
    floor = monotone_floor(df, ["s"], "m").max()
    prediction = 1e-6 + np.cumsum(steps[:len(times)])  # any non-decreasing prediction
    assert np.max(np.abs(prediction / np.asarray(times) - 1.0)) >= floor - 1e-12
    # and the pair bound is reached: the two rows of the largest drop priced at their harmonic-type midpoint
    t = np.asarray(times)
    i, j = max(((a, b) for a in range(len(t)) for b in range(a + 1, len(t))), key=lambda p: (t[p[0]] - t[p[1]]) / (t[p[0]] + t[p[1]]))
    if t[i] > t[j]:
        x = 2 * t[i] * t[j] / (t[i] + t[j])
        assert max(abs(x / t[i] - 1), abs(x / t[j] - 1)) == pytest.approx(floor)


def test_a_rows_stated_context_is_read_in_both_forms_and_an_unstated_one_takes_the_default():
    from sdsl.validation.published_rows import row_context

    assert row_context({"context_tokens": "ISL 1,024, OSL 512"}, 9) == 1024 + 256
    assert row_context({"context_tokens": "128K context + 1024 output"}, 9) == 128 * 1024 + 512
    assert row_context({"context_tokens": "1K context + 1024 output"}, 9) == 1024 + 512
    assert row_context({"context_tokens": "MT-bench (20 prompts)"}, 9) == 9
