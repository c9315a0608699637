"""CPU milliseconds of one byte-d288 target forward over q = 1..10 new tokens after a 100-token cache
(issue 10: why a chain of 7 — 8 verified tokens — steps faster than a chain of 6).

Run on the locked idle core: ``flock /work/wt/core1.lock taskset -c 1 .venv/bin/python
benchmarks/bench_target_forward_tokens.py``. One torch thread, process CPU time; per q the median of 150
forwards (cache rolled back to 100 before each), and over three interleaved passes the middle one. Prints
JSON ``{"ms_by_tokens": {q: ms}}`` (``benchmarks/results/target_forward_by_tokens.json``).
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import machine  # noqa: E402  (also pins numeric libraries to one thread)


def main(passes: int = 3, reps: int = 150) -> None:
    import torch

    from sdsl.torch.checkpoint import load_checkpoint

    torch.set_num_threads(1)
    target, _ = load_checkpoint("byte-d288")
    gen = torch.Generator().manual_seed(0)
    prefix = torch.randint(0, 256, (1, 100), generator=gen)
    out: dict[int, list[float]] = {}
    with torch.inference_mode():
        for _ in range(passes):
            for q in range(1, 11):
                cache = target.new_cache(1, 256)
                target(prefix, cache)
                tokens = torch.randint(0, 256, (1, q), generator=gen)
                times = []
                for _ in range(reps):
                    cache.set_lengths(torch.tensor([100]))
                    start = time.process_time()
                    target(tokens, cache)
                    times.append(time.process_time() - start)
                out.setdefault(q, []).append(1e3 * sorted(times)[reps // 2])
    print(json.dumps({"machine": machine(), "torch": torch.__version__, "passes": passes, "reps": reps,
                      "ms_by_tokens": {q: sorted(v)[len(v) // 2] for q, v in out.items()}}, indent=2))


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
