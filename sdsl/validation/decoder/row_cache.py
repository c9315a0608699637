"""Measured rows keyed by configuration, kept on disk so that a long validation run resumes where it
stopped (each new row is saved atomically)."""

from __future__ import annotations

import json
from pathlib import Path

from sdsl._io import atomic_write_text

__all__ = ["RowCache"]


class RowCache:
    """``get(key, measure)`` returns the stored row, or measures, stores and returns it."""

    def __init__(self, path):
        self.path = Path(path) if path else None
        self.data = json.loads(self.path.read_text()) if self.path and self.path.exists() else {}

    def get(self, key, fn):
        if key not in self.data:
            self.data[key] = fn()
            if self.path:
                atomic_write_text(self.path, json.dumps(self.data, indent=1, sort_keys=True))
        return self.data[key]
