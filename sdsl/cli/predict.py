"""`sdsl predict`: step-time breakdown, τ, tokens/s, TPOT and speedup of one configuration.

The command parses its options, calls :func:`sdsl.plan.api.predict` once and prints the result's ``report()`` or
``to_json()`` (JSON schema: docs/json.md)."""

from __future__ import annotations

import click

from sdsl.cli._common import acceptance_options, deployment_options, json_option, parse_int_list, workload_option
from sdsl.cli._speculation import proposer_option, tree_option


@click.command()
@click.option("--target", required=True, help="Target model (catalog name or config.json).")
@click.option("--draft", default=None, help="Draft model (catalog name or config.json); same as --proposer draft:<model>.")
@proposer_option
@click.option("--gamma", type=int, default=None,
              help="Draft tokens per step (a chain); with --tree, the k an --accepted-length was measured at.")
@tree_option
@deployment_options(tp_help="Tensor-parallel degree of the target (and its heads).")
@acceptance_options(alpha_help="i.i.d. per-token acceptance rate in (0, 1) (Leviathan et al.), a what-if level for the "
                               "proposer priced; default: its own (published catalog, SDSL's plane for a draft model).",
                    accepted_at_help="Draft length k the --accepted-length was measured at (default: --gamma).")
@workload_option
@click.option("--batch", default="1", show_default=True,
              help="Sequences decoded together; comma-separated batch sizes print one line per batch.")
@json_option
def predict(target, draft, proposers, gamma, tree, deployment, acceptance, workload, batch, as_json):
    """Step-time breakdown, tau and tokens/s of one configuration.

    Predict one speculative-decoding configuration: draft and verify step times, tau, tokens/s,
    time per output token and speedup over plain decoding of the target. A chain (--gamma) or an
    SGLang-style tree (--tree STEPS,TOPK,TOKENS) of any proposer (--proposer or --draft). Without a given
    acceptance the proposer's own prices it: the published catalog's for the target and --workload (the output
    names the rows or the transfer rule), SDSL's plane for a draft model. --engine names the execution profile
    that prices the engine's host time (default: the newest vLLM profile; ideal: the roofline alone).

    Examples:

    \b
        sdsl predict --target llama-3.1-8b --proposer eagle --gamma 4 --accepted-length 2.4 --hardware h100-sxm
        sdsl predict --target llama-3.1-8b --proposer eagle --gamma 4 --accepted-length 2.4 --hardware h100-sxm --engine vllm --json
        sdsl predict --target llama-3.1-8b --proposer eagle3 --gamma 3 --hardware h100-sxm --batch 1,8,64
    """
    from sdsl.acceptance import group_decay
    from sdsl.errors import InvalidInputError
    from sdsl.plan.api import predict as predict_one
    from sdsl.speculation.proposers import make_proposer

    if gamma is None and tree is None:
        raise InvalidInputError("Give --gamma (a chain) or --tree STEPS,TOPK,TOKENS.")
    if gamma is not None and gamma < 0:
        raise InvalidInputError("--gamma must be >= 0.")
    batches = parse_int_list(batch, "--batch")
    if min(batches) <= 0:
        raise InvalidInputError("--batch must be a positive integer.")
    if len(proposers) + bool(draft) != 1:
        raise InvalidInputError("Give one proposer: --draft <model> or --proposer draft:<model>|eagle|eagle3|medusa|mtp|ngram.")
    if tree is not None and gamma is not None and acceptance.given != "--accepted-length":
        raise InvalidInputError("Give --gamma or --tree, not both (with --tree, --gamma is only the k an "
                                "--accepted-length was measured at).")
    proposer = make_proposer(proposers[0] if proposers else f"draft:{draft}")
    if deployment.draft_tp != 1 and proposer.kind != "draft":
        raise InvalidInputError(f"--draft-tp applies to a separate draft model only; {proposer.name} runs on the "
                                "target's GPUs (its tensor parallelism is --tp).")
    if tree is not None and acceptance.given == "--accepted-length" and acceptance.accepted_at is None and gamma is None:
        given = {"accepted_length": float(acceptance.accepted_length)}  # the tree's own measured τ
    else:
        k = gamma if tree is None or gamma is not None else acceptance.accepted_at
        given = {"acceptance": acceptance.resolve(k=k, decay=group_decay(proposer.kind))}
    result = predict_one(target, proposer, deployment, gamma=None if tree else gamma, tree=tree,
                         batch=batches[0] if len(batches) == 1 else batches, workload=workload, **given)
    click.echo(result.to_json().rstrip("\n") if as_json else result.report())
