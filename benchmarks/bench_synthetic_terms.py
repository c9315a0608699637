"""Per-term CPU timings behind the synthetic sweep (issue 10), against sdsl's price of each term.

Run (one idle core, under the team's timing lock):

    flock /work/wt/core1.lock taskset -c 1 .venv/bin/python benchmarks/bench_synthetic_terms.py \
        --out benchmarks/results/synthetic_terms.json

Random-weight models at the sweep's shapes (fp32, one torch thread, process CPU time, fastest of
``--repeats``): the ``qwen2.5-0.5b``-shaped target and the ``smollm2-135m``-shaped draft with the target's
151,936-token vocabulary, each a forward over q new tokens per sequence at context 38 (the sweep's
prompt 32 + half of its 12 new tokens); the LM head alone (one GEMM tokens × d × V) and greedy
selection over V (argmax, one-hot) at the same vocabulary. Each timing sits next to sdsl's price of
the same work on hardware ``cpu`` with the shipped CPU calibration (``profiles/cpu.calib.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import machine  # noqa: E402  (also pins numeric libraries to one thread)

CONTEXT = 38


def _fastest(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def _forward_rows(model, spec, deployment, batches, qs, repeats):
    """A forward over q tokens per sequence after CONTEXT cached ones, measured and priced."""
    import torch

    from sdsl.speculation.proposers import forward_time

    rows = []
    for b in batches:
        cache = model.new_cache(b, CONTEXT + max(qs) + 2)
        model(torch.zeros(b, CONTEXT, dtype=torch.long), cache)
        for q in qs:
            tokens = torch.ones(b, q, dtype=torch.long)

            def run():
                model(tokens, cache)
                cache.set_lengths(torch.full((b,), CONTEXT, dtype=torch.long))

            rows.append({"model": spec.name, "batch": b, "q": q, "measured_s": _fastest(run, repeats),
                         "priced_s": float(forward_time(spec, deployment, batch=b, q=q, context=CONTEXT))})
    return rows


def _head_rows(deployment, widths, vocab, tokens_list, repeats):
    """The LM head GEMM and greedy selection over the vocabulary, measured and priced."""
    import torch

    from sdsl.speculation.proposers import _gemm_time
    from sdsl.torch.sampling import logits_to_probs

    rows = []
    for d in widths:
        w = torch.randn(vocab, d) * 0.02
        for n in tokens_list:
            x = torch.randn(1, n, d)
            logits = torch.nn.functional.linear(x, w)
            rows.append({"d_model": d, "vocab": vocab, "tokens": n,
                         "lm_head_s": _fastest(lambda: torch.nn.functional.linear(x, w), repeats),
                         "greedy_select_s": _fastest(lambda: logits_to_probs(logits).argmax(-1), repeats),
                         "lm_head_priced_s": float(_gemm_time(float(n), d, vocab, deployment))})
    return rows


# (in, out) weight shapes of neither sweep model, 3 MB to 268 MB in fp32 (the sweep's GEMMs span 1.3 MB to 545 MB)
HELD_OUT_GEMMS = ((768, 1024), (1024, 3072), (3072, 1536), (1536, 6144), (6144, 1536), (2048, 16384), (1024, 65536))
# the same weight size as the sweep's LM heads (896 x 151936 = 545 MB; 576 x 151936 = 350 MB), beyond the shapes above:
# three held-out shapes of 2^29 bytes (537 MB), appended to the profile with --add-large
LARGE_HELD_OUT_GEMMS = ((512, 262144), (1024, 131072), (2048, 65536))
CACHE_GEMM = (288, 1152)  # a byte-d288 family layer's MLP (1.3 MB, stays in cache)
COLD_BYTES = 256e6  # 8x the 32 MB L3: each timed call reads its weight from DRAM
GEMM_ROWS = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 28)


def gemm_rows(deployment, shapes, rows_list, repeats, cold_bytes: float = 0.0):
    """One fp32 GEMM (rows × n_in) · (n_in × n_out) per shape and row count: measured and priced. With
    ``cold_bytes`` the GEMM cycles through enough copies of its weight to stream that many bytes, so that
    every call reads its weight from memory as inside a forward pass (the mean call counts)."""
    import math

    import torch

    from sdsl.speculation.proposers import _gemm_time

    out = []
    for n_in, n_out in shapes:
        copies = max(1, math.ceil(cold_bytes / (4.0 * n_in * n_out)))
        weights = [torch.randn(n_out, n_in) * 0.02 for _ in range(copies)]
        for m in rows_list:
            x = torch.randn(m, n_in)

            def run():
                for w in weights:
                    torch.nn.functional.linear(x, w)

            out.append({"n_in": n_in, "n_out": n_out, "rows": m, "copies": copies,
                        "measured_s": _fastest(run, repeats) / copies,
                        "priced_s": float(_gemm_time(float(m), n_in, n_out, deployment))})
    return out


def write_gemm_profile(out: dict, path) -> None:
    """The held-out GEMM rows alone, the file :mod:`sdsl.validation.decoder.synthetic_terms` prices with."""
    from sdsl._io import atomic_write_text

    keep = {k: out[k] for k in ("machine", "clock", "repeats", "held_out_gemms", "cache_gemm")}
    keep["source"] = ("benchmarks/bench_synthetic_terms.py under `flock /work/wt/core1.lock taskset -c 1` on an idle "
                      "core: fp32 torch.nn.functional.linear, one thread, fastest of the repeats; weight shapes of "
                      "neither synthetic-sweep model")
    atomic_write_text(path, json.dumps(keep, indent=1) + "\n")


def add_large(path, repeats: int) -> dict:
    """Time :data:`LARGE_HELD_OUT_GEMMS` (DRAM-resident by size: one copy each) and append them to the profile."""
    import torch

    from sdsl._io import atomic_write_text
    from sdsl.roofline.deployment import Deployment
    from sdsl.validation.decoder.synthetic import cpu_params

    torch.set_num_threads(1)
    profile = json.loads(open(path).read())
    deployment = Deployment("cpu", dtype="fp32", context=CONTEXT, params=cpu_params())
    with torch.no_grad():
        rows = gemm_rows(deployment, LARGE_HELD_OUT_GEMMS, GEMM_ROWS, repeats, COLD_BYTES)
    done = {(r["n_in"], r["n_out"]) for r in rows}
    profile["held_out_gemms"] = [r for r in profile["held_out_gemms"] if (r["n_in"], r["n_out"]) not in done] + rows
    profile["large_gemms"] = {"machine": machine(), "shapes": [list(s) for s in LARGE_HELD_OUT_GEMMS],
                              "source": "benchmarks/bench_synthetic_terms.py --add-large, same lock, clock and repeats"}
    atomic_write_text(path, json.dumps(profile, indent=1) + "\n")
    print(json.dumps(rows, indent=1))
    return profile


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gemm-out", default=None, help="Also write the held-out GEMM rows here (profiles/cpu-gemm-rows.json).")
    ap.add_argument("--add-large", default=None, help="Only time LARGE_HELD_OUT_GEMMS and append them to this profile.")
    args = ap.parse_args(argv)
    if args.add_large:
        return add_large(args.add_large, args.repeats)

    import torch

    from sdsl.catalog.models import get_model
    from sdsl.roofline.deployment import Deployment
    from sdsl.validation.decoder.synthetic import cpu_params
    from sdsl.torch.synthetic import draft_spec_for, random_model

    torch.set_num_threads(1)
    target = get_model("qwen2.5-0.5b")
    draft = draft_spec_for(get_model("smollm2-135m"), target)
    deployment = Deployment("cpu", dtype="fp32", context=CONTEXT, params=cpu_params())
    out = {"machine": machine(), "context": CONTEXT, "clock": "process CPU time, 1 torch thread",
           "repeats": args.repeats}
    with torch.no_grad():
        out["held_out_gemms"] = gemm_rows(deployment, HELD_OUT_GEMMS, GEMM_ROWS, args.repeats, COLD_BYTES)
        out["cache_gemm"] = gemm_rows(deployment, (CACHE_GEMM,), GEMM_ROWS[:8], 5 * args.repeats)
        t_model = random_model(target, 0, 128)
        out["target"] = _forward_rows(t_model, target, deployment, (1, 4), (1, 2, 3, 4, 5, 6, 7), args.repeats)
        del t_model
        d_model = random_model(draft, 1, 128)
        out["draft"] = _forward_rows(d_model, draft, deployment, (1, 4), (1, 2), args.repeats)
        del d_model
        out["lm_head"] = _head_rows(deployment, (draft.d_model, target.d_model), target.vocab_size,
                                    (1, 2, 4, 8, 28), args.repeats)
    text = json.dumps(out, indent=1)
    if args.out:
        from sdsl._io import atomic_write_text

        atomic_write_text(args.out, text + "\n")
    if args.gemm_out:
        write_gemm_profile(out, args.gemm_out)
    print(text)
    return out


if __name__ == "__main__":
    main()
