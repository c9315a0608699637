"""``sdsl calibrate engine RUNS...``: fit an engine profile's free terms to your engine's measured runs and write a
profile JSON that ``--engine FILE`` takes (:mod:`sdsl.fit.engine_calibration`, docs/model.md §3.9)."""

from __future__ import annotations

import click

from sdsl.cli._common import echo_json, split_entries


@click.command("engine")
@click.argument("runs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--engine", "base", default="vllm", show_default=True,
              help="Profile whose structure (CUDA graphs, overlap, padding, kernels) the runs share: vllm, "
                   "vllm:2025-07, sglang, a profile name or a .json file.")
@click.option("--terms", default=None,
              help="Terms to fit, comma-separated: host_step_s, spec_step_s, draft_pass_s, launch_s, "
                   "allreduce_latency_s (the custom all-reduce's latency; needs runs at tp > 1); each must be identified "
                   "by the runs. Default: host_step_s,spec_step_s,draft_pass_s, less host_step_s (and on a zero-sync "
                   "build such as vllm's model runner V2 spec_step_s and draft_pass_s) where the profile overlaps it "
                   "with longer GPU steps in every run (it keeps the profile's value; the output says so).")
@click.option("--target", default=None, help="Target of runs that do not name one (catalog name or config.json).")
@click.option("--hardware", default=None, help="Hardware of runs that do not name one.")
@click.option("--tp", default=None, type=int, help="Tensor parallelism of runs that do not state it (default 1).")
@click.option("--context", default=None, type=float, help="Mean KV context of runs that do not state it (default 1024).")
@click.option("--proposer", default=None, help="Proposer of runs that do not name one (eagle, eagle3, draft:<model>, ...).")
@click.option("--k", "k", default=None, type=int, help="Chain length of runs that do not state it.")
@click.option("--batch", default=None, type=int, help="Batch (concurrency) of runs that do not state it.")
@click.option("--output-len", default=None, type=int, help="Tokens per request of a vLLM `bench latency` result.")
@click.option("--name", default=None, help="Name of the written profile (default calibrated-<base>).")
@click.option("-o", "--output", default=None, help="Write the profile JSON here (atomically).")
@click.option("--json", "as_json", is_flag=True, help="Print the profile and the fit as JSON.")
def engine(runs, base, terms, target, hardware, tp, context, proposer, k, batch, output_len, name, output, as_json):
    """Fit an engine profile to RUNS: CSV/JSON rows (target, hardware, tp, batch, context, proposer, k or tree,
    accepted_length, and one of tpot_ms, tokens_per_s, speedup), vLLM `bench serve --save-result` JSON (with its
    server log, NAME.log, for the SpecDecoding metrics lines), vLLM `bench latency --output-json` JSON, or SGLang
    `send_one` / `bench_one_batch` output. Plain decoding plus speculative runs at two k values pin the default terms;
    the command refuses runs that cannot identify a term. Prints each term, every run's residual and its
    leave-one-point-out error. Example: examples/engine_calibration.py.

    Examples:

    \b
        sdsl calibrate engine runs.csv --engine vllm-2025-07 -o my-vllm.json
        sdsl predict --target llama-3.1-8b --proposer eagle --gamma 4 --accepted-length 2.39 --engine my-vllm.json
    """
    from sdsl.fit.engine_calibration import calibrate_engine

    defaults = {key: v for key, v in (("target", target), ("hardware", hardware), ("tp", tp), ("context", context),
                                      ("proposer", proposer), ("k", k), ("batch", batch), ("output_len", output_len))
                if v is not None}
    result = calibrate_engine(runs, base=base, terms=None if terms is None else
                              split_entries(terms, "--terms", "host_step_s,spec_step_s"),
                              defaults=defaults, name=name)
    if output:
        result.to_json(output)
    if as_json:
        echo_json(result.to_dict())
        return
    click.echo(result.report())
    if output:
        click.echo(f"wrote {output}; use it with --engine {output}")
