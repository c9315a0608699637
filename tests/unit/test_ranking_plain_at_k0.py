"""A k = 0 row of the proposer ranking is plain decoding: the same tokens/s the pick and the k table use, in the
table, its CSV frame and the JSON, whatever the engine charges a speculative worker at γ = 0."""

import numpy as np
import pytest

from sdsl import Deployment
from sdsl.plan.ranking import rank_proposers


@pytest.fixture(scope="module")
def ranking():
    return rank_proposers("llama-3.1-8b", ["eagle3", "medusa"], Deployment("h100-sxm", context=128, engine="vllm"),
                          acceptance=0.05, gammas=range(0, 4), batches=[1, 256])


def test_k0_rows_are_plain_decoding(ranking):
    frame = ranking.to_frame()
    k0 = frame[frame.gamma == 0]
    assert len(k0) == 4
    np.testing.assert_allclose(k0.tokens_per_s, k0.plain_tokens_per_s)
    assert np.all(k0.speedup == 1.0) and np.all(k0.tau == 1.0) and np.all(k0.t_draft_s == 0.0)
    np.testing.assert_allclose(k0.tpot_s, k0.batch / k0.plain_tokens_per_s)
    # the speculative worker at gamma 0 costs more than plain under this engine: the row must not show that cost
    step = ranking.priced[0]
    assert np.all(step.tokens_per_s[0] < step.plain_tokens_per_s[0])


def test_the_table_agrees_with_the_pick(ranking):
    for row in ranking.records():
        if row["gamma"] == 0:
            assert row["speedup"] == 1.0 and row["tokens_per_s"] == pytest.approx(row["plain_tokens_per_s"])
    best = ranking.best()
    assert np.all(best["speedup"][best["gamma"] == 0] == pytest.approx(1.0))
