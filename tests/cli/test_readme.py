import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_worked_examples_are_current():
    """The four worked examples show sdsl's real output: rerunning them reproduces README.md byte for byte."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}  # this checkout
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "readme_examples.py"), "--check"], cwd=ROOT, env=env)
    assert r.returncode == 0, "README.md's worked examples are stale: run `python tools/readme_examples.py`"


def test_readme_is_short_and_has_four_examples():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250 and text.count("<!-- example: sdsl ") == 4
    table = text.split("## How accurate is it", 1)[1].split("## Known limits", 1)[0]
    assert sum(line.startswith("| ") for line in table.splitlines()) - 1 <= 12  # header row excluded
    limits = text.split("## Known limits", 1)[1].split("\n## ", 1)[0]
    assert sum(line.startswith("- ") for line in limits.splitlines()) == 5


def test_readme_shows_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert "make run" in text and "make test" in text


def test_ci_runs_make_test():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
