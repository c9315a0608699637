"""Whole-model forward times on this CPU, for checking the CPU calibration end to end (a minute or two).

    .venv/bin/python profiles/make_cpu_model_steps.py

The reference decoder (sdsl/torch/model.py, random weights, fp32, one torch thread) of the four
shapes in the committed CPU profiles (llama-68m, byte-d64/d128/d288) runs one cached forward of
``batch × q`` new tokens after ``context`` tokens, embedding and LM head included: the step that
``sdsl.roofline.latency.step_time(spec, Deployment("cpu", dtype="fp32"), batch=batch, q=q, context=context)``
prices.
Writes profiles/model-steps-cpu.csv (columns model, batch, q, context, repeats, time_s = median,
time_min_s; seconds, time.perf_counter). These rows are NOT used by the calibration (held out).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

from sdsl._io import atomic_write_text
from sdsl.catalog.models import get_model
from sdsl.torch.model import Transformer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_cpu_profiles import byte_family_spec  # noqa: E402

HERE = Path(__file__).resolve().parent
BATCH, Q, CONTEXT, WARMUP, REPEATS = (1, 4), (1, 4), (64, 512), 2, 9


@torch.no_grad()
def main() -> int:
    torch.set_num_threads(1)
    rows = ["model,batch,q,context,repeats,time_s,time_min_s"]
    for spec in [get_model("llama-68m")] + [byte_family_spec(d) for d in (64, 128, 288)]:
        model = Transformer(spec).init_weights(0).eval()
        for b in BATCH:
            for L in CONTEXT:
                cache = model.new_cache(b, L + max(Q) + 1)
                model(torch.zeros(b, L, dtype=torch.long), cache)
                for q in Q:
                    x = torch.zeros(b, q, dtype=torch.long)
                    ts = []
                    for i in range(WARMUP + REPEATS):
                        cache.set_lengths(L)
                        t0 = time.perf_counter()
                        model(x, cache)
                        if i >= WARMUP:
                            ts.append(time.perf_counter() - t0)
                    rows.append(f"{spec.name},{b},{q},{L},{REPEATS},{statistics.median(ts):.9g},{min(ts):.9g}")
                    print(rows[-1], flush=True)
    atomic_write_text(HERE / "model-steps-cpu.csv", "\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
