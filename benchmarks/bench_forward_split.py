"""Where a reference-family forward's time goes (issue 11, batch-8 diagnosis): the whole forward warm and
after a cache flush, its decoder layers and GEMMs timed inside the forward, and the same layers and GEMMs
run on their own (warm, as the layer/operator profiles time them).

Run (timing: the idle core, under the lock):
    flock /work/wt/core1.lock taskset -c 1 .venv/bin/python benchmarks/bench_forward_split.py --out benchmarks/results/forward_split.json
    flock /work/wt/core1.lock taskset -c 1 .venv/bin/python benchmarks/bench_forward_split.py --synthetic --out benchmarks/results/forward_split_synthetic.json

For every family checkpoint and (batch, q) in {1, 8} x {1, 2, 5, 9} after 96 cached tokens (one torch
thread, wall clock on the otherwise idle core, median of 15 after 2 warm-ups):
``fwd_ms`` the forward back to back; ``fwd_cold_ms`` right after summing a 64 MiB buffer; with timing hooks
on every decoder layer and nn.Linear, ``in_layers_ms`` (sum of the layers) and ``in_linear_ms`` (sum of the
layers' GEMMs) inside the forward; ``solo_layers_ms`` / ``solo_linear_ms`` the same modules each run on its
own back to back (weights warm). ``--synthetic`` times random-weight models of shapes no family checkpoint
has (:data:`SYNTHETIC` and :data:`SYNTHETIC_KNEE`, 2-65 MiB of weights) instead; ``--models a,b`` times only those.
Idle-machine run (both cores quiet, one model per hold, ``benchmarks/run_forward_split_idle.sh`` loops and merges):
    flock /work/wt/idle.lock flock /work/wt/core1.lock taskset -c 1 .venv/bin/python benchmarks/bench_forward_split.py --synthetic --models synth-d224x4 --out part.json The gap in - solo splits the in-forward cost a layer profile misses into
GEMMs (weights re-read after other layers evicted them) and the rest.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import emit, family_benchmark, median_ms  # noqa: E402  (also pins numeric libraries to one thread)

CONTEXT, REPEATS = 96, 15


def wall_ms(fn, before=None) -> float:
    """Median wall-clock milliseconds of ``fn`` (``_machine.median_ms``)."""
    return median_ms(fn, before, repeats=REPEATS, clock=time.perf_counter)


SHAPES = [(b, q) for b in (1, 8) for q in (1, 2, 5, 9)]
#: ``--synthetic``: random-weight models of widths and depths of no family checkpoint, 2-65 MiB of weights
#: (d_model, n_layer; 32-wide heads, n_kv the largest divisor of n_head up to n_head // 3, d_ff = 8/3·d rounded to 32, vocab 256)
SYNTHETIC = ((112, 4), (160, 4), (224, 4), (224, 8), (320, 4), (160, 16), (320, 8), (384, 8), (448, 8))
#: more of them around the knee (6-25 MiB; timed with both cores idle for the residency curve, VALIDATION.md "Forward terms")
SYNTHETIC_KNEE = ((160, 6), (224, 3), (224, 5), (160, 10), (320, 3), (224, 6), (224, 12), (320, 6))
SYNTHETIC_SHAPES = ((1, 1), (1, 5), (8, 1), (8, 5))


def _synthetic_models() -> dict:
    from sdsl.torch.model import Shape, Transformer

    out = {}
    for d, n in SYNTHETIC + SYNTHETIC_KNEE:
        h = d // 32
        shape = Shape(n_layer=n, d_model=d, n_head=h, n_kv_head=max(k for k in range(1, max(1, h // 3) + 1) if h % k == 0), d_ff=int(round(8 / 3 * d / 32)) * 32,
                      vocab_size=256, head_dim=32, tied_embeddings=True, max_context=512)
        out[f"synth-d{d}x{n}"] = Transformer(shape).init_weights(0).eval()
    return out


def _hooked(model, forward):
    """(sum of layer ms, sum of the layers' GEMM ms) inside the forward: median over runs of per-run sums."""
    import torch

    marks = {"layer": [], "linear": []}

    def timer(kind):
        def pre(mod, args):
            mod._t0 = time.perf_counter()

        def post(mod, args, out):
            marks[kind].append(time.perf_counter() - mod._t0)
        return pre, post

    handles = []
    for layer in model.layers:
        for kind, mod in [("layer", layer)] + [("linear", m) for m in layer.modules() if isinstance(m, torch.nn.Linear)]:
            pre, post = timer(kind)
            handles += [mod.register_forward_pre_hook(pre), mod.register_forward_hook(post)]
    sums = {"layer": [], "linear": []}
    for i in range(REPEATS + 2):
        for k in marks:
            marks[k].clear()
        forward()
        if i >= 2:
            for k in marks:
                sums[k].append(sum(marks[k]))
    for h in handles:
        h.remove()
    return 1e3 * float(np.median(sums["layer"])), 1e3 * float(np.median(sums["linear"]))


def _solo(model, b, q, cache):
    """Each layer, and each of its GEMMs, run on its own back to back (weights warm): summed medians (ms)."""
    import torch

    from sdsl.torch.model import step_inputs

    cache.set_lengths(CONTEXT)
    step = step_inputs(model.rope_cos, model.rope_sin, b, q, cache)
    x = model.tok_embeddings(torch.zeros(b, q, dtype=torch.long))
    layers = linears = 0.0
    for i, layer in enumerate(model.layers):
        layers += wall_ms(lambda: layer(x, step, i))  # noqa: B023
        inputs = {}
        hooks = [m.register_forward_hook(lambda mod, a, o: inputs.__setitem__(mod, a[0]))
                 for m in layer.modules() if isinstance(m, torch.nn.Linear)]
        layer(x, step, i)
        for h in hooks:
            h.remove()
        for mod, inp in inputs.items():
            linears += wall_ms(lambda: mod(inp))  # noqa: B023
    return layers, linears


def main() -> None:
    import torch

    synthetic = "--synthetic" in sys.argv
    if synthetic:
        sys.argv.remove("--synthetic")
    only = None
    if "--models" in sys.argv:  # a comma-separated subset (one model per lock hold)
        i = sys.argv.index("--models")
        only = sys.argv[i + 1].split(",")
        del sys.argv[i:i + 2]
    args, models = family_benchmark(__doc__.splitlines()[0])
    if synthetic:
        models = _synthetic_models()
    if only is not None:
        models = {k: models[k] for k in only}
    flush = torch.ones(64 * 2**20 // 4)
    rows = []
    with torch.no_grad():
        for name, model in models.items():
            for b, q in SYNTHETIC_SHAPES if synthetic else SHAPES:
                cache = model.new_cache(b, CONTEXT + q + 1)
                model(torch.zeros(b, CONTEXT, dtype=torch.long), cache)
                x = torch.zeros(b, q, dtype=torch.long)

                def forward():
                    cache.set_lengths(CONTEXT)
                    model(x, cache)  # noqa: B023

                row = {"model": name, "weight_bytes": 4 * sum(p.numel() for p in model.layers.parameters() if p.ndim == 2),
                       "n_linear": sum(isinstance(m, torch.nn.Linear) for m in model.layers.modules()), "batch": b, "q": q, "context": CONTEXT, "fwd_ms": wall_ms(forward),
                       "fwd_cold_ms": wall_ms(forward, flush.sum)}
                row["in_layers_ms"], row["in_linear_ms"] = _hooked(model, forward)
                row["in_layers_cold_ms"], row["in_linear_cold_ms"] = _hooked(model, lambda: (flush.sum(), forward()))
                row["solo_layers_ms"], row["solo_linear_ms"] = _solo(model, b, q, cache)
                rows.append(row)
                print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}, file=sys.stderr, flush=True)
    emit(args, rows, "wall clock (perf_counter) on the idle core, median of 15 after 2 warm-ups, 1 torch thread")


if __name__ == "__main__":
    main()
