"""Run every benchmark and save its JSON under benchmarks/results/ (``make bench``).

The SmolLM2-vs-transformers benchmark needs ``make smollm2`` and the ``bench`` extra
(``pip install -e ".[bench]"``); it is skipped with a message when either is missing.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
BENCHES = {"bench_core.py": "core.json", "bench_figures.py": "figures.json", "bench_simulator.py": "simulator.json",
           "bench_trees.py": "trees.json", "bench_proposers.py": "proposers.json",
           "bench_startup.py": "startup.json", "bench_reference_smollm2.py": "reference_smollm2.json"}


def main() -> int:
    sys.path.insert(0, str(HERE.parent))
    from sdsl._io import atomic_write_text

    failures = 0
    for script, out in BENCHES.items():
        if script == "bench_reference_smollm2.py":
            gguf = list((HERE.parent / ".cache" / "smollm2").rglob("*.gguf"))
            if not gguf or importlib.util.find_spec("transformers") is None:
                print(f"skip {script}: needs `make smollm2` and `pip install -e '.[bench]'`")
                continue
        print(f"running {script} ...", flush=True)
        proc = subprocess.run([sys.executable, str(HERE / script)], capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            failures += 1
            continue
        atomic_write_text(RESULTS / out, proc.stdout)
        print(f"  -> {RESULTS / out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
