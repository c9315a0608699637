"""Draft head and token trees on the committed family (``sdsl validate decoder --heads``).

On the largest family target (byte-d288) at batch 1, held-out stdlib prompts, sampling at the same
temperature as ``sdsl validate decoder``: plain decoding, chains of the family's small members as draft
models, chains and trees of the trained EAGLE-style head (``<target>-head``, :mod:`sdsl.torch.head`), and
trees of the best draft model. Each row records the measured speedup over plain decoding (process CPU
time, one torch thread, fastest of ``repeats`` per prompt, each prompt also decoded plainly right after
it so that the speedup compares runs made under the same machine conditions), τ, and the accept-count histogram
with the per-position acceptance (P(depth i accepted | depth i−1 was)). Every row, chain or tree, is
also priced by sdsl's cost model from its measured τ (:func:`price_row`: the proposer's passes from
:class:`sdsl.acceptance.trees.TokenTree`, each priced by :mod:`sdsl.speculation.proposers` — ``EagleHead`` for the
head, ``DraftModel`` for the family drafts — with the shipped CPU calibration). Summary keys: ``head_best_speedup``,
``tree_best_speedup``, ``chain_best_speedup`` (best chain of a draft model or the head) and
``tree_beats_chain``.
"""

from __future__ import annotations

import numpy as np
import torch

from sdsl.errors import InvalidInputError
from sdsl.validation.decoder.synthetic import COUNTED, cpu_params, family_spec, measure, to_requested, without_predictions
from sdsl.validation.decoder.row_cache import RowCache
from sdsl.torch.checkpoint import load_checkpoint
from sdsl.torch.head import HeadProposer, load_head
from sdsl.torch.proposers import DraftModel

#: what :func:`price_row` adds to the roofline on the CPU: the GEMM row factor κ (:mod:`sdsl.validation.decoder.synthetic_terms`)
PRICING_TERMS = ("gemm_rows",)

__all__ = ["HEAD_DEFAULTS", "heldout_prompts", "tuning_prompts", "head_tree_validation", "summarise_heads",
           "count_requested_heads", "recount_file"]

HEAD_DEFAULTS = {"target": "byte-d288", "drafts": ("byte-d64", "byte-d96", "byte-wide"), "gammas": (2, 3, 4, 5, 6),
                 "head_gammas": (1, 2, 3, 4, 5, 6, 7, 8), "trees": ("2x1x1x1", "2x2x1x1", "3x1x1x1x1", "2x2x2x1x1",
                                                                "3x2x1x1x1", "4x2x1x1x1x1"),
                 "draft_trees": ("2x1x1", "2x1x1x1", "2x2x1x1", "3x1x1x1x1"),
                 "n_prompts": 8, "prompt_len": 64, "max_new": 64, "temperature": 1.0, "repeats": 2}


def heldout_prompts(n: int, length: int) -> torch.Tensor:
    """``n`` evenly spaced windows of the held-out stdlib split."""
    from sdsl.torch.train import load_corpus

    held = load_corpus()["heldout"]
    starts = np.linspace(0, len(held) - length - 1, n + 2)[1:-1].astype(int)
    return torch.from_numpy(np.stack([held[s:s + length] for s in starts]).astype(np.int64))


def tuning_prompts(n: int, length: int) -> torch.Tensor:
    """``n`` windows of the held-out split half-way between those of :func:`heldout_prompts` (``n``): a
    tuning set that shares no byte with the evaluation prompts (nor with the 8 timing prompts) while the
    windows are shorter than half the spacing."""
    from sdsl.torch.train import load_corpus

    held = load_corpus()["heldout"]
    grid = np.linspace(0, len(held) - length - 1, n + 2)
    starts = ((grid[1:-1] + grid[2:]) / 2).astype(int)
    if starts[-1] + length > len(held) or (grid[1] - grid[0]) / 2 < length:
        raise InvalidInputError(f"{n} tuning windows of {length} bytes do not fit between the evaluation windows.")
    return torch.from_numpy(np.stack([held[s:s + length] for s in starts]).astype(np.int64))


def _pooled(target, proposer, tree, prompts, settings, paired: bool = False) -> dict:
    """One prompt at a time (batch 1): pooled tokens, seconds and accept counts over all prompts. ``paired``
    also decodes each prompt plainly right after it (``plain_tokens_per_s``), so that a row's speedup is
    measured against plain decoding under the same machine conditions (the shared machine drifts by ~7%)."""
    runs, plains = [], []
    for i in range(len(prompts)):
        for proposer_i, tree_i, into in ((proposer, tree, runs),) + (((None, None, plains),) if paired else ()):
            into.append(measure(target, proposer_i, tree_i, 1, prompts[i:i + 1], settings["max_new"],
                                temperature=settings["temperature"], seed=settings["seed"] + i,
                                repeats=settings["repeats"]))
    rate = lambda rs: sum(r["tokens_per_s"] * r["decode_s"] for r in rs) / sum(r["decode_s"] for r in rs)  # noqa: E731
    out = {"tokens_per_s": rate(runs), "decode_s": sum(r["decode_s"] for r in runs), "draft_s": sum(r["draft_s"] for r in runs),
           "steps": sum(r["steps"] for r in runs), "new_tokens": sum(r["new_tokens"] for r in runs), "tree": runs[0]["tree"]}
    if paired:
        out["plain_tokens_per_s"] = rate(plains)
    if tree is not None:
        counts = np.sum([r["accept_counts"] for r in runs], axis=0)
        reach = counts[::-1].cumsum()[::-1]
        out.update(accept_counts=counts.tolist(), tau=float((np.arange(len(counts)) * counts).sum() / counts.sum() + 1),
                   per_position=(reach[1:] / np.maximum(reach[:-1], 1)).tolist(),
                   requested_tau=len(prompts) * settings["max_new"] / out["steps"])
    return out


def head_tree_validation(target: str = HEAD_DEFAULTS["target"], drafts=HEAD_DEFAULTS["drafts"],
                         gammas=HEAD_DEFAULTS["gammas"], head_gammas=HEAD_DEFAULTS["head_gammas"],
                         trees=HEAD_DEFAULTS["trees"], draft_trees=HEAD_DEFAULTS["draft_trees"], n_prompts: int = HEAD_DEFAULTS["n_prompts"],
                         prompt_len: int = HEAD_DEFAULTS["prompt_len"], max_new: int = HEAD_DEFAULTS["max_new"],
                         temperature: float = HEAD_DEFAULTS["temperature"], repeats: int = HEAD_DEFAULTS["repeats"],
                         seed: int = 0, cache_path=None, threads: int = 1, progress: bool = True) -> dict:
    """Measure plain, draft-model chains, head chains, head trees and draft-model trees; summarise. Tokens/s counts
    the first ``max_new`` tokens of each prompt (:data:`sdsl.validation.decoder.synthetic.COUNTED`)."""
    from tqdm.auto import tqdm

    torch.set_num_threads(threads)
    target_model, target_meta = load_checkpoint(target)
    head, head_meta = load_head(f"{target}-head", target_model.shape)
    proposers = {"head": HeadProposer(head, target_model)} | {d: DraftModel(load_checkpoint(d)[0], d) for d in drafts}
    settings = {"target": target, "n_prompts": n_prompts, "prompt_len": prompt_len, "max_new": max_new,
                "temperature": temperature, "repeats": repeats, "seed": seed, "threads": threads, "batch": 1,
                "clock": "process CPU time (1 torch thread)", "paired_plain": True, "counted": COUNTED,
                "pricing_terms": list(PRICING_TERMS)}
    prompts = heldout_prompts(n_prompts, prompt_len)
    tag = "|".join(f"{k}={settings[k]}" for k in ("target", "n_prompts", "prompt_len", "max_new", "temperature",
                                                   "repeats", "seed", "paired_plain"))
    cache = RowCache(cache_path)
    plain = cache.get(f"plain|{tag}", lambda: _pooled(target_model, None, None, prompts, settings))
    jobs = [(d, f"chain{g}") for d in drafts for g in gammas] + [("head", f"chain{g}") for g in head_gammas]
    jobs += [("head", t) for t in trees]
    head_tag = f"{tag}|head={head_meta.get('heldout_top1_agreement')}"  # a retrained head is re-measured
    rows = []
    for name, tree in tqdm(jobs, desc="heads and trees", disable=not progress):
        key = f"sd|{name}|{tree}|{head_tag if name == 'head' else tag}"
        m = cache.get(key, lambda: _pooled(target_model, proposers[name], tree, prompts, settings, paired=True))
        rows.append(_row(name, tree, m))
    best_chain_draft = max((r for r in rows if r["kind"] == "chain" and r["proposer"] != "head"), key=lambda r: r["speedup"])
    for tree in draft_trees:  # the best draft model drafting trees too
        name = best_chain_draft["proposer"]
        m = cache.get(f"sd|{name}|{tree}|{tag}", lambda: _pooled(target_model, proposers[name], tree, prompts, settings,
                                                                 paired=True))
        rows.append(_row(name, tree, m))
    rows = count_requested_heads(rows, settings)  # rows cached before new_tokens was recorded
    out = summarise_heads(_price_rows(rows, target_meta, {d: load_checkpoint(d)[1] for d in drafts}, prompt_len + max_new // 2,
                                      prompt_len, max_new))
    out["plain"] = plain
    out["settings"] = settings
    out["head"] = {k: head_meta[k] for k in ("name", "params", "heldout_top1_agreement", "heldout_top1_by_depth", "train_seconds",
                                             "train_cpu_seconds", "train_config") if k in head_meta}
    return out


def _row(proposer: str, tree: str, measured: dict) -> dict:
    """A table row: the proposer, the tree as drafted ("chain5", "3x2x1x1x1") and its shape ("tree(3+6+...)")."""
    return measured | {"proposer": proposer, "tree": tree, "shape": measured["tree"],
                       "kind": "chain" if tree.startswith("chain") else "tree",
                       "speedup": measured["tokens_per_s"] / measured["plain_tokens_per_s"]}


def core_tree(text: str):
    """The decoder's tree (``"chain4"``, ``"3x2x1"``) as :class:`sdsl.acceptance.trees.TokenTree` (root dropped)."""
    from sdsl.acceptance.trees import TokenTree as CoreTree
    from sdsl.torch.tree import TokenTree

    return CoreTree(tuple(p - 1 for p in TokenTree.parse(text).parents[1:]))


def price_row(row: dict, target, proposer, deployment, prompt_len: int | None = None, max_new: int | None = None,
              gemm_rows: bool = True) -> float:
    """sdsl's predicted speedup of one measured row from its measured τ (module docstring):

        speedup = τ_r · T_target(q=1) / (Σ_passes T_proposer(q_pass) + T_target(q=n+1, L + mask) + T_worker)

    τ_r is the requested tokens per step the run measured (``requested_tau``: prompts × max_new / steps; the last
    step's overshoot is not output), τ when a row lacks it; the head's extend runs over the τ tokens emitted.

    Passes and verified tokens come from the tree (:class:`sdsl.acceptance.trees.TokenTree`:
    ``draft_tokens_per_pass``, ``verify_tokens``); a tree's mask is priced as context L + (n+1)/2 as in
    :func:`sdsl.speculation.step.price_step`. This is a variant of the shared step pricing (it prices the
    reference decoder's own tree passes, any :class:`~sdsl.acceptance.trees.TokenTree`, where ``price_step`` prices
    SGLang's (steps, topk, tokens) trees). The head (:class:`sdsl.speculation.proposers.EagleHead`)
    merges EAGLE's draft-extend into its first pass, which the decoder runs over every slot of the accepted
    path, depth + 1 per sequence (``benchmarks/results/head_step_accounting.json``), and adds its selection and
    verification kernels (:meth:`EagleHead.worker_time`, draft extend off). With ``prompt_len`` and ``max_new``
    it also pays the head's pass over the prompt's P − 1 pairs, which the decoder runs in its first step
    instead of that first pass, spread over the run's max_new / τ_r steps. With ``gemm_rows`` (on hardware "cpu")
    every GEMM of the plain, verify and drafting forwards is priced at the CPU GEMM row factor κ(rows, weight bytes)
    (:mod:`sdsl.validation.decoder.synthetic_terms`, measured on weight shapes of no family model), as the synthetic sweep
    and the SmolLM2 rows are."""
    from sdsl.speculation.proposers import EagleHead, forward_time

    tree, tau, context = core_tree(row["tree"]), float(row["tau"]), deployment.context
    tokens = float(row.get("requested_tau", tau))
    passes = tree.draft_tokens_per_pass.astype(float)
    worker = 0.0
    if isinstance(proposer, EagleHead):
        passes[0] = tree.depth + 1.0
        worker = float(proposer.worker_time(target, deployment, batch=1, steps=tree.depth, topk=tree.width, tau=tau,
                                            verify_tokens=tree.verify_tokens, context=context))
        if prompt_len is not None:
            first = (float(proposer.step_time(target, deployment, batch=1, q=q, context=c))
                     for q, c in ((prompt_len - 1.0, 0.0), (passes[0], context)))
            worker += (next(first) - next(first)) * tokens / max_new
    draft = sum(float(proposer.step_time(target, deployment, batch=1, q=q, context=context)) for q in passes)
    mask = 0.0 if tree.width == 1 else tree.verify_tokens / 2.0
    verify = float(forward_time(target, deployment, batch=1, q=tree.verify_tokens, context=context + mask))
    plain = float(forward_time(target, deployment, batch=1, q=1, context=context))
    if gemm_rows and deployment.hardware.kind == "cpu":  # the head's first pass: logits at the last accepted slot
        from sdsl.validation.decoder.synthetic_terms import model_extra_s, passes_extra_s

        plain += model_extra_s(target, deployment, 1.0)
        verify += model_extra_s(target, deployment, float(tree.verify_tokens))
        draft += passes_extra_s(proposer, target, deployment, passes)
    return tokens * plain / (draft + verify + worker)


def _price_rows(rows: list[dict], target_meta: dict, draft_metas: dict, context: int, prompt_len: int | None = None,
                max_new: int | None = None, gemm_rows: bool = True) -> list[dict]:
    """Every row (chains and trees, draft models and the head) with ``pred_speedup`` (:func:`price_row`,
    the shipped CPU calibration; ``gemm_rows=False`` leaves κ out, for the ablation) and ``speedup_error`` =
    predicted / measured − 1."""
    from sdsl.roofline.deployment import Deployment
    from sdsl.speculation.proposers import DraftModel, EagleHead

    deployment = Deployment("cpu", dtype="fp32", context=context, params=cpu_params())
    target = family_spec(target_meta["spec"])
    proposers = {"head": EagleHead(draft_extend=False)} | {
        d: DraftModel(family_spec(m["spec"])) for d, m in draft_metas.items()}
    out = []
    for r in rows:
        pred = price_row(r, target, proposers[r["proposer"]], deployment, prompt_len, max_new, gemm_rows)
        out.append(r | {"pred_speedup": pred, "speedup_error": pred / r["speedup"] - 1})
    return out


def count_requested_heads(rows: list[dict], settings: dict) -> list[dict]:
    """Rows measured when tokens/s counted every emitted token, converted to the first ``max_new`` of each prompt
    (only the requested tokens count): the tokens emitted are τ × steps (batch 1) = tokens/s × seconds (pooled rates), the requested
    ones prompts × max_new; tokens/s and the speedup scale by their ratio (plain decoding never overshoots). Rows
    that carry ``new_tokens`` are returned as they are."""
    requested = settings["n_prompts"] * settings["max_new"]
    out = []
    for r in rows:
        if "new_tokens" in r:
            out.append(r)
            continue
        n = round(r["tau"] * r["steps"])
        if abs(n - r["tokens_per_s"] * r["decode_s"]) > 1e-6 * n or not requested <= n:
            raise InvalidInputError(f"row {r['proposer']} {r['tree']}: tokens emitted do not match τ × steps.")
        out.append(to_requested(r, n, requested) | {"requested_tau": requested / r["steps"]})
    return out


def recount_file(path) -> dict:
    """Convert a committed ``validate decoder --heads`` result to requested tokens (:func:`count_requested_heads`),
    re-price and re-summarise it with the current cost model, and rewrite it (measurements unchanged)."""
    import json
    from pathlib import Path

    from sdsl._io import atomic_write_text

    d = json.loads(Path(path).read_text())
    h = d["heads"]
    settings = h["settings"] | {"counted": COUNTED, "pricing_terms": list(PRICING_TERMS)}
    rows = count_requested_heads(without_predictions(h["rows"]), settings)
    drafts = sorted({r["proposer"] for r in rows if r["proposer"] != "head"})
    out = summarise_heads(_price_rows(rows, load_checkpoint(settings["target"])[1], {d_: load_checkpoint(d_)[1] for d_ in drafts},
                                      settings["prompt_len"] + settings["max_new"] // 2, settings["prompt_len"],
                                      settings["max_new"]))
    out |= {k: h[k] for k in ("plain", "head") if k in h} | {"settings": settings}
    d = {k: out[k] for k in ("head_best_speedup", "tree_best_speedup", "chain_best_speedup")} | {"heads": out}
    atomic_write_text(path, json.dumps(d, indent=2, sort_keys=True) + "\n")
    return out


def summarise_heads(rows: list[dict]) -> dict:
    """Best measured speedups by kind; the head's best configuration and its per-position acceptance; the
    predicted-vs-measured errors (:func:`sdsl.validation.error_stats.summarize_errors`) over all rows,
    head rows, draft-model rows, trees and chains."""
    from sdsl.validation.error_stats import summarize_errors

    best = lambda rs: max(rs, key=lambda r: r["speedup"])  # noqa: E731
    head_best = best([r for r in rows if r["proposer"] == "head"])
    tree_best = best([r for r in rows if r["kind"] == "tree"])
    chain_best = best([r for r in rows if r["kind"] == "chain"])
    cfg = lambda r: {k: r[k] for k in ("proposer", "tree", "speedup", "tau", "per_position")}  # noqa: E731
    pricing = {kind: summarize_errors(r["speedup_error"] for r in rows if "speedup_error" in r and sel(r))
               for kind, sel in (("all", lambda r: True), ("head", lambda r: r["proposer"] == "head"),
                                 ("draft", lambda r: r["proposer"] != "head"), ("tree", lambda r: r["kind"] == "tree"),
                                 ("chain", lambda r: r["kind"] == "chain"))}
    return {"rows": rows, "pricing": pricing, "head_best_speedup": head_best["speedup"], "tree_best_speedup": tree_best["speedup"],
            "chain_best_speedup": chain_best["speedup"], "tree_beats_chain": tree_best["speedup"] > chain_best["speedup"],
            "head_best": cfg(head_best), "tree_best": cfg(tree_best), "chain_best": cfg(chain_best)}
