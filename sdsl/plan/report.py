"""The text the result objects report (what ``sdsl predict`` and ``sdsl optimize`` print), and the warnings they
carry: everything here reads a result's own ``to_dict()``, so the text and the JSON say the same thing."""

from __future__ import annotations

from sdsl.plan.config_table import speedup_band, tokens_band

__all__ = ["format_table", "describe_acceptance", "proposer_warnings", "plan_text", "prediction_text", "memory_text"]


def format_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """Fixed-width text table; columns = (key, header, format spec)."""
    cells = [[format(r[k], f) if f else str(r[k]) for k, _, f in columns] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, (_, h, _) in enumerate(columns)]
    line = lambda vals: "  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(vals, widths)))  # noqa: E731
    return "\n".join([line([h for _, h, _ in columns]), line(["-" * w for w in widths])] + [line(c) for c in cells])


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


def proposer_warnings(target, deployment, proposers) -> list[str]:
    """What ``predict`` and ``optimize`` warn about before their numbers (text and JSON): a context beyond the
    target's maximum, and each proposer the target cannot run (:func:`sdsl.plan.robust.deploy_blocker`: MTP on a
    target that ships no MTP module, a draft with another vocabulary), which is priced but never picked."""
    from sdsl.plan.robust import deploy_blocker
    from sdsl.roofline.attention import fp8_mla_warning

    out = []
    if deployment.context > target.max_context:
        out.append(f"context {deployment.context} exceeds {target.name}'s maximum of {target.max_context} tokens")
    if fp8 := fp8_mla_warning(target, deployment):
        out.append(fp8)
    for p in proposers:
        why = deploy_blocker(target, p)
        if why:
            out.append(f"{p.name} is not runnable: {why}; it is priced as if it were (shown last, never the pick)")
    return out


def _params(p):
    return "" if p is None else f"{p / 1e9:.2f}B" if p >= 1e9 else f"{p / 1e6:.0f}M"


def _header(out: dict, plan) -> list[str]:
    dep, t = plan.deployment, plan.target
    source = out["alpha_source"]
    if source == "sdsl-plane":
        source = "SDSL plane (D = %.3g tokens)" % out["sdsl"]["pretrain_tokens"]
    weights = _formats(dep.weight_dtype, dep.expert_dtype)
    ep = f", ep {dep.ep}" if dep.ep > 1 else ""
    lines = [f"target {t.name} ({t.total_params / 1e9:.2f}B) on {dep.hardware.name}, context {dep.context}, "
             f"tp {dep.tp}{ep}, {dep.dtype}{weights}; acceptance: {source}"]
    if out["target_origin"]:
        lines.append(f"target read from {out['target_origin'][len('Hugging Face config '):]}")
    lines += [f"latency parameters: {dep.params.source}"]
    lines += [f"MoE experts: {out['moe_experts']}"] if out.get("moe_experts") else []
    lines += [f"engine: {dep.engine.name} ({dep.engine.build})"]
    lines += [f"note: {n}." for n in out["notes"]] + [f"warning: {w}." for w in out["warnings"]]
    if source == "per-proposer" or any("evidence" in a for a in out["acceptance_by_proposer"].values()):
        lines.append("acceptance by proposer:")
        lines += [f"  {name}: {describe_acceptance(acc)}" for name, acc in out["acceptance_by_proposer"].items()]
    return lines + [""]


def _formats(weight_dtype, expert_dtype) -> str:
    """", fp8 weights, mxfp4 experts" of a header: the weight format, and the routed experts' where it differs."""
    weights = f", {weight_dtype} weights" if weight_dtype else ""
    return weights + (f", {expert_dtype} experts" if expert_dtype not in (None, weight_dtype) else "")


def _best_here(row: dict) -> str:
    """The per-batch best k and its tokens/s gain over the row's (deployed) k, "-" where they are the same k."""
    if row["best_gamma"] is None or row["best_gamma"] == row["gamma"]:
        return "-"
    return f"{row['best_gamma']} (+{100 * row['best_gamma_gain']:.1f}%)"


def _config_tables(out: dict, plan) -> list[str]:
    lines = []
    for b in plan.batches:
        rows = [dict(r, params=_params(r["draft_params"]), tpot_ms=1e3 * r["tpot_s"],
                     proposer=r["proposer"] + (" (not runnable)" if r["proposer"] in out["not_runnable"] else ""))
                for r in out["configs"] if r["batch"] == b]
        lines.append(f"batch {b}: plain decoding {rows[0]['plain_tokens_per_s']:.1f} tokens/s")
        for r in rows:  # every row carries its 80% bands (config_table.ROW_KEYS, sdsl.speculation.bands)
            r.update(tps_band=tokens_band(r), speedup_band=speedup_band(r), best_here=_best_here(r))
        band = lambda key: [(key, "80% band", "")]  # noqa: E731
        lines.append(format_table(rows, [("proposer", "proposer", ""), ("params", "params", ""), ("gamma", "k", "d"),
                                         ("best_here", "best k here", ""),
                                         ("alpha", "alpha", ".3f"), ("tau", "tau", ".2f"),
                                         ("tokens_per_s", "tokens/s", ".1f"), *band("tps_band"),
                                         ("tpot_ms", "TPOT ms", ".2f"), ("speedup", "speedup", ".2f"),
                                         *band("speedup_band"), ("bound", "bound", "")]))
        lines.append("")
    lines += [f"k: each proposer's k from its batch -> k table (k within {100 * out['tolerance']:.0f}% of the best are "
              "one choice, the smaller kept); best k here: the best k at that batch where it differs, with its tokens/s "
              "gain", plan.ranking.band_line(), ""]  # what k is, and where the bands come from, once under the tables
    if out["trees"] is not None:
        lines.append("best SGLang trees (steps, topk, num_draft_tokens):")
        rows = [dict(r, shape=",".join(map(str, r["tree"])), tpot_ms=1e3 * r["tpot_s"], tps_band=tokens_band(r),
                     speedup_band=speedup_band(r)) for r in out["trees"]]
        lines.append(format_table(rows, [("batch", "batch", "d"), ("proposer", "proposer", ""), ("shape", "tree", ""),
                                         ("tau", "tau", ".2f"), ("tokens_per_s", "tokens/s", ".1f"),
                                         ("tps_band", "80% band", ""), ("tpot_ms", "TPOT ms", ".2f"),
                                         ("speedup", "speedup", ".2f"), ("speedup_band", "80% band", ""),
                                         ("bound", "bound", "")]))
        lines += [plan.trees.band_line(), ""]
    return lines


def _k_lines(out: dict, plan) -> list[str]:
    name = out["pick"]["proposer"]
    lines = [f"best k by batch for {name} (context {plan.deployment.context}; k = 0: do not speculate; k within "
             f"{100 * out['tolerance']:.0f}% of the best are one choice, the smaller kept)",
             format_table(out["k_table"], [("batch_min", "batch from", "d"), ("batch_max", "to", "d"), ("k", "k", "d")]),
             plan.stop_line(),
             f"why, for {name} (bound: what bounds the verify forward; cost driver: what speculation adds most over the "
             "plain step, at k = 1 where k = 0; experts: per MoE layer, plain -> verify):"]
    rows = [dict(r, speedup=f"{r['speedup_min']:.2f}-{r['speedup_max']:.2f}",
                 experts=f"{r['plain_distinct_experts']:.1f} -> {r['verify_distinct_experts']:.1f}")
            for r in out["k_reasons"]]
    columns = [("batch_min", "batch from", "d"), ("batch_max", "to", "d"), ("k", "k", "d"), ("speedup", "speedup", ""),
               ("bound", "bound", ""), ("cost_driver", "cost driver", "")]
    if any(r["verify_distinct_experts"] for r in out["k_reasons"]):
        columns.append(("experts", "experts", ""))
    return lines + [format_table(rows, columns)]


def plan_text(plan, out: dict) -> str:
    """What ``sdsl optimize`` prints for ``plan`` (``out`` = ``plan.to_dict()``)."""
    lines = _header(out, plan) + _config_tables(out, plan) + _k_lines(out, plan)
    if out["export"] is not None:
        lines.append(f"\n{out['export']['engine']} configuration:\n{out['export']['config']}")
    sdsl = out["sdsl"]
    lines.append(f"\nSDSL FLOP-model optimum: N* = {sdsl['n_star'] / 1e6:.0f}M parameters (alpha {sdsl['alpha']:.3f}, "
                 f"gamma* {sdsl['gamma_star']:.2f}, speedup {sdsl['flop_speedup']:.2f}x in FLOPs)")
    return "\n".join(lines)


def _figures(out: dict) -> list[str]:
    """The TPOT, tokens/s and speedup lines of a prediction, with their 80% bands where it carries them."""
    ms = lambda s: f"{1e3 * s:8.3f} ms"  # noqa: E731
    if "tokens_per_s_low" not in out:
        return [f"  TPOT                  {ms(out['tpot_s'])}",
                f"  tokens/s              {out['tokens_per_s']:8.1f}   (plain {out['plain_tokens_per_s']:.1f})",
                f"  speedup               {out['speedup']:8.3f}x  (cost ratio c = {out['cost_ratio']:.4f})"]
    lines = [f"  TPOT                  {ms(out['tpot_s'])}   (80% band {1e3 * out['tpot_s_low']:.3f}-"
             f"{1e3 * out['tpot_s_high']:.3f} ms)",
             f"  tokens/s              {out['tokens_per_s']:8.1f}   (80% band {out['tokens_per_s_low']:.1f}-"
             f"{out['tokens_per_s_high']:.1f}; plain {out['plain_tokens_per_s']:.1f}, "
             f"{out['plain_tokens_per_s_low']:.1f}-{out['plain_tokens_per_s_high']:.1f})",
             f"  speedup               {out['speedup']:8.3f}x  (80% band {out['speedup_low']:.2f}-"
             f"{out['speedup_high']:.2f}; cost ratio c = {out['cost_ratio']:.4f})"]
    if "band" in out:
        from sdsl.speculation.priced_step import band_note

        lines.append(f"  {band_note(out['band'])}")
    return lines


def prediction_text(out: dict) -> str:
    """What ``sdsl predict`` prints for one configuration (``out`` = ``Prediction.to_dict()``)."""
    ms = lambda s: f"{1e3 * s:8.3f} ms"  # noqa: E731
    shape = f"gamma {out['gamma']}" if out["tree"] is None else "tree " + ",".join(map(str, out["tree"]))
    ep = f", ep {out['ep']}" if out.get("ep", 1) > 1 else ""
    weights = _formats(out.get("weight_dtype"), out.get("expert_dtype"))
    lines = [f"{out['target']} + {out['proposer']}, {shape}, tau {out['tau']:.3f} ({out['acceptance_source']}), "
             f"batch {out['batch']}, context {out['context']}, tp {out['tp']}{ep}, {out['dtype']}{weights} on "
             f"{out['hardware']}"]
    if out.get("target_origin"):
        lines.append(f"  target read from {out['target_origin'][len('Hugging Face config '):]}")
    lines += [f"  engine {out['engine']}: {out['engine_profile']['build']}",
              f"  latency parameters: {out['latency_params'].get('source', 'not stated')}"]
    lines += [f"  MoE experts: {out['moe_experts']}"] if out.get("moe_experts") else []
    lines += [f"  note: {n}" for n in out.get("notes", [])] + [f"  warning: {w}" for w in out["warnings"]]
    if "evidence" in (out.get("acceptance") or {}):
        lines.append(f"  acceptance: {describe_acceptance(out['acceptance'])}")
    lines += [f"  draft pass (q=1)      {ms(out['t_draft_s'])}", f"  drafting, all passes  {ms(out['t_propose_s'])}",
              f"  verify ({int(out['verify_tokens'])} tokens)    {ms(out['t_verify_s'])}   ({out['bound']}-bound)"]
    if out.get("distinct_experts"):
        lines.append(f"  experts per MoE layer {out['distinct_experts']:8.1f}      (plain step: "
                     f"{out['plain_distinct_experts']:.1f}; distinct experts the verified tokens route to, a sequence's "
                     "positions sharing some: ModelSpec.routing_locality)")
    lines += [f"  worker (GPU)          {ms(out['t_worker_s'])}",
              f"  engine host per step  {ms(out['t_host_s'])}   (exposed: the GPU waits for it)",
              f"  SD step               {ms(out['t_step_s'])}", f"  plain step (q=1)      {ms(out['t_plain_s'])}",
              *_figures(out),
              f"  memory per GPU        {memory_text(out)}"]
    return "\n".join(lines)


def memory_text(out: dict) -> str:
    """The memory check of a prediction's dict: GiB the most loaded GPU holds of its capacity, and whether it fits."""
    gib = 2.0 ** 30
    fits = "" if out["fits_in_memory"] else "   DOES NOT FIT: raise --tp or use a larger GPU"
    return f"{out['memory_per_gpu_bytes'] / gib:8.1f} GiB of {out['memory_capacity_bytes'] / gib:.1f} GiB{fits}"
