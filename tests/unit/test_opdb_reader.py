"""The operator-database reader (sdsl.fit.opdb) on the shipped subset: provenance per row, units, filters."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from sdsl._paths import data_path
from sdsl.errors import ConfigError
from sdsl.fit.opdb import OPDB_TABLES, PROVENANCE, SHAPE_COLUMNS, latest_versions, read_opdb, version_key


@pytest.mark.parametrize("table", sorted(OPDB_TABLES))
def test_every_table_has_provenance_shapes_and_positive_seconds(table):
    df = read_opdb(table)
    assert len(df) > 1000
    assert list(df.columns[:len(PROVENANCE)]) == list(PROVENANCE)
    assert set(SHAPE_COLUMNS[table]) <= set(df.columns)
    for col in ("gpu", "engine", "engine_version", "op", "dtype"):
        assert (df[col].astype(str).str.len() > 0).all(), col
    t = df["time_s"].to_numpy()
    # seconds, not milliseconds: the slowest row is the L40S's 512 MiB all-reduce over 8 PCIe GPUs, about 1.0 s
    assert np.isfinite(t).all() and (t > 0).all() and t.max() < 2.0


def test_subset_keeps_decode_rows_and_the_three_gpus():
    g = read_opdb("gemm")
    # GEMMs keep the decode rows m <= 512, one row past each row-tile edge (65 ... 1025: where a tile shows as a
    # step) and, for the calibration's compute-bound end, m = 1024 ... 8192
    m = set(g["m"].unique())
    assert {x for x in m if x <= 512} == {1, 2, 3, 4, 6, 8, 12, 16, 32, 48, 64, 96, 128, 192, 256, 512, 65, 129, 193, 257}
    assert {x for x in m if x > 512} == {513, 1024, 1025, 2048, 4096, 8192}
    assert {"h100_sxm", "h200_sxm", "b200_sxm"} <= set(g["gpu"])
    assert {"bfloat16", "fp8", "fp8_block", "nvfp4"} <= set(g["dtype"])
    a = read_opdb("generation_attention", gpu="h200_sxm", engine="vllm")
    assert a["batch_size"].max() <= 512 and set(a["kv_cache_dtype"]) == {"bfloat16", "fp8"}
    m = read_opdb("moe")
    assert m["num_tokens"].max() <= 512 and {"balanced", "power_law_1.01", "power_law_1.2"} <= set(m["distribution"])


def test_a_known_row_in_seconds():
    """H200, vLLM 0.24.0, a 4096x4096 bf16 GEMM at m=1: about 12.6 us (the package's table, in ms)."""
    g = read_opdb("gemm", gpu="h200_sxm", engine="vllm", dtype="bfloat16")
    row = g[(g["m"] == 1) & (g["n"] == 4096) & (g["k"] == 4096)]
    assert len(row) == 1 and row["engine_version"].iloc[0] == "0.24.0"
    assert 10e-6 < row["time_s"].iloc[0] < 15e-6


def test_versions_sort_as_releases():
    assert version_key("0.5.6.post2") < version_key("0.5.10") < version_key("0.5.14")
    assert version_key("1.3.0rc10") < version_key("1.3.0rc20") < version_key("1.3.0")
    ar = read_opdb("custom_allreduce", gpu="h200_sxm", engine="sglang")
    assert set(latest_versions(ar)["engine_version"]) == {"0.5.14"}


def test_unknown_table_and_missing_sources_are_config_errors(tmp_path):
    with pytest.raises(ConfigError):
        read_opdb("no_such_table")
    with pytest.raises(ConfigError):
        read_opdb("gemm", source=tmp_path / "missing")


def test_licence_and_notice_ship_with_the_subset():
    assert "Apache License" in data_path("opdb", "LICENSE.aiconfigurator").read_text()
    notice = data_path("opdb", "NOTICE").read_text()
    assert "aiconfigurator-core 0.12.0" in notice and "Apache-2.0" in notice
    with gzip.open(data_path("opdb", "gemm.csv.gz"), "rt") as f:
        assert f.readline().strip().startswith(",".join(PROVENANCE))
