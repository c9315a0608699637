"""FP8 plain decode of dense targets against the published engine rows that measure it (sdsl/data/published/decode.csv,
``row_set`` = ``fp8``), reported by ``sdsl validate published`` beside the bf16 rows.

Each row is priced as :func:`sdsl.validation.engine_fit.published_points` prices a plain-decode row — the row's engine
profile at its date (:func:`sdsl.validation.published_rows.row_engine`), the hardware's shipped latency calibration —
with its linear layers in fp8 where its ``dtype`` says fp8 (``Deployment.weight_dtype`` "fp8": fp8 bytes at the fp8
tensor-core peak with the format terms measured on NVIDIA's operator tables, ``LatencyParams.fp8_*``; activations, KV
cache and LM head bf16). Held out by construction: no term sdsl ships is fitted on these rows (the engine fits read the
``dev`` and ``engine`` sets only, :data:`sdsl.validation.published_rows.ENGINE_SETS`; the fp8 GEMM terms are fitted
on operator tables), so the shipped prediction is the leave-one-source-out one.

Errors are of speed, as in :mod:`sdsl.validation.published_validation`: measured / predicted − 1 of a TPOT,
predicted / measured − 1 of a speedup; positive means sdsl predicts faster. A ``speedup_fp8_vs_fp16`` row (one source's
FP8 tokens/s over its FP16 tokens/s, same GPU and setup) is priced as the ratio of two priced requests, each its
prefill (one forward of ``batch`` × ISL tokens) plus OSL decode steps at the mean context; its decode-only ratio is
beside it. Pairs — an fp8 TPOT row and the bf16 TPOT row of the same source, model, GPU, TP, batch and context, or a
speedup row — give the fp8/bf16 step-time ratio, measured and priced; its error is that of the speedup.

The headline is what ``sdsl predict --dtype fp8`` prices (:func:`sdsl.roofline.deployment.precision_options`).
Beside it, each row is also priced with every tensor in fp8 (``Deployment(dtype="fp8")``: fp8 bytes at the fp8 peak,
without the measured format terms; the CLI's ``--dtype fp8`` before it took the weight-format path) and on the
roofline alone (``ideal``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

__all__ = ["validate_fp8_decode", "FP8_GOAL", "ENGINE_ASSUMED"]

#: The goal: FP8 plain decode of a dense target priced within 10% of the engine rows that measure it (every row and
#: every fp8/bf16 ratio).
FP8_GOAL = 0.10
#: Engine columns without an execution profile of their own, priced with another engine's (the assumption recorded).
ENGINE_ASSUMED = {"nim": ("trtllm", "NIM names no backend engine on the page; priced with TensorRT-LLM's profile")}
SPEEDUP = "speedup_fp8_vs_fp16"


def _spec(row: dict, index: int):
    from sdsl.validation.published_rows import Unpriceable, interpret_decode

    spec = interpret_decode(row, index)
    if spec.engine_column in ENGINE_ASSUMED:
        engine, why = ENGINE_ASSUMED[spec.engine_column]
        spec = replace(spec, engine_column=engine, assumptions=spec.assumptions + [why])
    if spec.metric not in ("TPOT", SPEEDUP):
        raise Unpriceable(f"metric {spec.metric!r} is not a TPOT or an fp8/fp16 speedup")
    return spec


def _deployment(spec, profile, weights, dtype="bf16", engine=None, kv_dtype=None):
    """The row's deployment: ``weights`` "fp8" is what ``--dtype fp8`` builds
    (:func:`sdsl.roofline.deployment.precision_options`), with ``kv_dtype`` "fp8" what ``--kv-dtype fp8`` adds; None
    the compute ``dtype`` for every tensor ("fp8": the all-fp8 form compared beside it)."""
    from sdsl.roofline.deployment import Deployment, precision_options

    precision = {**precision_options(weights), "kv_dtype": kv_dtype} if weights else {"dtype": dtype}
    return Deployment(spec.hardware, tp=spec.tp, context=spec.context, engine=engine or profile, **precision)


def _decode_s(spec, dep) -> float:
    """Seconds of one plain decode step of the row's batch: the GPU step and the engine's host time."""
    from sdsl.speculation.step import price_step

    return float(np.asarray(price_step(spec.target, "ngram", dep, tau=1.0, gamma=0, batch=spec.batch).t_plain_s))


def _request_s(spec, dep, isl: int, osl: int) -> float:
    """A request's seconds: the prefill forward (batch × ISL tokens, empty cache) and OSL decode steps."""
    from sdsl.roofline.latency import step_time

    prefill = float(np.asarray(step_time(spec.target, dep, batch=spec.batch, q=isl, context=0).total_s))
    return prefill + osl * _decode_s(spec, dep)


def _isl_osl(row: dict) -> tuple[int, int]:
    from sdsl.validation.published_rows import ISL_OSL

    m = ISL_OSL.match(row.get("context_tokens", ""))
    return tuple(int(v.replace(",", "")) for v in m.groups()) if m else (0, 0)


def _priced(spec, row, profile) -> dict:
    """The row's metric priced: headline (fp8 format terms), decode-only, every tensor in fp8, ideal."""
    fp8, kv = spec.weight_dtype, spec.kv_dtype
    if spec.metric == "TPOT":
        ms = lambda dep: 1e3 * _decode_s(spec, dep)  # noqa: E731
        return {"predicted": ms(_deployment(spec, profile, fp8, kv_dtype=kv)), "predicted_decode_only": None,
                "predicted_all_fp8": ms(_deployment(spec, profile, None, dtype="fp8" if fp8 else "bf16")),
                "predicted_ideal": ms(_deployment(spec, profile, fp8, engine="ideal", kv_dtype=kv))}
    isl, osl = _isl_osl(row)
    ratio = lambda f, **kw: f(_deployment(spec, profile, None, **kw)) / f(  # noqa: E731
        _deployment(spec, profile, "fp8", **kw))
    request = lambda dep: _request_s(spec, dep, isl, osl)  # noqa: E731
    decode = lambda dep: _decode_s(spec, dep)  # noqa: E731
    all_fp8 = request(_deployment(spec, profile, None)) / request(_deployment(spec, profile, None, dtype="fp8"))
    return {"predicted": ratio(request), "predicted_decode_only": ratio(decode), "predicted_all_fp8": all_fp8,
            "predicted_ideal": ratio(request, engine="ideal")}


def _record(spec, row, profile) -> dict:
    from sdsl.validation.published_rows import source_key, speed_error

    out = {"row": spec.index, "source": spec.source, "source_key": source_key(spec.source), "engine": row["engine"],
           "profile": profile.name, "target": spec.target.name, "hardware": spec.hardware, "tp": spec.tp,
           "batch": spec.batch, "context": spec.context, "dtype": row["dtype"], "weight_dtype": spec.weight_dtype,
           "metric": spec.metric, "measured": spec.measured, "assumptions": list(spec.assumptions)}
    out.update(_priced(spec, row, profile))
    for key in ("", "_decode_only", "_all_fp8", "_ideal"):
        value = out[f"predicted{key}"]
        out[f"error{key}"] = None if value is None else speed_error(value, spec.measured, spec.metric)
    return out


def _pairs(rows: list[dict]) -> list[dict]:
    """fp8/bf16 step-time ratios: each fp8 TPOT row with its source's bf16 TPOT row of the same setup; each speedup
    row by itself (its step ratio is 1 / speedup). Error: that of the speedup (positive: sdsl's fp8 gains more)."""
    out = []
    key = lambda r: (r["source_key"], r["target"], r["hardware"], r["tp"], r["batch"], r["context"])  # noqa: E731
    bf16 = {key(r): r for r in rows if r["metric"] == "TPOT" and not r["weight_dtype"]}
    for r in rows:
        if r["metric"] == SPEEDUP:
            meas, pred, partner = 1.0 / r["measured"], 1.0 / r["predicted"], None
        elif r["weight_dtype"] and key(r) in bf16:
            b = bf16[key(r)]
            meas, pred, partner = r["measured"] / b["measured"], r["predicted"] / b["predicted"], b["row"]
        else:
            continue
        out.append({"source_key": r["source_key"], "fp8_row": r["row"], "bf16_row": partner, "target": r["target"],
                    "hardware": r["hardware"], "tp": r["tp"], "batch": r["batch"], "dtype": r["dtype"],
                    "measured_step_ratio": meas, "predicted_step_ratio": pred, "error": meas / pred - 1.0})
    return out


def validate_fp8_decode() -> dict:
    """Every row of the fp8 set priced (module docstring), the rows sdsl cannot price and why, the fp8/bf16 pairs,
    summaries (median |error|, worst, signed median) of the fp8 rows, the bf16 rows and the ratios, and the goal."""
    from sdsl.validation.published_rows import FP8_SET, Unpriceable, load_rows, row_engine
    from sdsl.validation.published_rows import summarize as _summarize

    rows, unpriced = [], []
    for i, row in enumerate(load_rows("decode", FP8_SET)):
        try:
            spec = _spec(row, i)
            profile = row_engine(spec)
        except Unpriceable as exc:
            unpriced.append({"row": i, "source": row["source"], "reason": str(exc)})
            continue
        rows.append(_record(spec, row, profile))
    pairs = _pairs(rows)
    fp8 = [r for r in rows if r["weight_dtype"]]
    summary = {"fp8_rows": _summarize(r["error"] for r in fp8),
               "fp8_tpot_rows": _summarize(r["error"] for r in fp8 if r["metric"] == "TPOT"),
               "fp8_rows_all_fp8": _summarize(r["error_all_fp8"] for r in fp8),
               "fp8_rows_ideal": _summarize(r["error_ideal"] for r in fp8),
               "bf16_rows": _summarize(r["error"] for r in rows if not r["weight_dtype"]),
               "ratios": _summarize(p["error"] for p in pairs)}
    worst_row = max((abs(r["error"]) for r in fp8), default=np.nan)
    worst_ratio = max((abs(p["error"]) for p in pairs), default=np.nan)
    goal = {"limit": FP8_GOAL, "worst_row_abs": float(worst_row), "worst_ratio_abs": float(worst_ratio),
            "rows_met": bool(worst_row <= FP8_GOAL), "ratios_met": bool(worst_ratio <= FP8_GOAL)}
    return {"rows": rows, "unpriced": unpriced, "pairs": pairs, "summary": summary, "goal": goal,
            "sources": sorted({r["source_key"] for r in rows})}
