"""The measured runs ``sdsl calibrate engine`` reads: a CSV, a JSON list, or an engine's own benchmark text (SGLang's
``send_one`` lines, ``bench_one_batch``'s decode latency), each row checked to one of the metrics it can fit
(:func:`read_runs`; :mod:`sdsl.fit.engine_calibration` prices and fits them)."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import numpy as np

from sdsl.errors import ConfigError, InvalidInputError

RUN_FIELDS = ("target", "hardware", "tp", "batch", "context", "dtype", "proposer", "k", "tree", "accepted_length",
              "tpot_ms", "tokens_per_s", "speedup", "label")
_METRICS = ("tpot_ms", "tokens_per_s", "speedup")


_SEND_ONE = re.compile(r"acc_length\s*[=:]\s*([0-9.]+).*?speed\s*[=:]\s*([0-9.]+)\s*token/s", re.S | re.I)
_BENCH_ONE = re.compile(r"Decode\.\s+median latency:\s*([0-9.eE+-]+)\s*s", re.I)


def _rows_from_csv(path: Path) -> list[dict]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a UTF-8 text file (a runs CSV is text: a header of run columns, then rows).") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    unknown = set(reader.fieldnames or ()) - set(RUN_FIELDS)
    if unknown:
        raise ConfigError(f"{path}: unknown run column(s) {', '.join(sorted(unknown))}; known: {', '.join(RUN_FIELDS)}.")
    return [{k: v for k, v in r.items() if v not in (None, "")} for r in reader]


def _rows_from_json(path: Path, data) -> list[dict]:
    if isinstance(data, dict) and "mean_tpot_ms" in data:  # vllm bench serve --save-result
        row = {"tpot_ms": data["mean_tpot_ms"], "batch": data.get("max_concurrency") or 1, "label": path.name}
        log = Path(data["log"]) if data.get("log") else path.with_suffix(".log")
        if log.is_file():
            from sdsl.fit.engine_logs import read_acceptance_log

            got = read_acceptance_log(log)
            row.update(accepted_length=got.mean_accepted_length, k=got.k)
        return [row]
    if isinstance(data, dict) and "avg_latency" in data:  # vllm bench latency --output-json
        return [{"latency_s": data["avg_latency"], "label": path.name}]
    rows = data.get("runs") if isinstance(data, dict) else data
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ConfigError(f"{path}: a runs JSON is a list of objects (or {{'runs': [...]}}), a vLLM bench result, "
                          "or a vLLM bench latency result.")
    return rows


def _rows_from_text(path: Path, text: str) -> list[dict]:
    rows = [{"accepted_length": float(a), "tokens_per_s": float(s), "label": f"{path.name}#{i + 1}"}
            for i, (a, s) in enumerate(_SEND_ONE.findall(text))]
    rows += [{"latency_s_per_step": float(v), "label": f"{path.name} decode#{i + 1}"}
             for i, v in enumerate(_BENCH_ONE.findall(text))]
    if not rows:
        raise ConfigError(f"{path}: no runs found (expected a CSV or JSON of runs, a vLLM bench JSON, or SGLang "
                          "send_one / bench_one_batch output).")
    return rows


def read_runs(paths, defaults: dict | None = None) -> list[dict]:
    """Every run of ``paths`` as a dict of :data:`RUN_FIELDS`, missing fields filled from ``defaults``; a file sdsl
    cannot read, or a run that lacks a field no default gives, is a one-line ConfigError/InvalidInputError."""
    from sdsl._io import load_json

    out = []
    for name in paths:
        path = Path(name)
        if not path.is_file():
            raise ConfigError(f"Run file {path} not found.")
        if path.suffix.lower() == ".csv":
            rows = _rows_from_csv(path)
        elif path.suffix.lower() == ".json":
            rows = _rows_from_json(path, load_json(path))
        else:
            rows = _rows_from_text(path, path.read_text(encoding="utf-8", errors="replace"))
        for i, r in enumerate(rows):
            out.append(_complete({**(defaults or {}), **r}, f"{path}, row {i + 1}"))
    if not out:
        raise InvalidInputError("No runs to calibrate on.")
    return out


def _complete(row: dict, where: str) -> dict:
    """A run with its numbers parsed and its measured metric decided."""
    row = dict(row)
    if "latency_s" in row:  # bench latency: batch x output_len tokens per request latency
        if "output_len" not in row:
            raise InvalidInputError(f"{where}: a vLLM bench latency result needs --output-len (tokens per request).")
        row["tokens_per_s"] = float(row.get("batch", 1)) * float(row["output_len"]) / float(row.pop("latency_s"))
    if "latency_s_per_step" in row:
        step = float(row.pop("latency_s_per_step"))
        row["tokens_per_s"] = float(row.get("batch", 1)) * float(row.get("accepted_length") or 1.0) / step
    missing = [f for f in ("target", "hardware") if not row.get(f)]
    if missing:
        raise InvalidInputError(f"{where}: no {' or '.join(missing)} (give a column or --{missing[0]}).")
    given = [m for m in _METRICS if row.get(m) not in (None, "")]
    if len(given) != 1:
        raise InvalidInputError(f"{where}: give exactly one of tpot_ms, tokens_per_s, speedup (got {len(given)}).")
    proposer = str(row.get("proposer") or "").strip()
    row["proposer"] = None if proposer.lower() in ("", "none", "plain") else proposer
    row["metric"], row["measured"] = given[0], _number(row, given[0], where, "a positive number", 0.0, strict=True)
    row["batch"] = _number(row, "batch", where, "a positive whole number", 1, default=1, whole=True)
    row["tp"] = _number(row, "tp", where, "a positive whole number", 1, default=1, whole=True)
    row["context"] = _number(row, "context", where, "a non-negative number of tokens", 0.0, default=1024.0)
    row["k"] = _number(row, "k", where, "a non-negative whole number", 0, whole=True)
    row["accepted_length"] = _number(row, "accepted_length", where, "at least 1 (the bonus token included)", 1.0)
    if row["proposer"] is not None:
        if row["accepted_length"] is None:
            raise InvalidInputError(f"{where}: a speculative run needs its accepted_length (bonus token included).")
        if row["k"] is None and not row.get("tree"):
            raise InvalidInputError(f"{where}: a speculative run needs k (chain length) or tree (STEPS,TOPK,TOKENS).")
    elif row["metric"] == "speedup":
        raise InvalidInputError(f"{where}: a plain run cannot be measured as a speedup.")
    row["where"] = where
    return row


def _number(row: dict, column: str, where: str, what: str, lo, *, default=None, whole: bool = False,
            strict: bool = False):
    """``row[column]`` as a finite number >= ``lo`` (> ``lo`` when ``strict``; an int when ``whole``), ``default``
    when absent; anything else is one InvalidInputError naming the file, the row and the column."""
    text = row.get(column)
    if text in (None, ""):
        return default
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = float("nan")
    ok = np.isfinite(value) and (value > lo if strict else value >= lo) and (not whole or value == int(value))
    if not ok:
        raise InvalidInputError(f"{where}: {column} must be {what}; got {text!r}.")
    return int(value) if whole else value
