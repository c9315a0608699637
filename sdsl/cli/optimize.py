"""`sdsl optimize`: the best draft models and speculation lengths for a target on a GPU."""

from __future__ import annotations

import click

from sdsl.cli._common import acceptance_options, deployment_options, echo_json, format_table, json_option, parse_int_list
from sdsl.cli._speculation import host_step_options, pass_overhead_option, proposer_option, resolve_host_step_s


@click.command()
@click.option("--target", default="llama-3.1-70b", show_default=True, help="Target model (catalog name or config.json).")
@deployment_options()
@click.option("--batch", default="1", show_default=True, help="Batch size(s), comma-separated.")
@acceptance_options
@click.option("--gamma-max", default=10, show_default=True, type=int, help="Largest speculation length searched.")
@click.option("--drafts", default=None, help="Comma-separated draft names (default: catalog models sharing the target's vocabulary, <= 1/4 its size).")
@click.option("--any-tokenizer", is_flag=True, help="Consider catalog drafts whatever their vocabulary.")
@click.option("--tokens", "pretrain_tokens", default=1e12, show_default=True, type=float,
              help="Pre-training tokens D = D' assumed by SDSL's law when --alpha is absent.")
@click.option("--top", default=10, show_default=True, type=int, help="Rows to print.")
@click.option("--serving", is_flag=True,
              help="Also print a batch-size -> k table for the best draft (TurboSpec goodput; for a serving "
                   "engine's dynamic speculation config).")
@click.option("--max-batch", default=256, show_default=True, type=int, help="Largest batch size in the --serving table.")
@proposer_option
@click.option("--trees", is_flag=True, help="Also rank SGLang token trees (steps 1-8 x topk 1,2,4,8 x <= 64 tokens) per proposer.")
@pass_overhead_option
@host_step_options
@click.option("--export", type=str, default=None,
              help="Print the pick's configuration for an engine: vllm | sglang | trtllm (ranks proposers).")
@click.option("--csv", "as_csv", is_flag=True, help="Print every evaluated configuration as CSV.")
@json_option
def optimize(target, deployment, batch, acceptance, gamma_max, drafts, any_tokenizer, pretrain_tokens, top, serving,
             max_batch, proposers, trees, pass_overhead_us, engine_host, host_step_us, export, as_csv, as_json):
    """Rank draft models and speculation lengths by predicted tokens/s.

    Every (draft, gamma, batch) is priced on the calibrated roofline of the hardware; alpha is
    the given --alpha or SDSL's acceptance plane. Also prints SDSL's continuous FLOP-optimal draft
    size N* for the target. With --proposer (repeatable; 'all' = every head kind) or --export, ranks
    proposers and k together, reports the batch at which speculation stops paying and the best k by
    batch, and prints the engine's configuration for the pick.
    """
    from sdsl.errors import InvalidInputError

    batches = parse_int_list(batch, "--batch")
    if min(batches) <= 0:
        raise InvalidInputError("--batch must be a positive integer.")
    if gamma_max < 0:
        raise InvalidInputError("--gamma-max must be >= 0.")
    if top <= 0:
        raise InvalidInputError("--top must be positive.")
    host_s = resolve_host_step_s(engine_host, host_step_us)
    if host_s > 0 and not (proposers or export or trees):
        raise InvalidInputError("--engine-host/--host-step-us price engine proposers: add --proposer, --trees or --export.")
    if proposers or export or trees:
        from sdsl.cli._optimize_proposers import rank_and_report

        return rank_and_report(target=target, deployment=deployment, proposers=proposers, drafts=drafts,
                               acc=acceptance.resolve(), gamma_max=gamma_max, batches=batches, max_batch=max_batch,
                               pretrain_tokens=pretrain_tokens, top=top, export=export, trees=trees,
                               pass_overhead_s=1e-6 * pass_overhead_us, host_step_s=host_s, as_json=as_json)
    alpha = acceptance.resolve()  # an Acceptance (priced per γ) or None (SDSL's plane)
    if alpha is not None and gamma_max > alpha.max_k:
        gamma_max = int(alpha.max_k)  # a measured vector prices only the positions it covers
    target_spec, grid = _rank_drafts(target, deployment, drafts, any_tokenizer, gamma_max, batches, alpha, pretrain_tokens)
    if as_csv:
        click.echo(grid.to_frame().to_csv(index=False), nl=False)
        return
    configs = [r for b in batches for r in [x for x in grid.best() if x["batch"] == b][:top]]
    serving_table = _serving_table(target_spec, deployment, configs[0], max_batch, gamma_max) if serving else None
    report = {"target": target_spec, "deployment": deployment, "grid": grid, "alpha": alpha, "batches": batches,
              "configs": configs, "sdsl": _flop_optimum(target_spec, pretrain_tokens), "serving": serving_table}
    (_echo_json if as_json else _echo_text)(report, top)


def _rank_drafts(target, deployment, drafts, any_tokenizer, gamma_max, batches, alpha, pretrain_tokens):
    """The target's spec and the (draft, γ, batch, α) grid priced on the deployment."""
    from sdsl.core.architecture import get_model
    from sdsl.core.search import candidate_drafts, evaluate_grid
    from sdsl.errors import InvalidInputError

    target_spec = get_model(target)
    if drafts:
        draft_specs = [get_model(d.strip()) for d in drafts.split(",") if d.strip()]
    else:
        draft_specs = candidate_drafts(target_spec, same_tokenizer=not any_tokenizer)
        if not draft_specs:
            raise InvalidInputError(
                f"No catalog draft shares {target_spec.name}'s vocabulary; pass --drafts or --any-tokenizer.")
    grid = evaluate_grid(target_spec, deployment, drafts=draft_specs, gammas=range(0, gamma_max + 1), batch=batches,
                         alpha=alpha, draft_tokens=pretrain_tokens, target_tokens=pretrain_tokens)
    return target_spec, grid


def _flop_optimum(target_spec, pretrain_tokens) -> dict:
    """SDSL's continuous FLOP-model optimum N* for the target (docs/model.md §3.2)."""
    from sdsl.core.optimize import optimal_draft_size

    n_star, s_star, a_star, g_star = optimal_draft_size(target_spec.total_params, pretrain_tokens, pretrain_tokens)
    return {"n_star": float(n_star[0]), "flop_speedup": float(s_star[0]), "alpha": float(a_star[0]),
            "gamma_star": float(g_star[0]), "pretrain_tokens": pretrain_tokens}


def _serving_table(target_spec, deployment, head, max_batch, gamma_max) -> dict:
    """TurboSpec's batch-size -> k table for the best draft (``head``: its best configuration)."""
    from sdsl.core.architecture import get_model
    from sdsl.errors import InvalidInputError
    from sdsl.serving import serving_k_table

    if max_batch < 1:
        raise InvalidInputError("--max-batch must be a positive integer.")
    return {"draft": head["draft"], "alpha": head["alpha"], "context": deployment.context, "max_batch": max_batch,
            "k_table": serving_k_table(target_spec, get_model(head["draft"]), deployment, alpha=head["alpha"],
                                       max_batch=max_batch, max_k=min(max(gamma_max, 0), 7))}


def _memory_need(r: dict) -> float:
    """Bytes per GPU of the target and the top config's draft (when it speculates) at the largest batch."""
    from sdsl.core.architecture import get_model
    from sdsl.core.latency import memory_with_draft_per_gpu

    head = r["configs"][0] if r["configs"] else None
    draft = get_model(head["draft"]) if head and head["gamma"] > 0 else None
    return float(memory_with_draft_per_gpu(r["target"], draft, r["deployment"], batch=max(r["batches"])))


def _echo_json(r: dict, top: int) -> None:
    dep, t = r["deployment"], r["target"]
    echo_json({"target": t.name, "hardware": dep.hardware.name, "context": dep.context, "tp": dep.tp, "dtype": dep.dtype,
               "alpha_source": r["grid"].alpha_source, "latency_params": dep.params.to_dict(),
               **({"acceptance": r["alpha"].to_dict()} if r["alpha"] is not None else {}),
               "fits_in_memory": bool(_memory_need(r) <= dep.hardware.mem_capacity),
               "configs": r["configs"], "sdsl": r["sdsl"], **({"serving": r["serving"]} if r["serving"] else {})})


def _echo_text(r: dict, top: int) -> None:
    dep, t, hw, sdsl = r["deployment"], r["target"], r["deployment"].hardware, r["sdsl"]
    source = r["grid"].alpha_source if r["alpha"] is not None else "SDSL plane (D = %.3g tokens)" % sdsl["pretrain_tokens"]
    click.echo(f"target {t.name} ({t.total_params / 1e9:.2f}B) on {hw.name}, context {dep.context}, "
               f"tp {dep.tp}, {dep.dtype}; alpha: {source}")
    click.echo(f"latency parameters: {dep.params.source}")
    if dep.context > t.max_context:
        click.echo(f"warning: context {dep.context} exceeds {t.name}'s maximum of {t.max_context} tokens.")
    need = _memory_need(r)
    if need > hw.mem_capacity:
        click.echo(f"warning: {t.name} (and its best draft) need {need / 1e9:.0f} GB per GPU (weights + KV cache) but "
                   f"{hw.name} has {hw.mem_capacity / 1e9:.0f} GB; raise --tp or use --dtype fp8.")
    click.echo("")
    for b in r["batches"]:
        rows = [x for x in r["configs"] if x["batch"] == b][:top]
        for x in rows:
            x["params"] = f"{x['draft_params'] / 1e9:.2f}B" if x["draft_params"] >= 1e9 else f"{x['draft_params'] / 1e6:.0f}M"
        click.echo(f"batch {b}: plain decoding {rows[0]['plain_tokens_per_s']:.1f} tokens/s")
        click.echo(format_table(rows, [("draft", "draft", ""), ("params", "params", ""), ("gamma", "gamma*", "d"),
                                       ("alpha", "alpha", ".3f"), ("tau", "tau", ".2f"),
                                       ("tokens_per_s", "tokens/s", ".1f"), ("speedup", "speedup", ".2f"),
                                       ("bound", "bound", "")]))
        click.echo("")
    if r["serving"]:
        st = r["serving"]
        click.echo(f"serving: goodput-optimal k by batch size for {st['draft']} "
                   f"(alpha {st['alpha']:.3f}, context {dep.context}; k = 0: do not speculate)")
        click.echo(format_table(st["k_table"], [("batch_min", "batch from", "d"), ("batch_max", "to", "d"), ("k", "k", "d")]))
        click.echo("")
    click.echo(f"SDSL FLOP-model optimum: N* = {sdsl['n_star'] / 1e6:.0f}M parameters (alpha {sdsl['alpha']:.3f}, "
               f"gamma* {sdsl['gamma_star']:.2f}, speedup {sdsl['flop_speedup']:.2f}x in FLOPs)")
