"""`sdsl validate kernels` (NVIDIA's measured operator tables) and `sdsl validate bands` (the 80% bands)."""

from __future__ import annotations

import click

#: --gpu choices -> the operator tables' GPU names.
_GPUS = {"h100": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm", "a100": "a100_sxm", "l40s": "l40s",
         "b300": "b300_sxm", "gb200": "gb200", "gb300": "gb300", "rtx-pro-6000": "rtx_pro_6000_server"}


@click.command("kernels")
@click.option("--gpu", "gpus", multiple=True, type=click.Choice(list(_GPUS)),
              help="Only this GPU (repeatable; default H100, H200 and B200).")
@click.option("--op", "ops", multiple=True, type=click.Choice(["gemm", "attention", "mla", "allreduce", "moe"]),
              help="Only this op (repeatable; default all).")
@click.option("--engine", default="vllm", show_default=True, type=click.Choice(["vllm", "sglang", "trtllm"]),
              help="Whose GEMM and attention tables the form is fitted and held out on (the shipped defaults are "
                   "vLLM's; MLA is always SGLang's).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def kernels(gpus, ops, engine, as_json):
    """Leave-one-shape-out accuracy of the kernel terms fitted on NVIDIA's measured operator tables.

    Source: aiconfigurator-core 0.12.0 (Apache-2.0), the subset shipped in sdsl/data/opdb. Per GPU and op:
    dense GEMM per weight format over 1-8192 tokens (one input width held out at a time), decode attention
    with bf16 and fp8 KV caches (one heads/KV-heads/head-dim shape held out), decode MLA (one head count
    held out), the engines' custom all-reduce and NCCL (one GPU count held out), the fused MoE layer (one model
    shape held out, per engine kernel and format); median, 95th percentile, worst and signed bias of the held-out
    errors (goal: 10% median, 25% worst), and the floor the tables put under the worst case of any form
    monotone in the work with the worst where they allow 25%; the GEMMs' step one row past each row-tile edge,
    measured against each candidate tile's. On H100 also Vidur's GEMMs against the tables'.

    Examples:

    \b
        sdsl validate kernels
        sdsl validate kernels --gpu h200 --op moe
        sdsl validate kernels --op gemm --engine sglang
        sdsl validate kernels --json
    """
    from sdsl.validation.kernel_validation import OPS, validate_kernels

    result = validate_kernels([_GPUS[g] for g in gpus] or None, ops=tuple(ops) or OPS, engine=engine)
    click.echo(result.to_json() if as_json else result.report(), nl=not as_json)


@click.command("bands")
@click.option("--write", is_flag=True, help="Write the bands to sdsl/data/bands.json (what predict and optimize read).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def bands(write, as_json):
    """The 80% bands on predicted tokens/s, TPOT and speedup, from sdsl's own held-out residuals (the rows of
    `validate published`, `validate moe` and `validate acceptance`): per class (plain decode and speculative by
    engine, mixture-of-experts, acceptance measured / same-target / transferred) the split-conformal band, the
    rows and sources behind it (a class with rows from fewer than 9 sources adds its parent class's rows: "band
    from"), and its coverage with each source's rows checked against the band built from the other sources only
    (goal 70-90%), over the rows and with each source counted once (what a new deployment can expect; judged where
    9 sources are checked). Says whether the shipped sdsl/data/bands.json is up to date.

    Examples:

    \b
        sdsl validate bands
        sdsl validate bands --write
    """
    import math

    from sdsl.cli._common import echo_json
    from sdsl.validation.band_checks import validate_bands
    from sdsl.validation.bands import coverage_percent

    out = validate_bands(write=write)
    if as_json:
        echo_json(out)
        return
    pct = lambda x: "-" if x is None else f"{100 * (math.exp(x) - 1):+.1f}%"  # noqa: E731
    click.echo(f"{out['level']:.0%} bands, r = log(measured / predicted); {out['method']}")
    click.echo(f"{'kind':<10} {'class':<26} {'rows':>5} {'sources':>7}  {'low':>7} {'high':>7}  {'band from':<22} "
               f"{'coverage, source held out':>31} {'each source once':>27} {'row held out':>12}")
    for kind in ("latency", "acceptance"):
        for name, b in out[kind].items():
            c = out["coverage"][kind][name]
            verdict = {True: "met", False: "NOT met", None: "too few rows"}[c["met"]]
            cov = "-" if c["coverage"] is None else f"{coverage_percent(c['coverage'])} ({c['inside']}/{c['checked']}) {verdict}"
            row = "-" if c["row_held_out"] is None else f"{100 * c['row_held_out']:.0f}%"
            judged = {True: "met", False: "NOT met", None: "too few sources"}[c["met_by_source"]]
            per_source = "-" if c["by_source"] is None else f"{coverage_percent(c['by_source'])} ({c['sources_checked']}) {judged}"
            click.echo(f"{kind:<10} {name:<26} {b['n']:>5} {b['n_sources']:>7}  {pct(b['low']):>7} {pct(b['high']):>7}  "
                       f"{b['from_class']:<22} {cov:>31} {per_source:>27} {row:>12}")
    cb = out["coverage"]["combined"]
    click.echo(f"combined (step time x acceptance, Spec-Bench speedups with the predicted accepted length, hf-eager, "
               f"no Spec-Bench row in either band): {100 * cb['coverage']:.0f}% of {cb['n']} inside "
               f"({'met' if cb['met'] else 'NOT met'})")
    for kind, c in out["coverage"]["profile_without_rows"].items():
        click.echo(f"a profile without rows ({kind}): each profile's rows against the widest {kind} band built without "
                   f"that profile's rows or sources: {100 * c['coverage']:.0f}% of {c['n']} inside "
                   f"({'met' if c['met'] else 'NOT met'})")
    click.echo(f"engine profiles with validation rows: {', '.join(out['profiles_with_rows'])} (any other profile gets "
               "its class's widest band)")
    state = "written" if write else ("up to date" if out["up_to_date"] else "NOT up to date: rerun with --write")
    click.echo(f"{out['path']}: {state}")
