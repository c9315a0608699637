"""Calibrate sdsl's engine model to your own engine's runs, then price with it.

Your runs here are a real published table: vLLM issue #20780 (2025-07, Llama-3.1-8B, batch 1) measured plain decoding
(TPOT 7.07 ms) and EAGLE-1 at k = 2..7 with the accepted length and TPOT of each. They are written as the runs CSV
`sdsl calibrate engine` reads (one row per run: target, hardware, batch, proposer, k, accepted_length, tpot_ms),
fitted with the structure of the vllm-2025-07 profile (CUDA graphs, no overlap while speculating), and the written
profile prices a configuration nobody measured: EAGLE-1 at k = 4 on the same engine at batch 8.

    python examples/engine_calibration.py
    sdsl calibrate engine runs.csv --engine vllm-2025-07 -o my-vllm.json    # the same from the shell
    sdsl predict --target llama-3.1-8b --proposer eagle --gamma 4 --accepted-length 2.39 --engine my-vllm.json
"""

from __future__ import annotations

import csv
import tempfile
from pathlib import Path

import sdsl
from sdsl.validation.published_rows import load_rows
from sdsl.fit.engine_calibration import calibrate_engine

SOURCE = "vllm-project/vllm#20780"
rows = [r for r in load_rows("speculative", None) if SOURCE in r["source"] and r["draft"].startswith("EAGLE-1")]
plain = next(r for r in load_rows("decode", None) if SOURCE in r["source"])
runs = [{"target": "llama-3.1-8b", "hardware": "h100-sxm", "batch": 1, "context": 512, "proposer": "", "k": "",
         "accepted_length": "", "tpot_ms": plain["value"], "label": "plain"}]
runs += [{"target": "llama-3.1-8b", "hardware": "h100-sxm", "batch": 1, "context": 512, "proposer": "eagle",
          "k": r["gamma"], "accepted_length": r["mean_accepted_len"], "tpot_ms": r["value"], "label": f"eagle k={r['gamma']}"}
         for r in rows]

with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "runs.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(runs[0]))
        writer.writeheader()
        writer.writerows(runs)
    result = calibrate_engine([path], base="vllm-2025-07", name="my-vllm")
    print(result.report())
    profile_file = Path(tmp) / "my-vllm.json"
    result.to_json(profile_file)
    dep = sdsl.Deployment("h100-sxm", context=512, engine=str(profile_file))
    for batch in (1, 8):
        step = sdsl.price_step("llama-3.1-8b", "eagle", dep, tau=2.39, gamma=4, batch=batch)
        ideal = sdsl.price_step("llama-3.1-8b", "eagle", dep.replace(engine="ideal"), tau=2.39, gamma=4, batch=batch)
        print(f"EAGLE-1 k=4 at batch {batch} with {dep.engine.name}: TPOT {1e3 * float(step.tpot_s):.2f} ms "
              f"(roofline alone {1e3 * float(ideal.tpot_s):.2f} ms), speedup {float(step.speedup):.2f}x")
print("Answer: the fitted profile above prices your engine's host time; pass its JSON to --engine.")
