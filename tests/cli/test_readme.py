import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_cli_reference_is_current():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "readme_cli.py"), "--check"], cwd=ROOT)
    assert r.returncode == 0, "README.md's CLI reference is stale: run `python tools/readme_cli.py`"


def test_readme_shows_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert "make run" in text and "make test" in text


def test_ci_runs_make_test():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
