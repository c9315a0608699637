"""Each script in examples/ runs in seconds and prints an answer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXPECT = {
    "speculation_on_my_gpu.py": "Verdict:",
    "draft_size_for_70b.py": "Answer: train a draft of about",
    "why_slower.py": "What to do:",
    "engine_calibration.py": "Answer: the fitted profile",
}


@pytest.mark.parametrize("script", sorted(EXPECT))
def test_example_runs(script, tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "MPLCONFIGDIR": str(tmp_path / "mpl")}
    out = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True, text=True, timeout=120,
                         env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert EXPECT[script] in out.stdout


def test_every_example_is_tested():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECT)


def test_why_slower_explains_a_slowdown(tmp_path):
    out = subprocess.run([sys.executable, str(EXAMPLES / "why_slower.py"), "--batch", "192", "--k", "5",
                          "--mean-acceptance-length", "1.5"], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Why it is slower:" in out.stdout and "compute-bound" in out.stdout
