"""Data integrity of the committed measurements that tests read back (tests/committed_results.sha256): each file
is unchanged since the numbers the documents state were pinned, and parses as what it claims to be. These are not
recomputations: the measurements (CPU timings, trained checkpoints) cannot be repeated in the suite; every number
derived from them that sdsl computes is recomputed by the test that states it."""

from __future__ import annotations

import json

import pytest

from sdsl._paths import REPO_ROOT

MANIFEST = REPO_ROOT / "tests" / "committed_results.sha256"
HASHES = {path.strip(): digest for digest, path in (line.split(maxsplit=1) for line in MANIFEST.read_text().splitlines()
                                                    if line.strip() and not line.startswith("#"))}


def sha256_of(path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("rel", sorted(HASHES))
def test_committed_measurement_is_unchanged_and_parses(rel):
    path = REPO_ROOT / rel
    assert path.is_file(), rel
    assert sha256_of(path) == HASHES[rel], f"{rel} changed: re-derive the numbers its integrity tests pin"
    if rel.endswith(".json"):
        data = json.loads(path.read_text())
        assert isinstance(data, dict) and data, rel
    elif rel.endswith(".csv"):
        header = path.read_text().splitlines()[0]
        assert "," in header, rel


def test_every_integrity_marker_names_listed_files():
    """The integrity markers of the suite name only files of the manifest (so the SHA-256 check runs for each)."""
    import ast

    named = set()
    for f in (REPO_ROOT / "tests").rglob("test_*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "integrity":
                named.update(a.value for a in node.args if isinstance(a, ast.Constant))
    assert named and named <= set(HASHES), sorted(named - set(HASHES))
    assert set(HASHES) <= named, sorted(set(HASHES) - named)  # no stale manifest line
