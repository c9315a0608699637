"""Re-price the committed ``sdsl validate decoder`` rows with the CPU forward terms (research.forward_forms).

No timing: the measured rows of ``benchmarks/results/validate_decoder.json`` are priced by the ``switch`` model plus
the forward terms, each (target, proposer) pair with its own held-out fit (no row of its models), and the terms
switched off one at a time (ablations, each refitted). About a minute on one core:

    taskset -c 0 .venv/bin/python -m research.reprice_decoder_forward --out benchmarks/results/validate_decoder_forward.json
    taskset -c 0 .venv/bin/python -m research.reprice_decoder_forward --residency idle --out benchmarks/results/validate_decoder_forward_idle.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

VARIANTS = {"forward": ("cold", "pack", "row"), "no_row": ("cold", "pack"), "no_pack": ("cold", "row"),
            "no_cold": ("pack", "row")}


def _price(data, spec, fits, rho):
    from sdsl.catalog.hardware import get_hardware
    from research.forward_forms import priced_speedup_forward
    from sdsl.validation.decoder.pricing import pair_models

    hw, s, out = get_hardware("cpu"), data["settings"], []
    for r in data["rows"]:
        t, d, g, b = r["target"], r["draft"], r["gamma"], r["batch"]
        form = fits[tuple(sorted(pair_models(t, d)))]
        kw = dict(overhead=r["overhead_s"], overhead_plain=r["overhead_plain_s"], max_new=s["max_new"], dram_ratio=rho)
        args = (spec[t], None if d == "prompt-lookup" else spec[d], g)
        pred = priced_speedup_forward(*args, min(r["alpha"], 1 - 1e-9), b, s["context_for_prediction"], hw, form, **kw)
        pooled = priced_speedup_forward(*args, r["alpha_pooled"], b, s["context_for_prediction"], hw, form, **kw)
        out.append({"target": t, "draft": d, "gamma": g, "batch": b, "speedup": r["speedup"], "pred_speedup": pred,
                    "speedup_error": pred / r["speedup"] - 1, "pred_speedup_pooled_alpha": pooled})
    return out


def _summary(rows) -> dict:
    from sdsl.validation.decoder.pricing import error_stats

    def stats(sel):
        return error_stats([r["pred_speedup"] for r in sel], [r["speedup"] for r in sel])

    by = lambda key: {str(k): stats([r for r in rows if key(r) == k]) for k in sorted({key(r) for r in rows})}  # noqa: E731
    regret = {}
    for t, b in sorted({(r["target"], r["batch"]) for r in rows}):
        same = [r for r in rows if r["target"] == t and r["batch"] == b]
        best, pick = max(same, key=lambda r: r["speedup"]), max(same, key=lambda r: r["pred_speedup_pooled_alpha"])
        regret[f"{t}|b{b}"] = {"best": best["speedup"], "pick": f"{pick['draft']} g{pick['gamma']}", "regret": 1 - pick["speedup"] / best["speedup"]}
    top = max(rows, key=lambda r: r["speedup"])
    return {"all": stats(rows), "by_batch": by(lambda r: r["batch"]), "by_batch_target": by(lambda r: f"{r['batch']}|{r['target']}"),
            "regret": regret, "optimizer_regret": regret[f"{top['target']}|b{top['batch']}"]["regret"]}


def main() -> None:
    from sdsl.validation.decoder.pricing import heldout_inputs, measured_dram_ratio, pair_models
    from sdsl.validation.decoder.validation import model_spec
    from research.forward_forms import SYNTHETIC_IDLE, fit_residency, heldout_form, heldout_form_capacity, sweep_residency
    from sdsl.torch.checkpoint import CHECKPOINT_DIR, list_checkpoints, load_checkpoint
    from sdsl._io import atomic_write_text

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="benchmarks/results/validate_decoder.json")
    ap.add_argument("--out", default=None)
    ap.add_argument("--residency", choices=("forwards", "idle", "sweep", "fitted"), default="forwards",
                    help="m(W) from the synthetic in-forward benchmark timed with core 0 busy (default), the same with both "
                         "cores idle (run and repeat pooled), the idle bandwidth sweep, or C chosen per held-out fit by the "
                         "kept forward rows (k from the synthetic benchmark; the full variant only)")
    ap.add_argument("--residency-files", default=None, help="with --residency idle: these comma-separated synthetic files instead")
    args = ap.parse_args()
    data = json.load(open(args.rows))
    spec = {p.stem: model_spec(load_checkpoint(p)[1]["spec"]) for p in list_checkpoints(CHECKPOINT_DIR)}
    inputs, rho = heldout_inputs(), measured_dram_ratio()
    idle = args.residency_files.split(",") if args.residency_files else SYNTHETIC_IDLE
    residency = {"sweep": sweep_residency, "idle": lambda: fit_residency(idle)}.get(args.residency, fit_residency)()
    pairs = sorted({tuple(sorted(pair_models(r["target"], r["draft"]))) for r in data["rows"]})
    result = {"residency_source": args.residency, "residency": residency | ({"files": [str(Path(p).relative_to(Path.cwd()) if Path(p).is_absolute() else p) for p in idle]} if args.residency == "idle" else {}), "rho": rho, "source_rows": args.rows, "variants": {}}
    for name, terms in VARIANTS.items():
        res = residency if "cold" in terms else dict(residency, capacity_bytes=math.inf)
        if args.residency == "fitted":
            if name != "forward":
                continue
            fitted = {held: heldout_form_capacity(held, spec, inputs, residency["sharpness"], rho) for held in pairs}
        else:
            fitted = {held: heldout_form(held, spec, inputs, res, rho, terms=tuple(t for t in terms if t != "cold")) for held in pairs}
        rows = _price(data, spec, {k: f for k, (f, _) in fitted.items()}, rho)
        result["variants"][name] = {"terms": list(terms), "summary": _summary(rows), "rows": rows,
                                    "fits": [{"held_out": list(k)} | meta | f.to_dict() for k, (f, meta) in fitted.items()]}
        s = result["variants"][name]["summary"]
        print(name, {k: round(v, 4) for k, v in s["all"].items()}, {b: (round(v["median_abs"], 4), round(v["median_signed"], 4))
                                                                     for b, v in s["by_batch"].items()}, flush=True)
    text = json.dumps(result, indent=1, default=lambda o: float(o) if isinstance(o, np.floating) else str(o))
    if args.out:
        atomic_write_text(args.out, text + "\n")


if __name__ == "__main__":
    main()
