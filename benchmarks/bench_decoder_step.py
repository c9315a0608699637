"""Reference decoder: CPU milliseconds per decoding step on byte-d288 (issue 10, decoder overhead).

Run on an otherwise idle core, e.g. ``flock /work/wt/core1.lock taskset -c 1 .venv/bin/python
benchmarks/bench_decoder_step.py`` (prints JSON; results recorded in BENCHMARKS.md). Plain decoding,
chains and trees of the committed head and of ``byte-wide``, batch 1, temperature 1, ``n_prompts``
held-out prompts × 64 new bytes, process CPU time of one torch thread; ``rounds`` round-robin passes over
the configurations (medians reported; each round's speedup is against that round's plain decoding).
Arguments: ``[rounds] [n_prompts] [set]`` (default 3 8 default); set ``trees`` times the head's chains
against its spine trees (a rank-0 chain plus side leaves, :meth:`sdsl.torch.tree.TokenTree.spine`). To
compare two versions of the decoder, run it with ``PYTHONPATH`` pointing at each checkout.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import machine  # noqa: E402  (also pins numeric libraries to one thread)

CONFIGS = (("plain", None), ("head", "chain4"), ("head", "chain5"), ("byte-wide", "chain4"), ("byte-wide", "chain5"),
           ("byte-wide", "2x1x1x1"), ("head", "2x1x1x1"), ("byte-wide", "3x1x1x1x1"), ("head", "3x2x1x1x1"))
TREE_CONFIGS = (("plain", None), ("head", "chain4"), ("head", "chain5"), ("head", "chain6"), ("head", "2x1x1x1"),
                ("head", "spine3x1x1x1x1"), ("head", "spine2x2x1x1x1"), ("head", "spine2x1x1x1x1x1"),
                ("byte-wide", "chain5"), ("byte-wide", "2x1x1x1"))


def main(rounds: int = 3, n_prompts: int = 8, which: str = "default") -> None:
    import numpy as np
    import torch

    from sdsl.experiments.decoder_heads import heldout_prompts
    from sdsl.torch.checkpoint import load_checkpoint
    from sdsl.torch.decoder import generate
    from sdsl.torch.head import HeadProposer, load_head
    from sdsl.torch.proposers import DraftModel

    torch.set_num_threads(1)
    target, _ = load_checkpoint("byte-d288")
    proposers = {"plain": None, "head": HeadProposer(load_head("byte-d288-head", target.shape)[0], target),
                 "byte-wide": DraftModel(load_checkpoint("byte-wide")[0], "byte-wide")}
    prompts = heldout_prompts(n_prompts, 64)
    configs = TREE_CONFIGS if which == "trees" else CONFIGS
    runs = {c: [] for c in configs}
    for _ in range(rounds):  # round-robin, so that every configuration sees the same machine drift
        for name, tree in configs:
            res = [generate(target, prompts[i:i + 1], 64, proposers[name], temperature=1.0, seed=i, clock="cpu",
                            tree=tree) for i in range(len(prompts))]
            runs[(name, tree)].append((sum(r.decode_s for r in res), sum(r.steps for r in res),
                                       sum(r.new_tokens for r in res)))
    plain = np.array([t / s for s, _, t in runs[configs[0]]])
    rows = []
    for (name, tree), rs in runs.items():
        rate = np.array([t / s for s, _, t in rs])
        rows.append({"proposer": name, "tree": tree or "", "ms_per_step": float(np.median([1e3 * s / n for s, n, _ in rs])),
                     "tokens_per_s": float(np.median(rate)), "tau": rs[0][2] / rs[0][1],
                     "speedup_by_round": (rate / plain).tolist(), "speedup_median": float(np.median(rate / plain))})
    print(json.dumps({"machine": machine(), "torch": torch.__version__, "rounds": rounds, "prompts": n_prompts,
                      "rows": rows}, indent=2))


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]), *sys.argv[3:4])
