"""Profile files: measured operator and decoder-layer times, and the Vidur per-operator reader.

A *profile* is two files side by side (``profiles/README.md`` documents them):

``NAME.csv``
    one row per measurement, columns :data:`PROFILE_COLUMNS`. ``kind`` is ``"op"`` (one GEMM of a
    decoder layer: ``op`` is a Vidur operator name, ``num_tokens`` rows times an
    ``in_features × out_features`` weight on one tensor-parallel worker) or ``"layer"`` (one whole
    decoder layer, ``op = "decoder_layer"``, ``batch`` sequences × ``q`` new tokens over ``context``
    cached tokens). ``time_s`` is the median over ``repeats`` timed runs, in seconds.
``NAME.json``
    the sidecar: device, datasheet peaks, dtype, torch/CUDA versions, date, harness version and the
    ``ModelSpec`` measured (:func:`new_metadata`). Written atomically.

:class:`ProfileWriter` appends rows and flushes each one as it is measured; reopening the same
profile resumes where it stopped (:meth:`ProfileWriter.done` tells what is already there).
:func:`read_profile` loads and validates; :mod:`sdsl.fit.vidur` (re-exported here) converts Vidur's
``mlp.csv`` files (Agrawal et al., "Vidur", MLSys 2024) into the same long format. A malformed or truncated file
raises :class:`~sdsl.errors.ProfileError` naming the file and the line.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from sdsl._io import atomic_write_text
from sdsl.errors import ProfileError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "FORMAT", "FORMAT_VERSION", "PROFILE_COLUMNS", "KEY_COLUMNS", "GEMM_OPS",
    "Profile", "ProfileWriter", "new_metadata", "profile_paths", "read_profile",
    "read_vidur", "read_vidur_file", "VIDUR_COLUMNS", "read_vidur_elementwise", "VIDUR_ELEMENTWISE",
    "read_calibration_inputs", "hardware_ref",
]

FORMAT = "sdsl-profile"
FORMAT_VERSION = 1
#: Vidur's names for the four GEMMs of a decoder layer (docs/model.md §4).
GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
_INT_COLUMNS = ("tp", "num_tokens", "in_features", "out_features", "batch", "q", "context", "repeats")
_FLOAT_COLUMNS = ("time_s", "time_min_s", "time_std_s")
PROFILE_COLUMNS = ("kind", "op") + _INT_COLUMNS + _FLOAT_COLUMNS
#: Columns that identify one measurement (a resumed run skips rows whose key is already written).
KEY_COLUMNS = ("kind", "op", "tp", "num_tokens", "in_features", "out_features", "batch", "q", "context")
_KINDS = ("op", "layer")
_SIDECAR_REQUIRED = ("format", "format_version", "device", "dtype", "model")


def profile_paths(path: str | os.PathLike) -> tuple[Path, Path]:
    """``(csv, json)`` paths of a profile given as ``NAME``, ``NAME.csv`` or ``NAME.json``."""
    path = Path(path)
    stem = path.with_suffix("") if path.suffix.lower() in (".csv", ".json") else path
    return stem.with_name(stem.name + ".csv"), stem.with_name(stem.name + ".json")


def new_metadata(*, device: Mapping[str, Any], dtype: str, model: Mapping[str, Any],
                 harness_version: str, torch_version: str | None = None,
                 cuda_version: str | None = None, grid: Mapping[str, Any] | None = None,
                 source: str = "", date: str | None = None) -> dict[str, Any]:
    """The sidecar dict. ``device`` holds at least ``name``; add ``hardware`` (catalog name),
    ``peak_flops`` (FLOP/s) and ``mem_bandwidth`` (B/s) so that calibration needs no flag."""
    if "name" not in device:
        raise ProfileError("Profile metadata: 'device' must have a 'name'.")
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "device": dict(device), "dtype": dtype, "model": dict(model),
        "torch_version": torch_version, "cuda_version": cuda_version,
        "date": date or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "harness_version": harness_version, "grid": dict(grid or {}), "source": source,
    }


@dataclass(frozen=True)
class Profile:
    """A loaded profile: ``data`` (one row per measurement) and ``meta`` (the sidecar)."""

    data: "pd.DataFrame"
    meta: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    @property
    def ops(self) -> "pd.DataFrame":
        """The per-operator GEMM rows."""
        return self.data[self.data["kind"] == "op"]

    @property
    def layers(self) -> "pd.DataFrame":
        """The whole decoder-layer rows."""
        return self.data[self.data["kind"] == "layer"]


def _key(row: Mapping[str, Any]) -> tuple:
    return tuple(str(row[c]) if c in ("kind", "op") else int(row[c]) for c in KEY_COLUMNS)


def _check_row(row: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Validate and convert one row (strings or numbers) to typed values; ``where`` names file+line."""
    missing = [c for c in PROFILE_COLUMNS if row.get(c) in (None, "")]
    if missing:
        raise ProfileError(f"{where}: missing value for column {missing[0]!r} (truncated or malformed row).")
    out: dict[str, Any] = {"kind": str(row["kind"]), "op": str(row["op"])}
    if out["kind"] not in _KINDS:
        raise ProfileError(f"{where}: kind must be one of {_KINDS}, got {out['kind']!r}.")
    for c in _INT_COLUMNS:
        try:
            v = float(row[c])
        except (TypeError, ValueError):
            raise ProfileError(f"{where}: column {c!r} is not a number ({row[c]!r}).") from None
        if not (math.isfinite(v) and v == int(v) and v >= 0):
            raise ProfileError(f"{where}: column {c!r} must be a non-negative integer, got {row[c]!r}.")
        out[c] = int(v)
    for c in _FLOAT_COLUMNS:
        try:
            out[c] = float(row[c])
        except (TypeError, ValueError):
            raise ProfileError(f"{where}: column {c!r} is not a number ({row[c]!r}).") from None
    if not (math.isfinite(out["time_s"]) and out["time_s"] > 0):
        raise ProfileError(f"{where}: time_s must be positive and finite, got {row['time_s']!r}.")
    if out["num_tokens"] < 1 or out["tp"] < 1:
        raise ProfileError(f"{where}: num_tokens and tp must be >= 1.")
    return out


def _read_sidecar(json_path: Path) -> dict[str, Any]:
    if not json_path.exists():
        raise ProfileError(f"Profile sidecar {json_path} is missing (every profile CSV needs its JSON).")
    try:
        meta = json.loads(json_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{json_path}: malformed JSON ({exc}).") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ProfileError(f"{json_path}: not an {FORMAT} sidecar (missing \"format\": \"{FORMAT}\").")
    for k in _SIDECAR_REQUIRED:
        if k not in meta:
            raise ProfileError(f"{json_path}: sidecar lacks the required key {k!r}.")
    if int(meta["format_version"]) > FORMAT_VERSION:
        raise ProfileError(f"{json_path}: format_version {meta['format_version']} is newer than this sdsl reads.")
    return meta


def _iter_csv(csv_path: Path) -> Iterable[tuple[int, dict[str, str]]]:
    """Yield ``(line_number, row)``; a wrong header, a short row or a truncated last line raise."""
    try:
        text = csv_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(f"Profile {csv_path} not found.") from None
    except UnicodeDecodeError:
        raise ProfileError(f"{csv_path}: not a UTF-8 text file.") from None
    lines = text.splitlines()
    if not lines:
        raise ProfileError(f"{csv_path}: empty file (no header).")
    header = next(csv.reader([lines[0]]))
    if tuple(header) != PROFILE_COLUMNS:
        raise ProfileError(f"{csv_path}, line 1: header must be {','.join(PROFILE_COLUMNS)}.")
    if not text.endswith("\n") and len(lines) > 1:
        raise ProfileError(f"{csv_path}, line {len(lines)}: truncated last row (no line end; an interrupted "
                           "write — resume the run to repair it).")
    for i, fields in enumerate(csv.reader(lines[1:]), start=2):
        if len(fields) != len(PROFILE_COLUMNS):
            raise ProfileError(f"{csv_path}, line {i}: {len(fields)} fields, expected {len(PROFILE_COLUMNS)}.")
        yield i, dict(zip(PROFILE_COLUMNS, fields))


def read_profile(path: str | os.PathLike) -> Profile:
    """Load and validate a profile (``NAME``, ``NAME.csv`` or ``NAME.json``)."""
    import pandas as pd

    csv_path, json_path = profile_paths(path)
    meta = _read_sidecar(json_path)
    rows, seen = [], {}
    for line, raw in _iter_csv(csv_path):
        row = _check_row(raw, f"{csv_path}, line {line}")
        k = _key(row)
        if k in seen:
            raise ProfileError(f"{csv_path}, line {line}: duplicate of line {seen[k]} (same measurement key).")
        seen[k] = line
        rows.append(row)
    df = pd.DataFrame(rows, columns=list(PROFILE_COLUMNS))
    df.attrs["meta"] = meta
    return Profile(data=df, meta=meta, path=csv_path)


class ProfileWriter:
    """Append measurements to a profile, one flushed line per row, resuming an interrupted run.

    Opening an existing profile checks that its sidecar describes the same device, dtype and model
    (else :class:`ProfileError`), keeps every complete row, drops a half-written last line, and
    reports the written keys through :meth:`done`. Use as a context manager.
    """

    _SAME = ("dtype",)

    def __init__(self, path: str | os.PathLike, meta: Mapping[str, Any], *, resume: bool = True):
        self.csv_path, self.json_path = profile_paths(path)
        self.meta = dict(meta)
        self._done: set[tuple] = set()
        exists = self.csv_path.exists() and self.csv_path.stat().st_size > 0
        if exists and not resume:
            raise ProfileError(f"{self.csv_path} exists; pass resume=True (CLI: --resume) or choose another path.")
        if exists:
            self._reopen()
        else:
            self.csv_path.parent.mkdir(parents=True, exist_ok=True)
            self.csv_path.write_text(",".join(PROFILE_COLUMNS) + "\n", encoding="utf-8")
        atomic_write_text(self.json_path, json.dumps(self.meta, indent=2, sort_keys=True) + "\n")
        self._fh = self.csv_path.open("a", encoding="utf-8", newline="")
        self._writer = csv.writer(self._fh, lineterminator="\n")

    def _reopen(self) -> None:
        if self.json_path.exists():
            old = _read_sidecar(self.json_path)
            for k in self._SAME:
                if old.get(k) != self.meta.get(k):
                    raise ProfileError(f"{self.json_path}: cannot resume, {k} was {old.get(k)!r}, now {self.meta.get(k)!r}.")
            if old["device"].get("name") != self.meta["device"].get("name"):
                raise ProfileError(f"{self.json_path}: cannot resume on a different device "
                                   f"({old['device'].get('name')!r} vs {self.meta['device'].get('name')!r}).")
            if old["model"].get("name") != self.meta["model"].get("name"):
                raise ProfileError(f"{self.json_path}: cannot resume with a different model "
                                   f"({old['model'].get('name')!r} vs {self.meta['model'].get('name')!r}).")
            self.meta["date"] = old.get("date", self.meta.get("date"))
        text = self.csv_path.read_text(encoding="utf-8")
        if not text.endswith("\n"):  # interrupted mid-line: drop the partial row
            text = text[: text.rfind("\n") + 1]
            with self.csv_path.open("r+", encoding="utf-8") as fh:
                fh.truncate(len(text.encode("utf-8")))
        if not text:
            self.csv_path.write_text(",".join(PROFILE_COLUMNS) + "\n", encoding="utf-8")
            return
        for line, raw in _iter_csv(self.csv_path):
            self._done.add(_key(_check_row(raw, f"{self.csv_path}, line {line}")))

    def done(self, row: Mapping[str, Any]) -> bool:
        """Whether a measurement with this key is already in the file."""
        return _key(row) in self._done

    def __len__(self) -> int:
        return len(self._done)

    def append(self, row: Mapping[str, Any]) -> bool:
        """Write one measurement and flush; returns False (writes nothing) if its key is already there."""
        typed = _check_row(row, f"{self.csv_path}, new row")
        k = _key(typed)
        if k in self._done:
            return False
        self._writer.writerow([repr(typed[c]) if c in _FLOAT_COLUMNS else typed[c] for c in PROFILE_COLUMNS])
        self._fh.flush()
        self._done.add(k)
        return True

    def finish(self, **meta_updates: Any) -> None:
        """Record ``meta_updates`` (e.g. ``complete=True``) in the sidecar, atomically."""
        self.meta.update(meta_updates)
        atomic_write_text(self.json_path, json.dumps(self.meta, indent=2, sort_keys=True) + "\n")

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> "ProfileWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


from sdsl.fit.vidur import (VIDUR_COLUMNS, VIDUR_ELEMENTWISE, read_vidur, read_vidur_elementwise,  # noqa: E402,F401
                             read_vidur_file)


def read_calibration_inputs(paths):
    """Operator frames, source names, hardware names, dtypes, (layer rows, model) and Vidur folders of ``paths``."""
    frames, names, hw_names, dtypes, layer_sets, vidur_dirs = [], [], set(), set(), [], []
    for p in map(Path, paths):
        if not p.exists() and not any(x.is_file() for x in profile_paths(p)):
            raise ProfileError(f"{p} not found: give an sdsl profile (NAME, NAME.csv or NAME.json) or a Vidur mlp.csv "
                               "file or folder.")
        if p.is_dir():
            df = read_vidur(p)
            dtypes.add("fp16")
            vidur_dirs.append(p)
        elif p.name == "mlp.csv" or (p.suffix == ".csv" and not profile_paths(p)[1].exists()):
            df = read_vidur_file(p)
            dtypes.add("fp16")
        else:
            prof = read_profile(p)
            df = prof.ops.assign(dtype=prof.meta["dtype"])
            dtypes.add(prof.meta["dtype"])
            if len(prof.layers):
                layer_sets.append((prof.layers, prof.meta["model"]))
            if prof.meta["device"].get("hardware"):
                hw_names.add(hardware_ref(prof.meta["device"]["hardware"]))
        frames.append(df)
        names.append(f"vidur/{p.name}" if p.is_dir() else
                     f"{p.parent.parent.name}/{p.parent.name}" if p.name == "mlp.csv" else p.name)
    return frames, names, hw_names, dtypes, layer_sets, vidur_dirs


def hardware_ref(value) -> str:
    """A sidecar's hardware: catalog names compare case-insensitively, file paths stay as written."""
    text = str(value)
    return text if ("/" in text or "\\" in text or text.lower().endswith((".toml", ".json"))) else text.lower()
