"""Write ``sdsl/data/compiled/<name>.json``: each shipped TOML catalog (``sdsl/data/*.toml``) parsed, with the
length and CRC-32 of the bytes it was parsed from (:func:`sdsl._io.compiled_toml`). sdsl reads a catalog from its
compiled copy only while those match the TOML (:func:`sdsl._io.load_shipped_toml`), since JSON loads several times
faster than TOML parses; after editing a catalog, run this again (tests/integrity/test_compiled_catalogs.py fails
until then).

    .venv/bin/python tools/compile_catalogs.py          # rewrite the compiled copies
    .venv/bin/python tools/compile_catalogs.py --check  # exit 1 if a copy is stale or missing
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sdsl._io import COMPILED_DIR, atomic_write_text, compiled_toml, load_toml  # noqa: E402

DATA = ROOT / "sdsl" / "data"


def compiled_text(toml_path: Path) -> str:
    """The compiled copy of one TOML catalog, as written."""
    return json.dumps(compiled_toml(toml_path.read_bytes(), load_toml(toml_path)), indent=1, ensure_ascii=False) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a compiled copy is stale or missing")
    args = parser.parse_args()
    stale = []
    for toml_path in sorted(DATA.glob("*.toml")):
        out = COMPILED_DIR / f"{toml_path.stem}.json"
        text = compiled_text(toml_path)
        if out.exists() and out.read_text(encoding="utf-8") == text:
            continue
        stale.append(out.relative_to(ROOT))
        if not args.check:
            atomic_write_text(out, text)
    for path in stale:
        print(f"{'stale' if args.check else 'wrote'} {path}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
