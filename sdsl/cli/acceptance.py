"""`sdsl acceptance`: per-position acceptance from an engine log or from any acceptance option, as JSON
that every other command takes through --acceptance-file."""

from __future__ import annotations

import click

from sdsl.cli._common import acceptance_options, echo_json, json_option


@click.command()
@click.option("--from-log", "log", type=click.Path(dir_okay=False), default=None,
              help="Engine log holding acceptance metrics (vLLM 'SpecDecoding metrics', SGLang 'accept len', llama.cpp).")
@click.option("--engine", type=click.Choice(["auto", "vllm", "sglang", "llamacpp"]), default="auto", show_default=True,
              help="Which engine wrote the log.")
@click.option("--k", "k", type=int, default=None,
              help="Draft tokens per step, when the log gives no per-position rates and does not state it "
                   "(SGLang: --speculative-num-steps).")
@acceptance_options
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write the acceptance JSON here (atomically).")
@json_option
def acceptance(log, engine, k, acceptance, out, as_json):
    """Show per-position acceptance (conditional and marginal rates, tau) and write it as JSON.

    Reads an engine log with --from-log, or converts --alpha / --accepted-length / --acceptance;
    pass the written file to predict/optimize with --acceptance-file.
    """
    from sdsl.errors import InvalidInputError

    if k is not None and k < 1:
        raise InvalidInputError("--k must be a positive integer.")
    if log is not None:
        if acceptance.given is not None:
            raise InvalidInputError(f"Give either --from-log or {acceptance.given}, not both.")
        from sdsl.fit.engine_logs import read_acceptance_log

        result = read_acceptance_log(log, engine=engine, k=k)
        data, text = result.to_dict(), result.report()
    else:
        acc = acceptance.resolve(k=k)
        if acc is None:
            raise InvalidInputError("Give --from-log FILE, or one of --alpha, --accepted-length, --acceptance, --acceptance-file.")
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
