"""`sdsl optimize --proposer ... [--export ENGINE]`: rank proposers and k together over batch sizes."""

from __future__ import annotations

import click

from sdsl.cli._common import echo_json, format_table

__all__ = ["rank_and_report"]

ALL_PROPOSERS = ("eagle", "eagle3", "medusa", "mtp", "ngram")


def _acceptance_for(proposers, acc, target, pretrain_tokens):
    """One acceptance per proposer: the given one, else SDSL's plane for draft models."""
    from sdsl.cli._speculation import _Acceptance
    from sdsl.core.proposers import DraftModel
    from sdsl.core.scaling import acceptance_from_sizes
    from sdsl.errors import InvalidInputError

    out = {}
    for p in proposers:
        if acc is not None:
            out[p.name] = [acc]
        elif isinstance(p, DraftModel):
            a = float(acceptance_from_sizes(p.model.total_params, target.total_params, pretrain_tokens, pretrain_tokens))
            out[p.name] = [_Acceptance("alpha", a)]
        else:
            raise InvalidInputError(f"{p.name} needs a measured acceptance: --alpha, --accepted-length or --acceptance.")
    return out


def rank_and_report(*, target, proposers, deployment, acc, gamma_max, batches, max_batch, pretrain_tokens, top,
                    export, as_json):
    """Rank, print the table (or JSON), the break-even batch and, with ``export``, the engine config."""
    import numpy as np

    from sdsl.core.export import export_config
    from sdsl.core.proposers import make_proposer
    from sdsl.core.ranking import k_table, rank_proposers
    from sdsl.errors import InvalidInputError

    names = [n for p in proposers for n in (ALL_PROPOSERS if p == "all" else (p,))]
    props = [make_proposer(p) for p in names]
    acceptance = _acceptance_for(props, acc, target, pretrain_tokens)
    gammas = range(0, gamma_max + 1)
    dense = np.unique(np.concatenate([np.arange(1, max_batch + 1), batches]))
    ranking = rank_proposers(target, props, deployment, acceptance=acceptance, gammas=gammas, batches=dense)
    best = ranking.best()
    pick_i = int(best["proposer"][np.searchsorted(dense, batches[0]), 0])
    pick_g = int(best["gamma"][np.searchsorted(dense, batches[0]), 0])
    if pick_g == 0:  # plain decoding wins: still export the best speculative config of that proposer
        sub = ranking.tokens_per_s[:, 1:, np.searchsorted(dense, batches[0]), 0]
        pick_i, pick_g = np.unravel_index(np.argmax(sub), sub.shape)
        pick_i, pick_g = int(pick_i), int(pick_g) + 1
    table = k_table(ranking, pick_i)
    rows = ranking.records(top=top, batches=batches)
    stop = ranking.break_even_batch()[0]
    pick = {"proposer": props[pick_i].name, "gamma": pick_g, "tree": None}
    result = {"target": target.name, "hardware": deployment.hardware.name, "configs": rows,
              "break_even_batch": None if np.isnan(stop) else int(stop), "max_batch": max_batch, "pick": pick,
              "k_table": table}
    if export:
        result["export"] = {"engine": export, "config": export_config(export, pick, table)}
    if as_json:
        echo_json(result)
        return
    for b in batches:
        sel = [r for r in rows if r["batch"] == b]
        if not sel:
            raise InvalidInputError(f"No configuration priced at batch {b}.")
        for r in sel:
            r["tpot_ms"] = 1e3 * r["tpot_s"]
        click.echo(f"batch {b}:")
        click.echo(format_table(sel, [("proposer", "proposer", ""), ("gamma", "k", "d"), ("tau", "tau", ".2f"),
                                      ("tokens_per_s", "tokens/s", ".1f"), ("tpot_ms", "TPOT ms", ".2f"),
                                      ("speedup", "speedup", ".2f")]))
        click.echo("")
    click.echo("speculation stops paying at batch " + (str(result["break_even_batch"]) if result["break_even_batch"]
                                                        else f"> {max_batch} (pays at every batch searched)"))
    click.echo(f"best k by batch for {pick['proposer']} (k = 0: do not speculate)")
    click.echo(format_table(table, [("batch_min", "batch from", "d"), ("batch_max", "to", "d"), ("k", "k", "d")]))
    if export:
        click.echo(f"\n{export} configuration:\n{result['export']['config']}")
