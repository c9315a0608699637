"""`sdsl predict`: step-time breakdown, τ, tokens/s, TPOT and speedup of one configuration."""

from __future__ import annotations

import click

from sdsl.cli._common import acceptance_options, deployment_options, echo_json, json_option, workload_option
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
@click.option("--batch", default=1, show_default=True, type=int, help="Sequences decoded together.")
@json_option
def predict(target, draft, proposers, gamma, tree, deployment, acceptance, workload, batch, as_json):
    """Predict one speculative-decoding configuration: draft and verify step times, tau, tokens/s,
    time per output token and speedup over plain decoding of the target. A chain (--gamma) or an
    SGLang-style tree (--tree STEPS,TOPK,TOKENS) of any proposer (--proposer or --draft). Without a given
    acceptance the proposer's own prices it: the published catalog's for the target and --workload (the output
    names the rows or the transfer rule), SDSL's plane for a draft model. --engine names the execution profile
    that prices the engine's host time (default: the newest vLLM profile; ideal: the roofline alone)."""
    from sdsl.catalog.models import get_model
    from sdsl.speculation.proposers import make_proposer
    from sdsl.speculation.step import parse_tree, price_step
    from sdsl.errors import InvalidInputError

    if gamma is None and tree is None:
        raise InvalidInputError("Give --gamma (a chain) or --tree STEPS,TOPK,TOKENS.")
    if gamma is not None and gamma < 0:
        raise InvalidInputError("--gamma must be >= 0.")
    if batch <= 0:
        raise InvalidInputError("--batch must be a positive integer.")
    if len(proposers) + bool(draft) != 1:
        raise InvalidInputError("Give one proposer: --draft <model> or --proposer draft:<model>|eagle|eagle3|medusa|mtp|ngram.")
    if tree is not None and gamma is not None and acceptance.given != "--accepted-length":
        raise InvalidInputError("Give --gamma or --tree, not both (with --tree, --gamma is only the k an "
                                "--accepted-length was measured at).")
    shape = parse_tree(tree) if tree else None
    proposer = make_proposer(proposers[0] if proposers else f"draft:{draft}")
    if deployment.draft_tp != 1 and proposer.kind != "draft":
        raise InvalidInputError(f"--draft-tp applies to a separate draft model only; {proposer.name} runs on the "
                                "target's GPUs (its tensor parallelism is --tp).")
    options = {"workload": workload, "spread_k": gamma if gamma else (shape.steps if shape else None)}
    step = price_step(target, proposer, deployment, gamma=None if shape else gamma, tree=shape, batch=batch,
                      acceptance_options=options, **_acceptance(acceptance, gamma, shape, proposer))
    spec = get_model(target)
    out = _json(step, proposer, gamma, shape, spec)
    out["warnings"] = _warnings(spec, step, proposer, gamma)
    if as_json:
        echo_json(out)
        return
    _echo(out, deployment.hardware.name)


def _acceptance(acceptance, gamma, shape, proposer) -> dict:
    """price_step's τ arguments from the acceptance options: with --tree, an --accepted-length alone is the tree's
    own measured τ; otherwise the Acceptance (an accepted length fitted with the proposer's decay ratio; None: the
    proposer's own, the published catalog or SDSL's plane)."""
    from sdsl.acceptance import group_decay

    if shape is not None and acceptance.given == "--accepted-length" and acceptance.accepted_at is None and gamma is None:
        return {"tau": float(acceptance.accepted_length), "tau_source": "accepted-length of this tree (measured)"}
    return {"acceptance": acceptance.resolve(k=gamma if shape is None else (gamma if gamma is not None
                                                                            else acceptance.accepted_at),
                                             decay=group_decay(proposer.kind))}


def _json(step, proposer, gamma, shape, target_spec) -> dict:
    """``sdsl predict --json``: the priced step's fields (docs/json.md) and the inputs."""
    acc, dep = step.acceptance, step.deployment
    chain = {} if shape is not None or acc is None else {
        "alpha": float(acc.iid_alpha(gamma)) if gamma else None,
        "alpha_source": "given" if acc.is_iid and acc.source != "sdsl-plane" else acc.source}
    values = {k: v for k, v in step.to_dict().items() if k not in ("gamma", "tree", "batch", "deployment", "acceptance",
                                                                   "target", "proposer", "engine")}
    return {"target": step.target, "draft": getattr(getattr(proposer, "model", None), "name", None), **chain,
            "proposer": proposer.name, "proposer_source": proposer.source, "hardware": dep.hardware.name,
            "gamma": None if shape else gamma, "tree": None if shape is None else [shape.steps, shape.topk, shape.tokens],
            "batch": int(step.batch), "context": dep.context,
            "tp": dep.tp, "dtype": dep.dtype, **values, "engine": dep.engine.name, "engine_profile": dep.engine.summary(),
            "latency_params": dep.params.to_dict(), **_memory(step, proposer, target_spec),
            **({"acceptance": acc.to_dict(gamma if shape is None else None)} if acc is not None else {})}


def _memory(step, proposer, target_spec) -> dict:
    """Bytes the most loaded GPU holds (the target's weights and KV cache, a draft model's beside them; a head's own
    weights are not counted) and whether they fit in the GPU's memory."""
    from sdsl.roofline.latency import memory_with_draft_per_gpu

    dep = step.deployment
    need = float(memory_with_draft_per_gpu(target_spec, getattr(proposer, "model", None), dep, batch=int(step.batch)))
    return {"memory_per_gpu_bytes": need, "memory_capacity_bytes": float(dep.hardware.mem_capacity),
            "fits_in_memory": need <= dep.hardware.mem_capacity}


def _warnings(target, step, proposer, gamma) -> list:
    """:func:`~sdsl.cli._common.proposer_warnings`, and a k = 0 step that still pays for the drafter."""
    from sdsl.cli._common import proposer_warnings

    out = proposer_warnings(target, step.deployment, [proposer])
    if gamma == 0 and float(step.t_step_s) > float(step.t_plain_s) * (1 + 1e-9):
        out.append("k = 0 with speculation enabled: the engine still runs the drafter (docs/model.md, drafter tax); "
                   "'plain' is decoding with speculation off")
    return out


def _echo(out: dict, hw_name: str) -> None:
    ms = lambda s: f"{1e3 * s:8.3f} ms"  # noqa: E731
    shape = f"gamma {out['gamma']}" if out["tree"] is None else "tree " + ",".join(map(str, out["tree"]))
    click.echo(f"{out['target']} + {out['proposer']}, {shape}, tau {out['tau']:.3f} ({out['acceptance_source']}), "
               f"batch {out['batch']}, context {out['context']}, tp {out['tp']}, {out['dtype']} on {hw_name}")
    click.echo(f"  engine {out['engine']}: {out['engine_profile']['build']}")
    click.echo(f"  latency parameters: {out['latency_params'].get('source', 'not stated')}")
    for line in out["warnings"]:
        click.echo(f"  warning: {line}")
    if "evidence" in out.get("acceptance", {}):
        from sdsl.cli.optimize import describe_acceptance

        click.echo(f"  acceptance: {describe_acceptance(out['acceptance'])}")
    click.echo(f"  draft pass (q=1)      {ms(out['t_draft_s'])}")
    click.echo(f"  drafting, all passes  {ms(out['t_propose_s'])}")
    click.echo(f"  verify ({int(out['verify_tokens'])} tokens)    {ms(out['t_verify_s'])}   ({out['bound']}-bound)")
    if out.get("distinct_experts"):
        click.echo(f"  experts per MoE layer {out['distinct_experts']:8.1f}      (plain step: {out['plain_distinct_experts']:.1f}; "
                   "distinct experts the verified tokens route to)")
    click.echo(f"  worker (GPU)          {ms(out['t_worker_s'])}")
    click.echo(f"  engine host per step  {ms(out['t_host_s'])}   (exposed: the GPU waits for it)")
    click.echo(f"  SD step               {ms(out['t_step_s'])}")
    click.echo(f"  plain step (q=1)      {ms(out['t_plain_s'])}")
    click.echo(f"  TPOT                  {ms(out['tpot_s'])}")
    click.echo(f"  tokens/s              {out['tokens_per_s']:8.1f}   (plain {out['plain_tokens_per_s']:.1f})")
    click.echo(f"  speedup               {out['speedup']:8.3f}x  (cost ratio c = {out['cost_ratio']:.4f})")
    gib = 2.0 ** 30
    click.echo(f"  memory per GPU        {out['memory_per_gpu_bytes'] / gib:8.1f} GiB of "
               f"{out['memory_capacity_bytes'] / gib:.1f} GiB" + ("" if out["fits_in_memory"] else
                                                               "   DOES NOT FIT: raise --tp or use a larger GPU"))
