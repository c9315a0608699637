"""Every command's ``--help`` is its docstring: ``sdsl --help``'s one-liner is the docstring's first line, and each
command and subcommand ends with an Examples section whose commands name real commands and options."""

from __future__ import annotations

import shlex

import click
import pytest

from sdsl.cli import COMMANDS, cli

CTX = click.Context(cli, info_name="sdsl")


def _commands():
    out = [(("sdsl",), cli)]
    for name in sorted(COMMANDS):
        cmd = cli.get_command(CTX, name)
        out.append((("sdsl", name), cmd))
        if isinstance(cmd, click.Group):
            out += [(("sdsl", name, sub), cmd.get_command(CTX, sub)) for sub in sorted(cmd.list_commands(CTX))]
    return out


def _examples(cmd) -> list[str]:
    text = cmd.help or ""
    assert "Examples:" in text
    block = text.split("Examples:", 1)[1]
    return [line.strip() for line in block.splitlines() if line.strip().startswith("sdsl ")]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_one_liner_is_the_docstrings_first_line(name):
    cmd = cli.get_command(CTX, name)
    assert (cmd.help or "").strip().split("\n\n")[0].replace("\n", " ").split() == COMMANDS[name][2].split()


@pytest.mark.parametrize("path,cmd", _commands(), ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_every_help_has_examples_of_real_commands_and_options(path, cmd):
    examples = _examples(cmd)
    assert examples
    for line in examples:
        words = shlex.split(line)[1:]
        target, rest = cli, words
        while isinstance(target, click.Group) and rest and rest[0] in target.list_commands(CTX):
            target, rest = target.get_command(CTX, rest[0]), rest[1:]
        if rest == ["--help"] or (rest and rest[0] == "COMMAND"):
            continue
        # a group given arguments runs its default subcommand (`sdsl calibrate PROFILES` is `calibrate latency`)
        commands = [target.get_command(CTX, c) for c in target.list_commands(CTX)] if isinstance(target, click.Group) \
            else [target]
        options = {opt for c in commands for p in c.params for opt in (*p.opts, *p.secondary_opts)}
        flags = {w.split("=")[0] for w in rest if w.startswith("-")}
        assert flags <= options, f"{line}: {sorted(flags - options)}"
