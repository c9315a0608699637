"""The published acceptance catalog (``sdsl/data/acceptance/catalog.csv``) as frozen records.

Each :class:`CatalogRow` is one published measurement: a mean accepted length τ (bonus token
included, τ = 1 + Σ m_i as in :mod:`sdsl.acceptance`) and/or per-position marginal rates
m_1..m_k, or only a speedup, with the proposer, target, task, workload, temperature, k or tree, engine
and hardware, and its source with an exact quote. Columns, conventions and sources:
``sdsl/data/acceptance/README.md``.

:func:`select` filters by method, target, workload, dataset or source; :func:`k_sweeps` groups rows of
one proposer measured at several k, :func:`chain_tree_pairs` pairs a chain with a tree of the same head
and verified-token budget.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections import defaultdict
from dataclasses import dataclass, fields
from functools import lru_cache

import numpy as np

from sdsl._paths import data_path
from sdsl.errors import ConfigError, UnknownNameError

__all__ = ["CatalogRow", "COLUMNS", "METHODS", "WORKLOADS", "STRUCTURES", "catalog_rows", "method_rows", "select", "methods",
           "targets", "workloads", "sources", "k_sweeps", "chain_tree_pairs"]

COLUMNS = ("row_id", "method", "target", "draft", "dataset", "task", "workload", "temperature", "structure", "k",
           "topk", "verify_tokens", "config", "tau", "tau_upper", "tau_convention", "marginal", "engine", "hardware",
           "batch", "speedup", "speedup_baseline", "throughput_tok_s", "baseline_tok_s", "source_kind", "source",
           "locator", "quote", "notes")
METHODS = ("draft_model", "eagle", "eagle2", "eagle3", "eagle_family", "medusa", "hydra", "mtp", "ngram", "lookahead",
           "rest", "token_recycling", "samd", "dflash", "dspark", "dfly")
WORKLOADS = ("chat", "code", "math", "summarization", "rag", "translation", "mixed", "other", "synthetic", "unstated")
STRUCTURES = ("chain", "tree", "dynamic_tree", "adaptive_chain", "block", "lookahead", "retrieval_tree", "unstated")
SOURCE_KINDS = ("repo", "pr", "issue", "paper")
CATALOG_FILE = ("acceptance", "catalog.csv")


def _num(text: str, kind=float):
    return None if text == "" else kind(text)


@dataclass(frozen=True)
class CatalogRow:
    """One catalogued measurement; empty source fields are ``None`` (numbers) or ``""`` (text)."""

    row_id: str
    method: str
    target: str
    draft: str
    dataset: str
    task: str
    workload: str
    temperature: float | None
    structure: str
    k: int | None
    topk: int | None
    verify_tokens: int | None
    config: str
    tau: float | None
    tau_upper: float | None
    tau_convention: str
    marginal: tuple
    engine: str
    hardware: str
    batch: str
    speedup: float | None
    speedup_baseline: str
    throughput_tok_s: float | None
    baseline_tok_s: float | None
    source_kind: str
    source: str
    locator: str
    quote: str
    notes: str

    @classmethod
    def from_csv(cls, rec: dict) -> CatalogRow:
        vals = {name: rec[name] for name in _TEXT_FIELDS}
        vals.update({name: _num(rec[name].strip(), int) for name in _INT_FIELDS})
        vals.update({name: _num(rec[name].strip()) for name in _FLOAT_FIELDS})
        text = rec["marginal"].strip()
        vals["marginal"] = tuple(float(x) for x in text.split(";")) if text else ()
        row = object.__new__(cls)  # the frozen dataclass's __init__ without its per-field object.__setattr__ (no checks
        row.__dict__.update(vals)  # to skip: the class has no __post_init__); 842 rows read at every start-up
        return row

    # views ----------------------------------------------------------------------------------------
    @property
    def has_acceptance(self) -> bool:
        """True when the row gives an accepted length or per-position rates (not only a speedup)."""
        return self.tau is not None or bool(self.marginal)

    @property
    def marginal_array(self) -> np.ndarray:
        return np.asarray(self.marginal, dtype=float)

    @property
    def marginal_complete(self) -> bool:
        """True when the row prints one marginal rate for each of its k draft positions."""
        return bool(self.marginal) and self.k is not None and len(self.marginal) == self.k

    @property
    def accepted_length(self) -> float | None:
        """τ: the printed accepted length, else 1 + Σ m_i of a complete per-position vector."""
        if self.tau is not None:
            return self.tau
        return 1.0 + float(sum(self.marginal)) if self.marginal_complete else None

    @property
    def source_id(self) -> str:
        """The publication a row comes from, for holding sources out: the repository of a ``github:`` file
        (AngelSlim's README and benchmark page are one source), the thread of a PR or issue (description and
        comments are one source), else the source text up to its first space."""
        text = self.source
        if text.startswith("github:"):
            return text[len("github:"):].split("@")[0]
        if text.startswith(("github-pr:", "github-issue:")):
            return text.split(":", 1)[1].split(" ")[0]
        return text.split(" ")[0]

    @property
    def speedup_ratio(self) -> float | None:
        """The printed speedup, else throughput / baseline throughput when both are printed."""
        if self.speedup is not None:
            return self.speedup
        if self.throughput_tok_s and self.baseline_tok_s:
            return self.throughput_tok_s / self.baseline_tok_s
        return None

    def acceptance(self):
        """This row as an :class:`~sdsl.acceptance.Acceptance`: the measured marginal vector
        when complete, else the decay form fitted to τ at k with the ratio of the method's group
        (:data:`sdsl.acceptance.decay.GROUP_DECAY`; chains and blocks only)."""
        from sdsl.acceptance.decay import group_decay
        from sdsl.acceptance.vector import Acceptance

        src = f"catalog:{self.row_id}"
        if self.marginal_complete:
            return Acceptance.from_marginal(self.marginal, source=src)
        if self.tau is not None and self.k is not None and self.structure in ("chain", "block"):
            return Acceptance.from_accepted_length(self.tau, self.k, decay=group_decay(self.method, target=self.target),
                                                  source=src)
        raise UnknownNameError(f"Catalog row {self.row_id} has no chain acceptance to price (structure "
                               f"{self.structure}, k {self.k}, {'no ' if self.tau is None else ''}accepted length).")

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["marginal"] = list(self.marginal)
        return d


def _check(rows: tuple) -> None:
    """Values a malformed edit of the file would break (the integrity test checks the rest)."""
    for r in rows:
        if r.method not in METHODS or r.workload not in WORKLOADS or r.structure not in STRUCTURES:
            raise ConfigError(f"{'/'.join(CATALOG_FILE)} row {r.row_id}: unknown method, workload or structure "
                              f"({r.method}, {r.workload}, {r.structure}).")
        if r.tau is not None and not (math.isfinite(r.tau) and r.tau >= 1.0):
            raise ConfigError(f"{'/'.join(CATALOG_FILE)} row {r.row_id}: accepted length {r.tau} is below 1.")


_INT_FIELDS = ("k", "topk", "verify_tokens")
_FLOAT_FIELDS = ("temperature", "tau", "tau_upper", "speedup", "throughput_tok_s", "baseline_tok_s")
_TEXT_FIELDS = tuple(f.name for f in fields(CatalogRow) if f.name not in {*_INT_FIELDS, *_FLOAT_FIELDS, "marginal"})


@lru_cache(maxsize=1)
def catalog_rows() -> tuple:
    """Every catalogued row, in file order."""
    path = data_path(*CATALOG_FILE)
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise ConfigError(f"{path} has columns {reader.fieldnames}; expected {list(COLUMNS)}.")
        rows = tuple(CatalogRow.from_csv(rec) for rec in reader)
    _check(rows)
    return rows


@lru_cache(maxsize=None)
def method_rows(methods: tuple) -> tuple:
    """The rows of ``methods`` (catalog method names), in file order: the rows of :func:`catalog_rows` whose method
    is one of them. Before the whole catalog is parsed, only their records are (:func:`_method_records`), so a
    command that prices one kind of proposer does not read the other 800 rows."""
    methods = tuple(methods)
    if not methods:
        return ()
    records = _method_records(frozenset(methods)) if catalog_rows.cache_info().currsize == 0 else None
    if records is None:
        return tuple(r for r in catalog_rows() if r.method in methods)
    rows = tuple(CatalogRow.from_csv(dict(zip(COLUMNS, rec))) for rec in records)
    _check(rows)
    return rows


def _method_records(methods: frozenset) -> list | None:
    """The parsed records whose second column (``method``) is one of ``methods``, found without parsing the rest:
    a record starts after a newline with an even number of quote characters before it (outside every quoted field)
    and ends at the first such newline after it. None (parse the whole file) when the header is not
    :data:`COLUMNS` or a record so found is not one row of every column; a quoted ``row_id`` is not found (the
    integrity tests check that this finds the same rows as the whole file parsed)."""
    with open(data_path(*CATALOG_FILE), "rb") as fh:
        data = fh.read()
    head_end = data.find(b"\n")
    if data[:head_end].rstrip(b"\r") != ",".join(COLUMNS).encode():
        return None
    out, counted, quotes = [], 0, 0
    for match in re.finditer(b",(?:" + b"|".join(re.escape(m.encode()) for m in sorted(methods)) + b"),", data):
        start = data.rfind(b"\n", 0, match.start()) + 1
        first = data[start:match.start()]
        if b"," in first or b'"' in first:  # not the second column of a line
            continue
        quotes, counted = quotes + data.count(b'"', counted, start), start
        if quotes % 2:  # the line continues a quoted field
            continue
        end = data.find(b"\n", start)
        while end != -1 and data.count(b'"', start, end) % 2:
            end = data.find(b"\n", end + 1)
        rec = list(csv.reader(io.StringIO(data[start:len(data) if end == -1 else end].decode("utf-8"), newline="")))
        if len(rec) != 1 or len(rec[0]) != len(COLUMNS) or rec[0][1] not in methods:
            return None
        out.append(rec[0])
    return out


def _known(value: str, allowed, what: str) -> str:
    v = value.strip().lower()
    if v not in allowed:
        raise UnknownNameError(f"No catalogued {what} '{value}'; known: {', '.join(allowed)}.")
    return v


def select(*, method: str | None = None, target: str | None = None, workload: str | None = None,
           dataset: str | None = None, source: str | None = None, structure: str | None = None,
           k: int | None = None, with_acceptance: bool = True) -> tuple:
    """Rows matching every given filter. ``method``, ``workload`` and ``structure`` must be catalogued
    names (UnknownNameError otherwise); ``target`` and ``dataset`` match case-insensitively and exactly;
    ``source`` is a case-insensitive substring of the source column. ``with_acceptance`` (default) drops
    speedup-only rows."""
    m = _known(method, METHODS, "method") if method is not None else None
    w = _known(workload, WORKLOADS, "workload") if workload is not None else None
    s = _known(structure, STRUCTURES, "structure") if structure is not None else None
    t = target.strip().lower() if target is not None else None
    d = dataset.strip().lower() if dataset is not None else None
    src = source.strip().lower() if source is not None else None
    out = tuple(r for r in catalog_rows()
                if (m is None or r.method == m) and (w is None or r.workload == w) and (s is None or r.structure == s)
                and (t is None or r.target.lower() == t) and (d is None or r.dataset.lower() == d)
                and (src is None or src in r.source.lower()) and (k is None or r.k == k)
                and (not with_acceptance or r.has_acceptance))
    return out


def _distinct(attr: str, with_acceptance: bool) -> tuple:
    return tuple(sorted({getattr(r, attr) for r in catalog_rows() if r.has_acceptance or not with_acceptance}))


def methods(with_acceptance: bool = True) -> tuple:
    return _distinct("method", with_acceptance)


def targets(with_acceptance: bool = True) -> tuple:
    return _distinct("target", with_acceptance)


def workloads(with_acceptance: bool = True) -> tuple:
    return _distinct("workload", with_acceptance)


def sources(with_acceptance: bool = True) -> tuple:
    """Distinct ``source`` strings (a repository file at a commit, a thread and comment, a paper)."""
    return _distinct("source", with_acceptance)


def _same_setting(r: CatalogRow) -> tuple:
    """Everything but k, tree shape and the results: rows equal here differ only in how they speculate."""
    return (r.source, r.method, r.target, r.draft, r.dataset, r.task, r.temperature, r.engine, r.hardware, r.batch,
            r.config)


def k_sweeps(rows=None) -> tuple:
    """Groups (tuples sorted by k) of chain or block rows with an accepted length that share source,
    proposer, target, task, temperature, engine, hardware, batch and other settings (``config``) but differ in k; SGLang chains are
    ``topk`` 1. Each group has at least two distinct k."""
    groups = defaultdict(list)
    for r in catalog_rows() if rows is None else rows:
        if r.structure in ("chain", "block") and r.k is not None and r.accepted_length is not None and (r.topk in (None, 1)):
            groups[_same_setting(r)].append(r)
    return tuple(tuple(sorted(g, key=lambda r: r.k)) for g in groups.values() if len({r.k for r in g}) >= 2)


def chain_tree_pairs(rows=None) -> tuple:
    """(chain, tree) pairs of one head in one setting with the same depth k and the same verified-token
    budget: the tree spends the budget on width (topk > 1) instead of the chain's single path."""
    chains, trees = {}, defaultdict(list)
    for r in catalog_rows() if rows is None else rows:
        if r.tau is None or r.k is None or r.verify_tokens is None:
            continue
        key = _same_setting(r) + (r.k, r.verify_tokens)
        if r.structure == "chain" and r.topk == 1:
            chains[key] = r
        elif r.structure == "tree" and (r.topk or 0) > 1:
            trees[key].append(r)
    return tuple((chains[key], t) for key in chains for t in trees.get(key, ()))
