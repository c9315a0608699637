"""`sdsl validate decoder`: measured speculative decoding (torch reference) vs sdsl's predictions."""

from __future__ import annotations

import click

from sdsl.cli._common import json_text, parse_int_list


@click.command("decoder")
@click.option("--targets", default="byte-d192,byte-d288", show_default=True, help="Target checkpoints (comma-separated).")
@click.option("--drafts", default="byte-d64,byte-d96,byte-d128,byte-wide,byte-deep", show_default=True,
              help="Draft checkpoints (comma-separated); prompt lookup is always added.")
@click.option("--gammas", default="1-8", show_default=True, help="Speculation lengths, '1-8' or '1,2,4'.")
@click.option("--batches", default="1,8", show_default=True, help="Batch sizes.")
@click.option("--prompts", "n_prompts", default=16, show_default=True, help="Held-out prompts (decoded in chunks of the batch size).")
@click.option("--max-new", default=64, show_default=True, help="New tokens per prompt.")
@click.option("--repeats", default=2, show_default=True, help="Timed repeats per run, plain and speculative alike (the fastest counts).")
@click.option("--temperature", default=1.0, show_default=True, help="Sampling temperature (0 = greedy).")
@click.option("--seed", default=0, show_default=True)
@click.option("--cache", "cache_path", default=".cache/validate_decoder.json", show_default=True,
              help="Row cache (resumable; delete it to re-measure). Use '' for none.")
@click.option("--smollm2", "smollm2", default=None, help="Also measure SmolLM2-135M (GGUF path or directory) with prompt lookup.")
@click.option("--no-plane", is_flag=True, help="Skip the acceptance-plane fit over all family pairs.")
@click.option("--in-sample", is_flag=True,
              help="Price with the committed profiles/cpu.calib.json (fitted on the validated models too) instead of "
                   "a calibration refitted per (target, proposer) without any row of its models (the default).")
@click.option("--heads", is_flag=True, help="Also measure the trained draft head and token trees (byte-d288, batch 1).")
@click.option("--synthetic", is_flag=True, help="Also run the forced-acceptance sweep at real shapes (qwen2.5-0.5b target).")
@click.option("--family/--no-family", default=True, show_default=True, help="Measure the family's draft-model grid.")
@click.option("--out", default=None, help="Also write the full JSON result here.")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def decoder(targets, drafts, gammas, batches, n_prompts, max_new, repeats, temperature, seed, cache_path, smollm2, no_plane,
            in_sample, heads, synthetic, family, out, as_json):
    """Measure α, τ, tokens/s and speedup of the torch reference decoder on the committed byte-level
    family (every draft × target × γ × batch) and compare with sdsl's predicted speedup from the
    measured α and the CPU latency model, refitted per pair without its models' rows. Summary keys:
    median_speedup_error, median_signed_error, share_over_predicted, worst_speedup_error, models
    (the same per model variant), best_speedup, best_config, optimizer_regret."""
    import json

    from sdsl._io import atomic_write_text
    from sdsl.errors import InvalidInputError
    from sdsl.validation.decoder.extensions import extend_report, extension_lines
    from sdsl.validation.decoder.validation import validate_decoder

    gamma_list, batch_list = parse_int_list(gammas, "--gammas"), parse_int_list(batches, "--batches")
    if not gamma_list or min(gamma_list) < 1:
        raise InvalidInputError("--gammas must list speculation lengths >= 1 (plain decoding is always measured).")
    if not batch_list or min(batch_list) < 1:
        raise InvalidInputError("--batches must list batch sizes >= 1.")
    for name, value in (("--prompts", n_prompts), ("--max-new", max_new), ("--repeats", repeats)):
        if value < 1:
            raise InvalidInputError(f"{name} must be >= 1.")
    if temperature < 0:
        raise InvalidInputError("--temperature must be >= 0.")
    if smollm2:
        from pathlib import Path

        from sdsl.errors import ConfigError
        from sdsl.torch.gguf_loader import find_smollm2

        if not (Path(smollm2).is_file() or find_smollm2(smollm2)):
            raise ConfigError(f"No SmolLM2 GGUF file under {smollm2} (fetch it with `make smollm2`).")
    res = {} if not family else validate_decoder(targets=targets.split(","), drafts=[d for d in drafts.split(",") if d],
                           gammas=gamma_list, batches=batch_list, n_prompts=n_prompts, max_new=max_new, repeats=repeats,
                           temperature=temperature, seed=seed, cache_path=cache_path or None, plane=not no_plane,
                           smollm2=smollm2, progress=not as_json, in_sample=in_sample)
    res = extend_report(res, heads=heads, synthetic=synthetic, smollm2=None if family else smollm2, progress=not as_json)
    text = json_text(res, sort_keys=True)
    if out:
        atomic_write_text(out, text + "\n")
    if as_json:
        click.echo(text)
        return
    for line in extension_lines(res):
        click.echo(line)
    if family:
        _print_report(res)


def _print_report(res: dict) -> None:
    """The human-readable table and summary lines."""
    click.echo(f"{'target':10s} {'draft':14s} {'b':>2s} {'γ':>2s} {'alpha':>6s} {'tau':>5s} {'tok/s':>8s} "
               f"{'speedup':>7s} {'pred':>6s} {'err':>6s} {'pred_st':>7s} {'err_st':>6s}")
    for r in res["rows"]:
        click.echo(f"{r['target']:10s} {r['draft']:14s} {r['batch']:2d} {r['gamma']:2d} {r['alpha']:6.3f} {r['tau']:5.2f} "
                   f"{r['tokens_per_s']:8.1f} {r['speedup']:7.2f} {r['pred_speedup']:6.2f} {100 * r['speedup_error']:5.0f}% "
                   f"{r['pred_speedup_steps']:7.2f} {100 * r['speedup_error_steps']:5.0f}%")
    click.echo(f"median |speedup error| {100 * res['median_speedup_error']:.1f}%, median signed "
               f"{100 * res['median_signed_error']:+.1f}%, {100 * res['share_over_predicted']:.0f}% of rows over-predicted, "
               f"worst {100 * res['worst_speedup_error']:.1f}% ({res['settings']['latency_params']})")
    for name, st in res["models"].items():
        click.echo(f"  {name:10s} median |error| {100 * st['median_abs']:5.1f}%  signed {100 * st['median_signed']:+5.1f}%  "
                   f"over-predicted {100 * st['share_over']:3.0f}%  worst {100 * st['worst_abs']:5.1f}%")
    b = res["best_config"]
    click.echo(f"best measured speedup {res['best_speedup']:.2f}x: draft {b['draft']} γ={b['gamma']} batch {b['batch']} "
               f"-> target {b['target']}; sdsl's pick {res['sdsl_pick']['draft']} γ={res['sdsl_pick']['gamma']} "
               f"(measured {res['sdsl_pick']['measured_speedup']:.2f}x), regret {100 * res['optimizer_regret']:.1f}%")
    if res.get("plane", {}).get("fit"):
        f = res["plane"]["fit"]
        click.echo(f"acceptance plane on {f['n']} pairs: alpha = {f['A']:.4f}*ppl_draft + {f['B']:.4f}*ppl_target + "
                   f"{f['C']:.3f}, R2 {f['R2']:.2f} (paper: -0.0067, 0.01297, 0.642, R2 0.60); signs match: {f['signs_match_paper']}")
