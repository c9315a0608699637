"""Where sdsl finds its shipped data and, in a source checkout, its committed results.

The measurements and traces sdsl's evidence rests on ship inside the package, under ``sdsl/data``
(sources and licences in ``sdsl/data/README.md``): Vidur's operator and all-reduce timings
(``vidur/``), the Splitwise serving traces (``traces/``) and published engine measurements
(``published/``). Committed results (``profiles/``, ``benchmarks/results/``) exist only in a
source checkout, under :data:`REPO_ROOT`.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["REPO_ROOT", "DATA_DIR", "data_path"]

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(__file__).resolve().parent / "data"


def data_path(*parts: str) -> Path:
    """A path inside the package's data folder, e.g. ``data_path("vidur", "h100")``."""
    return DATA_DIR.joinpath(*parts)
