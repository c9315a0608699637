"""Recomputes every number of VALIDATION.md "Acceptance decay form" (deterministic: pinned at ~1e-3)."""

import numpy as np
import pytest

from sdsl.acceptance import DEFAULT_DECAY, fit_decay_ratio
from sdsl.fit.acceptance_fit import decay_fit_report, load_per_position, published_k_pairs


@pytest.fixture(scope="module")
def report():
    return decay_fit_report()


def test_published_vectors_are_consistent_with_their_mean_lengths():
    rows = load_per_position()
    assert len(rows) == 3
    for r in rows:  # every source states mean length = 1 + sum of marginal rates
        assert r["mean_accepted_len"] == pytest.approx(1 + r["marginal"].sum(), abs=0.006)
        assert np.all(np.diff(r["marginal"]) <= 0)


def test_default_decay_is_the_model_fit(report):
    assert report["r_model_all"] == pytest.approx(DEFAULT_DECAY, abs=1e-9)
    assert report["r_model_all"] == pytest.approx(0.915, abs=1e-3)
    assert report["r_ngram"] == pytest.approx(1.059, abs=1e-3)  # n-gram acceptance rises with position


def test_leave_one_source_out(report):
    by = {x["held_out"].split(":")[1]: x for x in report["loso"]}
    llama, vllm = by["ggml-org/llama.cpp#24536"], by["vllm-project/vllm#24344"]
    # r fitted on the other source only
    assert llama["decay"]["r"] == pytest.approx(0.805, abs=1e-3)
    assert vllm["decay"]["r"] == pytest.approx(0.975, abs=1e-3)
    # worst |relative error| of tau(j), j < K, predicted from tau(K): decay vs i.i.d.
    assert llama["decay"]["tau_max_abs_rel"] == pytest.approx(0.0508, rel=1e-2)
    assert llama["iid"]["tau_max_abs_rel"] == pytest.approx(0.0067, rel=1e-2)
    assert vllm["decay"]["tau_max_abs_rel"] == pytest.approx(0.0450, rel=1e-2)
    assert vllm["iid"]["tau_max_abs_rel"] == pytest.approx(0.0504, rel=1e-2)
    assert llama["decay"]["marginal_mae"] == pytest.approx(0.0713, rel=1e-2)
    assert vllm["decay"]["marginal_mae"] == pytest.approx(0.0531, rel=1e-2)


def test_ngram_out_of_family(report):
    (ng,) = report["ngram"]
    assert ng["decay"]["tau_max_abs_rel"] == pytest.approx(0.1327, rel=1e-2)
    assert ng["iid"]["tau_max_abs_rel"] == pytest.approx(0.0535, rel=1e-2)


def test_published_k_pair_held_out(report):
    (pair,) = published_k_pairs()
    assert pair["k"] == [2, 4] and pair["tau"] == [1.89, 2.08]
    rows = {p["model"]: p for p in report["k_pairs"]}
    assert rows["decay"]["rel_err_up"] == pytest.approx(0.0131, rel=1e-2)
    assert rows["decay"]["rel_err_down"] == pytest.approx(-0.0090, rel=1e-2)
    assert rows["iid"]["rel_err_up"] == pytest.approx(0.0466, rel=1e-2)
    assert rows["iid"]["rel_err_down"] == pytest.approx(-0.0291, rel=1e-2)


def test_fit_recovers_a_known_ratio():
    from sdsl.acceptance import decay_conditional

    m = np.cumprod(decay_conditional(0.85, 0.9, 6))
    assert fit_decay_ratio([m]) == pytest.approx(0.9, abs=1e-3)
