"""`sdsl optimize --proposer ... [--export ENGINE]`: rank proposers and k together over batch sizes."""

from __future__ import annotations

import click

from sdsl.cli._common import echo_json, format_table

__all__ = ["rank_and_report", "ALL_PROPOSERS"]

ALL_PROPOSERS = ("eagle", "eagle3", "medusa", "mtp", "ngram")


def _proposers(proposers, drafts):
    from sdsl.core.proposers import make_proposer

    names = [n for p in proposers for n in (ALL_PROPOSERS if p == "all" else (p,))]
    names += [f"draft:{d.strip()}" for d in (drafts or "").split(",") if d.strip()]
    return [make_proposer(n) for n in (names or ALL_PROPOSERS)]


def _acceptance_for(props, acc, target, pretrain_tokens):
    """One acceptance per proposer: the given one, else SDSL's plane for draft models."""
    from sdsl.core.acceptance_vector import Acceptance
    from sdsl.core.proposers import DraftModel
    from sdsl.core.scaling import acceptance_from_sizes
    from sdsl.errors import InvalidInputError

    out = {}
    for p in props:
        if acc is not None:
            out[p.name] = [acc]
        elif isinstance(p, DraftModel):
            a = float(acceptance_from_sizes(p.model.total_params, target.total_params, pretrain_tokens, pretrain_tokens))
            out[p.name] = [Acceptance.from_iid(a)]
        else:
            raise InvalidInputError(f"{p.name} needs a measured acceptance: --alpha, --accepted-length (with "
                                    "--accepted-at), --acceptance or --acceptance-file.")
    return out


def _pick(ranking, dense, batch):
    """(proposer index, k) of the best configuration at ``batch``; the best k ≥ 1 when plain decoding wins."""
    import numpy as np

    b = int(np.searchsorted(dense, batch))
    sub = ranking.tokens_per_s[:, 1:, b, 0] if ranking.gammas[0] == 0 else ranking.tokens_per_s[:, :, b, 0]
    i, g = np.unravel_index(np.argmax(sub), sub.shape)
    return int(i), int(ranking.gammas[int(g) + (1 if ranking.gammas[0] == 0 else 0)])


def rank_and_report(*, target, deployment, proposers, drafts, acc, gamma_max,
                    batches, max_batch, pretrain_tokens, top, export, trees=False, pass_overhead_s=0.0,
                    host_step_s=0.0, as_json):
    """Rank, print the table (or JSON), the break-even batch, the best k by batch and the engine config."""
    import numpy as np

    from sdsl.core.architecture import get_model
    from sdsl.core.export import ENGINES, export_config
    from sdsl.core.ranking import k_table, rank_proposers, rank_trees
    from sdsl.errors import InvalidInputError

    if export and export.lower().replace("-", "") not in ENGINES:
        raise InvalidInputError(f"Unknown engine {export!r}; expected one of {', '.join(ENGINES)}.")
    if max_batch < 1:
        raise InvalidInputError("--max-batch must be a positive integer.")
    target, hw, dep = get_model(target), deployment.hardware, deployment
    props = _proposers(proposers, drafts)
    dense = np.unique(np.concatenate([np.arange(1, max_batch + 1), batches]))
    gmax = gamma_max if acc is None or not np.isfinite(acc.max_k) else min(gamma_max, int(acc.max_k))
    per_proposer = _acceptance_for(props, acc, target, pretrain_tokens)
    ranking = rank_proposers(target, props, dep, acceptance=per_proposer, gammas=range(0, gmax + 1), batches=dense,
                             pass_overhead_s=pass_overhead_s, host_step_s=host_step_s)
    pick_i, pick_g = _pick(ranking, dense, batches[0])
    table = k_table(ranking, pick_i)
    stop = ranking.break_even_batch()[0]
    pick = {"proposer": props[pick_i].name, "gamma": pick_g, "tree": None}
    result = {"target": target.name, "hardware": hw.name, "configs": ranking.records(top=top, batches=batches),
              "break_even_batch": None if np.isnan(stop) else int(stop), "max_batch": max_batch, "pick": pick,
              "host_step_s": host_step_s,
              "k_table": table}
    if trees:
        depth = range(1, max(1, min(8, gmax)) + 1)  # a measured vector covers only its positions
        result["trees"] = rank_trees(target, props, dep, acceptance=per_proposer, batches=batches, steps=depth,
                                     pass_overhead_s=pass_overhead_s, host_step_s=host_step_s).records(top, batches)
        best_tree = result["trees"][0]
        chain_best = ranking.records(top=1, batches=batches[:1])[0]
        if best_tree["tokens_per_s"] > chain_best["tokens_per_s"] and best_tree["tree"][1] > 1:
            result["tree_pick"] = {"proposer": best_tree["proposer"], "gamma": None, "tree": best_tree["tree"]}
    if export:
        engine_pick = result.get("tree_pick", pick) if export.lower() == "sglang" else pick
        result["export"] = {"engine": export, "pick": engine_pick, "config": export_config(export, engine_pick, table)}
    if as_json:
        echo_json(result)
    else:
        _echo(result, batches, export)


def _echo(result, batches, export):
    if result["host_step_s"] > 0:
        click.echo(f"engine host time per speculative step: {1e3 * result['host_step_s']:.3f} ms\n")
    for b in batches:
        sel = [dict(r, tpot_ms=1e3 * r["tpot_s"]) for r in result["configs"] if r["batch"] == b]
        click.echo(f"batch {b}:")
        click.echo(format_table(sel, [("proposer", "proposer", ""), ("gamma", "k", "d"), ("tau", "tau", ".2f"),
                                      ("tokens_per_s", "tokens/s", ".1f"), ("tpot_ms", "TPOT ms", ".2f"),
                                      ("speedup", "speedup", ".2f")]))
        click.echo("")
    if "trees" in result:
        click.echo("best SGLang trees (steps, topk, num_draft_tokens):")
        rows = [dict(r, shape=",".join(map(str, r["tree"]))) for r in result["trees"]]
        click.echo(format_table(rows, [("batch", "batch", "d"), ("proposer", "proposer", ""), ("shape", "tree", ""),
                                       ("tau", "tau", ".2f"), ("tokens_per_s", "tokens/s", ".1f"),
                                       ("speedup", "speedup", ".2f")]))
        click.echo("")
    stop = result["break_even_batch"]
    click.echo("speculation stops paying at batch " + (str(stop) if stop else
                                                        f"> {result['max_batch']} (pays at every batch searched)"))
    click.echo(f"best k by batch for {result['pick']['proposer']} (k = 0: do not speculate)")
    click.echo(format_table(result["k_table"], [("batch_min", "batch from", "d"), ("batch_max", "to", "d"),
                                                ("k", "k", "d")]))
    if export:
        click.echo(f"\n{export} configuration:\n{result['export']['config']}")
