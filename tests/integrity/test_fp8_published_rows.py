"""INTEGRITY CHECK of the committed dense FP8 rows of sdsl/data/published/decode.csv (``row_set`` = ``fp8``), not a
test of a model: every row parses into something sdsl prices (catalog model, catalog GPU, tensor parallelism, batch,
context from ``ISL n, OSL m``, fp8 linear layers exactly where ``dtype`` says fp8), its value appears in its quote (or
its notes say it is derived), and the set keeps at least six FP8 rows from at least two publications."""

from __future__ import annotations

import math
import re

import pytest

from sdsl.validation.published_rows import FP8_SET, ISL_OSL, interpret_decode, load_rows, source_key

NUMBER = re.compile(r"\d+(?:\.\d+)?")


@pytest.fixture(scope="module")
def rows():
    return load_rows("decode", FP8_SET)


def test_the_set_is_large_enough(rows):
    fp8 = [r for r in rows if r["dtype"].lower().startswith("fp8")]
    assert len(fp8) >= 6
    assert len({source_key(r["source"]) for r in fp8}) >= 2
    assert {r["engine"] for r in rows} <= {"trtllm", "vllm", "sglang", "nim"}


def test_every_row_interprets(rows):
    for i, row in enumerate(rows):
        spec = interpret_decode(row, i)  # raises Unpriceable where a field does not map
        assert spec.metric in ("TPOT", "speedup_fp8_vs_fp16"), i
        assert row["unit"] == ("ms" if spec.metric == "TPOT" else "x"), i
        assert spec.hardware in ("h100-sxm", "h200", "b200", "l40s"), (i, spec.hardware)
        assert spec.tp == int(row["tp"]) >= 1 and spec.batch == int(row["batch"]) >= 1, i
        assert spec.concurrency == int(row["concurrency"]) == spec.batch, i
        assert spec.weight_dtype == ("fp8" if row["dtype"].lower().startswith("fp8") else None), i
        isl, osl = (int(v.replace(",", "")) for v in ISL_OSL.match(row["context_tokens"]).groups())
        assert spec.context == isl + osl // 2, i
        assert math.isfinite(spec.measured) and spec.measured > 0, i
        if spec.metric == "speedup_fp8_vs_fp16":
            assert spec.weight_dtype == "fp8" and spec.measured > 1.0, i


def test_values_are_in_their_quotes(rows):
    for i, row in enumerate(rows):
        numbers = {float(n) for n in NUMBER.findall(row["quote"])}
        if row["notes"].startswith("Derived"):
            continue  # the notes state the arithmetic (Baseten's "33%" as 1.33)
        assert float(row["value"]) in numbers, (i, row["value"])


def test_every_fp8_tpot_row_has_its_bf16_pair_or_says_it_has_none(rows):
    def setup(r):
        return source_key(r["source"]), r["model"], r["gpu"], r["tp"], r["batch"], r["context_tokens"]

    bf16 = {setup(r) for r in rows if r["dtype"] == "bf16"}
    for i, r in enumerate(rows):
        if r["metric"] == "TPOT" and r["dtype"].lower().startswith("fp8"):
            assert setup(r) in bf16 or "FP8-only" in r["notes"], i
