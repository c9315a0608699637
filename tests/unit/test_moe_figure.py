"""The numbers paper_figures/README.md states for moe_speculation_vs_batch.png (MoESD's claim), recomputed under
the shipped H100 calibration, and the shape a dense-style expert model would not give."""

from __future__ import annotations

import numpy as np
import pytest

import sdsl.core.step_ops as step_ops
from sdsl._paths import REPO_ROOT
from sdsl.experiments.figures.moe import MOE_FIGURE_HOST_S, moe_vs_dense_by_batch

B = np.arange(1, 257)


def _says(*fragments):
    text = " ".join((REPO_ROOT / "paper_figures" / "README.md").read_text().split())
    for f in fragments:
        assert " ".join(f.split()) in text, f"paper_figures/README.md no longer says {f!r}"


def test_moe_gains_most_at_medium_batch():
    _says("2.39× at batch 1, 1.54× at 256", "1.63× at batch 1, 1.36× at batch 4", "rises to 2.49× at batch 45",
          "above the dense target from batch 18 to 256 (from 11 with the host time)")
    roof, host = moe_vs_dense_by_batch(B), moe_vs_dense_by_batch(B, host_s=MOE_FIGURE_HOST_S)
    moe, dense = roof["qwen3-30b-a3b"]["speedup"], roof["qwen3-4b"]["speedup"]
    assert dense[0] == pytest.approx(2.39, abs=5e-3) and dense[-1] == pytest.approx(1.54, abs=5e-3)
    assert np.all(np.diff(dense) <= 1e-12)  # the dense target's speedup only falls with the batch
    assert moe[0] == pytest.approx(1.63, abs=5e-3) and int(B[np.argmin(moe)]) == 4 and moe.min() == pytest.approx(1.36, abs=5e-3)
    assert int(B[np.argmax(moe)]) == 45 and moe.max() == pytest.approx(2.49, abs=5e-3)
    ahead = B[moe > dense]
    assert (ahead.min(), ahead.max(), ahead.size) == (18, 256, 239)
    with_host = B[host["qwen3-30b-a3b"]["speedup"] > host["qwen3-4b"]["speedup"]]
    assert with_host.min() == 11


def test_a_weights_once_expert_model_loses_the_dip(monkeypatch):
    """Priced as if a step read a 1-token step's experts (a dense model's assumption), the MoE curve falls
    monotonically like the dense one: the dip at small batch is the expert union."""
    real = step_ops.expert_rows
    monkeypatch.setattr(step_ops, "expert_rows", lambda shapes, tokens, params: (
        real(shapes, 0.0 * np.asarray(tokens, dtype=float) + 1.0, params)[0], np.asarray(tokens, dtype=float) * shapes.top_k))
    moe = moe_vs_dense_by_batch(np.array([1, 4, 45]))["qwen3-30b-a3b"]["speedup"]
    assert moe[1] > moe[2]
