"""The CLI reference from the commands' --help text: :func:`sections` builds the documentation site's CLI page
(tools/mkdocs_hooks.py, at every `make docs`). A README.md holding the cli-reference markers gets the same text:

    .venv/bin/python tools/readme_cli.py          # rewrite the marked section in README.md
    .venv/bin/python tools/readme_cli.py --check  # exit 1 if that section is stale
"""

from __future__ import annotations

import sys
from pathlib import Path

from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- cli-reference:start -->", "<!-- cli-reference:end -->"


def _help(args: list[str]) -> str:
    from sdsl.cli import cli

    result = CliRunner().invoke(cli, args + ["--help"], prog_name="sdsl", terminal_width=100)
    if result.exit_code != 0:
        raise RuntimeError(f"sdsl {' '.join(args)} --help failed: {result.output}")
    return result.output.rstrip()


def sections(level: int = 3) -> list[str]:
    """Markdown of ``sdsl --help`` and every command's (and subcommand's) help, headings at ``level``."""
    import click

    from sdsl.cli import COMMANDS, cli

    parts = ["```text", "$ sdsl --help", _help([]), "```"]
    ctx = click.Context(cli)
    for name in sorted(COMMANDS):
        cmd = cli.get_command(ctx, name)
        parts += ["", f"{'#' * level} `sdsl {name}`", "", "```text", _help([name]), "```"]
        if isinstance(cmd, click.Group):
            for sub in sorted(cmd.list_commands(ctx)):
                parts += ["", f"{'#' * (level + 1)} `sdsl {name} {sub}`", "", "```text", _help([name, sub]), "```"]
    return parts


def reference() -> str:
    return "\n".join([START, "", *sections(3), "", END])


def render(readme: str) -> str:
    if START not in readme or END not in readme:
        raise SystemExit(f"README.md lacks the {START} ... {END} markers")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return head + reference() + tail


def main() -> int:
    path = ROOT / "README.md"
    old = path.read_text()
    new = render(old)
    if "--check" in sys.argv:
        return 0 if new == old else 1
    path.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
