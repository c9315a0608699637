"""Reference decoder: CPU milliseconds per decoding step on byte-d288 (issue 10, decoder overhead).

Run on an otherwise idle core, e.g. ``flock /work/wt/core1.lock taskset -c 1 .venv/bin/python
benchmarks/bench_decoder_step.py`` (prints JSON; results recorded in BENCHMARKS.md). Plain decoding,
chains and trees of the committed head and of ``byte-wide``, batch 1, temperature 1, 3 held-out prompts
× 64 new bytes, process CPU time of one torch thread, fastest of 3 repeats. To compare two versions of
the decoder, run it with ``PYTHONPATH`` pointing at each checkout.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import machine  # noqa: E402  (also pins numeric libraries to one thread)

CONFIGS = (("plain", None), ("head", "chain4"), ("byte-wide", "chain4"), ("byte-wide", "3x1x1x1x1"),
           ("head", "3x2x1x1x1"))


def main() -> None:
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
    prompts = heldout_prompts(8, 64)[:3]
    rows = []
    for name, tree in CONFIGS:
        runs = []
        for _ in range(3):
            res = [generate(target, prompts[i:i + 1], 64, proposers[name], temperature=1.0, seed=i, clock="cpu",
                            tree=tree) for i in range(len(prompts))]
            runs.append((sum(r.decode_s for r in res), sum(r.steps for r in res), sum(r.new_tokens for r in res)))
        seconds, steps, tokens = min(runs)
        rows.append({"proposer": name, "tree": tree or "", "ms_per_step": 1e3 * seconds / steps,
                     "tokens_per_s": tokens / seconds, "tau": tokens / steps})
    print(json.dumps({"machine": machine(), "torch": torch.__version__, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
