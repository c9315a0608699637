"""Rerun every fit the tests and the shipped defaults depend on under each OpenBLAS core type this machine runs,
each in its own subprocess, and report how far each fitted parameter and headline number spreads.

    python tools/blas_spread.py                       # default kernels + Prescott, Haswell, Zen (+ SkylakeX with AVX-512)
    python tools/blas_spread.py --json spread.json    # also write every value under every kernel
    python tools/blas_spread.py --cores Haswell,Zen   # a subset

The fits: ``sdsl calibrate`` of the shipped GPU calibrations (the profiles/README.md commands: H100 and A100 with
their all-reduce, A40), the all-reduce fit's own cost, and ``sdsl validate latency --json`` (leave-one-model-out GEMM
and elementwise fits, held-out TP all-reduce fits, the NVLS research form, the shipped defaults' own errors).
``OPENBLAS_CORETYPE`` is set here, in the subprocesses only: tests and CI leave it alone. numpy's OpenBLAS reads it
at import, so each kernel type is one fresh interpreter. The report gives, per value, the relative spread
(max − min)/|median| over the kernel types, and the significant digits every kernel agrees on.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORES = ("Prescott", "Haswell", "Zen", "SkylakeX")
GPUS = {"h100": "h100-sxm", "a100": "a100-80gb", "a40": "a40"}


def _flatten(prefix: str, value, out: dict) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        if math.isfinite(value):
            out[prefix] = float(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}", v, out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _flatten(f"{prefix}[{i}]", v, out)


def worker() -> dict:
    """Every value the fits produce under this interpreter's BLAS kernels (one flat dict)."""
    import tempfile

    from click.testing import CliRunner

    from sdsl._paths import data_path
    from sdsl.cli import cli
    from sdsl.catalog.hardware import get_hardware
    from sdsl.fit.allreduce import fit_allreduce, nvlink_rows, read_allreduce

    vidur, out = data_path("vidur"), {}
    with tempfile.TemporaryDirectory() as tmp:
        for gpu, name in GPUS.items():
            net = vidur / "network" / f"{gpu}_dgx_all_reduce.csv"
            extra = ["--allreduce", str(net)] if net.exists() else []
            path = Path(tmp) / f"{name}.json"
            r = CliRunner().invoke(cli, ["calibrate", str(vidur / gpu), "--hardware", name, *extra, "--no-points",
                                         "-o", str(path)])
            if r.exit_code:
                raise SystemExit(f"calibrate {name} failed: {r.output}")
            got = json.loads(path.read_text())
            _flatten(f"calibrate.{name}", {**got["params"], "mape": got["mape"], "decode_mape": got["decode_mape"],
                                           "rms_log_error": got["rms_log_error"]}, out)
            if net.exists():
                _, stats = fit_allreduce(nvlink_rows([read_allreduce(net)]), get_hardware(name))
                out[f"calibrate.{name}.allreduce_cost"] = stats["cost"]
    r = CliRunner().invoke(cli, ["validate", "latency", "--data", str(vidur), "--json"])
    if r.exit_code:
        raise SystemExit(f"validate latency failed: {r.output}")
    _flatten("validate_latency", json.loads(r.output), out)
    return out


def _machine_cores() -> list[str]:
    try:
        avx512 = "avx512f" in Path("/proc/cpuinfo").read_text()
    except OSError:
        avx512 = False
    return [c for c in CORES if c != "SkylakeX" or avx512]


def run_core(core: str | None) -> tuple[dict, float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("OPENBLAS_CORETYPE", None)
    if core:
        env["OPENBLAS_CORETYPE"] = core
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--worker"], cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"OPENBLAS_CORETYPE={core or '(default)'}: worker failed\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), time.perf_counter() - t0


def spread(runs: dict[str, dict]) -> dict[str, dict]:
    """Per value: min, max, relative spread (max − min)/|median| and the significant digits all kernels share."""
    keys = sorted(set.intersection(*(set(v) for v in runs.values())))
    out = {}
    for k in keys:
        vals = sorted(r[k] for r in runs.values())
        med = vals[len(vals) // 2]
        rel = (vals[-1] - vals[0]) / abs(med) if med else (0.0 if vals[-1] == vals[0] else math.inf)
        out[k] = {"min": vals[0], "max": vals[-1], "rel_spread": rel,
                  "digits": 16 if rel == 0 else max(0, int(math.floor(-math.log10(rel))))}
    return out


def report(runs: dict[str, dict], sp: dict[str, dict], seconds: dict[str, float]) -> str:
    lines = [f"kernel types: {', '.join(runs)} (seconds: {', '.join(f'{k} {v:.0f}' for k, v in seconds.items())})", ""]
    lines.append("| shipped calibration value | H100-SXM | A100-80GB | A40 | worst relative spread |")
    lines.append("|---|---|---|---|---|")
    fields = sorted({k.split(".", 2)[2] for k in sp if k.startswith("calibrate.")})
    for f in fields:
        cells, worst = [], 0.0
        for name in GPUS.values():
            s = sp.get(f"calibrate.{name}.{f}")
            cells.append("—" if s is None else f"{s['min']:.6g}")
            worst = max(worst, 0.0 if s is None else s["rel_spread"])
        lines.append(f"| {f} | " + " | ".join(cells) + f" | {worst:.1e} |")
    lines.append("")
    groups: dict[str, list] = {}
    for k, s in sp.items():
        if k.startswith("validate_latency."):
            parts = k.split(".")
            group = ".".join(parts[1:3]) if parts[2] in ("allreduce", "shipped") else parts[1]
            if parts[2] == "allreduce" and len(parts) > 3 and parts[3] == "limits":
                group += ".limits"
            groups.setdefault(group, []).append((s["rel_spread"], k))
    lines.append("| validate latency group | values | worst relative spread | worst value |")
    lines.append("|---|---|---|---|")
    for g, items in sorted(groups.items()):
        rel, k = max(items)
        lines.append(f"| {g} | {len(items)} | {rel:.1e} | {k.split('.', 1)[1]} |")
    worst = max(s["rel_spread"] for s in sp.values())
    calib = max(s["rel_spread"] for k, s in sp.items() if k.startswith("calibrate."))
    lines += ["", f"worst relative spread: shipped calibrations {calib:.1e}, every value {worst:.1e} "
                  f"({len(sp)} values)"]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cores", default=None, help="comma-separated OPENBLAS_CORETYPE values (default: all this CPU runs)")
    ap.add_argument("--json", default=None, help="write every value under every kernel type here")
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker()))
        return 0
    cores = [None] + (args.cores.split(",") if args.cores else _machine_cores())
    runs, seconds = {}, {}
    for core in cores:
        label = core or "default"
        runs[label], seconds[label] = run_core(core)
    sp = spread(runs)
    print(report(runs, sp, seconds))
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "spread": sp}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
