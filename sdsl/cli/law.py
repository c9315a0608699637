"""`sdsl law`: reproduce SDSL's throughput-optimal draft-size law N* = μ·M + M₀."""

from __future__ import annotations

import click

from sdsl.cli._common import echo_json, json_option, split_entries


@click.command()
@click.option("--tokens", "draft_tokens", default=1e12, show_default=True, type=float, help="Draft pre-training tokens D.")
@click.option("--target-tokens", default=None, type=float, help="Target pre-training tokens D' (default: same as D).")
@click.option("--targets", default=None, help="Comma-separated target names (default: the paper's 13).")
@json_option
def law(draft_tokens, target_tokens, targets, as_json):
    """Per-target optimal draft size N* (SDSL acceptance plane + Chinchilla loss law + Lambert-W
    speedup) and the fitted line N* = mu*M + M0, next to the paper's mu = 2.71e-3, M0 = 8.71e7."""
    import math

    from sdsl.speculation.optimum import SDSL_TARGETS, fit_draft_law
    from sdsl.errors import InvalidInputError

    for flag, value in (("--tokens", draft_tokens), ("--target-tokens", target_tokens)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise InvalidInputError(f"{flag} must be a finite positive number of pre-training tokens; got {value:g}.")
    names = split_entries(targets, "--targets", "llama-2-7b,llama-2-13b") if targets is not None else SDSL_TARGETS
    result = fit_draft_law(names, draft_tokens, target_tokens if target_tokens is not None else draft_tokens)
    if as_json:
        echo_json(result.to_dict())
    else:
        click.echo(result.report())
