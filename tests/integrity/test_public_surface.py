"""The public surface: README and the notebooks import only from ``sdsl``, every name they use is in
``sdsl.__all__``, every name of ``__all__`` resolves, and the names above the core load only on first use."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import sdsl

ROOT = Path(__file__).resolve().parents[2]


def _readme_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def _notebook_cells() -> list[str]:
    cells = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        cells += ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    return cells


SOURCES = _readme_blocks() + _notebook_cells()


def test_there_is_code_to_check():
    assert len(_readme_blocks()) >= 2 and len(_notebook_cells()) >= 10


@pytest.mark.parametrize("i", range(len(SOURCES)))
def test_readme_and_notebooks_import_only_from_sdsl(i):
    tree = ast.parse(SOURCES[i])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert all(a.name == "sdsl" or not a.name.startswith("sdsl") for a in node.names), ast.unparse(node)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sdsl"):
            assert node.module == "sdsl", ast.unparse(node)
            assert {a.name for a in node.names} <= set(sdsl.__all__), ast.unparse(node)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sdsl":
            assert node.attr in sdsl.__all__, f"sdsl.{node.attr}"


def test_every_public_name_resolves_and_is_listed_once():
    assert len(sdsl.__all__) == len(set(sdsl.__all__))
    missing = [n for n in sdsl.__all__ if not hasattr(sdsl, n)]
    assert missing == []


def test_the_layers_above_the_core_load_on_first_use():
    code = ("import sys, sdsl; before = 'sdsl.serving' in sys.modules or 'sdsl.fit.calibration' in sys.modules; "
            "sdsl.simulate; sdsl.fit_latency; print(before, 'sdsl.serving' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
    with pytest.raises(AttributeError):
        sdsl.no_such_name  # noqa: B018
