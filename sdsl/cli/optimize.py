"""`sdsl optimize`: rank proposers (catalog draft models by default) and speculation lengths for a target on a GPU.

The command parses its options and calls :func:`sdsl.plan.plan.plan_speculation` once; everything it prints
comes from that result (JSON schema: docs/json.md).
"""

from __future__ import annotations

import math

import click

from sdsl.cli._common import (acceptance_for_option, acceptance_options, deployment_options, json_option,
                              parse_acceptance_for, parse_int_list, split_entries, workload_option)
from sdsl.cli._speculation import proposer_option


def all_proposers(target) -> tuple[str, ...]:
    """What ``--proposer all`` ranks for ``target`` (:func:`sdsl.plan.search.expand_proposers`)."""
    from sdsl.plan.search import expand_proposers

    return tuple(expand_proposers(target, ["all"]))


@click.command()
@click.option("--target", default="llama-3.1-70b", show_default=True, help="Target model (catalog name or config.json).")
@deployment_options()
@click.option("--batch", default="1", show_default=True, help="Batch size(s), comma-separated.")
@acceptance_options(accepted_at_help="Draft length k the --accepted-length was measured at, and of --acceptance-for values "
                                     "without @K (no default: required with --accepted-length).")
@acceptance_for_option
@workload_option
@click.option("--gamma-max", default=10, show_default=True, type=int,
              help="Largest speculation length searched (at least 1).")
@click.option("--drafts", default=None, help="Comma-separated draft names (default, without --proposer: catalog models "
                                             "sharing the target's vocabulary, <= 1/4 its size).")
@click.option("--any-tokenizer", is_flag=True, help="Consider catalog drafts whatever their vocabulary.")
@click.option("--tokens", "pretrain_tokens", default=1e12, show_default=True, type=float,
              help="Pre-training tokens D = D' assumed by SDSL's law for draft models without a given acceptance.")
@click.option("--top", default=10, show_default=True, type=int, help="Rows to print per batch size.")
@click.option("--max-batch", default=256, show_default=True, type=int,
              help="Largest batch size in the batch-size -> k table (raised to the largest --batch; at most 16384).")
@proposer_option
@click.option("--trees", is_flag=True, help="Also rank SGLang token trees (steps 1-8 x topk 1,2,4,8 x <= 64 tokens) per proposer.")
@click.option("--export", type=str, default=None,
              help="Print the pick's configuration for an engine: vllm | sglang | trtllm.")
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="Also draw speed-up vs batch (log axis), one line per proposer at its best k, the pick marked, to FILE.png|.pdf.")
@click.option("--csv", "as_csv", is_flag=True, help="Print every evaluated chain configuration as CSV (not with --json, --trees or --export).")
@json_option
def optimize(target, deployment, batch, acceptance, acceptance_for, workload, gamma_max, drafts, any_tokenizer,
             pretrain_tokens, top, max_batch, proposers, trees, export, plot, as_csv, as_json):
    """Best draft models and speculation lengths for a target.

    Rank proposers and speculation lengths by predicted tokens/s.

    Every (proposer, k, batch) is priced on the calibrated roofline of the hardware with the engine's execution
    profile (--engine; default the newest vLLM profile), so the best k and the batch at which speculation stops
    paying include the engine's host time. Without --proposer or
    --drafts, the proposers are the catalog's draft models for the target (where none shares its vocabulary, as
    for DeepSeek-V3 or gpt-oss, 'all'); --proposer (repeatable; 'all' =
    every head kind and n-gram lookup, MTP only for targets that ship MTP modules) and --drafts name them. Each proposer is priced with its own acceptance:
    --acceptance-for PROPOSER=TAU@K where you measured it, else the published catalog's for the target and
    --workload (the same target when catalogued, else a transfer across targets; the output names the rows or
    rule) and SDSL's acceptance plane for draft models. --accepted-length, --acceptance and --acceptance-file
    are one proposer's measurement (several proposers: --acceptance-for); --alpha is a what-if level for
    every proposer without --acceptance-for. Prints each
    proposer per batch at the k its batch -> k table deploys (k within 5% of the best are one choice; the
    batch's own best k beside it where it differs), the batch at which speculation stops paying, the best k
    by batch for the pick, the engine's configuration with --export, and SDSL's continuous FLOP-optimal draft
    size N*.

    Examples:

    \b
        sdsl optimize --target llama-3.1-70b --hardware h100-sxm --tp 4
        sdsl optimize --target llama-3.1-8b --proposer all --hardware h100-sxm --engine vllm --batch 1
        sdsl optimize --target llama-3.1-8b --proposer eagle3 --hardware h100-sxm --export vllm
        sdsl optimize --target qwen3-30b-a3b --proposer eagle3 --hardware h100-sxm --engine sglang --batch 1,64
    """
    from sdsl.errors import InvalidInputError
    from sdsl.plan.plan import plan_speculation
    from sdsl.speculation.proposers import make_proposer

    _check_outputs(as_csv, as_json, trees, export, plot)
    batches = parse_int_list(batch, "--batch")
    if min(batches) <= 0:
        raise InvalidInputError("--batch must be a positive integer.")
    if gamma_max < 1:
        raise InvalidInputError(f"--gamma-max must be at least 1 (k = 0, plain decoding, is always ranked); got {gamma_max}.")
    if not (math.isfinite(pretrain_tokens) and pretrain_tokens > 0):
        raise InvalidInputError(f"--tokens must be a finite positive number of pre-training tokens; got {pretrain_tokens:g}.")
    names = _proposer_names(target, proposers, drafts)
    if deployment.draft_tp != 1 and names and not any(make_proposer(n).kind == "draft" for n in names):
        raise InvalidInputError("--draft-tp applies to a separate draft model only; the ranked heads and n-gram lookup "
                                "run on the target's GPUs (their tensor parallelism is --tp).")
    given = _acceptance(target, names, acceptance, acceptance_for, any_tokenizer)
    plan = plan_speculation(target, deployment, proposers=names or None, acceptance=given,
                            gamma_max=gamma_max, batches=batches, max_batch=max_batch, trees=trees, export=export,
                            pretrain_tokens=pretrain_tokens, any_tokenizer=any_tokenizer, top=top, workload=workload)
    if as_csv:
        click.echo(plan.ranking.to_frame(batches=batches).to_csv(index=False), nl=False)
        return
    if plot:
        from sdsl.plots._common import _figure, save_figure

        fig, axes = _figure(figsize=(6.0, 4.2))
        plan.plot(ax=axes[0, 0])
        save_figure(fig, plot)
    click.echo(plan.to_json().rstrip("\n") if as_json else plan.report())
    if plot and not as_json:
        click.echo(f"wrote {plot}")


def _check_outputs(as_csv, as_json, trees, export, plot) -> None:
    """--csv prints the evaluated chains only: it takes neither --json nor what its schema cannot carry; --plot
    writes a .png or .pdf."""
    from sdsl.errors import InvalidInputError

    if plot and not str(plot).lower().endswith((".png", ".pdf")):
        raise InvalidInputError(f"--plot writes a .png or .pdf file; got {plot!r}.")
    if as_csv and as_json:
        raise InvalidInputError("Give one of --json, --csv.")
    for flag, value in (("--trees", trees), ("--export", export)):
        if as_csv and value:
            raise InvalidInputError(f"--csv lists the evaluated chains only and cannot carry {flag}; use --json or the "
                                    "table output with it.")


def _proposer_names(target, proposers, drafts) -> list[str]:
    """The proposers named by --proposer (``all`` expanded) and --drafts, in the order given (plan_speculation
    ranks a proposer named twice once)."""
    names = []
    if proposers:  # (sdsl.plan.api, with predict's dataclasses, only when proposers are named)
        from sdsl.plan.search import expand_proposers

        names = expand_proposers(target, proposers)
    if drafts is not None:
        names += [f"draft:{d}" for d in split_entries(drafts, "--drafts", "llama-68m,llama-160m")]
    return names


def _acceptance(target, names, acceptance, acceptance_for, any_tokenizer):
    """The acceptance argument of plan_speculation: None (every proposer's own), one Acceptance (--alpha for all;
    a measurement when one proposer is ranked), or {proposer name: Acceptance} with the --acceptance-for ones."""
    from sdsl.acceptance import group_decay
    from sdsl.catalog.models import get_model
    from sdsl.plan.plan import default_proposers
    from sdsl.speculation.proposers import make_proposer
    from sdsl.errors import InvalidInputError

    ranked = [make_proposer(n) for n in names] if names else default_proposers(get_model(target), any_tokenizer=any_tokenizer)
    overrides = parse_acceptance_for(acceptance_for, acceptance.accepted_at)
    known = {p.name for p in ranked} | {p.kind for p in ranked}
    unknown = [n for n in overrides if n not in known]
    if unknown:
        raise InvalidInputError(f"--acceptance-for names {', '.join(unknown)}, which is not ranked (ranked: "
                                f"{', '.join(p.name for p in ranked)}).")
    if acceptance.measured and len(ranked) > 1:
        raise InvalidInputError(f"{acceptance.given} is one proposer's measurement but {len(ranked)} are ranked; give "
                                "--acceptance-for PROPOSER=TAU@K for each one you measured (the others use the "
                                "published catalog or SDSL's plane).")
    if acceptance.accepted_at is not None and acceptance.accepted_length is None and not overrides:
        raise InvalidInputError("--accepted-at only qualifies --accepted-length or --acceptance-for; give one of them.")
    shared = acceptance.resolve(decay=group_decay(ranked[0].kind) if acceptance.measured else None,
                                bare_accepted_at=bool(overrides))
    if not overrides:
        return shared
    by_name = {}
    for p in ranked:
        spec = overrides.get(p.name, overrides.get(p.kind, shared))
        if spec is not None:
            by_name[p.name] = spec
    return by_name
