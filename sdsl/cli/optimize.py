"""`sdsl optimize`: rank proposers (catalog draft models by default) and speculation lengths for a target on a GPU.

The command parses its options and calls :func:`sdsl.core.plan.plan_speculation` once; everything it prints
comes from that result (JSON schema: docs/json.md).
"""

from __future__ import annotations

import click

from sdsl.cli._common import acceptance_options, deployment_options, echo_json, format_table, json_option, parse_int_list
from sdsl.cli._speculation import proposer_option

ALL_PROPOSERS = ("eagle", "eagle3", "medusa", "mtp", "ngram")  # what --proposer all ranks


@click.command()
@click.option("--target", default="llama-3.1-70b", show_default=True, help="Target model (catalog name or config.json).")
@deployment_options()
@click.option("--batch", default="1", show_default=True, help="Batch size(s), comma-separated.")
@acceptance_options
@click.option("--gamma-max", default=10, show_default=True, type=int, help="Largest speculation length searched.")
@click.option("--drafts", default=None, help="Comma-separated draft names (default, without --proposer: catalog models "
                                             "sharing the target's vocabulary, <= 1/4 its size).")
@click.option("--any-tokenizer", is_flag=True, help="Consider catalog drafts whatever their vocabulary.")
@click.option("--tokens", "pretrain_tokens", default=1e12, show_default=True, type=float,
              help="Pre-training tokens D = D' assumed by SDSL's law for draft models without a given acceptance.")
@click.option("--top", default=10, show_default=True, type=int, help="Rows to print per batch size.")
@click.option("--serving", is_flag=True,
              help="Also add the batch-size -> k table to the JSON as a `serving` object with what it was tuned for "
                   "(the table itself, `k_table`, is always given).")
@click.option("--max-batch", default=256, show_default=True, type=int, help="Largest batch size in the batch-size -> k table.")
@proposer_option
@click.option("--trees", is_flag=True, help="Also rank SGLang token trees (steps 1-8 x topk 1,2,4,8 x <= 64 tokens) per proposer.")
@click.option("--export", type=str, default=None,
              help="Print the pick's configuration for an engine: vllm | sglang | trtllm.")
@click.option("--csv", "as_csv", is_flag=True, help="Print every evaluated configuration as CSV.")
@json_option
def optimize(target, deployment, batch, acceptance, gamma_max, drafts, any_tokenizer, pretrain_tokens, top, serving,
             max_batch, proposers, trees, export, as_csv, as_json):
    """Rank proposers and speculation lengths by predicted tokens/s.

    Every (proposer, k, batch) is priced on the calibrated roofline of the hardware with the engine's execution
    profile (--engine; default the newest vLLM profile), so the best k and the batch at which speculation stops
    paying include the engine's host time. Without --proposer or
    --drafts, the proposers are the catalog's draft models for the target; --proposer (repeatable; 'all' =
    every head kind and n-gram lookup) and --drafts name them. Acceptance is the one given (--alpha, ...) for
    every proposer, else each proposer's own (SDSL's acceptance plane for draft models). Prints each
    proposer at its best k per batch, the batch at which speculation stops paying, the best k by batch for
    the pick, the engine's configuration with --export, and SDSL's continuous FLOP-optimal draft size N*.
    """
    from sdsl.core.plan import plan_speculation
    from sdsl.errors import InvalidInputError

    batches = parse_int_list(batch, "--batch")
    if min(batches) <= 0:
        raise InvalidInputError("--batch must be a positive integer.")
    names = [n for p in proposers for n in (ALL_PROPOSERS if p == "all" else (p,))]
    names += [f"draft:{d.strip()}" for d in (drafts or "").split(",") if d.strip()]
    plan = plan_speculation(target, deployment, proposers=names or None, acceptance=acceptance.resolve(),
                            gamma_max=gamma_max, batches=batches, max_batch=max_batch, trees=trees, export=export,
                            pretrain_tokens=pretrain_tokens, any_tokenizer=any_tokenizer, top=top)
    if as_csv:
        click.echo(plan.ranking.to_frame(batches=batches).to_csv(index=False), nl=False)
        return
    out = plan.to_dict()
    if serving:
        out["serving"] = plan.serving()
    if as_json:
        echo_json(out)
    else:
        _echo(out, plan)


def _echo_header(out: dict, plan) -> None:
    dep, t = plan.deployment, plan.target
    source = out["alpha_source"]
    if source == "sdsl-plane":
        source = "SDSL plane (D = %.3g tokens)" % out["sdsl"]["pretrain_tokens"]
    click.echo(f"target {t.name} ({t.total_params / 1e9:.2f}B) on {dep.hardware.name}, context {dep.context}, "
               f"tp {dep.tp}, {dep.dtype}; acceptance: {source}")
    click.echo(f"latency parameters: {dep.params.source}")
    click.echo(f"engine: {dep.engine.name} ({dep.engine.build})")
    if dep.context > t.max_context:
        click.echo(f"warning: context {dep.context} exceeds {t.name}'s maximum of {t.max_context} tokens.")
    if not out["fits_in_memory"]:
        click.echo(f"warning: {t.name} (and its best draft) do not fit in {dep.hardware.name}'s "
                   f"{dep.hardware.mem_capacity / 1e9:.0f} GB per GPU (weights + KV cache); raise --tp or use --dtype fp8.")
    click.echo("")


def _params(p):
    return "" if p is None else f"{p / 1e9:.2f}B" if p >= 1e9 else f"{p / 1e6:.0f}M"


def _echo(out: dict, plan) -> None:
    _echo_header(out, plan)
    for b in plan.batches:
        rows = [dict(r, params=_params(r["draft_params"]), tpot_ms=1e3 * r["tpot_s"]) for r in out["configs"]
                if r["batch"] == b]
        click.echo(f"batch {b}: plain decoding {rows[0]['plain_tokens_per_s']:.1f} tokens/s")
        click.echo(format_table(rows, [("proposer", "proposer", ""), ("params", "params", ""), ("gamma", "k", "d"),
                                       ("alpha", "alpha", ".3f"), ("tau", "tau", ".2f"),
                                       ("tokens_per_s", "tokens/s", ".1f"), ("tpot_ms", "TPOT ms", ".2f"),
                                       ("speedup", "speedup", ".2f"), ("bound", "bound", "")]))
        click.echo("")
    if "trees" in out:
        click.echo("best SGLang trees (steps, topk, num_draft_tokens):")
        rows = [dict(r, shape=",".join(map(str, r["tree"]))) for r in out["trees"]]
        click.echo(format_table(rows, [("batch", "batch", "d"), ("proposer", "proposer", ""), ("shape", "tree", ""),
                                       ("tau", "tau", ".2f"), ("tokens_per_s", "tokens/s", ".1f"),
                                       ("speedup", "speedup", ".2f")]))
        click.echo("")
    stop = out["break_even_batch"]
    click.echo("speculation stops paying at batch " + (str(stop) if stop else
                                                        f"> {out['max_batch']} (pays at every batch searched)"))
    click.echo(f"best k by batch for {out['pick']['proposer']} (context {plan.deployment.context}; "
               "k = 0: do not speculate)")
    click.echo(format_table(out["k_table"], [("batch_min", "batch from", "d"), ("batch_max", "to", "d"), ("k", "k", "d")]))
    if "export" in out:
        click.echo(f"\n{out['export']['engine']} configuration:\n{out['export']['config']}")
    sdsl = out["sdsl"]
    click.echo(f"\nSDSL FLOP-model optimum: N* = {sdsl['n_star'] / 1e6:.0f}M parameters (alpha {sdsl['alpha']:.3f}, "
               f"gamma* {sdsl['gamma_star']:.2f}, speedup {sdsl['flop_speedup']:.2f}x in FLOPs)")
