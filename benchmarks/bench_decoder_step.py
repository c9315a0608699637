"""Reference decoder: CPU milliseconds per decoding step on byte-d288 (issue 10, decoder overhead).

Run on an otherwise idle core, e.g. ``flock /work/wt/core1.lock taskset -c 1 .venv/bin/python
benchmarks/bench_decoder_step.py`` (prints JSON; results recorded in BENCHMARKS.md). Plain decoding,
chains and trees of the committed head and of ``byte-wide``, batch 1, temperature 1, ``n_prompts``
held-out prompts × 64 new bytes, process CPU time of one torch thread; ``rounds`` round-robin passes over
the configurations (medians reported; each round's speedup is against that round's plain decoding).
Arguments: ``[rounds] [n_prompts] [set] [head tree...] [--tune]`` (default 3 8 default); set ``trees``
times the head's chains against its spine trees (a rank-0 chain plus side leaves,
:meth:`sdsl.torch.tree.TokenTree.spine`); set ``dynamic`` times plain decoding, the head's best chains and
static spines and the head trees named after it (e.g. the dynamic spine ``dspine6@0.4``,
:class:`sdsl.torch.dynamic_tree.DynamicSpine`); ``--tune`` times the tuning windows
(:func:`sdsl.validation.decoder.heads.tuning_prompts`) instead of the evaluation prompts. Each tree is
built once per configuration (mask templates reused across prompts). To compare two versions of the
decoder, run it with ``PYTHONPATH`` pointing at each checkout. Tokens/s, speedups and τ count every byte a run
emits, the last step's overshoot included (``DecodeResult.new_tokens``), as the committed runs did; the
validation (``sdsl validate decoder --heads``) counts only the requested bytes.
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
DYNAMIC_CONFIGS = (("plain", None), ("head", "chain5"), ("head", "chain6"), ("head", "chain7"),
                   ("head", "spine2x1x1x1x1x1"), ("head", "spine3x1x1x1x1"))


def main(rounds: int = 3, n_prompts: int = 8, which: str = "default", *extra: str, tune: bool = False) -> None:
    import numpy as np
    import torch

    from sdsl.validation.decoder.heads import heldout_prompts, tuning_prompts
    from sdsl.torch.checkpoint import load_checkpoint
    from sdsl.torch.decoder import generate
    from sdsl.torch.dynamic_tree import parse_tree
    from sdsl.torch.head import HeadProposer, load_head
    from sdsl.torch.proposers import DraftModel

    torch.set_num_threads(1)
    target, _ = load_checkpoint("byte-d288")
    proposers = {"plain": None, "head": HeadProposer(load_head("byte-d288-head", target.shape)[0], target),
                 "byte-wide": DraftModel(load_checkpoint("byte-wide")[0], "byte-wide")}
    prompts = (tuning_prompts if tune else heldout_prompts)(n_prompts, 64)
    configs = {"trees": TREE_CONFIGS, "dynamic": DYNAMIC_CONFIGS}.get(which, CONFIGS) + tuple(("head", t) for t in extra)
    trees = {tree: parse_tree(tree) for _, tree in configs if tree}
    runs = {c: [] for c in configs}
    for _ in range(rounds):  # round-robin, so that every configuration sees the same machine drift
        for name, tree in configs:
            res = [generate(target, prompts[i:i + 1], 64, proposers[name], temperature=1.0, seed=i, clock="cpu",
                            tree=trees.get(tree)) for i in range(len(prompts))]
            runs[(name, tree)].append((sum(r.decode_s for r in res), sum(r.steps for r in res),
                                       sum(r.new_tokens for r in res)))
    plain = np.array([t / s for s, _, t in runs[configs[0]]])
    rows = []
    for (name, tree), rs in runs.items():
        rate = np.array([t / s for s, _, t in rs])
        rows.append({"proposer": name, "tree": tree or "", "ms_per_step": float(np.median([1e3 * s / n for s, n, _ in rs])),
                     "tokens_per_s": float(np.median(rate)), "tau": rs[0][2] / rs[0][1],
                     "speedup_by_round": (rate / plain).tolist(), "speedup_median": float(np.median(rate / plain))})
        stats = getattr(trees.get(tree), "stats", None)  # a dynamic spine's drafted shapes, over all rounds
        if stats:
            rows[-1].update(leaves_per_step=stats["leaves"] / stats["steps"],
                            tree_step_share=stats.get("tree_steps", 0) / stats["steps"])
    print(json.dumps({"machine": machine(), "torch": torch.__version__, "rounds": rounds, "prompts": n_prompts,
                      "split": "tuning" if tune else "evaluation", "rows": rows}, indent=2))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--tune"]
    main(*(int(a) for a in args[:2]), *args[2:], tune="--tune" in sys.argv[1:])
