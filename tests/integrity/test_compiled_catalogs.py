"""The shipped TOML catalogs' compiled copies (sdsl/data/compiled/<name>.json) and the loader that reads them.

The first group is an INTEGRITY CHECK of the committed copies: each holds exactly its TOML file's parse (types
included) and the length and CRC-32 of the file's bytes, so sdsl reads the catalogs from them; after editing a
catalog, ``tools/compile_catalogs.py`` rewrites them. The second group tests the loader
(:func:`sdsl._io.load_shipped_toml`): it reads a copy only while the copy was made from the very bytes of the
TOML file, which a loader that trusted a stale copy fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from sdsl import _io
from sdsl._io import COMPILED_DIR, compiled_toml, load_shipped_toml, load_toml
from sdsl.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
CATALOGS = sorted((ROOT / "sdsl" / "data").glob("*.toml"))


def test_there_are_catalogs_to_check():
    assert {p.name for p in CATALOGS} >= {"models.toml", "hardware.toml", "heads.toml"}


@pytest.mark.parametrize("path", CATALOGS, ids=lambda p: p.name)
def test_integrity_each_compiled_copy_is_its_catalogs_parse(path):
    copy = json.loads((COMPILED_DIR / f"{path.stem}.json").read_text(encoding="utf-8"))
    raw = path.read_bytes()
    assert (copy["length"], copy["crc32"]) == (len(raw), zlib.crc32(raw))
    # as JSON text, so an integer and a float of equal value (1 and 1.0) differ
    assert json.dumps(copy["data"]) == json.dumps(load_toml(path))


def test_integrity_the_tool_finds_no_stale_copy():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "compile_catalogs.py"), "--check"], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("path", CATALOGS, ids=lambda p: p.name)
def test_shipped_catalogs_are_read_from_their_copies(path, monkeypatch):
    def no_toml(raw, where):
        raise AssertionError(f"{where} was parsed as TOML")

    monkeypatch.setattr(_io, "_parse_toml", no_toml)
    assert json.dumps(load_shipped_toml(path)) == json.dumps(json.loads(
        (COMPILED_DIR / f"{path.stem}.json").read_text(encoding="utf-8"))["data"])


# ----------------------------------------------------------------------------------------------------
# The loader
def _catalog(tmp_path, text: str) -> tuple[Path, Path]:
    toml, compiled = tmp_path / "things.toml", tmp_path / "compiled"
    toml.write_text(text)
    compiled.mkdir()
    return toml, compiled


def _write_copy(toml: Path, compiled: Path, data: dict) -> None:
    (compiled / "things.json").write_text(json.dumps(compiled_toml(toml.read_bytes(), data)))


def test_a_copy_of_these_bytes_is_read(tmp_path):
    toml, compiled = _catalog(tmp_path, "[a]\nx = 1\n")
    _write_copy(toml, compiled, {"a": {"x": 1}, "from": "copy"})
    assert load_shipped_toml(toml, compiled)["from"] == "copy"


def test_an_edited_catalog_is_parsed_not_read_from_its_stale_copy(tmp_path):
    toml, compiled = _catalog(tmp_path, "[a]\nx = 1\n")
    _write_copy(toml, compiled, {"a": {"x": 1}})
    toml.write_text("[a]\nx = 2\n")  # same length, other bytes
    assert load_shipped_toml(toml, compiled) == {"a": {"x": 2}}
    toml.write_text("[a]\nx = 1.5\n")
    assert load_shipped_toml(toml, compiled) == {"a": {"x": 1.5}}


def test_a_missing_or_unreadable_copy_falls_back_to_the_toml(tmp_path):
    toml, compiled = _catalog(tmp_path, "[a]\nx = 1\n")
    assert load_shipped_toml(toml, compiled) == {"a": {"x": 1}}
    (compiled / "things.json").write_text("{not json")
    assert load_shipped_toml(toml, compiled) == {"a": {"x": 1}}
    (compiled / "things.json").write_text("[1, 2]")
    assert load_shipped_toml(toml, compiled) == {"a": {"x": 1}}


def test_a_missing_or_malformed_catalog_is_one_config_error(tmp_path):
    toml, compiled = _catalog(tmp_path, "[a\n")
    with pytest.raises(ConfigError, match="Malformed TOML"):
        load_shipped_toml(toml, compiled)
    with pytest.raises(ConfigError, match="File not found"):
        load_shipped_toml(tmp_path / "none.toml", compiled)
