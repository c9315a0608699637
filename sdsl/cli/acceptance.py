"""`sdsl acceptance`: per-position acceptance from an engine log, a prompt-lookup replay, any acceptance option,
or the published catalog's default for a proposer on a target and workload, as JSON that every other command
takes through --acceptance-file."""

from __future__ import annotations

import click

from sdsl.cli._common import WORKLOAD_HELP, acceptance_options, echo_json, json_option


@click.command()
@click.option("--from-log", "log", type=click.Path(dir_okay=False), default=None,
              help="Engine log holding acceptance metrics (vLLM 'SpecDecoding metrics', SGLang 'accept len', llama.cpp).")
@click.option("--engine", type=click.Choice(["auto", "vllm", "sglang", "llamacpp"]), default="auto", show_default=True,
              help="Which engine wrote the log.")
@click.option("--ngram", "ngram", type=click.Path(dir_okay=False), default=None,
              help="JSONL of {\"prompt\", \"response\"} texts (UTF-8 bytes as tokens) or {\"prompt_ids\", "
                   "\"response_ids\"}: prompt-lookup acceptance replayed exactly with vLLM's n-gram rule.")
@click.option("--ngram-min", type=int, default=2, show_default=True, help="Smallest n-gram matched (vLLM prompt_lookup_min).")
@click.option("--ngram-max", type=int, default=5, show_default=True, help="Largest n-gram matched (vLLM prompt_lookup_max).")
@click.option("--k", "k", type=int, default=None,
              help="Draft tokens per step: with --ngram the lookup's k (default 5); with --from-log when the log "
                   "gives no per-position rates and does not state it (SGLang: --speculative-num-steps).")
@click.option("--proposer", default=None,
              help="Show this proposer's default acceptance (eagle | eagle3 | medusa | mtp | ngram | draft:<model>) on "
                   "--target: the published catalog's for --workload, SDSL's plane for a draft model.")
@click.option("--target", default=None, help="Target model of --proposer (catalog name or config.json).")
@click.option("--workload", default="chat", show_default=True, help=WORKLOAD_HELP)
@acceptance_options(alpha_help="i.i.d. per-token acceptance rate in (0, 1) (Leviathan et al.) to convert to per-position rates.",
                    accepted_at_help="Draft length k the --accepted-length was measured at (default: --k).")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write the acceptance JSON here (atomically).")
@json_option
def acceptance(log, engine, ngram, ngram_min, ngram_max, k, proposer, target, workload, acceptance, out, as_json):
    """Show per-position acceptance (conditional and marginal rates, tau) and write it as JSON.

    Reads an engine log with --from-log, replays prompt lookup over your own prompt/response pairs with
    --ngram, converts --alpha / --accepted-length / --acceptance, or shows the default acceptance of
    --proposer on --target for --workload (per-position rates at --k, tau, and the catalog rows or rule it
    came from); pass the written file to predict/optimize with --acceptance-file.
    """
    from sdsl.errors import InvalidInputError

    if k is not None and k < 1:
        raise InvalidInputError("--k must be a positive integer.")
    if (proposer is None) != (target is None):
        raise InvalidInputError("--proposer and --target go together: the default acceptance of a proposer on a target.")
    if proposer is not None:
        others = [n for n, v in (("--from-log", log), ("--ngram", ngram), (acceptance.given, acceptance.given)) if v]
        if others:
            raise InvalidInputError(f"Give either --proposer or {others[0]}, not both.")
        data, text = _default_acceptance(proposer, target, workload, k)
    elif ngram is not None:
        if log is not None or acceptance.given is not None:
            raise InvalidInputError(f"Give either --ngram or {'--from-log' if log is not None else acceptance.given}, not both.")
        from sdsl.acceptance.ngram import prompt_lookup_acceptance, read_pairs

        pairs, tokenizer = read_pairs(ngram)
        result = prompt_lookup_acceptance(pairs, k=5 if k is None else k, min_n=ngram_min, max_n=ngram_max,
                                          tokenizer=tokenizer, source=f"ngram-replay:{ngram}")
        data, text = result.to_dict(), result.report()
    elif log is not None:
        if acceptance.given is not None:
            raise InvalidInputError(f"Give either --from-log or {acceptance.given}, not both.")
        from sdsl.fit.engine_logs import read_acceptance_log

        result = read_acceptance_log(log, engine=engine, k=k)
        data, text = result.to_dict(), result.report()
    else:
        acc = acceptance.resolve(k=k)
        if acc is None:
            raise InvalidInputError("Give --from-log FILE, --ngram FILE, --proposer NAME with --target MODEL, or one of "
                                    "--alpha, --accepted-length, --acceptance, --acceptance-file.")
        shown = k if k is not None else (acc.k if acc.tail_ratio is None else (acceptance.accepted_at or acc.k))
        data, text = acc.to_dict(shown), acc.report(shown)
    if out:
        import json

        from sdsl._io import atomic_write_text

        atomic_write_text(out, json.dumps(data, indent=2) + "\n")
    if as_json:
        echo_json(data)
    else:
        click.echo(text)
        if out:
            click.echo(f"wrote {out} (use it with --acceptance-file)")


def _default_acceptance(proposer, target, workload, k):
    """(JSON, text) of a proposer's default acceptance on a target: per-position rates at k, τ and its evidence."""
    from sdsl.cli.optimize import describe_acceptance
    from sdsl.speculation.resolve import resolve_acceptance

    acc = resolve_acceptance(proposer, target, workload=workload, spread_k=k)
    shown = k if k is not None else (acc.evidence["spread"]["k"] if acc.evidence else 4)
    data, text = acc.to_dict(shown), acc.report(shown)
    return data, text + ("\n  from " + describe_acceptance(data) if acc.evidence else "")
