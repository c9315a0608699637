"""The result protocol every sdsl result object follows: ``report()``, ``to_dict()``,
``to_json(path=None)`` and ``plot(ax=None)``.

A result class defines ``report``, ``to_dict`` (plain Python values only) and ``plot`` (a call into
a pure drawing function of :mod:`sdsl.plots`, imported inside the method); :class:`Result` adds the
JSON serialisation, written atomically when a path is given.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from sdsl._io import atomic_write_text

__all__ = ["Result", "plain", "finite_or_none"]


def plain(value: Any) -> Any:
    """``value`` with numpy arrays and scalars turned into lists and Python numbers, tuples into
    lists and mapping keys into strings, so that ``json.loads(json.dumps(plain(v))) == plain(v)``."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return plain(value.tolist())
    return value


def finite_or_none(value: Any) -> Any:
    """``value`` (plain Python values) with every NaN or infinite float replaced by ``None`` (JSON's null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite_or_none(v) for v in value]
    return value


class Result:
    """Mixin of the result protocol; subclasses define ``report``, ``to_dict`` and ``plot``."""

    def report(self) -> str:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def to_dict(self) -> dict:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def plot(self, ax=None):  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def to_json(self, path: str | os.PathLike | None = None, **to_dict_options) -> str:
        """The result as indented JSON (NaN and infinity written as ``null``, as every sdsl JSON writes them);
        written atomically to ``path`` when given. Keyword options go to :meth:`to_dict`."""
        text = json.dumps(finite_or_none(plain(self.to_dict(**to_dict_options))), indent=2, allow_nan=False) + "\n"
        if path is not None:
            atomic_write_text(path, text)
        return text
