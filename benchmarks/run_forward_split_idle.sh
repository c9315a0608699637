#!/usr/bin/env bash
# The forward split with BOTH cores idle (VALIDATION.md "Forward terms", idle residency): one model per hold of
# /work/wt/idle.lock (the team's other core is kept quiet while it is held) and /work/wt/core1.lock, timed on core 1.
# Each hold also records what else ran (core 0's busy share during the hold from /proc/stat, the busiest processes
# before it) next to the rows; the parts are merged into
#   benchmarks/results/forward_split_synthetic_idle.json   (--synthetic, every synthetic shape)
#   benchmarks/results/forward_split_idle.json             (the family checkpoints)
# Usage: benchmarks/run_forward_split_idle.sh synthetic|family PARTS_DIR [SUFFIX]   (SUFFIX e.g. _repeat: a second pass)
set -euo pipefail
kind=$1; parts=$2; suffix=${3:-}; mkdir -p "$parts"
py=.venv/bin/python
if [ "$kind" = synthetic ]; then
  flag=--synthetic; out=benchmarks/results/forward_split_synthetic_idle$suffix.json
  models=$(taskset -c 0 $py -c "import sys; sys.path.insert(0, 'benchmarks'); import bench_forward_split as b; print(' '.join(f'synth-d{d}x{n}' for d, n in b.SYNTHETIC + b.SYNTHETIC_KNEE))")
else
  flag=; out=benchmarks/results/forward_split_idle$suffix.json
  models="byte-d64 byte-d96 byte-d128 byte-wide byte-deep byte-d192 byte-d288"
fi
for m in $models; do
  [ -s "$parts/$m.json" ] && continue
  flock /work/wt/idle.lock flock /work/wt/core1.lock bash -c "
    grep '^cpu0 ' /proc/stat > '$parts/$m.env'; ps -eo pid,psr,pcpu,comm --sort=-pcpu | head -4 >> '$parts/$m.env'
    taskset -c 1 $py benchmarks/bench_forward_split.py $flag --models $m --out '$parts/$m.json' > /dev/null
    grep '^cpu0 ' /proc/stat >> '$parts/$m.env'"
done
taskset -c 0 $py - "$parts" "$out" $models <<'PY'
import json, sys
from pathlib import Path
parts, out, models = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
docs = [json.loads((parts / f"{m}.json").read_text()) for m in models]
env = {m: (parts / f"{m}.env").read_text().splitlines() for m in models}


def busy(before, after):  # core 0's busy share between two /proc/stat cpu0 lines (idle + iowait count as idle)
    d = [int(b) - int(a) for a, b in zip(before.split()[1:], after.split()[1:])]
    return 1 - (d[3] + d[4]) / sum(d)

res = {"machine": docs[0]["machine"], "clock": "wall clock (perf_counter) on core 1 with core 0 idle (both locks held, one "
       "model per hold), median of 15 after 2 warm-ups, 1 torch thread", "rows": [r for d in docs for r in d["rows"]],
       "holds": {m: {"core0_busy": busy(e[0], e[-1]), "top_before": e[1:-1]} for m, e in env.items()}}
Path(out).write_text(json.dumps(res, indent=1) + "\n")
print(out, len(res["rows"]), "rows; core-0 busy share per hold:", {m: round(h["core0_busy"], 3) for m, h in res["holds"].items()})
PY
