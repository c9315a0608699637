"""τ of the head's chains and trees on many held-out prompts (issue 10: is a tree's τ gain real?).

``bench_decoder_step.py`` times 8 prompts, and τ over 8 prompts × 64 bytes moves by about ±0.2 from
one sample of prompts and seeds to the next — as much as a tree gains over a chain. This script counts
tokens only (no timing; run it under ``taskset -c 0``): the head on byte-d288, batch 1, temperature 1,
``n_prompts`` held-out windows × 64 new bytes, seed = prompt index; pooled τ = tokens / steps with its
standard error over prompts (ratio estimator). Arguments: ``[--tune] n_prompts config...`` (default 128
and the configurations of ``bench_decoder_step.py``'s ``trees`` set); ``--tune`` decodes the tuning
windows (:func:`sdsl.validation.decoder.heads.tuning_prompts`, disjoint from the evaluation prompts)
instead, to choose a dynamic spine's threshold. A dynamic spine (``dspine6@0.7``) also reports its side
leaves per step and the share of steps that verified a tree. Prints JSON.
"""

from __future__ import annotations

import json
import sys

DEFAULT = ("chain4", "chain5", "chain6", "2x1x1x1", "spine3x1x1x1x1", "spine2x2x1x1x1", "spine2x1x1x1x1x1")


def main(n_prompts: int = 128, *trees: str, tune: bool = False) -> dict:
    import numpy as np
    import torch

    from sdsl.validation.decoder.heads import heldout_prompts, tuning_prompts
    from sdsl.torch.checkpoint import load_checkpoint
    from sdsl.torch.decoder import generate
    from sdsl.torch.dynamic_tree import parse_tree
    from sdsl.torch.head import HeadProposer, load_head

    torch.set_num_threads(1)
    target, _ = load_checkpoint("byte-d288")
    head = HeadProposer(load_head("byte-d288-head", target.shape)[0], target)
    prompts = (tuning_prompts if tune else heldout_prompts)(n_prompts, 64)
    rows = []
    for name in trees or DEFAULT:
        tree = parse_tree(name)
        res = [generate(target, prompts[i:i + 1], 64, head, temperature=1.0, seed=i, tree=tree) for i in range(n_prompts)]
        steps = np.array([r.steps for r in res], dtype=float)
        tokens = np.array([r.new_tokens for r in res], dtype=float)
        tau = tokens.sum() / steps.sum()
        se = float(np.sqrt(np.var(tokens - tau * steps, ddof=1) * n_prompts) / steps.sum())
        row = {"tree": name, "tau": float(tau), "tau_se": se, "steps": int(steps.sum()), "tokens": int(tokens.sum())}
        if hasattr(tree, "stats"):
            row.update(leaves_per_step=tree.stats["leaves"] / tree.stats["steps"],
                       tree_step_share=tree.stats.get("tree_steps", 0) / tree.stats["steps"])
        rows.append(row)
    out = {"prompts": n_prompts, "split": "tuning" if tune else "evaluation", "rows": rows}
    print(json.dumps(out, indent=2), flush=True)
    return out


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--tune"]
    main(*(int(a) if i == 0 else a for i, a in enumerate(args)), tune="--tune" in sys.argv[1:])
