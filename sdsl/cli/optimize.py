"""`sdsl optimize`: rank proposers (catalog draft models by default) and speculation lengths for a target on a GPU.

The command parses its options and calls :func:`sdsl.plan.plan.plan_speculation` once; everything it prints
comes from that result (JSON schema: docs/json.md).
"""

from __future__ import annotations

import math

import click

from sdsl.cli._common import (acceptance_for_option, acceptance_options, deployment_options, echo_json, format_table,
                              json_option, parse_acceptance_for, parse_int_list, proposer_warnings, split_entries,
                              workload_option)
from sdsl.cli._speculation import proposer_option

ALL_PROPOSERS = ("eagle", "eagle3", "medusa", "mtp", "ngram")  # what --proposer all ranks


def all_proposers(target) -> tuple[str, ...]:
    """What ``--proposer all`` ranks for ``target``: every head kind and n-gram lookup, and MTP only where the target
    ships multi-token-prediction modules (``ModelSpec.mtp_layers``; DeepSeek-V3/R1, GLM-4.5): a dense model has none
    to run, so MTP's published acceptance would rank a proposer the user cannot deploy."""
    from sdsl.catalog.models import get_model

    has_mtp = get_model(target).mtp_layers > 0
    return tuple(p for p in ALL_PROPOSERS if p != "mtp" or has_mtp)


@click.command()
@click.option("--target", default="llama-3.1-70b", show_default=True, help="Target model (catalog name or config.json).")
@deployment_options()
@click.option("--batch", default="1", show_default=True, help="Batch size(s), comma-separated.")
@acceptance_options(accepted_at_help="Draft length k the --accepted-length was measured at, and of --acceptance-for values "
                                     "without @K (no default: required with --accepted-length).")
@acceptance_for_option
@workload_option
@click.option("--gamma-max", default=10, show_default=True, type=int, help="Largest speculation length searched.")
@click.option("--drafts", default=None, help="Comma-separated draft names (default, without --proposer: catalog models "
                                             "sharing the target's vocabulary, <= 1/4 its size).")
@click.option("--any-tokenizer", is_flag=True, help="Consider catalog drafts whatever their vocabulary.")
@click.option("--tokens", "pretrain_tokens", default=1e12, show_default=True, type=float,
              help="Pre-training tokens D = D' assumed by SDSL's law for draft models without a given acceptance.")
@click.option("--top", default=10, show_default=True, type=int, help="Rows to print per batch size.")
@click.option("--serving", is_flag=True,
              help="Also add the batch-size -> k table to the JSON as a `serving` object with what it was tuned for "
                   "(the table itself, `k_table`, is always given).")
@click.option("--max-batch", default=256, show_default=True, type=int,
              help="Largest batch size in the batch-size -> k table (raised to the largest --batch; at most 16384).")
@proposer_option
@click.option("--trees", is_flag=True, help="Also rank SGLang token trees (steps 1-8 x topk 1,2,4,8 x <= 64 tokens) per proposer.")
@click.option("--export", type=str, default=None,
              help="Print the pick's configuration for an engine: vllm | sglang | trtllm.")
@click.option("--csv", "as_csv", is_flag=True, help="Print every evaluated chain configuration as CSV (not with --json, --trees or --export).")
@json_option
def optimize(target, deployment, batch, acceptance, acceptance_for, workload, gamma_max, drafts, any_tokenizer,
             pretrain_tokens, top, serving, max_batch, proposers, trees, export, as_csv, as_json):
    """Rank proposers and speculation lengths by predicted tokens/s.

    Every (proposer, k, batch) is priced on the calibrated roofline of the hardware with the engine's execution
    profile (--engine; default the newest vLLM profile), so the best k and the batch at which speculation stops
    paying include the engine's host time. Without --proposer or
    --drafts, the proposers are the catalog's draft models for the target; --proposer (repeatable; 'all' =
    every head kind and n-gram lookup, MTP only for targets that ship MTP modules) and --drafts name them. Each proposer is priced with its own acceptance:
    --acceptance-for PROPOSER=TAU@K where you measured it, else the published catalog's for the target and
    --workload (the same target when catalogued, else a transfer across targets; the output names the rows or
    rule) and SDSL's acceptance plane for draft models. --accepted-length, --acceptance and --acceptance-file
    are one proposer's measurement (several proposers: --acceptance-for); --alpha is a what-if level for
    every proposer without --acceptance-for. Prints each
    proposer at its best k per batch, the batch at which speculation stops paying, the best k by batch for
    the pick, the engine's configuration with --export, and SDSL's continuous FLOP-optimal draft size N*.
    """
    from sdsl.plan.plan import plan_speculation
    from sdsl.speculation.proposers import make_proposer
    from sdsl.errors import InvalidInputError

    _check_outputs(as_csv, as_json, trees, export)
    batches = parse_int_list(batch, "--batch")
    if min(batches) <= 0:
        raise InvalidInputError("--batch must be a positive integer.")
    if not (math.isfinite(pretrain_tokens) and pretrain_tokens > 0):
        raise InvalidInputError(f"--tokens must be a finite positive number of pre-training tokens; got {pretrain_tokens:g}.")
    names = _proposer_names(target, proposers, drafts)
    if deployment.draft_tp != 1 and names and not any(make_proposer(n).kind == "draft" for n in names):
        raise InvalidInputError("--draft-tp applies to a separate draft model only; the ranked heads and n-gram lookup "
                                "run on the target's GPUs (their tensor parallelism is --tp).")
    given = _acceptance(target, names, acceptance, acceptance_for, any_tokenizer)
    gamma_max, note = _gamma_cap(given, gamma_max)
    plan = plan_speculation(target, deployment, proposers=names or None, acceptance=given,
                            gamma_max=gamma_max, batches=batches, max_batch=max_batch, trees=trees, export=export,
                            pretrain_tokens=pretrain_tokens, any_tokenizer=any_tokenizer, top=top, workload=workload)
    if as_csv:
        click.echo(plan.ranking.to_frame(batches=batches).to_csv(index=False), nl=False)
        return
    out = plan.to_dict()
    out["warnings"] = _warnings(plan)
    if serving:
        out["serving"] = plan.serving()
    if as_json:
        echo_json(out)
    else:
        if note:
            click.echo(note)
        _echo(out, plan)


def _check_outputs(as_csv, as_json, trees, export) -> None:
    """--csv prints the evaluated chains only: it takes neither --json nor what its schema cannot carry."""
    from sdsl.errors import InvalidInputError

    if as_csv and as_json:
        raise InvalidInputError("Give one of --json, --csv.")
    for flag, value in (("--trees", trees), ("--export", export)):
        if as_csv and value:
            raise InvalidInputError(f"--csv lists the evaluated chains only and cannot carry {flag}; use --json or the "
                                    "table output with it.")


def _proposer_names(target, proposers, drafts) -> list[str]:
    """The proposers named by --proposer (``all`` expanded) and --drafts, in the order given (plan_speculation
    ranks a proposer named twice once)."""
    names = [n for p in proposers for n in (all_proposers(target) if p == "all" else (p,))]
    if drafts is not None:
        names += [f"draft:{d}" for d in split_entries(drafts, "--drafts", "llama-68m,llama-160m")]
    return names


def _gamma_cap(given, gamma_max: int) -> tuple[int, str | None]:
    """--gamma-max capped at the draft positions a given acceptance vector covers, and the note that says so."""
    from sdsl.acceptance import Acceptance

    vectors = [given] if isinstance(given, Acceptance) else list(given.values()) if isinstance(given, dict) else []
    covered = [int(a.max_k) for a in vectors if math.isfinite(a.max_k)]
    if not covered or min(covered) >= gamma_max:
        return gamma_max, None
    k = min(covered)
    return k, (f"note: k searched up to {k} only, the draft positions the given acceptance covers "
               f"(--gamma-max {gamma_max}); give more per-position rates to search further.")


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


def _warnings(plan) -> list:
    """:func:`~sdsl.cli._common.proposer_warnings` of the ranked proposers, and a deployment that does not fit."""
    dep, t = plan.deployment, plan.target
    out = proposer_warnings(t, dep, plan.ranking.proposers)
    if not plan.fits_in_memory():
        out.append(f"{t.name} (and its best draft) do not fit in {dep.hardware.name}'s "
                   f"{dep.hardware.mem_capacity / 2 ** 30:.0f} GiB per GPU (weights + KV cache); raise --tp or use --dtype fp8")
    return out


def _echo_header(out: dict, plan) -> None:
    dep, t = plan.deployment, plan.target
    source = out["alpha_source"]
    if source == "sdsl-plane":
        source = "SDSL plane (D = %.3g tokens)" % out["sdsl"]["pretrain_tokens"]
    click.echo(f"target {t.name} ({t.total_params / 1e9:.2f}B) on {dep.hardware.name}, context {dep.context}, "
               f"tp {dep.tp}, {dep.dtype}; acceptance: {source}")
    click.echo(f"latency parameters: {dep.params.source}")
    click.echo(f"engine: {dep.engine.name} ({dep.engine.build})")
    for line in out["warnings"]:
        click.echo(f"warning: {line}.")
    if source == "per-proposer" or any("evidence" in a for a in out["acceptance_by_proposer"].values()):
        click.echo("acceptance by proposer:")
        for name, acc in out["acceptance_by_proposer"].items():
            click.echo(f"  {name}: {describe_acceptance(acc)}")
    click.echo("")


def describe_acceptance(acc: dict) -> str:
    """One line on where an acceptance came from: its source, and for a catalog default its rows and spread."""
    ev = acc.get("evidence")
    if not ev:
        return acc["source"]
    sp = ev["spread"]
    plural = lambda n, word: f"{n} {word}" + ("" if n == 1 else "s")  # noqa: E731
    return (f"{acc['source']} ({plural(len(ev['rows']), 'row')} from {plural(len(ev['sources']), 'source')}: "
            f"{', '.join(ev['sources'])}; tau({sp['k']}) {sp['min']:.2f}-{sp['max']:.2f} over "
            f"{plural(len(sp['by_task']), 'task')})")


def _params(p):
    return "" if p is None else f"{p / 1e9:.2f}B" if p >= 1e9 else f"{p / 1e6:.0f}M"


def _echo(out: dict, plan) -> None:
    _echo_header(out, plan)
    for b in plan.batches:
        rows = [dict(r, params=_params(r["draft_params"]), tpot_ms=1e3 * r["tpot_s"]) for r in out["configs"]
                if r["batch"] == b]
        click.echo(f"batch {b}: plain decoding {rows[0]['plain_tokens_per_s']:.1f} tokens/s")
        click.echo(format_table(rows, [("proposer", "proposer", ""), ("params", "params", ""), ("gamma", "k", "d"),
                                       ("alpha", "alpha", ".3f"), ("tau", "tau", ".2f"),
                                       ("tokens_per_s", "tokens/s", ".1f"), ("tpot_ms", "TPOT ms", ".2f"),
                                       ("speedup", "speedup", ".2f"), ("bound", "bound", "")]))
        click.echo("")
    if "trees" in out:
        click.echo("best SGLang trees (steps, topk, num_draft_tokens):")
        rows = [dict(r, shape=",".join(map(str, r["tree"]))) for r in out["trees"]]
        click.echo(format_table(rows, [("batch", "batch", "d"), ("proposer", "proposer", ""), ("shape", "tree", ""),
                                       ("tau", "tau", ".2f"), ("tokens_per_s", "tokens/s", ".1f"),
                                       ("speedup", "speedup", ".2f")]))
        click.echo("")
    click.echo(f"best k by batch for {out['pick']['proposer']} (context {plan.deployment.context}; "
               "k = 0: do not speculate)")
    click.echo(format_table(out["k_table"], [("batch_min", "batch from", "d"), ("batch_max", "to", "d"), ("k", "k", "d")]))
    click.echo(plan.stop_line())
    click.echo(f"why, for {out['pick']['proposer']} (bound: what bounds the verify forward; cost driver: what speculation "
               "adds most over the plain step, at k = 1 where k = 0; experts: per MoE layer, plain -> verify):")
    rows = [dict(r, speedup=f"{r['speedup_min']:.2f}-{r['speedup_max']:.2f}",
                 experts=f"{r['plain_distinct_experts']:.1f} -> {r['verify_distinct_experts']:.1f}")
            for r in out["k_reasons"]]
    columns = [("batch_min", "batch from", "d"), ("batch_max", "to", "d"), ("k", "k", "d"), ("speedup", "speedup", ""),
               ("bound", "bound", ""), ("cost_driver", "cost driver", "")]
    if any(r["verify_distinct_experts"] for r in out["k_reasons"]):
        columns.append(("experts", "experts", ""))
    click.echo(format_table(rows, columns))
    if "export" in out:
        click.echo(f"\n{out['export']['engine']} configuration:\n{out['export']['config']}")
    sdsl = out["sdsl"]
    click.echo(f"\nSDSL FLOP-model optimum: N* = {sdsl['n_star'] / 1e6:.0f}M parameters (alpha {sdsl['alpha']:.3f}, "
               f"gamma* {sdsl['gamma_star']:.2f}, speedup {sdsl['flop_speedup']:.2f}x in FLOPs)")
