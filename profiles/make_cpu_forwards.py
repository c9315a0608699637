"""Whole-forward times of the committed reference family on this CPU, for the calibration (about a minute).

    .venv/bin/python profiles/make_cpu_forwards.py

Every checkpoint in sdsl/data/checkpoints (the reference decoder, sdsl/torch/model.py, fp32,
``torch.set_num_threads(1)``) runs one cached forward of ``batch × q`` new tokens after
``context`` tokens — embedding, every layer and the LM head: the step that
``sdsl.roofline.latency.step_time(spec, Deployment("cpu", dtype="fp32"), batch=batch, q=q, context=context)`` prices — for
batch 1 and 8, q = 1…9 (a γ = 8 verification is q = 9) and context 32/96/256. Timed exactly as
``sdsl validate decoder`` times its step microbenchmarks (:func:`sdsl.validation.decoder.validation.step_times`:
process CPU time, the median of 15 runs after 2 warm-ups), so the calibration sees the clock the
validation's measured speedups use.

Writes profiles/model-forwards-cpu.csv (columns model, batch, q, context, repeats, time_s; seconds)
and its sidecar profiles/model-forwards-cpu.json (format ``sdsl-model-steps``: each model's
ModelSpec, clock, threads, torch version, date). ``sdsl calibrate ... --steps
profiles/model-forwards-cpu.csv`` fits to these rows jointly with the operator and layer profiles.
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
from pathlib import Path

import torch

from sdsl._io import atomic_write_text
from sdsl.torch.checkpoint import CHECKPOINT_DIR, list_checkpoints, load_checkpoint
from sdsl.validation.decoder.validation import model_spec, step_times

HERE = Path(__file__).resolve().parent
OUT = HERE / "model-forwards-cpu"
BATCH, Q, CONTEXT, REPEATS = (1, 8), tuple(range(1, 10)), (32, 96, 256), 15


def _cpu_name() -> str:
    """The CPU model this ran on (from /proc/cpuinfo; the machine's VM type can change between sessions)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown"


def main() -> int:
    torch.set_num_threads(1)
    rows = ["model,batch,q,context,repeats,time_s"]
    specs = {}
    for path in list_checkpoints(CHECKPOINT_DIR):
        model, meta = load_checkpoint(path)
        model = model.float().eval()
        spec = model_spec(meta["spec"])
        specs[spec.name] = spec.to_dict()
        for b in BATCH:
            for L in CONTEXT:
                for q, t in step_times(model, b, Q, L, repeats=REPEATS, clock="cpu", stat="median").items():
                    rows.append(f"{spec.name},{b},{q},{L},{REPEATS},{t:.9g}")
            print(f"{spec.name}: batch {b} done", flush=True)
    atomic_write_text(OUT.with_suffix(".csv"), "\n".join(rows) + "\n")
    meta = {"format": "sdsl-model-steps", "format_version": 1, "hardware": "cpu", "dtype": "fp32",
            "threads": 1, "cpu": _cpu_name(), "clock": "process CPU time (time.process_time), median of 15 runs after 2 warm-ups",
            "torch_version": torch.__version__, "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "source": "profiles/make_cpu_forwards.py: one cached forward of the reference decoder "
                      "(sdsl/torch/model.py) per row", "models": specs}
    atomic_write_text(OUT.with_suffix(".json"), json.dumps(meta, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
