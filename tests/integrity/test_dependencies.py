"""The runtime dependencies in pyproject.toml are what the installed code imports: no dependency sdsl never
imports (sympy is the notebooks'), and every import is a dependency or an extra (torch, bench) of the commands
that need it."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = {"tomli": "tomli", "yaml": "pyyaml"}  # import name -> distribution name, where they differ



def _requirements(names) -> set[str]:
    return {re.split(r"[<>=;\[ ]", r, maxsplit=1)[0].lower() for r in names}


def _imports(paths) -> set[str]:
    stdlib = set(sys.stdlib_module_names)
    found = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else []
            found.update(n.split(".")[0] for n in names)
    return {DISTRIBUTION.get(n, n) for n in found - stdlib - {"sdsl", "__future__"}}


def test_runtime_dependencies_are_what_sdsl_imports():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = set().union(*(_requirements(project["optional-dependencies"][e]) for e in ("torch", "bench")))
    imported = _imports((ROOT / "sdsl").rglob("*.py"))
    assert _requirements(project["dependencies"]) == imported - extras
    assert "sympy" not in imported
