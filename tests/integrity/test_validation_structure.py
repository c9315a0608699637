"""Integrity check of VALIDATION.md's structure (reads the document only; no number is recomputed here).

VALIDATION.md is organised by claim: a claims index (claim, result, goal, met?, command, section) whose every row links
to the section that holds the evidence, no internal work-item references, and the blocks marked for wholesale
replacement present exactly once. The numbers themselves are pinned by the tests each section names.
"""

from __future__ import annotations

import re

from sdsl._paths import REPO_ROOT

DOC = REPO_ROOT / "VALIDATION.md"


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def _slug(heading: str) -> str:
    """GitHub's (and mkdocs' for headings without runs of punctuation) anchor of a heading."""
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", heading.strip().lower()))


def _anchors(text: str) -> set[str]:
    in_code = False
    out = set()
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        m = None if in_code or line.startswith("    ") else re.match(r"#{1,6} (.+)", line)
        if m:
            out.add(_slug(m.group(1)))
    return out


def _index_rows(text: str) -> list[str]:
    block = text.split("## Claims index", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in block.splitlines() if r.startswith("|")]
    assert rows[0].startswith("| claim | result") and set(rows[1]) <= set("|-")
    return rows[2:]


def test_no_internal_work_item_references():
    text = _text()
    assert not re.findall(r"issues? [0-9]+", text, re.I)  # external citations keep their '#': "vLLM issue #20780"
    for word in (r"\bsessions?\b", r"follow-up", r"\bhelpers?\b", r"/work/"):
        assert not re.search(word, text, re.I), word


def test_claims_index_links_every_row_to_an_existing_section():
    text = _text()
    rows = _index_rows(text)
    assert 20 <= len(rows) <= 42
    anchors = _anchors(text)
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 6, row
        assert cells[3], row  # met? is always stated
        links = re.findall(r"\]\(#([^)]+)\)", cells[5])
        assert links and all(a in anchors for a in links), row


def test_missed_goals_stay_visible_in_the_index():
    missed = [r for r in _index_rows(_text()) if "not met" in r.lower() or "not measured" in r.lower()]
    assert len(missed) >= 10  # e.g. H100 GEMMs, engine rows, MoE, acceptance catalog, decoder speedup, trees


def test_relative_links_point_at_files_that_exist():
    for target in re.findall(r"\]\(([^)#][^)]*)\)", _text()):
        if not re.match(r"[a-z]+://", target):
            assert (REPO_ROOT / target.split("#")[0]).exists(), target


def test_replaceable_blocks_are_marked_once_and_in_order():
    text = _text()
    for name in ("published", "serving70b"):
        start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
        assert text.count(start) == 1 and text.count(end) == 1, name
        assert text.index(start) < text.index(end), name
