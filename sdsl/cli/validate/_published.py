"""The text report of ``sdsl validate published`` (the command is in :mod:`sdsl.cli.validate`)."""

from __future__ import annotations

import click

__all__ = ["echo_published"]


def _pct(x) -> str:
    return "   n/a" if x is None else f"{100 * x:+6.1f}%"


def echo_published(out: dict) -> None:
    """Rows, unpriced rows, the per-class summary (leave-one-source-out, shipped, roofline alone), the k-sweeps and
    the goals."""
    from sdsl.validation.published_validation import CLASSES

    click.echo("errors of speed (predicted/measured - 1 of tokens/s or speedup; measured/predicted - 1 of TPOT);"
               " loso = terms fitted without the row's source")
    for r in out["rows"]:
        shape = r["tree"] and "tree " + ",".join(map(str, r["tree"])) or (f"k {r['gamma']}" if r["proposer"] else "plain")
        click.echo(f"{r['class']:<18} {r['file'][:4]}#{r['row']:<3} {r['profile'][:24]:<24} {r['target']:<15} "
                   f"{r['hardware']:<9} tp{r['tp']} b{r['batch']:<2} {(r['proposer'] or '-'):<15} {shape:<13} "
                   f"{r['metric'][:10]:<10} {r['measured']:8.2f}  loso {_pct(r['error'])}  shipped "
                   f"{_pct(r['error_shipped'])}  ideal {_pct(r['error_ideal'])}")
    for u in out["unpriced"]:
        click.echo(f"not priced: {u['file']}#{u['row']} ({u['row_set']}): {u['reason']}")
    for cls, what in CLASSES:
        s = out["summary"][cls]
        if not s["loso"]["n"]:
            continue
        line = ", ".join(f"{label} median |e| {100 * s[label]['median_abs_error']:.1f}% worst "
                         f"{_pct(s[label]['worst_error']).strip()} signed {_pct(s[label]['median_signed_error']).strip()}"
                         for label in ("loso", "shipped", "ideal"))
        click.echo(f"{cls} (n={s['loso']['n']}; {what}): {line}")
    for sw in out["k_sweeps"]:
        lo = sw["loso"]
        click.echo(f"k-sweep {sw['source']} {sw['proposer']} {sw['shape']} k={sw['k']}: measured best k "
                   f"{sw['measured_best_k']}, sdsl best k {lo['best_k']} (loso), same order: {lo['same_order']}")
    ks = out["k_sweep"]
    click.echo(f"vLLM EAGLE k-sweep (PR #16937, acceptance borrowed from PR #16035): measured best k "
               f"{ks['measured_best_k']}; sdsl best k {ks['engine']['best_k']} with {ks['profile']} "
               f"(terms fitted without the sweep's source), {ks['ideal']['best_k']} on the roofline alone")
    for name, g in out["goals"].items():
        if isinstance(g, dict):
            click.echo(f"goal {name}: {'met' if g['met'] else 'MISSED'} ({_pct(g['value']).strip()} against "
                       f"{100 * g['limit']:.0f}%)")
    _echo_fp8(out.get("fp8"))


def _echo_fp8(f) -> None:
    """The dense FP8 plain-decode rows, their fp8/bf16 step ratios and the FP8 goal."""
    if not f:
        return
    click.echo("FP8 plain decode of dense targets (row_set fp8; no fitted term reads these rows): error of speed, "
               "as above (what `--dtype fp8` prices); all-fp8 = every tensor in fp8")
    for r in f["rows"]:
        click.echo(f"fp8 decode#{r['row']:<3} {r['profile'][:16]:<16} {r['target']:<14} {r['hardware']:<9} tp{r['tp']} "
                   f"b{r['batch']:<2} {(r['weight_dtype'] or 'bf16'):<5} {r['metric'][:10]:<10} {r['measured']:8.4g}  "
                   f"predicted {r['predicted']:8.4g}  {_pct(r['error'])}  all-fp8 {_pct(r['error_all_fp8'])}  "
                   f"ideal {_pct(r['error_ideal'])}")
    for p in f["pairs"]:
        click.echo(f"fp8/bf16 step ratio decode#{p['fp8_row']} ({p['target']}, {p['hardware']}, tp{p['tp']}, "
                   f"b{p['batch']}): measured {p['measured_step_ratio']:.3f}, sdsl {p['predicted_step_ratio']:.3f} "
                   f"({_pct(p['error']).strip()})")
    for u in f["unpriced"]:
        click.echo(f"not priced: decode#{u['row']} (fp8): {u['reason']}")
    for name, label in (("fp8_rows", "fp8 rows"), ("ratios", "fp8/bf16 ratios")):
        s = f["summary"][name]
        if s["n"]:
            click.echo(f"{label} (n={s['n']}): median |e| {100 * s['median_abs_error']:.1f}% worst "
                       f"{_pct(s['worst_error']).strip()} signed {_pct(s['median_signed_error']).strip()}")
    g = f["goal"]
    click.echo(f"goal fp8_within_{100 * g['limit']:.0f}pct: rows {'met' if g['rows_met'] else 'MISSED'} (worst "
               f"{100 * g['worst_row_abs']:.1f}%), ratios {'met' if g['ratios_met'] else 'MISSED'} (worst "
               f"{100 * g['worst_ratio_abs']:.1f}%)")
