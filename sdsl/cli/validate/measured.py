"""`sdsl validate kernels` (NVIDIA's measured operator tables) and `sdsl validate bands` (the 80% bands)."""

from __future__ import annotations

import click

#: --gpu choices -> the operator tables' GPU names.
_GPUS = {"h100": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm", "a100": "a100_sxm", "l40s": "l40s",
         "b300": "b300_sxm", "gb200": "gb200", "gb300": "gb300"}


@click.command("kernels")
@click.option("--gpu", "gpus", multiple=True, type=click.Choice(list(_GPUS)),
              help="Only this GPU (repeatable; default H100, H200 and B200).")
@click.option("--op", "ops", multiple=True, type=click.Choice(["gemm", "attention", "mla", "allreduce", "moe"]),
              help="Only this op (repeatable; default all).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def kernels(gpus, ops, as_json):
    """Leave-one-shape-out accuracy of the kernel terms fitted on NVIDIA's measured operator tables.

    Source: aiconfigurator-core 0.12.0 (Apache-2.0), the subset shipped in sdsl/data/opdb. Per GPU and op:
    dense GEMM per weight format over 1-512 tokens (one input width held out at a time), decode attention
    with bf16 and fp8 KV caches (one heads/KV-heads/head-dim shape held out), decode MLA (one head count
    held out), the engines' custom all-reduce and NCCL (one GPU count held out), the fused MoE layer (one model
    shape held out, per engine kernel and format); median, 95th percentile, worst and signed bias of the held-out
    errors (goal: 10% median, 25% worst). On H100 also Vidur's GEMMs against the tables'.

    Examples:

    \b
        sdsl validate kernels
        sdsl validate kernels --gpu h200 --op moe
        sdsl validate kernels --json
    """
    from sdsl.cli._common import echo_json
    from sdsl.validation.kernel_validation import OPS, validate_kernels

    names = [_GPUS[g] for g in gpus] or None
    out = validate_kernels(names, ops=tuple(ops) or OPS)
    if as_json:
        echo_json(out)
        return
    click.echo(f"Measured kernels: {out['source']}; held-out errors (goal: median <= "
               f"{100 * out['goal']['median_abs']:.0f}%, worst <= {100 * out['goal']['worst_abs']:.0f}%)")
    for gpu, res in out["gpus"].items():
        click.echo(f"{gpu}:")
        for op, entries in res.items():
            for key, r in entries.items():
                h = r["heldout"]
                versions = ",".join(f"{e} {v}" for e in r["engine"] for v in r["engine_version"])
                mark = "ok" if h.get("meets_goal") else "MISSED"
                line = (f"  {op:<10} {key:<16} median {100 * h['median_abs']:5.1f}%  p95 {100 * h['p95_abs']:5.1f}%  "
                        f"worst {100 * h['worst_abs']:6.1f}%  bias {100 * h['median_signed']:+5.1f}%  {mark:<6} "
                        f"({r['rows']} rows, {r['folds']} {r['held_out']} folds; {versions})")
                if "small_m" in r:
                    line += (f"\n{'':30}m <= 16: median {100 * r['small_m']['median_abs']:.1f}%, worst "
                             f"{100 * r['small_m']['worst_abs']:.1f}%; m > 16: median {100 * r['large_m']['median_abs']:.1f}%, "
                             f"worst {100 * r['large_m']['worst_abs']:.1f}%")
                    if r.get("measured_time_vs_bf16_at_m1"):
                        line += f"; measured time / bf16 at m = 1: {r['measured_time_vs_bf16_at_m1']:.2f}x"
                click.echo(line)
    for gpu, sh in out.get("shipped", {}).items():
        cal = sh["calibration"]
        click.echo(f"{gpu} shipped defaults ({cal['kind']}: {'; '.join(cal['sources']) or 'transferred'}) on the tables' GEMMs: "
                   + ", ".join(f"{k} median {100 * v['median_abs']:.1f}% bias {100 * v['median_signed']:+.1f}%"
                               for k, v in sh["gemm"].items()))
    for gpu, rows in out.get("fp8_decode", {}).items():
        click.echo(f"{gpu} FP8 plain decode, Qwen3-8B (fp8/bf16: measured layer kernels vs sdsl's step): " + ", ".join(
            f"b{r['batch']} {r['measured_layer_ratio']:.2f} vs {r['priced_step_ratio']:.2f} ({100 * r['error']:+.1f}%)"
            for r in rows))
    for engine, m in out.get("engine_allreduce", {}).items():
        click.echo(f"engine profiles' custom all-reduce, {engine} {m['version']} ({m['kernel_source']}, H100/H200, CUDA graph): "
                   f"a = {1e6 * m['latency_s']:.2f} us, eta = {m['eta']:.3f}; GPU count held out: median "
                   f"{100 * m['heldout_median_abs']:.1f}%")
    v = out.get("vidur_h100")
    if v:
        s = v["shipped_on_opdb"]
        click.echo(f"H100, the two sources: shipped defaults ({v['shipped_source'][:60]}...) on the tables' bf16 GEMMs: "
                   f"median {100 * s['median_abs']:.1f}%, worst {100 * s['worst_abs']:.1f}%, bias {100 * s['median_signed']:+.1f}%")
        if "vidur_vs_opdb" in v:
            d = v["vidur_vs_opdb"]
            click.echo(f"  Vidur fp16 / tables bf16 at {v['shared_points']} shared (m, n, k): median {100 * d['median_signed']:+.1f}%, "
                       f"median |diff| {100 * d['median_abs']:.1f}%, worst {100 * d['worst']:+.1f}% "
                       f"(shapes {', '.join(v['shared_shapes'])})")


@click.command("bands")
@click.option("--write", is_flag=True, help="Write the bands to sdsl/data/bands.json (what predict and optimize read).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def bands(write, as_json):
    """The 80% bands on predicted tokens/s, TPOT and speedup, from sdsl's own held-out residuals (the rows of
    `validate published`, `validate moe` and `validate acceptance`): per class (plain decode and speculative by
    engine, mixture-of-experts, acceptance measured / same-target / transferred) the split-conformal band, the
    rows and sources behind it, and its coverage with each source's rows checked against the band built from the
    other sources only (goal 70-90%). Says whether the shipped sdsl/data/bands.json is up to date.

    Examples:

    \b
        sdsl validate bands
        sdsl validate bands --write
    """
    import math

    from sdsl.cli._common import echo_json
    from sdsl.validation.bands import validate_bands

    out = validate_bands(write=write)
    if as_json:
        echo_json(out)
        return
    pct = lambda x: "-" if x is None else f"{100 * (math.exp(x) - 1):+.1f}%"  # noqa: E731
    click.echo(f"{out['level']:.0%} bands, r = log(measured / predicted); {out['method']}")
    click.echo(f"{'kind':<10} {'class':<26} {'rows':>5} {'sources':>7}  {'low':>7} {'high':>7}  {'band from':<22} "
               f"{'coverage, source held out':>31} {'row held out':>12}")
    for kind in ("latency", "acceptance"):
        for name, b in out[kind].items():
            c = out["coverage"][kind][name]
            verdict = {True: "met", False: "NOT met", None: "too few rows"}[c["met"]]
            cov = "-" if c["coverage"] is None else f"{100 * c['coverage']:.0f}% ({c['inside']}/{c['checked']}) {verdict}"
            row = "-" if c["row_held_out"] is None else f"{100 * c['row_held_out']:.0f}%"
            click.echo(f"{kind:<10} {name:<26} {b['n']:>5} {b['n_sources']:>7}  {pct(b['low']):>7} {pct(b['high']):>7}  "
                       f"{b['from_class']:<22} {cov:>31} {row:>12}")
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
