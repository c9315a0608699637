"""The ``sdsl`` command line.

Subcommands live in ``sdsl/cli/<name>.py`` and are imported only when invoked, so that
``sdsl --help`` stays fast (no pandas, torch or matplotlib at start-up). Every user error is an
:class:`~sdsl.errors.SDSLError`: it is printed as one line on stderr and the exit code is 2.
"""

from __future__ import annotations

import gc
import importlib
import sys

import click

from sdsl.errors import SDSLError

__all__ = ["cli", "main", "COMMANDS"]

# name -> ("module", "attribute", "one-line help shown by `sdsl --help`")
COMMANDS: dict[str, tuple[str, str, str]] = {
    "optimize": ("sdsl.cli.optimize", "optimize", "Best draft models and speculation lengths for a target."),
    "predict": ("sdsl.cli.predict", "predict", "Step-time breakdown, tau and tokens/s of one configuration."),
    "law": ("sdsl.cli.law", "law", "SDSL's draft-size law N* = mu*M + M0 over the paper's 13 targets."),
    "hardware": ("sdsl.cli.catalog", "hardware", "List the hardware catalog."),
    "models": ("sdsl.cli.catalog", "models", "List the model catalog."),
    "engines": ("sdsl.cli.catalog", "engines", "List the engine execution profiles (--engine)."),
    "profile": ("sdsl.cli.profile", "profile", "Measure operator and decoder-layer times into a profile (torch)."),
    "calibrate": ("sdsl.cli.calibrate", "calibrate", "Fit the latency model to profiles, or an engine profile to your runs."),
    "validate": ("sdsl.cli.validate", "validate", "Check predictions against real measurements (latency, decoder, published, acceptance, moe, kernels, bands)."),
    "train-family": ("sdsl.cli.train.family", "train_family", "Train the byte-level reference model family (torch)."),
    "train-head": ("sdsl.cli.train.head", "train_head", "Train an EAGLE-style draft head on a family target (torch)."),
    "figures": ("sdsl.cli.figures", "figures", "Regenerate the paper figures (PNG) into paper_figures/."),
    "acceptance": ("sdsl.cli.acceptance", "acceptance", "Per-position acceptance from an engine log (vLLM, SGLang), a prompt-lookup replay, or an accepted length."),
    "simulate": ("sdsl.cli.simulate", "simulate", "Serving simulation of speculation policies (none, k=N, adaptive) under load."),
}


class LazyGroup(click.Group):
    """A click group that imports each subcommand's module on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[name]
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Run the CLI; user errors (SDSLError, bad options) print one line on stderr and exit 2."""
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except (SDSLError, click.UsageError, click.BadParameter) as exc:
            message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
            click.echo(f"Error: {message}", err=True)
            rv = 2
        except click.exceptions.Abort:
            click.echo("Aborted.", err=True)
            rv = 1
        except click.ClickException as exc:
            exc.show()
            rv = exc.exit_code
        except OSError as exc:
            click.echo(f"Error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), err=True)
            rv = 2
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sdsl")
def cli() -> None:
    """sdsl — predict speculative-decoding throughput and pick the optimal draft and γ.

    Examples:

    \b
        sdsl optimize --target llama-3.1-70b --hardware h100-sxm --tp 4
        sdsl predict --target llama-3.1-8b --proposer eagle --gamma 4 --accepted-length 2.4 --hardware h100-sxm
        sdsl COMMAND --help
    """


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``sdsl``, ``python -m sdsl``: ``argv`` None, the process's own arguments): runs the
    command and ends the process (:func:`_exit`). With ``argv`` (a call from Python) it runs the command and raises
    ``SystemExit`` as click does, leaving the collector and the exit to the caller."""
    if argv is not None:
        cli.main(args=argv, prog_name="sdsl")
        return
    # A command's imports create tens of thousands of long-lived objects (modules, functions, dataclasses); at the
    # default first threshold (700) the cycle collector rescans them dozens of times during start-up. A higher one
    # leaves cycles to be collected later (BENCHMARKS.md, "Start-up"); the library itself never touches gc.
    gc.set_threshold(100_000, *gc.get_threshold()[1:])
    try:
        cli.main(prog_name="sdsl")
    except SystemExit as exc:
        _exit(exc.code)
    _exit(0)


def _exit(code) -> None:
    """End the process as ``sys.exit(code)`` would, without the interpreter's teardown (freeing every module and
    object and a last full collection: about 5% of a short command's instructions, BENCHMARKS.md "Start-up"): run
    the atexit handlers, flush the standard streams, then ``os._exit``. Only while no other thread runs (the
    interpreter would wait for it); every file sdsl writes is closed or atomically renamed before its command
    returns."""
    import atexit
    import os
    import threading

    if threading.active_count() > 1:
        sys.exit(code)
    if code is not None and not isinstance(code, int):  # sys.exit("message"): the message on stderr, status 1
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away (sdsl ... | head), a closed stream
            pass
    os._exit(code or 0)


if __name__ == "__main__":  # pragma: no cover
    main()
