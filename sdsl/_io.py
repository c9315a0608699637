"""Small file helpers: atomic writes and TOML/JSON loading with clear errors."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from sdsl.errors import ConfigError

__all__ = ["atomic_write_text", "atomic_write_bytes", "load_toml", "load_json", "load_mapping"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file and an atomic rename."""
    import tempfile  # imported on first write: reading commands do not pay for it

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file ordinary permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def load_toml(path: str | os.PathLike) -> dict[str, Any]:
    """Read a TOML file; a missing or malformed file raises :class:`ConfigError`."""
    if sys.version_info >= (3, 11):  # imported on first read (its regular expressions compile at import)
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    path = Path(path)
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"File not found: {path}.") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"Malformed TOML in {path}: {exc}.") from None


def load_json(path: str | os.PathLike) -> Any:
    """Read a JSON file; a missing or malformed file raises :class:`ConfigError`."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"File not found: {path}.") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Malformed JSON in {path}: {exc}.") from None


def load_mapping(path: str | os.PathLike) -> dict[str, Any]:
    """Read a TOML or JSON file (chosen by suffix) into a dict."""
    path = Path(path)
    data = load_json(path) if path.suffix.lower() == ".json" else load_toml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a table/object at the top level.")
    return data
