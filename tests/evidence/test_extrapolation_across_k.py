"""VALIDATION.md "Per-position rates across k", MTP measured at k = 1: the one rule across k (the proposer group's
decay ratio, r = 1 for MTP) carries a k = 1 measurement to larger k above what published runs at those k measure, so
a pick beyond the measured k is flagged (sdsl.plan.robust.beyond_measured)."""

from __future__ import annotations

import pandas as pd
import pytest

from sdsl._paths import data_path
from sdsl.acceptance import Acceptance, group_decay
from sdsl.plan.robust import beyond_measured, measured_k


def _catalog_tau(row_id: str) -> float:
    rows = pd.read_csv(data_path("acceptance", "catalog.csv")).set_index("row_id")
    return float(rows.loc[row_id, "tau"])


def test_deepseek_v3_k1_carried_to_lmsys_mtp_windows_over_predicts():
    """DeepSeek-V3's report: tau 1.85 at k = 1 (MTP acceptance 85%). LMSYS's SGLang runs of DeepSeek-V3 (ISL 65,536)
    with a 3- and a 4-token MTP window (k = 2 and 3 drafts beside the verified token) accept 2.18 and 2.44."""
    pub = pd.read_csv(data_path("published", "speculative.csv"))
    lmsys = pub[pub["source"].str.contains("lm-sys.github.io") & pub["mean_accepted_len"].notna()]
    measured = dict(zip(lmsys["gamma"].str.extract(r"^(\d)-token")[0].astype(int) - 1, lmsys["mean_accepted_len"]))
    assert measured == {2: 2.18, 3: 2.44}
    k1 = Acceptance.from_accepted_length(_catalog_tau("deepseek-v3-report-mtp-k1"), 1, decay=group_decay("mtp"))
    over = {k: float(k1.tau(k)) / tau - 1 for k, tau in measured.items()}
    assert over[2] == pytest.approx(0.180, abs=0.002) and over[3] == pytest.approx(0.306, abs=0.002)
    assert measured_k(k1) == 1 and beyond_measured("mtp", k1, 3) and not beyond_measured("mtp", k1, 1)


def test_inkling_k1_carried_to_k8_over_predicts_its_own_k8_runs():
    """vLLM PR #48892 measured Inkling's MTP on GSM8K at k = 1 and k = 8 (two runs each): carried from k = 1, tau(8)
    is 6-12% above the k = 8 runs, the same sign as DeepSeek-V3's."""
    pairs = [("vllm-pr48892-inkling-mtp-k1-gsm8k-c64", "vllm-pr48892-inkling-mtp-k8-gsm8k-c64"),
             ("vllm-pr48892-inkling-mtp-k1-gsm8k-comment", "vllm-pr48892-inkling-mtp-k8-gsm8k-comment")]
    over = [float(Acceptance.from_accepted_length(_catalog_tau(a), 1, decay=group_decay("mtp")).tau(8))
            / _catalog_tau(b) - 1 for a, b in pairs]
    assert over == pytest.approx([0.125, 0.063], abs=0.002)
