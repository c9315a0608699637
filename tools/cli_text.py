"""The `sdsl` command's text, run in-process: :func:`run_sdsl` (one command's output, as a terminal 100 columns wide
prints it) and :func:`sections` (every command's ``--help``). The documentation site's CLI page and its
``<!-- sdsl: ARGS -->`` markers (tools/mkdocs_hooks.py) and the README's worked examples (tools/readme_examples.py)
all come from here.
"""

from __future__ import annotations


def run_sdsl(args: list[str]) -> str:
    """The output of ``sdsl ARGS`` (trailing whitespace stripped); a non-zero exit is an error."""
    from click.testing import CliRunner

    from sdsl.cli import cli

    result = CliRunner().invoke(cli, args, prog_name="sdsl", terminal_width=100)
    if result.exit_code != 0:
        raise RuntimeError(f"`sdsl {' '.join(args)}` failed ({result.exit_code}): {result.output}")
    return result.output.rstrip()


def sections(level: int = 3) -> list[str]:
    """Markdown of ``sdsl --help`` and every command's (and subcommand's) help, headings at ``level``."""
    import click

    from sdsl.cli import COMMANDS, cli

    parts = ["```text", "$ sdsl --help", run_sdsl(["--help"]), "```"]
    ctx = click.Context(cli)
    for name in sorted(COMMANDS):
        cmd = cli.get_command(ctx, name)
        parts += ["", f"{'#' * level} `sdsl {name}`", "", "```text", run_sdsl([name, "--help"]), "```"]
        if isinstance(cmd, click.Group):
            for sub in sorted(cmd.list_commands(ctx)):
                parts += ["", f"{'#' * (level + 1)} `sdsl {name} {sub}`", "", "```text",
                          run_sdsl([name, sub, "--help"]), "```"]
    return parts
