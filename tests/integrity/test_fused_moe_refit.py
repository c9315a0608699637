"""Integrity check: the shipped fused-MoE fits (sdsl/data/moe/fused_moe.json, written by `python -m sdsl.fit.opdb.moe
--write`, part of `make opdb-calibrate`) are what a refit on the shipped subset gives now. Compared by what they price
on every table row, to 1e-4, and by their held-out scores: a term a kernel's rows leave poorly set (its L2 speed-up where
the resident rows are latency-bound) moves by a percent between BLAS builds without changing a price."""

from __future__ import annotations

import numpy as np
import pytest

from sdsl.catalog.moe import fused_moe_fits
from sdsl.fit.opdb import moe as opdb_moe

IDENTITY = ("gpu", "engine", "kernel_source", "dtype", "row_tile", "versions", "rows", "shapes")
TERMS = ("t0_s", "per_expert_s", "eta_memory", "eta_compute", "per_pair_s", "l2_speedup")


@pytest.mark.slow
def test_shipped_fused_moe_fits_are_the_refit():
    from sdsl.fit.opdb import read_opdb

    shipped, refit = fused_moe_fits(), opdb_moe.fit_fused_moe()
    assert [tuple(getattr(f, k) for k in IDENTITY) for f in shipped] == [tuple(getattr(f, k) for k in IDENTITY) for f in refit]
    feats = opdb_moe.determined(opdb_moe.moe_features(opdb_moe._decode_rows(read_opdb("moe"))))
    groups = dict(tuple(feats.groupby(opdb_moe.GROUP, sort=True)))
    for a, b in zip(shipped, refit):
        rows = groups[tuple(getattr(a, k) for k in opdb_moe.GROUP)]
        price = lambda f: opdb_moe._predict([getattr(f, k) for k in TERMS], rows, f.row_tile)  # noqa: E731
        assert np.max(np.abs(price(b) / price(a) - 1.0)) < 1e-4, (a.gpu, a.kernel_source, a.dtype)
        assert a.loso.keys() == b.loso.keys()
        for k in a.loso:
            assert b.loso[k] == pytest.approx(a.loso[k], abs=1e-4), (a.gpu, a.kernel_source, a.dtype, k)
