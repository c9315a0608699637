"""One prepared GPU run (≤ 10 minutes on one H200): profiling harness + synthetic decoder sweep.

    python benchmarks/gpu_decoder.py --out "$OUT"              # on the GPU machine
    python benchmarks/gpu_decoder.py --out /tmp/x --tiny       # CPU smoke run at tiny shapes (the test suite's)

1. ``sdsl profile``'s harness (operator GEMMs and whole decoder layers, bf16) for the target
   (llama-3.1-8b) and the draft (llama-3.2-1b): ``<hw>-<model>.csv`` + sidecars under ``--out``;
2. the forced-acceptance sweep (:func:`sdsl.experiments.decoder_synthetic.synthetic_sweep`): an
   8B-shaped target with a 1B-shaped draft and an EAGLE-shaped head, bf16, batch 1–64, k 1–6, three
   acceptance levels, each row priced by sdsl on the hardware's shipped calibration:
   ``synthetic.json`` (summary + rows) and ``synthetic_rows.json`` (the resumable row cache).
A deadline keeps the whole run inside ``--budget-s``; ``summary.json`` says what finished.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TINY = {"name": "tiny-target", "family": "llama", "n_layer": 2, "d_model": 64, "n_head": 4, "n_kv_head": 2,
        "d_ff": 160, "vocab_size": 512, "max_context": 2048}


def _models(tiny: bool):
    from sdsl.core.architecture import ModelSpec, get_model

    if tiny:
        return ModelSpec(**TINY), ModelSpec(**(TINY | {"name": "tiny-draft", "n_layer": 1, "d_model": 32, "n_head": 2,
                                                      "n_kv_head": 1, "d_ff": 64}))
    return get_model("llama-3.1-8b"), get_model("llama-3.2-1b")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--tiny", action="store_true", help="tiny shapes on the CPU (smoke test)")
    parser.add_argument("--budget-s", type=float, default=540.0)
    args = parser.parse_args(argv)
    import torch

    from sdsl.experiments.decoder_synthetic import synthetic_sweep
    from sdsl.torch.harness.run import Grid, default_grid, quick_grid, run_profile

    start = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = "cpu" if args.tiny or not torch.cuda.is_available() else "cuda"
    hardware = "cpu" if device == "cpu" else _gpu_key()
    target, draft = _models(args.tiny)
    summary = {"device": device, "hardware": hardware, "torch": torch.__version__, "target": target.name,
               "draft": draft.name, "profiles": [], "errors": []}
    grid = quick_grid() if args.tiny else Grid(num_tokens=default_grid("cuda").num_tokens, batch=(1, 4, 16, 64),
                                               q=(1, 2, 4, 7), context=(512, 2048), warmup=3, repeats=10)
    for spec in (target, draft):
        try:
            path = run_profile(spec, out / f"{hardware}-{spec.name}.csv", device=device,
                               dtype="fp32" if args.tiny else "bf16", grid=grid, progress=False,
                               hardware=None if args.tiny else hardware)
            summary["profiles"].append(path.name)
        except Exception as exc:  # keep going: the sweep is worth having without a profile
            summary["errors"].append(f"profile {spec.name}: {exc!r}")
    if device == "cuda":
        torch.set_default_device("cuda")
    sweep = synthetic_sweep(target=target, draft=draft, gammas=(1, 2, 3, 4, 6) if not args.tiny else (1, 3),
                            batches=(1, 2, 4, 8, 16, 32, 64) if not args.tiny else (1, 2),
                            alphas=(0.5, 0.7, 0.9) if not args.tiny else (0.8,), prompt_len=128 if not args.tiny else 8,
                            max_new=32 if not args.tiny else 6, repeats=2 if not args.tiny else 1,
                            cache_path=out / "synthetic_rows.json", progress=False, device=device,
                            dtype="fp32" if args.tiny else "bf16", hardware=hardware,
                            deadline=start + args.budget_s - 30)
    (out / "synthetic.json").write_text(json.dumps(sweep, indent=1, sort_keys=True, default=float) + "\n")
    summary.update(rows=sweep["n_rows"], median_speedup_error=sweep["median_speedup_error"],
                   median_signed_error=sweep["median_signed_error"], seconds=round(time.time() - start, 1))
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return summary


def _gpu_key() -> str:
    from sdsl.torch.harness.run import _guess_hardware

    import torch

    return _guess_hardware(torch.device("cuda")) or "h100-sxm"


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
