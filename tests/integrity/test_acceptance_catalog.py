"""The published acceptance catalog (sdsl/data/acceptance/catalog.csv) and its loader.

The first group is an INTEGRITY CHECK of the committed file (schema, sources and quotes present, values
in range, τ ≤ k + 1, marginal rates non-increasing, printed numbers present in their quotes): it reads
the file back and asserts its invariants. The second group tests the loader's behaviour (parsing,
filters, groupings, conversion to Acceptance), which a wrong loader fails.
"""

from __future__ import annotations

import csv
import re

import numpy as np
import pytest

from sdsl._paths import data_path
from sdsl.acceptance import catalog as cat
from sdsl.acceptance import Acceptance
from sdsl.errors import UnknownNameError

ROWS = cat.catalog_rows()
ACC = [r for r in ROWS if r.has_acceptance]


def _printed(value: float, quote: str) -> bool:
    """The number appears in the quote as printed (any trailing zeros), or as a percentage."""
    nums = {float(x) for x in re.findall(r"\d+(?:\.\d+)?", quote.replace(",", ""))}
    return any(abs(value - n) < 5e-10 * max(1, n) or abs(100 * value - n) < 5e-8 for n in nums)


# ----------------------------------------------------------------------------------------------------
# Integrity check of the committed file
def test_integrity_schema_and_ids():
    with open(data_path("acceptance", "catalog.csv"), newline="", encoding="utf-8") as fh:
        header = next(csv.reader(fh))
    assert tuple(header) == cat.COLUMNS
    ids = [r.row_id for r in ROWS]
    assert len(ids) == len(set(ids)) == len(ROWS)


def test_integrity_every_row_cites_and_quotes():
    for r in ROWS:
        assert r.source and r.locator and r.quote.strip(), r.row_id
        assert r.tau_convention or not r.has_acceptance, r.row_id
        assert r.source_kind in cat.SOURCE_KINDS, r.row_id
        assert r.method in cat.METHODS and r.workload in cat.WORKLOADS and r.structure in cat.STRUCTURES, r.row_id
        assert r.has_acceptance or r.speedup is not None, r.row_id
        if r.source_kind == "repo":
            assert re.search(r"@[0-9a-f]{40}:", r.source), r.row_id  # a repository file at a commit


def test_integrity_values_in_range():
    for r in ACC:
        if r.tau is not None:
            assert 1.0 <= r.tau, r.row_id
            if r.k is not None and r.structure in ("chain", "block"):
                assert r.tau <= r.k + 1 + 1e-9, r.row_id
            if r.tau_upper is not None:
                assert r.tau <= r.tau_upper, r.row_id
        m = r.marginal_array
        if m.size:
            assert np.all((m >= 0) & (m <= 1)), r.row_id
            assert np.all(np.diff(m) <= 1e-12), r.row_id  # marginal rates never increase with position
            assert r.k is not None and m.size <= r.k, r.row_id
            if r.marginal_complete and r.tau is not None and "drafting steps only" not in r.tau_convention:
                assert abs(1 + m.sum() - r.tau) <= 0.02, r.row_id  # up to the rounding of printed rates
        if r.speedup is not None:
            assert 0 < r.speedup < 20, r.row_id
        if r.temperature is not None:
            assert 0 <= r.temperature <= 2, r.row_id


def test_integrity_printed_numbers_are_in_their_quotes():
    for r in ROWS:
        if r.tau is not None and not r.tau_convention.startswith(("derived", "bonus excluded")):
            assert _printed(r.tau, r.quote), r.row_id
        if r.tau_convention.startswith("bonus excluded"):
            assert _printed(r.tau - 1, r.quote), r.row_id
        for x in r.marginal:
            assert _printed(x, r.quote), (r.row_id, x)
        if r.speedup is not None and not r.tau_convention.startswith("derived"):
            assert _printed(r.speedup, r.quote) or r.source_kind == "pr", r.row_id


def test_integrity_coverage_goals():
    """>= 40 acceptance rows from >= 5 sources, several methods on one target, several targets per method."""
    assert len(ACC) >= 40 and len({r.source for r in ACC}) >= 5
    per_target = {}
    for r in ACC:
        per_target.setdefault(r.target, set()).add(r.method)
    assert max(len(v) for v in per_target.values()) >= 5
    per_method = {}
    for r in ACC:
        per_method.setdefault(r.method, set()).add(r.target)
    assert len(per_method["eagle3"] - {"unstated"}) >= 10 and len(per_method["medusa"]) >= 3


# ----------------------------------------------------------------------------------------------------
# Loader behaviour
def test_rows_are_frozen_and_typed():
    r = ROWS[0]
    with pytest.raises(AttributeError):
        r.tau = 2.0  # type: ignore[misc]
    assert isinstance(r.marginal, tuple) and cat.catalog_rows() is ROWS
    assert all(isinstance(x.k, (int, type(None))) and isinstance(x.tau, (float, type(None))) for x in ROWS)


def test_select_filters_and_unknown_names():
    v7 = cat.select(target="vicuna-7b-v1.3", workload="mixed")
    assert v7 and all(r.target == "Vicuna-7B-v1.3" and r.workload == "mixed" for r in v7)
    assert {r.method for r in v7} >= {"eagle", "eagle2", "medusa", "hydra", "draft_model", "ngram", "lookahead"}
    assert all(r.has_acceptance for r in cat.select(method="ngram"))
    speed_only = [r for r in cat.select(source="Spec-Bench", with_acceptance=False) if not r.has_acceptance]
    assert len(speed_only) > 0 and all(r.speedup is not None for r in speed_only)
    assert cat.select(method="EAGLE3", k=7, dataset="mt-bench", target="Llama-3.1-8B-Instruct")
    with pytest.raises(UnknownNameError, match="No catalogued method 'eagle4'"):
        cat.select(method="eagle4")
    with pytest.raises(UnknownNameError, match="No catalogued workload 'poetry'"):
        cat.select(workload="poetry")


def test_spec_bench_row_parses_its_quote():
    """EAGLE-2 on Vicuna-7B, A100: #Mean Accepted Tokens 4.34 and Overall 2.36x, the last two cells."""
    (r,) = [x for x in cat.select(method="eagle2", target="Vicuna-7B-v1.3", workload="mixed") if "A100" in x.hardware]
    cells = [c.strip().strip("*").rstrip("x") for c in r.quote.strip("|").split("|")]
    assert (r.tau, r.speedup) == (4.34, 2.36) == (float(cells[-2]), float(cells[-1]))


def test_k_sweeps_group_one_setting_by_k():
    sweeps = cat.k_sweeps()
    assert sweeps
    for g in sweeps:
        assert len({r.k for r in g}) >= 2 and [r.k for r in g] == sorted(r.k for r in g)
        assert len({(r.source, r.target, r.draft, r.task, r.config) for r in g}) == 1
    # SpecForge's chains at steps 3, 5, 7 of one head: accepted length grows with k
    spec = [g for g in sweeps if "SpecForge" in g[0].source and g[0].target == "Kimi-K2-Instruct" and g[0].dataset == "GSM8K"]
    assert len(spec) == 1 and [r.k for r in spec[0]] == [3, 5, 7]
    assert np.all(np.diff([r.tau for r in spec[0]]) > 0)


def test_chain_tree_pairs_share_head_depth_and_budget():
    pairs = cat.chain_tree_pairs()
    assert len(pairs) >= 10
    for chain, tree in pairs:
        assert chain.topk == 1 and tree.topk > 1 and chain.structure == "chain" and tree.structure == "tree"
        assert (chain.k, chain.verify_tokens, chain.draft, chain.task) == (tree.k, tree.verify_tokens, tree.draft, tree.task)


def test_acceptance_reproduces_the_row():
    """A complete per-position row becomes the measured vector; a chain with only τ gets the decay form
    solved to the same τ at its k."""
    (r,) = [x for x in cat.select(method="mtp", target="Inkling", k=8) if "description" in x.source]
    a = r.acceptance()
    assert isinstance(a, Acceptance) and a.k == 8
    assert np.allclose(a.marginal, r.marginal) and float(a.tau()) == pytest.approx(1 + sum(r.marginal))
    (c,) = cat.select(method="eagle3", target="Llama-3.1-8B-Instruct", k=7, dataset="MT-Bench", source="vllm")
    assert c.marginal == () and float(c.acceptance().tau(7)) == pytest.approx(c.tau, abs=1e-9)
    tree = next(x for x in ACC if x.structure == "dynamic_tree")
    with pytest.raises(UnknownNameError, match="no chain acceptance"):
        tree.acceptance()


def test_speedup_ratio_and_to_dict():
    r = next(x for x in ACC if "SpecForge" in x.source)
    assert r.speedup is None and r.speedup_ratio == pytest.approx(r.throughput_tok_s / r.baseline_tok_s)
    d = r.to_dict()
    assert d["row_id"] == r.row_id and isinstance(d["marginal"], list) and set(d) == set(cat.COLUMNS)


def test_integrity_readme_counts_match_the_file():
    text = data_path("acceptance", "README.md").read_text(encoding="utf-8")
    m = re.search(r"`catalog.csv` has (\d+) rows: (\d+) carry", text)
    assert m and (int(m.group(1)), int(m.group(2))) == (len(ROWS), len(ACC))


# ----------------------------------------------------------------------------------------------------
# Reading one method's rows without parsing the others (what a command pricing one kind of proposer reads)
@pytest.mark.parametrize("methods", [(m,) for m in cat.METHODS] + [("eagle", "eagle2")])
def test_integrity_method_rows_without_the_rest_are_the_whole_files_rows(methods):
    """An integrity check of the committed file against the scanner: the records found by their method column are
    exactly the rows of the whole file parsed (every column), in file order."""
    records = cat._method_records(frozenset(methods))
    assert records is not None
    found = [cat.CatalogRow.from_csv(dict(zip(cat.COLUMNS, rec))) for rec in records]
    whole = [r for r in ROWS if r.method in methods]
    assert [r.__dict__ for r in found] == [r.__dict__ for r in whole] and whole


def _write_catalog(tmp_path, monkeypatch, lines: list[str]) -> None:
    folder = tmp_path / "acceptance"
    folder.mkdir()
    (folder / "catalog.csv").write_bytes(("\n".join([",".join(cat.COLUMNS), *lines]) + "\n").encode())
    monkeypatch.setattr(cat, "data_path", lambda *parts: tmp_path.joinpath(*parts))


def _line(row_id: str, method: str, quote: str = "q", notes: str = "") -> str:
    values = {c: "" for c in cat.COLUMNS}
    values.update(row_id=row_id, method=method, target="Llama-3.1-8B", workload="chat", structure="chain", k="4",
                  tau="2.5", quote=quote, notes=notes)
    return ",".join(values[c] for c in cat.COLUMNS)


def test_method_records_skip_quoted_text_that_looks_like_a_record(tmp_path, monkeypatch):
    """A quoted field spanning lines whose continuation reads like a draft_model record, and one holding
    ',draft_model,' inside a line, are text: only the real draft_model records are found, whole."""
    lines = [_line("a", "eagle3", quote='"first line\nx,draft_model,continued ""quoted"" text"'),
             _line("b", "draft_model", quote='"the quote, with a comma\nand a second line"'),
             _line("c", "ngram", notes='"see ,draft_model, here"'),
             _line("d", "draft_model")]
    _write_catalog(tmp_path, monkeypatch, lines)
    records = cat._method_records(frozenset({"draft_model"}))
    assert [r[0] for r in records] == ["b", "d"]
    assert records[0][cat.COLUMNS.index("quote")] == "the quote, with a comma\nand a second line"
    with open(tmp_path / "acceptance" / "catalog.csv", newline="", encoding="utf-8") as fh:
        whole = [r for r in csv.reader(fh)][1:]
    assert records == [r for r in whole if r[1] == "draft_model"]


def test_method_records_hand_back_to_the_whole_parse_when_unsure(tmp_path, monkeypatch):
    """A header that is not the catalog's, or a record that does not parse to every column, returns None (the
    caller then parses the whole file)."""
    _write_catalog(tmp_path, monkeypatch, [_line("d", "draft_model") + ",a 30th column"])
    assert cat._method_records(frozenset({"draft_model"})) is None
    (tmp_path / "acceptance" / "catalog.csv").write_text("row_id,method\nd,draft_model\n")
    assert cat._method_records(frozenset({"draft_model"})) is None
