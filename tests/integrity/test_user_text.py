"""User-facing text speaks of sdsl and its evidence, never of how the work was organised: no reference to the
project's own work items ("issue 11", "issues 3 and 11", "issue-10 follow-up") and no sessions, helpers or
teammates in the documents, the documentation site's pages, the package's docstrings and CLI help, or its data
READMEs. A citation of another project's issue or pull request names it with ``#`` ("vLLM issue #20780",
"SGLang PR #11398", "vLLM #20780") and passes."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ["README.md", "VALIDATION.md", "BENCHMARKS.md", "paper_figures/README.md", "profiles/README.md",
             "research/README.md", *[str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")]]
PACKAGE_TEXT = [str(p.relative_to(ROOT)) for ext in ("*.py", "*.md") for p in (ROOT / "sdsl").rglob(ext)]
# our own work item: "issue 11", "issues 3 and 11", "issue-11"; a citation carries a '#' before its number
OWN_ISSUE = re.compile(r"\bissues?[ -]+[0-9]+", re.IGNORECASE)
WORK_WORDS = re.compile(r"\b(sessions?|helpers'|teammates?'?s?|the team's)\b", re.IGNORECASE)


def _hits(paths, pattern) -> list[str]:
    out = []
    for rel in paths:
        for n, line in enumerate((ROOT / rel).read_text().splitlines(), 1):
            if pattern.search(line):
                out.append(f"{rel}:{n}: {line.strip()[:120]}")
    return out


def test_no_internal_issue_numbers_in_user_facing_text():
    hits = _hits(DOCUMENTS + PACKAGE_TEXT, OWN_ISSUE)
    assert not hits, "name the claim, not the work item:\n" + "\n".join(hits)


def test_no_work_organisation_words_in_the_documents():
    hits = _hits(DOCUMENTS, WORK_WORDS)
    assert not hits, "say what was measured and how, not who worked when:\n" + "\n".join(hits)


def test_the_patterns_tell_work_items_from_citations():
    """A wrong pattern fails here: it must catch our work items and pass other projects' issue numbers."""
    for own in ("goal (issue 11)", "(issues 3 and 11)", "Issue 11 follow-up", "the issue-11 GPU terms"):
        assert OWN_ISSUE.search(own), own
    for cited in ("vLLM issue #20780", "SpecForge issue #339", "SGLang PR #11398", "vLLM #20780",
                  "vllm-issue26191-eagle3-k7-mtbench", "AngelSlim issues #163"):
        assert not OWN_ISSUE.search(cited), cited
    assert WORK_WORDS.search("while eight sessions shared the two cores") and not WORK_WORDS.search("sdsl/_io.py helpers")
