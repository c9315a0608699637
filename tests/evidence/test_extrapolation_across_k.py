"""VALIDATION.md "Per-position rates across k", MTP measured at k = 1: the one rule across k (the proposer group's
decay ratio: a single MTP module reused at every depth, r = 0.71, fitted on two other sources' sweeps; a drafter
with one module per position keeps r = 1) against what published runs at larger k measure; a pick beyond the measured k is
still flagged (sdsl.plan.robust.beyond_measured)."""

from __future__ import annotations

import pandas as pd
import pytest

from sdsl._paths import data_path
from sdsl.acceptance import Acceptance, group_decay
from sdsl.plan.robust import beyond_measured, measured_k


def _catalog_tau(row_id: str) -> float:
    rows = pd.read_csv(data_path("acceptance", "catalog.csv")).set_index("row_id")
    return float(rows.loc[row_id, "tau"])


def test_deepseek_v3_k1_carried_to_lmsys_mtp_windows_over_predicts_less_than_iid():
    """DeepSeek-V3's report: tau 1.85 at k = 1 (MTP acceptance 85%). LMSYS's SGLang runs of DeepSeek-V3 (ISL 65,536)
    with a 3- and a 4-token MTP window (k = 2 and 3 drafts beside the verified token) accept 2.18 and 2.44: +8% and
    +6% with the chained module's ratio (no row of LMSYS's in its fit), +18% and +31% i.i.d."""
    pub = pd.read_csv(data_path("published", "speculative.csv"))
    lmsys = pub[pub["source"].str.contains("lm-sys.github.io") & pub["mean_accepted_len"].notna()]
    measured = dict(zip(lmsys["gamma"].str.extract(r"^(\d)-token")[0].astype(int) - 1, lmsys["mean_accepted_len"]))
    assert measured == {2: 2.18, 3: 2.44}
    tau1 = _catalog_tau("deepseek-v3-report-mtp-k1")
    over = {}
    for name, r in (("shipped", group_decay("mtp")), ("iid", 1.0)):
        k1 = Acceptance.from_accepted_length(tau1, 1, decay=r)
        over[name] = [float(k1.tau(k)) / tau - 1 for k, tau in measured.items()]
    assert over["shipped"] == pytest.approx([0.084, 0.059], abs=0.002)
    assert over["iid"] == pytest.approx([0.180, 0.306], abs=0.002)
    k1 = Acceptance.from_accepted_length(tau1, 1, decay=group_decay("mtp"))
    assert measured_k(k1) == 1 and beyond_measured("mtp", k1, 3) and not beyond_measured("mtp", k1, 1)


def test_deepseek_r1_one_module_chained_k1_to_k5_with_its_source_held_out():
    """TensorRT-LLM's DeepSeek-R1 sweep (its one MTP module chained k = 1-5 times, 8x B200): carried from k = 1 with the
    chained module's ratio fitted without that source (on vLLM's DeepSeek-V4 rates alone: 0.615), -5% ... -11%;
    i.i.d. +7% ... +63%."""
    from sdsl.fit.acceptance_fit import fit_decay_groups

    taus = [_catalog_tau(f"trtllm-blog1-deepseek-r1-mtp-k{k}") for k in range(1, 6)]
    assert taus == [1.92, 2.58, 2.82, 2.99, 3.01]
    r = fit_decay_groups(exclude_sources=("NVIDIA/TensorRT-LLM",))["mtp_chained"]
    for decay, lo, hi in ((r, -0.12, -0.05), (1.0, 0.07, 0.64)):
        k1 = Acceptance.from_accepted_length(taus[0], 1, decay=decay)
        errors = [float(k1.tau(k)) / t - 1 for k, t in zip(range(2, 6), taus[1:])]
        assert lo <= min(errors) and max(errors) <= hi


def test_inkling_k1_carried_to_k8_over_predicts_its_own_k8_runs():
    """vLLM PR #48892 measured Inkling's MTP on GSM8K at k = 1 and k = 8 (two runs each): carried from k = 1, tau(8)
    is 6-12% above the k = 8 runs, the same sign as DeepSeek-V3's."""
    pairs = [("vllm-pr48892-inkling-mtp-k1-gsm8k-c64", "vllm-pr48892-inkling-mtp-k8-gsm8k-c64"),
             ("vllm-pr48892-inkling-mtp-k1-gsm8k-comment", "vllm-pr48892-inkling-mtp-k8-gsm8k-comment")]
    r = group_decay("mtp", target="Inkling")  # one MTP module per position: i.i.d.
    assert r == 1.0
    over = [float(Acceptance.from_accepted_length(_catalog_tau(a), 1, decay=r).tau(8)) / _catalog_tau(b) - 1
            for a, b in pairs]
    assert over == pytest.approx([0.125, 0.063], abs=0.002)


def test_what_optimize_picks_for_deepseek_v3_mtp():
    """CHANGELOG: with the chained module's ratio `optimize` picks k 3 for DeepSeek-V3 + MTP (8x H200, batch 1, the
    catalog's k = 1 acceptance); carried i.i.d. the same acceptance made it pick k 7."""
    import sdsl

    assert sdsl.optimize("deepseek-v3", "h200", proposers=["mtp"], tp=8).pick["gamma"] == 3
    iid = Acceptance.from_accepted_length(_catalog_tau("deepseek-v3-report-mtp-k1"), 1, decay=1.0)
    assert sdsl.optimize("deepseek-v3", "h200", proposers=["mtp"], tp=8, acceptance=iid).pick["gamma"] == 7
