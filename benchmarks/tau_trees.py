"""τ of the head's chains and trees on many held-out prompts (issue 10: is a tree's τ gain real?).

``bench_decoder_step.py`` times 8 prompts, and τ over 8 prompts × 64 bytes moves by about ±0.2 from
one sample of prompts and seeds to the next — as much as a tree gains over a chain. This script counts
tokens only (no timing; run it under ``taskset -c 0``): the head on byte-d288, batch 1, temperature 1,
``n_prompts`` held-out windows × 64 new bytes, seed = prompt index; pooled τ = tokens / steps with its
standard error over prompts (ratio estimator). Arguments: ``n_prompts config...`` (default 128 and the
configurations of ``bench_decoder_step.py``'s ``trees`` set). Prints JSON.
"""

from __future__ import annotations

import json
import sys

DEFAULT = ("chain4", "chain5", "chain6", "2x1x1x1", "spine3x1x1x1x1", "spine2x2x1x1x1", "spine2x1x1x1x1x1")


def main(n_prompts: int = 128, *trees: str) -> None:
    import numpy as np
    import torch

    from sdsl.experiments.decoder_heads import heldout_prompts
    from sdsl.torch.checkpoint import load_checkpoint
    from sdsl.torch.decoder import generate
    from sdsl.torch.head import HeadProposer, load_head

    torch.set_num_threads(1)
    target, _ = load_checkpoint("byte-d288")
    head = HeadProposer(load_head("byte-d288-head", target.shape)[0], target)
    prompts = heldout_prompts(n_prompts, 64)
    rows = []
    for tree in trees or DEFAULT:
        res = [generate(target, prompts[i:i + 1], 64, head, temperature=1.0, seed=i, tree=tree) for i in range(n_prompts)]
        steps = np.array([r.steps for r in res], dtype=float)
        tokens = np.array([r.new_tokens for r in res], dtype=float)
        tau = tokens.sum() / steps.sum()
        se = float(np.sqrt(np.var(tokens - tau * steps, ddof=1) * n_prompts) / steps.sum())
        rows.append({"tree": tree, "tau": float(tau), "tau_se": se, "steps": int(steps.sum()),
                     "tokens": int(tokens.sum())})
    print(json.dumps({"prompts": n_prompts, "rows": rows}, indent=2))


if __name__ == "__main__":
    main(*(int(a) if i == 0 else a for i, a in enumerate(sys.argv[1:])))
