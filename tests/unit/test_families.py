"""Continuous draft family and the hardware-aware optimal draft size (sdsl.plan.families)."""

from __future__ import annotations

import numpy as np
import pytest

from sdsl.errors import InvalidInputError
from sdsl.plan.families import best_drafts, draft_size_sweep, llama_family


def test_family_sizes_increase_and_shapes_are_llama_like():
    fam = llama_family(128256, [256, 512, 2048, 4096])
    params = [m.total_params for m in fam]
    assert params == sorted(params)
    big = fam[-1]
    assert (big.n_layer, big.n_head, big.n_kv_head, big.d_ff) == (32, 64, 16, 14336)
    assert 6e9 < big.total_params < 9e9
    with pytest.raises(InvalidInputError):
        llama_family(d_models=[200])


def test_sweep_shape_and_flop_columns():
    fam = llama_family(128256, [256, 512, 1024, 2048])
    df = draft_size_sweep("llama-3.1-8b", "h100-sxm", drafts=fam, batch=(1, 32), gammas=range(0, 6))
    assert len(df) == 8
    assert set(df["batch"]) == {1, 32}
    assert (df["speedup"] >= 1.0 - 1e-12).all()  # γ = 0 is always available
    assert np.allclose(df.loc[df.batch == 1, "alpha"].to_numpy(), df.loc[df.batch == 32, "alpha"].to_numpy())
    best = best_drafts(df)
    assert list(best["batch"]) == [1, 32]
    # the roofline adds launch overheads and memory traffic the FLOP model ignores
    assert (best["hw_speedup"] < best["flop_speedup"]).all()
