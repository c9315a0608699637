"""INTEGRITY CHECK of committed data files, not a test of a model: sdsl/data/engines/evidence.csv (schema,
non-empty source and quote, values that parse, terms documented in its README) and the engine columns of
sdsl/data/published/{decode,speculative}.csv. The derived values are recomputed from the rows they come from."""

from __future__ import annotations

import csv
import datetime as dt
import math

import pytest

from sdsl._paths import data_path
from sdsl.validation.published_rows import load_rows

EVIDENCE_COLUMNS = ["engine", "build", "date", "term", "value", "unit", "source", "quote", "notes"]
ENGINES = {"vllm", "sglang", "trtllm", "gpt-fast", "hf-eager", "eager-pytorch", "llamacpp", "cuda", "onnxruntime-genai", "mlx"}
UNITS = {"s", "ms", "us", "tok/s", "x", "fraction", "count", "bool", "tokens", "requests", "MB"}
SOURCE_PREFIXES = ("github:", "github-pr:", "github-issue:", "pypi:", "https://")
ENGINE_COLUMNS = ["engine", "engine_version", "date", "concurrency", "quote", "row_set"]
PUBLISHED_ENGINES = ENGINES | {"nim"}  # NVIDIA NIM rows (row_set fp8) name no backend engine


def _csv(*parts) -> tuple[list[str], list[dict]]:
    with open(data_path(*parts), newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames), list(reader)


@pytest.fixture(scope="module")
def evidence():
    return _csv("engines", "evidence.csv")


def _numbers(value: str) -> list[float]:
    return [float(v) for v in value.split(";")]


def _valid_date(text: str) -> bool:
    if not text:
        return True
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10


def test_evidence_schema(evidence):
    header, rows = evidence
    assert header == EVIDENCE_COLUMNS
    assert len(rows) >= 50
    for i, r in enumerate(rows):
        for col in ("engine", "build", "term", "value", "unit", "source", "quote"):
            assert r[col].strip(), (i, col)
        assert r["engine"] in ENGINES, (i, r["engine"])
        assert r["unit"] in UNITS, (i, r["unit"])
        assert r["source"].startswith(SOURCE_PREFIXES), (i, r["source"])
        assert _valid_date(r["date"]), (i, r["date"])


def test_evidence_values_parse(evidence):
    _, rows = evidence
    for i, r in enumerate(rows):
        values = _numbers(r["value"])
        assert all(math.isfinite(v) for v in values), i
        if r["unit"] == "bool":
            assert values in ([0.0], [1.0]), (i, r["value"])
        if r["term"] == "cudagraph_capture_sizes":
            assert values == sorted(set(values)) and values[0] >= 1, i
        elif len(values) == 2:  # a stated range low;high
            assert values[0] <= values[1], i
        else:
            assert len(values) == 1, (i, r["value"])


def test_every_term_is_documented(evidence):
    _, rows = evidence
    with open(data_path("engines", "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    for term in {r["term"] for r in rows}:
        assert term in readme, term


def test_every_engine_build_of_the_profiles_has_evidence(evidence):
    _, rows = evidence
    builds = " | ".join(f"{r['engine']}: {r['build']}" for r in rows)
    for needle in ("gpt-fast:", "hf-eager:", "vllm: vLLM V1 main before PR #17211", "vllm: vLLM V1 + PR #25872",
                   "vllm: vLLM model runner V2", "sglang: SGLang spec v1", "sglang: SGLang beta spec-overlap",
                   "trtllm:", "llamacpp:"):
        assert needle in builds, needle


def _evidence_value(rows, term, source_part, build_part=""):
    (row,) = [r for r in rows if r["term"] == term and source_part in r["source"] and build_part in r["build"]]
    return float(row["value"])


def test_derived_values_recompute_from_the_published_rows(evidence):
    """Arithmetic stated in the notes, redone on the rows of speculative.csv they come from."""
    _, rows = evidence
    spec = load_rows("speculative", row_sets=None)
    sweep = {(r["draft"][:7], int(r["gamma"])): (float(r["value"]), float(r["mean_accepted_len"]))
             for r in spec if "vllm#20780" in r["source"]}
    for head, expected_row in (("EAGLE-1", 0), ("EAGLE-3", 1)):
        (t2, a2), (t7, a7) = sweep[(head, 2)], sweep[(head, 7)]
        values = sorted(float(r["value"]) for r in rows if r["term"] == "per_draft_pass_time")
        assert values[expected_row] == pytest.approx((t7 * a7 - t2 * a2) / 5, abs=1e-3)
    step = {r["engine_version"][:14]: float(r["mean_accepted_len"]) / float(r["value"])
            for r in spec if "sglang#11398" in r["source"]}
    assert _evidence_value(rows, "spec_step_exposed_host_time", "sglang#11398") == pytest.approx(
        (step["SGLang main, s"] - step["SGLang beta sp"]) * 1e3, abs=1e-3)
    graphs = {(r["draft"][:7], "off" if "CUDA graphs off" in r["engine_version"] else "on"):
              float(r["mean_accepted_len"]) / float(r["value"])
              for r in spec if "sglang#4247" in r["source"] and r["gamma"].startswith("num_steps=8")}
    saved = _evidence_value(rows, "spec_step_time_saved_by_graphs", "sglang#4247", "EAGLE-3")
    assert saved == pytest.approx((graphs[("EAGLE-3", "off")] - graphs[("EAGLE-3", "on")]) * 1e3, abs=1e-3)


@pytest.mark.parametrize("name,dev_rows", [("decode", 20), ("speculative", 32)])
def test_published_engine_columns(name, dev_rows):
    header, rows = _csv("published", f"{name}.csv")
    assert header[-len(ENGINE_COLUMNS):] == ENGINE_COLUMNS
    assert len(load_rows(name)) == dev_rows  # the development set sdsl validate published prices
    assert len(load_rows(name, row_sets=None)) == len(rows)
    for i, r in enumerate(rows):
        assert r["row_set"] in ("dev", "engine", "moe", "fp8"), i
        assert r["engine"] in PUBLISHED_ENGINES, (i, r["engine"])
        assert r["engine_version"].strip() and r["quote"].strip() and r["source"].strip(), i
        assert _valid_date(r["date"]), (i, r["date"])
        assert float(r["value"]) > 0, i
        if r["concurrency"]:
            assert int(r["concurrency"]) >= 1, i
        if r.get("mean_accepted_len"):
            assert float(r["mean_accepted_len"]) >= 1.0, i
        if r["row_set"] == "engine":
            assert r["date"], i  # engine rows are priced with the profile of their date


def test_engine_speculative_rows_with_accepted_length():
    """The engine set the execution model is built on: accepted length with TPOT or tokens/s."""
    rows = [r for r in load_rows("speculative", row_sets=("engine",)) if r["mean_accepted_len"]]
    assert len(rows) >= 17
    assert {r["engine"] for r in rows} >= {"vllm", "sglang", "trtllm"}
    assert len({r["source"].split(" (")[0] for r in rows}) >= 4
    assert any(int(r["concurrency"]) > 1 for r in rows)
