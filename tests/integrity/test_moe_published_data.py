"""Integrity check of committed data: the mixture-of-experts rows of sdsl/data/published.

These tests only read back the committed CSV files. They check the schema, that every MoE row names its source
and carries the source's quote, that its numbers parse, that every number entered appears in its quote (so a
value cannot drift from the text it was copied from), and that the stated win/loss of each speculative row
agrees with its own numbers. They say nothing about how well sdsl prices these rows.
"""

from __future__ import annotations

import csv
import math
import re

import pytest

from sdsl._paths import data_path

ENGINE_COLUMNS = ["engine", "engine_version", "date", "concurrency", "quote", "row_set"]
DECODE_HEADER = ["source", "model", "gpu", "tp", "dtype", "batch", "context_tokens", "metric", "value", "unit", "notes"] + ENGINE_COLUMNS
SPEC_HEADER = ["source", "target", "draft", "gpu", "tp", "dtype", "batch", "gamma", "alpha", "mean_accepted_len",
               "metric", "value", "unit", "notes"] + ENGINE_COLUMNS
ROUTING_HEADER = ["model", "quantity", "value", "unit", "condition", "source", "quote", "notes"]
NOTE_KEYS = ("class", "engine", "version", "date", "ep", "dataset", "hf_id")
SPEC_KEYS = NOTE_KEYS + ("plain", "outcome", "ratio_vs_plain")
# Models with a catalog name: their rows use it, never the Hugging Face id.
CATALOG_HF = {"qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B", "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
              "deepseek-v3": "deepseek-ai/DeepSeek-V3", "deepseek-r1": "deepseek-ai/DeepSeek-R1",
              "gpt-oss-20b": "openai/gpt-oss-20b", "gpt-oss-120b": "openai/gpt-oss-120b",
              "llama-4-scout": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
              "llama-4-maverick": "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
              "mixtral-8x7b": "mistralai/Mixtral-8x7B-Instruct-v0.1", "glm-4.5-air": "zai-org/GLM-4.5-Air"}
NUMBER = re.compile(r"\d+(?:\.\d+)?")
RANGE = re.compile(r"^-?\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?$")


def _read(name: str) -> tuple[list[str], list[dict]]:
    with open(data_path("published", f"{name}.csv"), newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames), list(reader)


def _fields(notes: str) -> dict:
    """The `key=value` fields before the quote, the quote itself under 'quote'."""
    head, sep, rest = notes.partition("quote=«")
    assert sep, "no quote=«…» in notes"
    quote, end, _ = rest.partition("»")
    assert end, "quote=« is not closed by »"
    fields = dict(part.split("=", 1) for part in head.rstrip("; ").split("; ") if part)
    fields["quote"] = quote
    return fields


def _in_quote(value: str, quote: str) -> bool:
    """Whether the number ``value`` (sign ignored) appears in ``quote``."""
    numbers = [float(n) for n in NUMBER.findall(quote.replace(",", ""))] + [float(n) for n in NUMBER.findall(quote)]
    return any(math.isclose(abs(float(value)), n, rel_tol=0, abs_tol=1e-12) for n in numbers)


def _moe_rows(name: str) -> list[dict]:
    return [r for r in _read(name)[1] if r["notes"].startswith("class=")]


@pytest.fixture(scope="module")
def decode_rows():
    return _moe_rows("decode")


@pytest.fixture(scope="module")
def spec_rows():
    return _moe_rows("speculative")


def test_headers_unchanged():
    assert _read("decode")[0] == DECODE_HEADER
    assert _read("speculative")[0] == SPEC_HEADER
    assert _read("moe_routing")[0] == ROUTING_HEADER


@pytest.mark.parametrize("name", ["decode", "speculative"])
def test_moe_rows_carry_source_fields_and_quote(name):
    keys = SPEC_KEYS if name == "speculative" else NOTE_KEYS
    model_key = "target" if name == "speculative" else "model"
    for row in _moe_rows(name):
        f = _fields(row["notes"])
        assert row["source"].strip(), row
        assert set(keys) <= set(f), (row["source"], set(keys) - set(f))
        assert f["class"] in ("moe", "dense-comparison")
        assert f["quote"].strip()
        assert row[model_key] not in CATALOG_HF.values(), f"{row[model_key]} has a catalog name"
        if f["hf_id"] in CATALOG_HF.values():
            assert row[model_key] in CATALOG_HF, row[model_key]


@pytest.mark.parametrize("name", ["decode", "speculative"])
def test_moe_numbers_parse_and_appear_in_their_quote(name):
    for row in _moe_rows(name):
        quote = _fields(row["notes"])["quote"]
        value = float(row["value"])
        assert math.isfinite(value) and value > 0, row["source"]
        assert int(row["batch"]) >= 1
        assert _in_quote(row["value"], quote), (row["source"], row["value"])
        if name == "speculative" and row["mean_accepted_len"]:
            assert float(row["mean_accepted_len"]) >= 1.0
            assert _in_quote(row["mean_accepted_len"], quote), (row["source"], row["mean_accepted_len"])
        if row["tp"].isdigit():
            assert int(row["tp"]) >= 1


def test_speculative_outcome_matches_its_numbers(spec_rows):
    for row in spec_rows:
        f = _fields(row["notes"])
        ratio = float(f["ratio_vs_plain"])
        assert f["outcome"] == ("wins" if ratio > 1 else "loses"), row["source"]
        plain = NUMBER.match(f["plain"])
        if row["metric"] == "speedup_vs_autoregressive":
            assert ratio == pytest.approx(float(row["value"]))
        elif plain and row["metric"] != "TPOT":
            assert ratio == pytest.approx(float(row["value"]) / float(plain.group()), abs=1e-3), row["source"]


def test_moe_coverage(decode_rows, spec_rows):
    """At least 10 MoE rows on at least two models, plain and speculative, with cases where speculation loses."""
    moe_spec = [r for r in spec_rows if _fields(r["notes"])["class"] == "moe"]
    moe_dec = [r for r in decode_rows if _fields(r["notes"])["class"] == "moe"]
    assert len(moe_spec) >= 10 and len(moe_dec) >= 10
    assert len({r["target"] for r in moe_spec} & set(CATALOG_HF)) >= 2
    assert len({r["model"] for r in moe_dec} & set(CATALOG_HF)) >= 2
    assert any(_fields(r["notes"])["outcome"] == "loses" for r in moe_spec)
    assert any(_fields(r["notes"])["outcome"] == "wins" for r in moe_spec)


def test_routing_rows():
    _, rows = _read("moe_routing")
    assert len(rows) >= 10
    for row in rows:
        assert all(row[k].strip() for k in ("model", "quantity", "unit", "condition", "source", "quote")), row
        value = row["value"].strip()
        assert RANGE.match(value), value
        parts = value.lstrip("-").split("-")
        if len(parts) == 2:
            assert float(parts[0]) < float(parts[1])
        for part in parts:
            assert _in_quote(part, row["quote"]), (row["source"], row["quantity"], value)
