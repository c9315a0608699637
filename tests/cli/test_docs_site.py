"""The documentation site's generated pages (tools/mkdocs_hooks.py; the full build is `make docs`, run by `make test`):
the API page has a block for every public name, the CLI page a section for every command, command markers become
real output, and each figure lands after the paragraph that names it."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _hooks():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "tools" / "mkdocs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_page_documents_every_public_name_at_an_importable_path():
    import sdsl

    blocks = re.findall(r"^::: (\S+)$", _hooks().api_page(), re.M)
    documented = {path.rsplit(".", 1)[1] for path in blocks}
    assert documented == set(sdsl.__all__) - {"__version__"}
    for path in blocks:
        if path in sdsl._NAMESPACES.values():  # a namespace's block documents its module
            importlib.import_module(path)
            continue
        module, _, name = path.rpartition(".")
        assert hasattr(importlib.import_module(module), name), path


def test_cli_page_has_every_command_and_subcommand():
    from sdsl.cli import COMMANDS

    page = _hooks().cli_page()
    for name in COMMANDS:
        assert f"## `sdsl {name}`" in page
    assert "### `sdsl validate latency`" in page and "$ sdsl --help" in page


def test_command_markers_become_their_output():
    hooks = _hooks()
    text = hooks.RUN.sub(lambda m: hooks._run(m.group(1)), "<!-- sdsl: law -->")
    assert text.startswith("```text\n$ sdsl law\n") and "mu" in text.lower()
    with pytest.raises(RuntimeError, match="failed in the docs"):
        hooks._run("predict --target no-such-model --gamma 2 --alpha 0.5")


def test_a_figure_follows_the_paragraph_that_names_it():
    hooks = _hooks()
    page = "Intro.\n\nThe figure `serving_k_vs_batch.png` shows k\nagainst batch.\n\nNext paragraph.\n"
    out = hooks._with_figures(page, "validation.md")
    assert out.index("![serving_k_vs_batch.png](figures/serving_k_vs_batch.png)") > out.index("against batch.")
    assert out.index("![serving_k_vs_batch.png]") < out.index("Next paragraph.")
    assert hooks._with_figures("```\nserving_k_vs_batch.png\n```\n", "validation.md").count("![") == 0


def test_a_list_right_under_a_paragraph_becomes_a_list():
    hooks = _hooks()
    assert hooks._lists_after_paragraphs("Terms:\n- one\n- two\n") == "Terms:\n\n- one\n- two\n"
    assert hooks._lists_after_paragraphs("```\nx\n- y\n```") == "```\nx\n- y\n```"
