"""The vectorised search (sdsl.plan.search): the grid prices each configuration exactly as a
one-configuration prediction would, and its best-γ pick is the argmax."""

from __future__ import annotations

import numpy as np
import pytest

from sdsl.catalog.models import get_model
from sdsl.roofline.deployment import Deployment
from sdsl.plan.search import SearchGrid, candidate_drafts, evaluate_grid, search
from sdsl.speculation.throughput import predict
from sdsl.errors import InvalidInputError

TARGET = "llama-2-7b"
DRAFTS = ("llama-68m", "llama-160m")


@pytest.fixture(scope="module")
def grid() -> SearchGrid:
    return evaluate_grid(TARGET, Deployment("h100-sxm", context=512), drafts=DRAFTS, gammas=range(0, 6), batch=(1, 16),
                         alpha=(0.6, 0.8))


def test_grid_matches_pointwise_predictions(grid):
    tps = np.broadcast_to(grid.prediction.tokens_per_s, grid.shape)
    for (d, g, b, a) in [(0, 0, 0, 0), (1, 3, 1, 1), (0, 5, 1, 0), (1, 1, 0, 1)]:
        one = predict(get_model(TARGET), get_model(DRAFTS[d]), Deployment("h100-sxm", context=512),
                      gamma=int(grid.gammas[g]), alpha=float(grid.alpha[0, 0, 0, a]), batch=int(grid.batches[b]))
        assert tps[d, g, b, a] == pytest.approx(float(one.tokens_per_s), rel=1e-9)


def test_best_is_the_argmax_over_gamma(grid):
    best = grid.best_arrays()
    tps = np.broadcast_to(grid.prediction.tokens_per_s, grid.shape)
    np.testing.assert_array_equal(best["gamma"], grid.gammas[np.argmax(tps, axis=1)].astype(int))
    np.testing.assert_allclose(best["tokens_per_s"], tps.max(axis=1))
    rows = grid.best()
    assert len(rows) == len(DRAFTS) * 2 * 2
    assert [r["batch"] for r in rows] == sorted(r["batch"] for r in rows)


def test_frame_has_one_row_per_configuration(grid):
    frame = grid.to_frame()
    assert len(frame) == int(np.prod(grid.shape)) == 2 * 6 * 2 * 2
    assert set(frame["alpha_source"]) == {"given"}
    assert frame.loc[frame["gamma"] == 0, "speedup"].to_numpy() == pytest.approx(1.0)


def test_plane_alpha_grows_with_the_draft():
    g = evaluate_grid(TARGET, "h100-sxm", drafts=DRAFTS, gammas=(1, 2), batch=(1,))
    assert g.alpha_source == "sdsl-plane" and g.alpha[1, 0, 0, 0] > g.alpha[0, 0, 0, 0]


def test_search_returns_the_grid_as_a_frame():
    frame = search(TARGET, "h100-sxm", drafts=DRAFTS, gammas=(0, 1), batch=(1,), alpha=(0.7,))
    assert list(frame["draft"].unique()) == list(DRAFTS) and len(frame) == 4


def test_candidate_drafts_share_the_tokenizer_and_are_small():
    target = get_model("llama-3.1-70b")
    drafts = candidate_drafts(target)
    assert drafts and all(d.vocab_size == target.vocab_size for d in drafts)
    assert all(d.total_params <= 0.25 * target.total_params for d in drafts)
    assert [d.total_params for d in drafts] == sorted(d.total_params for d in drafts)


@pytest.mark.parametrize("kwargs", [dict(gammas=()), dict(batch=()), dict(alpha=(1.2,)), dict(drafts=())])
def test_bad_grids_raise(kwargs):
    base = dict(drafts=DRAFTS, gammas=(1,), batch=(1,), alpha=(0.7,))
    base.update(kwargs)
    with pytest.raises(InvalidInputError):
        evaluate_grid(TARGET, "h100-sxm", **base)
