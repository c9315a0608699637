"""``sdsl validate``: hold sdsl's predictions against measurements.

Subcommands: ``latency`` (operator step-time model vs Vidur's real H100/A100/A40 measurements), ``decoder``,
``published`` (published engine measurements), ``acceptance`` (the published acceptance catalog, each row
predicted from the other sources), ``moe`` (published mixture-of-experts measurements) and ``bands`` (the 80% bands
on every prediction, from those validations' held-out residuals, and their coverage).
"""

from __future__ import annotations

import click


@click.group("validate")
def validate() -> None:
    """Check predictions against real measurements (latency, decoder, published, acceptance, moe, kernels, bands).

    Check sdsl's predictions against real measurements.

    Examples:

    \b
        sdsl validate latency
        sdsl validate published --json
        sdsl validate acceptance
        sdsl validate moe
        sdsl validate kernels --gpu h200
        sdsl validate bands
        sdsl validate decoder --gammas 1,4,8 --no-plane
    """


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
    held out in turn); then the shipped defaults' own error on every row (JSON key "shipped").
    Also compares H100 step times with TurboSpec's fitted lines.

    Examples:

    \b
        sdsl validate latency
        sdsl validate latency --transfer --json
    """
    from sdsl.validation.latency_validation import validate_latency
    from sdsl.cli._common import echo_json
    from sdsl.cli.validate.transfer import parse_hardware_map, run_transfer

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
        sh = r["shipped"]
        line = (f"    shipped defaults (default_params), every row: GEMMs {100 * sh['pooled_overall_mape']:.1f}%, decode "
                f"{100 * sh['pooled_decode_mape']:.1f}%, worst model decode {100 * sh['worst_model_decode_mape']:.1f}%")
        if "elementwise_mape" in sh:
            line += (f"; elementwise {100 * sh['elementwise_mape']:.1f}% per kernel, "
                     f"{100 * sh['elementwise_layer_mape']:.1f}% per layer sum")
        if sh["allreduce"]:
            line += "; all-reduce " + ", ".join(f"TP{k} {100 * v:.1f}%" for k, v in sh["allreduce"]["tp_mape"].items())
        click.echo(line)
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


from sdsl.cli.validate.decoder import decoder as _decoder  # noqa: E402  (the torch reference decoder; imports torch lazily)

validate.add_command(_decoder)


@validate.command("published")
@click.option("--figure", default=None, help="Also save the predicted-vs-measured and k-sweep figure here (.png).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def published(figure, as_json):
    """Price every published row sdsl can price (sdsl/data/published, development and engine rows) with the
    execution profile of its engine and date and the measured accepted length; per-row errors with the profile
    terms fitted without the row's source (the headline), with the shipped terms and on the roofline alone; the
    rows it cannot price and why; per-class median, worst and signed error; every k-sweep's order and best k; the
    goals. Apart from them (no fit reads these rows, key ``fp8``): the dense FP8 plain-decode rows priced with fp8
    linear layers, their fp8/bf16 step ratios and the FP8 goal.

    Examples:

    \b
        sdsl validate published
        sdsl validate published --json
    """
    from sdsl.cli._common import echo_json
    from sdsl.cli.validate._published import echo_published
    from sdsl.validation.published_validation import validate_published

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


@validate.command("acceptance")
@click.option("--engine", default="roofline", show_default=True,
              help="Cost model that prices the Spec-Bench speedups at batch 1: roofline (the shipped calibrated operator "
                   "roofline alone) or an engine execution profile (hf-eager: the Hugging Face eager decoding Spec-Bench "
                   "runs; any name `sdsl engines` lists, ENGINE:YYYY-MM[-DD] or FILE.json).")
@click.option("--pass-overhead-us", type=float, default=0.0, show_default=True,
              help="Host time per forward pass (us) added to the roofline for the Spec-Bench speedups.")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def acceptance(engine, pass_overhead_us, as_json):
    """Hold the published acceptance catalog against itself: every catalogued accepted length predicted
    leave-one-source-out by the rules that give sdsl's default acceptance (the row's whole source held out,
    decay ratios and tree model refitted without it), pooled, per source and by rule tier; the decay form
    across k (each k-sweep from its smallest k); the tree model on chain/tree pairs at equal budget; and the
    order of Spec-Bench's methods per target and GPU, priced with the measured and the predicted accepted
    length (Kendall tau against the measured speedup order).

    Examples:

    \b
        sdsl validate acceptance
        sdsl validate acceptance --engine hf-eager
    """
    from sdsl.cli._common import echo_json
    from sdsl.validation.acceptance_validation import validate_acceptance

    out = validate_acceptance(engine=engine, pass_overhead_s=1e-6 * pass_overhead_us)
    if as_json:
        echo_json(out)
        return
    pct = lambda x: f"{100 * x:.1f}%"  # noqa: E731
    acc = out["accepted_length"]
    p, sw, goal = acc["pooled"], acc["source_weighted"], acc["goal"]
    click.echo(f"accepted length, leave one source out: {p['n']} rows from {acc['n_sources']} sources; median |error| "
               f"{pct(p['median_abs_error'])}, worst {pct(p['worst_abs_error'])}, median signed "
               f"{100 * p['median_signed_error']:+.1f}% (goal: median <= {pct(goal['median_abs_error'])}, worst <= "
               f"{pct(goal['worst_abs_error'])}, >= {goal['min_rows']} rows from >= {goal['min_sources']} sources: "
               f"{'met' if acc['goals_met'] else 'NOT met'})")
    click.echo(f"  source-weighted: median of per-source medians {pct(sw['median_of_source_medians'])}, worst source "
               f"{pct(sw['worst_source_median'])}; without {acc['largest_source']}: "
               f"{acc['without_largest_source']['n']} rows, median {pct(acc['without_largest_source']['median_abs_error'])}")
    for src, s in acc["per_source"].items():
        click.echo(f"  {src:<32} n={s['n']:<4} median |error| {pct(s['median_abs_error']):>7}  worst "
                   f"{pct(s['worst_abs_error']):>7}  median signed {100 * s['median_signed_error']:+.1f}%")
    click.echo("  by tier: " + ", ".join(f"{t} {pct(s['median_abs_error'])} (n={s['n']})" for t, s in acc["by_tier"].items()))
    click.echo(f"  not predicted: {len(acc['not_predicted'])} rows (" + "; ".join(
        f"{n}: {why}" for why, n in acc["not_predicted_reasons"].items()) + ")")
    ws = out["within_source"]
    click.echo(f"  inside {ws['source']} ({ws['n_rows']} chains, not held out by source): " + ", ".join(
        f"{name} {pct(v['median_abs_error'])}" for name, v in ws["by_rule"].items()))
    ks = out["k_sweeps"]
    click.echo(f"across k ({ks['n_sweeps']} sweeps, upwards from the smallest k): " + ", ".join(
        f"{name} median {pct(s['median_abs_error'])} worst {pct(s['worst_abs_error'])} signed "
        f"{100 * s['median_signed_error']:+.1f}%" for name, s in ks["summary"].items()))
    sf = ks["specforge"]
    click.echo("  SpecForge k=3 -> 5 / 7 median signed: " + ", ".join(
        f"{name} {100 * sf[f'{name}_k3_to_k5']['median_signed_error']:+.1f}% / "
        f"{100 * sf[f'{name}_k3_to_k7']['median_signed_error']:+.1f}%" for name in ks["summary"]))
    tr = out["trees"]
    click.echo(f"trees ({tr['n_pairs']} chain/tree pairs at equal budget, tree below chain in "
               f"{tr['measured_tree_below_chain']}): nodes by acceptance median |error| "
               f"{pct(tr['acceptance_selection']['median_abs_error'])} (signed "
               f"{100 * tr['acceptance_selection']['median_signed_error']:+.1f}%); by draft score (T = "
               f"{tr['draft_selection']['temperature']:g}) {pct(tr['draft_selection']['median_abs_error'])} (signed "
               f"{100 * tr['draft_selection']['median_signed_error']:+.1f}%), leave one target out "
               f"{pct(tr['leave_one_target_out']['median_abs_error'])}")
    rk = out["ranking"]
    click.echo(f"Spec-Bench ranking (cost model {rk['engine']}, batch 1; Kendall tau >= {rk['goal']:g} per target):")
    for g in rk["groups"]:
        order = ", ".join(f"{m['method']} {m['measured_speedup']:.2f}x/{m['speedup_with_measured_tau']:.2f}x"
                          + ("" if m["speedup_with_predicted_tau"] is None else f"/{m['speedup_with_predicted_tau']:.2f}x")
                          for m in g["methods"])
        click.echo(f"  {g['target']} {g['hardware']}: tau {g['kendall_tau_measured_tau']:.2f} with measured "
                   f"acceptance, {g['kendall_tau_predicted_tau']:.2f} with predicted ({g['n_predicted']} methods); "
                   f"measured/priced/predicted speedup: {order}")
@validate.command("moe")
@click.option("--engine", default="row", show_default=True,
              help="Engine execution profile: row (each row's own engine and build: the newest profile of that "
                   "engine not after the row) | ideal (the roofline alone, no engine host time) | an engine (sglang: "
                   "that engine's build by each row's date) | a profile name | ENGINE:YYYY-MM[-DD] | FILE.json (`sdsl "
                   "engines` lists them).")
@click.option("--experts", type=click.Choice(["measured", "roofline"]), default="measured", show_default=True,
              help="Routed experts: measured (the fused-MoE kernel fitted on the operator tables of the row's GPU, "
                   "where it has them) | roofline (the grouped GEMMs at the dense efficiencies, as before those tables).")
@click.option("--routing-locality", type=float, default=None, metavar="RHO",
              help="Share of a position's experts its successor keeps beyond chance, for every target "
                   "(default: each model's, the measured 0.21; 0: independent routing).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def moe(engine, experts, routing_locality, as_json):
    """Price the published mixture-of-experts rows (sdsl/data/published, row_set=moe) on the roofline with the
    shipped calibration and the execution profile of the engine each row ran on (--engine ideal: no engine
    host time): plain-decode
    tokens/s, the speculative/plain ratio of each source and whether speculation wins or loses, with the measured
    accepted length as an oracle τ; the rows it cannot price and why; the verify-growth check (measured step time
    against the priced one within a source).

    Examples:

    \b
        sdsl validate moe
        sdsl validate moe --engine ideal
        sdsl validate moe --routing-locality 0
    """
    from sdsl.cli._common import echo_json
    from sdsl.validation.moe_validation import validate_moe

    out = validate_moe(engine=None if engine == "ideal" else engine, experts=experts, routing_locality=routing_locality)
    if as_json:
        echo_json(out)
        return
    click.echo(f"step model: {out['model']}; oracle input: {', '.join(out['oracle_inputs'])}")
    for kernel in out["moe_kernels"]:
        click.echo(f"MoE experts: {kernel}")
    for r in out["rows"]:
        shape = r["tree"] and "tree " + ",".join(map(str, r["tree"])) or ("plain" if r["proposer"] is None else f"k {r['gamma']}")
        line = (f"{r['class']:<16} {r['file'][:4]}#{r['row']:<3} {r['target']:<16} {r['hardware']:<9} tp{r['tp']} "
                f"b{r['batch']:<3} {shape:<13} measured {r['measured']:8.1f}  predicted {r['predicted']:8.1f} "
                f"({100 * r['error']:+6.1f}%)")
        if r["proposer"] is not None:
            line += (f"  ratio {r['ratio_measured']:.2f} vs {r['ratio_predicted']:.2f} ({100 * r['ratio_error']:+6.1f}%) "
                     f"{r['outcome']}/{r['outcome_predicted']}")
        click.echo(line)
    for u in out["unpriced"]:
        click.echo(f"not priced: {u['file']}#{u['row']} {u['model']}: {u['reason']}")
    c, goals, met = out["claims"], out["goals"], out["goals_met"]
    for key, goal in (("plain", "plain_median_abs_error_max"), ("ratio", "ratio_median_abs_error_max")):
        s = c[key]
        click.echo(f"{key}: n={s['n']} median |error| {100 * s['median_abs_error']:.1f}% (goal <= "
                   f"{100 * goals[goal]:.0f}%: {'met' if met[key] else 'NOT met'}), worst {100 * s['worst_error']:+.1f}%, "
                   f"median signed {100 * s['median_signed_error']:+.1f}%")
        groups = [*c[f"{key}_by_source"].items(), *((f"proposer {p}", s) for p, s in c.get(f"{key}_by_proposer", {}).items())]
        for name, s in groups:
            right = f", {s['outcome_right']} of {s['n']} wins/losses right" if "outcome_right" in s else ""
            click.echo(f"  {key}, {name}: n={s['n']} median |error| {100 * s['median_abs_error']:.1f}%, worst "
                       f"{100 * s['worst_error']:+.1f}%, median signed {100 * s['median_signed_error']:+.1f}%{right}")
    o = c["outcome"]
    click.echo(f"wins/loses right: {o['right']} of {o['n']} ({100 * o['share_right']:.0f}%; goal >= "
               f"{100 * goals['outcome_share_right_min']:.0f}%: {'met' if met['outcome'] else 'NOT met'}); measured losses "
               f"{o['measured_losses']}, predicted losses {o['predicted_losses']}")
    click.echo(f"coverage: {c['rows']} MoE rows priced, models {', '.join(c['models'])}")
    for g in out["verify_growth"]:
        if g["informative"]:
            click.echo(f"verify growth {g['source']} {g['target']} tp{g['tp']} b{g['batch']} "
                       f"{g['dataset']}: measured = {1e3 * g['intercept_s']:+.1f} ms + {g['slope']:.2f} x priced")


from sdsl.cli.validate.measured import bands as _bands, kernels as _kernels  # noqa: E402  (measured tables, bands)

validate.add_command(_kernels)
validate.add_command(_bands)
