"""MkDocs hooks that build the documentation site's generated pages at build time, so none can go stale.

- ``cli.md`` — every command's ``--help`` (:func:`tools.cli_text.sections`);
- ``api.md`` — one mkdocstrings block per name of ``sdsl.__all__``, grouped as ``sdsl/__init__.py`` groups them
  (the lazily imported names under the module that defines them);
- ``validation.md``, ``benchmarks.md``, ``figures.md`` — VALIDATION.md, BENCHMARKS.md and
  paper_figures/README.md as they are in the repository, and ``figures/*.png`` — the committed figures;
- ``<!-- sdsl: ARGS -->`` in a page becomes ``$ sdsl ARGS`` and the command's real output, and
  ``<!-- python: FILE ARGS -->`` the script's source and its output;
- a registered figure appears after the first paragraph of a page that names its file (``serving_k_vs_batch.png``);
- a list that starts right under a paragraph (GitHub renders it as a list, Python-Markdown would not) gets the
  blank line before it.

Configured in mkdocs.yml (``hooks:``); ``make docs`` runs ``mkdocs build --strict``.
"""

from __future__ import annotations

import ast
import functools
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# generated page -> (repository file it copies, its title replaced by)
COPIED = {"validation.md": ("VALIDATION.md", None), "benchmarks.md": ("BENCHMARKS.md", None),
          "figures.md": ("paper_figures/README.md", "# Figures")}
LIST_ITEM = re.compile(r"^(- |\* |\d+\. )")
RUN = re.compile(r"^<!-- sdsl: (.+?) -->$", re.M)
SCRIPT = re.compile(r"^<!-- python: (\S+)(.*?) -->$", re.M)


def _figure_names() -> list[str]:
    from sdsl.validation.figures import FIGURES

    return [f.name for f in FIGURES]


@functools.lru_cache(maxsize=1)
def _cli_text():
    """tools/cli_text.py (a sibling file, not an installed package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("cli_text", ROOT / "tools" / "cli_text.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cli_page() -> str:
    return "\n".join(["# CLI reference", "",
                      "Every command's `--help`, generated when the site is built (`tools/cli_text.py`). "
                      "Bad input prints one sentence on stderr and exits with code 2.", "", *_cli_text().sections(2), ""])


def _all_groups() -> list[tuple[str, list[str]]]:
    """(group title, names) in the order and with the comments of ``__all__`` in sdsl/__init__.py."""
    source = (ROOT / "sdsl" / "__init__.py").read_text()
    block = source[source.index("__all__ = ["):]
    block = block[:block.index("\n]") + 2]
    groups: list[tuple[str, list[str]]] = []
    for line in block.splitlines()[1:-1]:
        line = line.strip()
        if line.startswith("#"):
            groups.append((line.lstrip("# ").strip(), []))
        elif line and not line.startswith("*"):
            groups[-1][1].extend(ast.literal_eval("[" + line + "]"))
    return groups


def api_page() -> str:
    import sdsl

    lazy: dict[str, list[str]] = {}
    for name, module in sdsl._LAZY.items():
        lazy.setdefault(module, []).append(name)
    lines = ["# API reference", "",
             "Everything a user calls is importable from `sdsl` itself (`sdsl.__all__`); this page is generated from "
             "it and from the docstrings when the site is built. Equations are in [the model](model.md); every "
             "result object has `report()`, `to_dict()`, `to_json(path=None)` and `plot(ax=None)`.", ""]
    for title, names in _all_groups():
        if title.startswith("imported on first use"):
            continue
        lines += [f"## {title[0].upper()}{title[1:]}", ""]
        lines += [f"::: sdsl.{n}\n" for n in names if n != "__version__"]
    for module, names in lazy.items():
        lines += [f"## From `{module}` (imported on first use)", "",
                  f"`sdsl.{names[0]}` imports `{module}` the first time it is used.", ""]
        lines += [f"::: {module}.{n}\n" for n in names]
    return "\n".join(lines)


def _copied(path: str, title: str | None) -> str:
    text = (ROOT / path).read_text()
    if title:
        text = title + text[text.index("\n"):]
    return text


def on_files(files, config):
    """Add the generated pages and the committed figures to the site's files."""
    from mkdocs.structure.files import File

    pages = {"cli.md": cli_page(), "api.md": api_page(),
             **{name: _copied(src, title) for name, (src, title) in COPIED.items()}}
    for name, text in pages.items():
        files.append(File.generated(config, name, content=text))
    for fig in _figure_names():
        files.append(File.generated(config, f"figures/{fig}", abs_src_path=str(ROOT / "paper_figures" / fig)))
    return files


def _run(args: str) -> str:
    try:
        out = _cli_text().run_sdsl(shlex.split(args))
    except RuntimeError as e:
        raise RuntimeError(f"{e} (failed in the docs)") from None
    return f"```text\n$ sdsl {args}\n{out}\n```"


def _script(path: str, args: str) -> str:
    import subprocess

    out = subprocess.run([sys.executable, path, *shlex.split(args)], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"`python {path}{args}` failed in the docs: {out.stderr}")
    source = (ROOT / path).read_text().rstrip()
    return (f"```python\n{source}\n```\n\n```text\n$ python {path}{args}\n{out.stdout.rstrip()}\n```")


def _with_figures(markdown: str, page_src: str) -> str:
    """Each registered figure after the first paragraph (or heading) that names it; under each heading of figures.md."""
    prefix = "../" * page_src.count("/")
    lines, placed = markdown.split("\n"), set()
    headed = {f for f in _figure_names() if page_src == "figures.md" and f"### {f}" in markdown}
    out, fence, pending = [], False, []
    for i, line in enumerate(lines):
        out.append(line)
        if line.lstrip().startswith("```"):
            fence = not fence
        if fence:
            continue
        for fig in _figure_names():
            if fig in line and fig not in placed and (fig not in headed or line.startswith("### ")):
                placed.add(fig)
                pending.append(fig)
        end = (not line.strip() or line.startswith("#") or i + 1 == len(lines) or not lines[i + 1].strip()
               or lines[i + 1].startswith("#"))
        if pending and end and not line.lstrip().startswith("|"):
            for fig in pending:
                out += ["", f"![{fig}]({prefix}figures/{fig})", ""]
            pending = []
    return "\n".join(out)


def _lists_after_paragraphs(markdown: str) -> str:
    out, fence = [], False
    for line in markdown.split("\n"):
        if line.lstrip().startswith("```"):
            fence = not fence
        prev = out[-1] if out else ""
        if (not fence and LIST_ITEM.match(line) and prev.strip() and not LIST_ITEM.match(prev.lstrip())
                and not prev.startswith((" ", "|", "#"))):
            out.append("")
        out.append(line)
    return "\n".join(out)


def on_page_markdown(markdown, page, config, files):
    markdown = RUN.sub(lambda m: _run(m.group(1)), markdown)
    markdown = SCRIPT.sub(lambda m: _script(m.group(1), m.group(2)), markdown)
    return _with_figures(_lists_after_paragraphs(markdown), page.file.src_uri)
