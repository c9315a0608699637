"""Cold start-up of ``sdsl optimize`` against ``python -c "import numpy"``, in one run on one machine.

Each command runs in a fresh interpreter (``-X importtime`` off, bytecode caches warm: a user's second call),
alternating the two so that both see the same machine load; the CPU time (user + system) of each child is read
from ``os.wait4``. The goal: the median ``sdsl optimize`` costs at most 2x the median ``import numpy``.

    python benchmarks/bench_startup.py --repeats 15 > benchmarks/results/startup.json
    python benchmarks/bench_startup.py --repeats 15 --against /tmp/base  # /tmp/base: `git archive REV` of an older
                                                                         # commit, interleaved (both as python -m sdsl)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# what a user types: the installed console script beside this interpreter (``python -m sdsl`` where there is none,
# which adds runpy's start-up)
_SCRIPT = Path(sys.executable).with_name("sdsl")
_SDSL = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "sdsl"]
COMMANDS = {
    "import numpy": [sys.executable, "-c", "import numpy"],
    "sdsl optimize": [*_SDSL, "optimize", "--target", "llama-3.1-70b", "--hardware", "h100-sxm", "--tp", "4"],
    "import sdsl": [sys.executable, "-c", "import sdsl"],
}

# bytecode written and read as in a user's install (a development shell may switch it off)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def cpu_seconds(argv, cwd=ROOT) -> float:
    """User + system CPU seconds of one child process (its own, from wait4), run in ``cwd`` (whose ``sdsl`` a
    ``python -m sdsl`` imports first)."""
    proc = subprocess.Popen(argv, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--against", type=Path, default=None,
                        help="another checkout's root: its `python -m sdsl optimize` and this one's join the rotation")
    args = parser.parse_args()
    runs = {name: (argv, ROOT) for name, argv in COMMANDS.items()}
    if args.against is not None:
        dash_m = [sys.executable, "-m", "sdsl", *COMMANDS["sdsl optimize"][len(_SDSL):]]
        runs.update({"sdsl optimize (python -m, this checkout)": (dash_m, ROOT),
                     "sdsl optimize (python -m, against)": (dash_m, args.against.resolve())})
    for argv, cwd in runs.values():  # warm the bytecode caches once
        cpu_seconds(argv, cwd)
    times = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, (argv, cwd) in runs.items():
            times[name].append(cpu_seconds(argv, cwd))
    med = {name: statistics.median(t) for name, t in times.items()}
    out = {"machine": machine(), "repeats": args.repeats,
           "median_cpu_s": {k: round(v, 4) for k, v in med.items()},
           "min_cpu_s": {k: round(min(v), 4) for k, v in times.items()},
           "ratio_optimize_to_numpy": round(med["sdsl optimize"] / med["import numpy"], 3),
           "ratio_import_sdsl_to_numpy": round(med["import sdsl"] / med["import numpy"], 3),
           "goal": "sdsl optimize <= 2x import numpy (median CPU time)",
           "goal_met": med["sdsl optimize"] <= 2 * med["import numpy"]}
    if args.against is not None:
        out["against"] = {"checkout": str(args.against), **{
            key: round(med[f"sdsl optimize (python -m, {key})"] / med["import numpy"], 3)
            for key in ("this checkout", "against")}}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
