"""`sdsl train-family`: train the byte-level reference model family on the CPython stdlib."""

from __future__ import annotations

import click

from sdsl.cli._common import echo_json


@click.command("train-family")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Checkpoint directory [default: sdsl/data/checkpoints].")
@click.option("--steps", type=int, default=None, help="Optimizer steps per model [default: 240].")
@click.option("--only", multiple=True, help="Train only these members (repeatable), e.g. byte-d64.")
@click.option("--threads", type=int, default=2, show_default=True, help="torch CPU threads.")
@click.option("--force", is_flag=True, help="Retrain members whose checkpoint already exists.")
@click.option("--json", "as_json", is_flag=True, help="Print the family summary as JSON.")
def train_family(out_dir, steps, only, threads, force, as_json):
    """Train the reference family (five sizes ~0.1M-8M params, plus equal-size wide/deep variants).

    Resumable: an interrupted run continues from its last saved state; finished members are skipped.
    Deterministic: seeds are fixed per member and batches depend only on (seed, step).
    """
    from dataclasses import replace

    from sdsl.errors import InvalidInputError, UnknownNameError
    from sdsl.torch.checkpoint import CHECKPOINT_DIR
    from sdsl.torch.train import TrainConfig, family, train_family as run

    if steps is not None and steps < 1:
        raise InvalidInputError("--steps must be >= 1.")
    if threads < 1:
        raise InvalidInputError("--threads must be >= 1.")
    unknown = sorted(set(only) - set(family()))
    if unknown:
        raise UnknownNameError(f"Unknown family member {', '.join(unknown)}; known: {', '.join(family())}.")

    cfg = TrainConfig() if steps is None else replace(TrainConfig(), steps=steps)
    summary = run(out_dir or CHECKPOINT_DIR, cfg=cfg, only=list(only) or None, threads=threads, force=force,
                  progress=not as_json)
    if as_json:
        echo_json(summary, sort_keys=True)
    else:
        for name, m in summary.items():
            click.echo(f"{name:10s} params={m['params']:>9,d} ppl={m['heldout_ppl']:.3f} "
                       f"bpb={m['heldout_bits_per_byte']:.3f} train_s={m['train_seconds']}")
