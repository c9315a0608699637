"""The package holds what users call: every module under sdsl/ is reached from a command (``sdsl.cli``), a figure
(``sdsl.validation.figures``) or a public name (``sdsl`` and its lazy exports); research variants live in
research/, which sdsl never imports.

The walk follows every import in a file (top level and inside functions) and every string constant that names
an sdsl module ("sdsl.cli.optimize" in ``COMMANDS``, "sdsl.validation.figures.scaling:fig_..." in ``FIGURES``,
the ``_LAZY`` map of ``sdsl/__init__.py``), since those are imported by name on first use."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "sdsl"
ENTRY_POINTS = ("sdsl", "sdsl.__main__", "sdsl.cli", "sdsl.validation.figures")


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _named(module: str, path: Path) -> set[str]:
    """Dotted names a module imports or names in a string (candidates, not yet resolved to modules)."""
    here = module.split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else node.module
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("sdsl."):
            names.add(node.value.partition(":")[0])
    return names


def _resolve(name: str, modules) -> str | None:
    """The longest module prefix of a dotted name (``sdsl.roofline.latency.step_time`` -> ``sdsl.roofline.latency``)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def reachable(modules: dict[str, Path]) -> set[str]:
    seen, stack = set(), list(ENTRY_POINTS)
    while stack:
        module = stack.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        stack += [".".join(parts[:i]) for i in range(1, len(parts))]  # importing a.b.c runs a and a.b
        stack += [m for m in (_resolve(n, modules) for n in _named(module, modules[module])) if m]
    return seen


def test_every_sdsl_module_is_reached_from_a_command_a_figure_or_a_public_name():
    modules = _modules()
    unreached = sorted(set(modules) - reachable(modules))
    assert not unreached, (f"modules no command, figure or public name reaches: {unreached}; "
                           "move research variants to research/ (research/README.md) or wire them in")


def test_the_walk_sees_lazy_imports():
    """The walk is not vacuous: lazily imported subcommands, figure recipes and lazy exports are found."""
    seen = reachable(_modules())
    assert {"sdsl.cli.optimize", "sdsl.validation.figures.serving", "sdsl.serving", "sdsl.fit.calibration"} <= seen


def test_sdsl_never_imports_research():
    hits = sorted(m for m, p in _modules().items() if any(n.split(".")[0] == "research" for n in _named(m, p)))
    assert not hits, f"sdsl modules importing the research/ folder (not installed): {hits}"
