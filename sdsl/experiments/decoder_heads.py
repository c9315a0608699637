"""Draft head and token trees on the committed family (``sdsl validate decoder --heads``).

On the largest family target (byte-d288) at batch 1, held-out stdlib prompts, sampling at the same
temperature as ``sdsl validate decoder``: plain decoding, chains of the family's small members as draft
models, chains and trees of the trained EAGLE-style head (``<target>-head``, :mod:`sdsl.torch.head`), and
trees of the best draft model. Each row records the measured speedup over plain decoding (process CPU
time, one torch thread, fastest of ``repeats`` per prompt chunk), τ, and the accept-count histogram
with the per-position acceptance (P(depth i accepted | depth i−1 was)). Chains are also priced by
sdsl's model (:func:`sdsl.core.throughput.predict` from the measured α with the CPU calibration; the head
priced as a one-layer model at the target's width). Summary keys: ``head_best_speedup``,
``tree_best_speedup``, ``chain_best_speedup`` (best chain of a draft model or the head) and
``tree_beats_chain``.
"""

from __future__ import annotations

import numpy as np
import torch

from sdsl.experiments.decoder_synthetic import cpu_params, family_spec, measure
from sdsl.experiments.row_cache import RowCache
from sdsl.torch.checkpoint import load_checkpoint
from sdsl.torch.head import HeadProposer, load_head
from sdsl.torch.proposers import DraftModel

__all__ = ["HEAD_DEFAULTS", "heldout_prompts", "head_tree_validation", "summarise_heads"]

HEAD_DEFAULTS = {"target": "byte-d288", "drafts": ("byte-d64", "byte-d96", "byte-wide"), "gammas": (2, 3, 4, 5, 6),
                 "head_gammas": (1, 2, 3, 4, 5, 6), "trees": ("2x1x1x1", "2x2x1x1", "3x1x1x1x1", "2x2x2x1x1",
                                                                "3x2x1x1x1", "4x2x1x1x1x1"),
                 "n_prompts": 8, "prompt_len": 64, "max_new": 64, "temperature": 1.0, "repeats": 2}


def heldout_prompts(n: int, length: int) -> torch.Tensor:
    """``n`` evenly spaced windows of the held-out stdlib split."""
    from sdsl.torch.train import load_corpus

    held = load_corpus()["heldout"]
    starts = np.linspace(0, len(held) - length - 1, n + 2)[1:-1].astype(int)
    return torch.from_numpy(np.stack([held[s:s + length] for s in starts]).astype(np.int64))


def _pooled(target, proposer, tree, prompts, settings) -> dict:
    """One prompt at a time (batch 1): pooled tokens, seconds and accept counts over all prompts."""
    runs = [measure(target, proposer, tree, 1, prompts[i:i + 1], settings["max_new"],
                    temperature=settings["temperature"], seed=settings["seed"] + i, repeats=settings["repeats"])
            for i in range(len(prompts))]
    seconds = sum(r["decode_s"] for r in runs)
    tokens = sum(r["tokens_per_s"] * r["decode_s"] for r in runs)
    out = {"tokens_per_s": tokens / seconds, "decode_s": seconds, "draft_s": sum(r["draft_s"] for r in runs),
           "steps": sum(r["steps"] for r in runs), "tree": runs[0]["tree"]}
    if tree is not None:
        counts = np.sum([r["accept_counts"] for r in runs], axis=0)
        reach = counts[::-1].cumsum()[::-1]
        out.update(accept_counts=counts.tolist(), tau=float((np.arange(len(counts)) * counts).sum() / counts.sum() + 1),
                   per_position=(reach[1:] / np.maximum(reach[:-1], 1)).tolist())
    return out


def head_tree_validation(target: str = HEAD_DEFAULTS["target"], drafts=HEAD_DEFAULTS["drafts"],
                         gammas=HEAD_DEFAULTS["gammas"], head_gammas=HEAD_DEFAULTS["head_gammas"],
                         trees=HEAD_DEFAULTS["trees"], n_prompts: int = HEAD_DEFAULTS["n_prompts"],
                         prompt_len: int = HEAD_DEFAULTS["prompt_len"], max_new: int = HEAD_DEFAULTS["max_new"],
                         temperature: float = HEAD_DEFAULTS["temperature"], repeats: int = HEAD_DEFAULTS["repeats"],
                         seed: int = 0, cache_path=None, threads: int = 1, progress: bool = True) -> dict:
    """Measure plain, draft-model chains, head chains, head trees and draft-model trees; summarise."""
    from tqdm.auto import tqdm

    torch.set_num_threads(threads)
    target_model, target_meta = load_checkpoint(target)
    head, head_meta = load_head(f"{target}-head", target_model.shape)
    proposers = {"head": HeadProposer(head, target_model)} | {d: DraftModel(load_checkpoint(d)[0], d) for d in drafts}
    settings = {"target": target, "n_prompts": n_prompts, "prompt_len": prompt_len, "max_new": max_new,
                "temperature": temperature, "repeats": repeats, "seed": seed, "threads": threads, "batch": 1,
                "clock": "process CPU time (1 torch thread)"}
    prompts = heldout_prompts(n_prompts, prompt_len)
    tag = "|".join(f"{k}={settings[k]}" for k in ("target", "n_prompts", "prompt_len", "max_new", "temperature",
                                                   "repeats", "seed"))
    cache = RowCache(cache_path)
    plain = cache.get(f"plain|{tag}", lambda: _pooled(target_model, None, None, prompts, settings))
    jobs = [(d, f"chain{g}") for d in drafts for g in gammas] + [("head", f"chain{g}") for g in head_gammas]
    jobs += [("head", t) for t in trees]
    rows = []
    for name, tree in tqdm(jobs, desc="heads and trees", disable=not progress):
        m = cache.get(f"sd|{name}|{tree}|{tag}", lambda: _pooled(target_model, proposers[name], tree, prompts, settings))
        rows.append({"proposer": name, "tree": tree, "kind": "chain" if tree.startswith("chain") else "tree",
                     "speedup": m["tokens_per_s"] / plain["tokens_per_s"]} | m)
    best_chain_draft = max((r for r in rows if r["kind"] == "chain" and r["proposer"] != "head"), key=lambda r: r["speedup"])
    for tree in trees[:3]:  # the best draft model drafting trees too
        name = best_chain_draft["proposer"]
        m = cache.get(f"sd|{name}|{tree}|{tag}", lambda: _pooled(target_model, proposers[name], tree, prompts, settings))
        rows.append({"proposer": name, "tree": tree, "kind": "tree", "speedup": m["tokens_per_s"] / plain["tokens_per_s"]} | m)
    out = summarise_heads(_price_chains(rows, target_meta, {d: load_checkpoint(d)[1] for d in drafts}, prompt_len + max_new // 2))
    out["plain"] = plain
    out["settings"] = settings
    out["head"] = {k: head_meta[k] for k in ("name", "params", "heldout_top1_agreement", "train_seconds",
                                             "train_cpu_seconds", "train_config") if k in head_meta}
    return out


def _price_chains(rows: list[dict], target_meta: dict, draft_metas: dict, context: int) -> list[dict]:
    """Chain rows get sdsl's predicted speedup from their measured α (no decoder overhead term)."""
    from sdsl.core.acceptance import alpha_from_accept_histogram
    from sdsl.core.deployment import Deployment
    from sdsl.core.throughput import predict
    from sdsl.torch.synthetic import head_spec_for

    deployment = Deployment("cpu", dtype="fp32", context=context, params=cpu_params())
    target = family_spec(target_meta["spec"])
    specs = {"head": head_spec_for(target)} | {d: family_spec(m["spec"]) for d, m in draft_metas.items()}
    out = []
    for r in rows:
        if r["kind"] == "chain":
            alpha = min(float(alpha_from_accept_histogram(np.asarray(r["accept_counts"]))), 1 - 1e-9)
            pr = predict(target, specs[r["proposer"]], deployment, gamma=len(r["accept_counts"]) - 1, alpha=alpha)
            r = r | {"alpha": alpha, "pred_speedup": float(pr.speedup), "speedup_error": float(pr.speedup) / r["speedup"] - 1}
        out.append(r)
    return out


def summarise_heads(rows: list[dict]) -> dict:
    """Best measured speedups by kind; the head's best configuration and its per-position acceptance."""
    best = lambda rs: max(rs, key=lambda r: r["speedup"])  # noqa: E731
    head_best = best([r for r in rows if r["proposer"] == "head"])
    tree_best = best([r for r in rows if r["kind"] == "tree"])
    chain_best = best([r for r in rows if r["kind"] == "chain"])
    cfg = lambda r: {k: r[k] for k in ("proposer", "tree", "speedup", "tau", "per_position")}  # noqa: E731
    return {"rows": rows, "head_best_speedup": head_best["speedup"], "tree_best_speedup": tree_best["speedup"],
            "chain_best_speedup": chain_best["speedup"], "tree_beats_chain": tree_best["speedup"] > chain_best["speedup"],
            "head_best": cfg(head_best), "tree_best": cfg(tree_best), "chain_best": cfg(chain_best)}
