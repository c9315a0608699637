"""Reproduce the committed CPU profiles and their calibration (a few minutes on 2 cores).

    .venv/bin/python profiles/make_cpu_profiles.py

Profiles llama-68m and three shapes of the byte-level reference family (sdsl train-family:
d_model 64, 128, 288) in fp32 with one torch thread (a 2-core machine shared with other jobs:
one thread is far less disturbed by time-slicing than two), then fits profiles/cpu.calib.json to
the operator rows and the whole decoder-layer rows jointly (the same as
``sdsl calibrate profiles/cpu-*.csv --fit-layers --points -o profiles/cpu.calib.json``).
Rerunning resumes: rows already in a profile are not measured again (delete them to remeasure).
"""

from __future__ import annotations

import sys
from pathlib import Path

from sdsl.catalog.models import ModelSpec, get_model
from sdsl.fit.calibration import calibrate_profiles
from sdsl.torch.harness import Grid, run_profile

HERE = Path(__file__).resolve().parent
GRID = Grid(num_tokens=(1, 2, 4, 8, 16, 32, 64, 128, 256), batch=(1, 2, 4, 8), q=(1, 2, 4, 8),
            context=(64, 256, 1024), warmup=3, repeats=9, min_time_s=0.02)


def byte_family_spec(d_model: int) -> ModelSpec:
    """The reference family's shape rule (sdsl/torch/train.py: family_shape)."""
    n_head = d_model // 32
    n_kv = max(k for k in range(1, n_head // 2 + 1) if n_head % k == 0) if n_head > 1 else 1
    return ModelSpec(name=f"byte-d{d_model}", family="sdsl-byte", n_layer=d_model // 32, d_model=d_model,
                     n_head=n_head, n_kv_head=n_kv, d_ff=32 * round(8 * d_model / 3 / 32), vocab_size=256,
                     head_dim=32, tied_embeddings=True, max_context=1024,
                     source="sdsl/torch/train.py family_shape")


def main() -> int:
    specs = [get_model("llama-68m")] + [byte_family_spec(d) for d in (64, 128, 288)]
    paths = []
    for spec in specs:
        out = HERE / f"cpu-{spec.name}"
        paths.append(run_profile(spec, out, device="cpu", dtype="fp32", grid=GRID, hardware="cpu", threads=1))
        print(f"profiled {spec.name} -> {out}.csv", flush=True)
    res = calibrate_profiles(paths, hardware="cpu", fit_layers=True)
    res.to_json(HERE / "cpu.calib.json", include_points=True)
    print(res.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
