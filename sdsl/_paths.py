"""Where sdsl finds the project's shared data and committed results.

The measurements and traces in ``../shared/data`` (DESIGN.md §4) sit beside the repository; set
``SDSL_SHARED_DATA`` to point elsewhere. Committed results (profiles/, benchmarks/results/) live in
the repository itself and exist only in a source checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["REPO_ROOT", "shared_data_dir"]

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """``$SDSL_SHARED_DATA`` if set, else ``<repo>/../shared/data``."""
    env = os.environ.get("SDSL_SHARED_DATA")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "data"
