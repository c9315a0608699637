"""``sdsl validate``: hold sdsl's predictions against measurements.

Subcommands: ``latency`` (operator step-time model vs Vidur's real H100/A100/A40 measurements).
"""

from __future__ import annotations

import click


@click.group("validate")
def validate() -> None:
    """Check sdsl's predictions against real measurements."""


def _default_vidur() -> str:
    from sdsl._paths import data_path

    return str(data_path("vidur"))


@validate.command("latency")
@click.option("--data", "data", default=None, type=click.Path(file_okay=False),
              help="Vidur profiling folder with <gpu>/<org>/<model>/mlp.csv (default: the copy shipped in sdsl/data/vidur).")
@click.option("--figure", default=None, help="Also save the held-out predicted-vs-measured figure here.")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@click.option("--transfer", is_flag=True, help="Leave one GPU out instead: price each GPU from the OTHER GPUs' "
              "calibrations through its datasheet (cross-GPU efficiency model).")
@click.option("--hardware", "hardware_map", multiple=True, metavar="FOLDER=NAME_OR_FILE",
              help="Hardware of a GPU folder the catalog does not name (repeatable).")
def latency(data, figure, as_json, transfer, hardware_map):
    """Leave-one-model-out accuracy of the calibrated step-time model on Vidur's H100, A100 and A40 data.

    For each GPU, every row of one model is held out, the rest fitted, the held-out rows predicted:
    GEMM times pooled over all held-out rows and in the decode regime (num_tokens <= 64), the worst
    held-out model, the signed bias by num_tokens, the elementwise kernels (per kernel and per layer
    sum), and the NCCL all-reduce across TP 2/4/8 where Vidur measured it (H100, A100; each TP degree
    held out in turn). Also compares H100 step times with TurboSpec's fitted lines.
    """
    from sdsl.experiments.latency_validation import validate_latency
    from sdsl.cli._common import echo_json
    from sdsl.cli.transfer import parse_hardware_map, run_transfer

    mapping = parse_hardware_map(hardware_map)
    if transfer:
        run_transfer(data or _default_vidur(), mapping, figure=figure, as_json=as_json)
        return
    out = validate_latency(data or _default_vidur(), figure=figure, hardware=mapping)
    if as_json:
        echo_json(out)
        return
    for hw in sorted(k for k in out if k != "turbospec"):
        r = out[hw]
        click.echo(f"{hw.upper()} GEMMs, held-out rows pooled: MAPE {100 * r['pooled_overall_mape']:.1f}%, decode "
                   f"{100 * r['pooled_decode_mape']:.1f}%; worst model decode {100 * r['worst_model_decode_mape']:.1f}% "
                   f"({r['worst_model']}); median over models {100 * r['overall_mape']:.1f}% / {100 * r['decode_mape']:.1f}%")
        click.echo("    median signed error by num_tokens: " + ", ".join(
            f"{k} {100 * v['median']:+.1f}%" for k, v in r["bias_by_tokens"].items()))
        click.echo(f"    elementwise kernels: {100 * r['elementwise_mape']:.1f}% per kernel (decode "
                   f"{100 * r['elementwise_decode_mape']:.1f}%, worst model {100 * r['elementwise_worst_model_mape']:.1f}%, "
                   f"median signed {100 * r['elementwise_bias']['median']:+.1f}%), "
                   f"{100 * r['elementwise_layer_mape']:.1f}% per layer sum")
        if r["allreduce"]:
            ar = r["allreduce"]
            click.echo("    all-reduce (DGX), TP held out: " + ", ".join(
                f"TP{k} {100 * v:.1f}% ({100 * ar['heldout_tp_bias'][k]:+.1f}%)" for k, v in ar["heldout_tp_mape"].items())
                + f"; pooled {100 * ar['heldout_pooled_mape']:.1f}%, worst TP {100 * ar['heldout_worst_tp_mape']:.1f}%"
                + (f"; pairwise node predicted {100 * ar['pairwise_mape']:.1f}%" if "pairwise_mape" in ar else ""))
    ts = out.get("turbospec")
    if ts:
        click.echo("TurboSpec step-time lines (H100, batch 1..64, context 1024):")
        for name, v in ts.items():
            if name == "allreduce_fit" or v is None:
                continue
            click.echo(f"    {name} TP{v['tp']}: mean |diff| {100 * v['mean_abs_rel_diff']:.1f}%, "
                       f"max {100 * v['max_abs_rel_diff']:.1f}%; batch 1 {v['batch1']['predicted_ms']:.2f} vs "
                       f"{v['batch1']['turbospec_ms']:.2f} ms, batch 64 {v['batch64']['predicted_ms']:.2f} vs "
                       f"{v['batch64']['turbospec_ms']:.2f} ms")
    if figure:
        click.echo(f"wrote {figure}")


from sdsl.cli.validate_decoder import decoder as _decoder  # noqa: E402  (issue 4: torch reference decoder; imports torch lazily)

validate.add_command(_decoder)


@validate.command("published")
@click.option("--figure", default=None, help="Also save the predicted-vs-measured and k-sweep figure here (.png).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def published(figure, as_json):
    """Price every published row sdsl can price (sdsl/data/published, development and engine rows) with the
    execution profile of its engine and date and the measured accepted length; per-row errors with the profile
    terms fitted without the row's source (the headline), with the shipped terms and on the roofline alone; the
    rows it cannot price and why; per-class median, worst and signed error; every k-sweep's order and best k; the
    goals."""
    from sdsl.cli._common import echo_json
    from sdsl.cli._validate_published import echo_published
    from sdsl.experiments.published_validation import validate_published

    out = validate_published()
    if figure:
        import matplotlib

        matplotlib.use("Agg")
        from sdsl.plots import save_figure
        from sdsl.plots.published import published_figure

        save_figure(published_figure(out), figure)
    if as_json:
        echo_json(out)
        return
    echo_published(out)
    if figure:
        click.echo(f"wrote {figure}")
