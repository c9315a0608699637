"""Write VALIDATION.md's per-class band table ("Uncertainty bands") from the shipped sdsl/data/bands.json.

    .venv/bin/python -m sdsl validate bands --write   # recompute the bands first
    .venv/bin/python tools/bands_table.py             # rewrite the table between its markers in VALIDATION.md
    .venv/bin/python tools/bands_table.py --check     # exit 1 if the table is stale (tests/integrity checks it)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BLOCK = re.compile(r"(<!-- bands-table -->\n)(.*?)(<!-- bands-table:end -->)", re.S)


def main() -> int:
    from sdsl.speculation.bands import load_bands
    from sdsl.validation.band_checks import markdown_table

    path = ROOT / "VALIDATION.md"
    old = path.read_text()
    if not BLOCK.search(old):
        raise SystemExit("VALIDATION.md has no <!-- bands-table --> block")
    new = BLOCK.sub(lambda m: m.group(1) + markdown_table(load_bands()) + "\n" + m.group(3), old)
    if "--check" in sys.argv:
        return 0 if new == old else 1
    if new != old:
        path.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
