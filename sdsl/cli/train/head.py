"""`sdsl train-head`: train an EAGLE-style draft head on a frozen family target (torch)."""

from __future__ import annotations

import math

import click

from sdsl.cli._common import echo_json


@click.command("train-head")
@click.option("--target", default="byte-d288", show_default=True, help="Family member whose head to train.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Checkpoint directory [default: sdsl/data/checkpoints].")
@click.option("--steps", type=int, default=None, help="Optimizer steps [default: 1600].")
@click.option("--pool", type=int, default=None, help="Training windows whose target features are precomputed "
              "[default: 2048].")
@click.option("--lr", type=float, default=None, help="Peak AdamW learning rate (cosine to 0.1x) [default: 0.003].")
@click.option("--labels", type=click.Choice(["tokens", "target"]), default=None,
              help="Classification target: the corpus token x_{t+2} or the target's distribution p_{t+2} "
              "(EAGLE §4.2) [default: target].")
@click.option("--threads", type=int, default=2, show_default=True, help="torch CPU threads.")
@click.option("--json", "as_json", is_flag=True, help="Print the head's metadata as JSON.")
def train_head(target, out_dir, steps, pool, lr, labels, threads, as_json):
    """Train a draft head (fc + one decoder layer at the target's width, sharing the target's embedding
    and LM head) on the stdlib corpus; writes <target>-head.safetensors next to the family.

    Resumable: an interrupted run continues from its last saved state. Deterministic: batches depend
    only on (seed, step).
    """
    from dataclasses import replace

    from sdsl.errors import InvalidInputError, UnknownNameError
    from sdsl.torch.checkpoint import CHECKPOINT_DIR
    from sdsl.torch.head_train import HeadConfig, train_head as run
    from sdsl.torch.train import family

    for flag, value in (("--steps", steps), ("--pool", pool)):
        if value is not None and value < 1:
            raise InvalidInputError(f"{flag} must be >= 1.")
    if lr is not None and not (math.isfinite(lr) and lr > 0):
        raise InvalidInputError("--lr must be a finite number > 0.")
    if threads < 1:
        raise InvalidInputError("--threads must be >= 1.")
    if target not in family():
        raise UnknownNameError(f"Unknown family member {target}; known: {', '.join(family())}.")
    given = {"steps": steps, "pool": pool, "lr": lr, "labels": labels}
    cfg = replace(HeadConfig(), **{k: v for k, v in given.items() if v is not None})
    meta = run(target, out_dir or CHECKPOINT_DIR, cfg=cfg, threads=threads, progress=not as_json)
    if as_json:
        echo_json(meta, sort_keys=True)
    else:
        click.echo(f"{meta['name']}: params={meta['params']:,d} held-out top-1 agreement "
                   f"{meta['heldout_top1_agreement']:.3f} train_s={meta['train_seconds']}")
