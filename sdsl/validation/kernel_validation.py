"""``sdsl validate kernels``: the terms fitted on NVIDIA's measured operator tables (:mod:`sdsl.fit.opdb.kernels`),
each scored on rows its fit never saw.

Per GPU (H100-SXM, H200, B200 by default; also A100, L40S, B300, GB200, GB300, RTX PRO 6000) and op, the subset:

- dense GEMM per weight format (bf16, fp8, fp8_block, nvfp4 where measured), 1-8192 tokens: one model width
  held out at a time (every GEMM whose input width k is that value: a hidden size and the projections that
  read it), the form fitted on the other widths; bf16 fits the whole GEMM form, a low-precision format its
  three terms beside the bf16 fit of the same fold; errors also by regime (m <= 16: weight reads; m > 16; m <= 512, m > 512);
- decode attention (GQA/MQA/MHA) with a bf16 and an fp8 KV cache: one (heads, KV heads, head dim) shape held
  out at a time; decode MLA: one head count; all-reduce (custom kernel, graph and eager; NCCL): one GPU count;
- the shipped defaults (``default_params``) on every GEMM row per format, the attention a priced step charges on every
  bf16-KV decode-attention and MLA row (key ``shipped``; rows timed from L2 apart), and on H100/H200/B200 the MLA
  block a step prices against the tables' whole module (key ``mla_module``, :mod:`sdsl.fit.opdb.mla_module`);
- FP8 plain decode of Qwen3-8B (key ``fp8_decode``): one layer's measured fp8/bf16 kernel ratio beside the priced step's;
- the custom all-reduce the engine profiles take (key ``engine_allreduce``, :mod:`sdsl.fit.opdb.engines`);
- the fused MoE layer (:mod:`sdsl.fit.opdb.moe`), 1-512 tokens, MoE TP × EP <= 8, balanced and power-law routing:
  one model shape held out at a time, per engine kernel and weight format and pooled per format;
- the GEMM row tiles (key ``row_tiles``, :mod:`sdsl.fit.opdb.row_tiles`): the measured step one row past a tile
  edge against each candidate tile's; H100 only: Vidur's fp16 GEMMs and the tables' bf16 GEMMs at the (m, n, k) both
  measured, and the Vidur-fitted shipped defaults priced on the tables' rows (:mod:`sdsl.fit.opdb.sources`);
- beside every held-out summary (key ``floor``): the least worst |e| any form monotone in the work can reach on the
  rows (:func:`sdsl._evidence.monotone_floor`) and the held-out errors where that is within 25%.

Every summary: :func:`sdsl._evidence.summarize_errors` plus the 95th percentile; ``meets_goal``: median <= 10%, worst <= 25%.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdsl.fit.opdb.defaults import ENGINE
from sdsl._evidence import leave_one_group_out, monotone_floor, summarize_errors
from sdsl._result import Result
from sdsl.fit.opdb.mla_module import MLA_MODULE_GPUS, mla_module_check, mla_module_lines
from sdsl.fit.opdb.sources import DECODE_M, SMALL_M, vidur_lines, vidur_vs_tables
from sdsl.fit.opdb.row_tiles import row_tile_lines, row_tile_steps

__all__ = ["validate_kernels", "KernelValidation", "GOAL_MEDIAN", "GOAL_WORST", "DEFAULT_GPUS", "OPS"]
GOAL_MEDIAN, GOAL_WORST = 0.10, 0.25
DEFAULT_GPUS = ("h100_sxm", "h200_sxm", "b200_sxm")
OPS = ("gemm", "attention", "mla", "allreduce", "moe")
SMALL_KV, LARGE_KV, LONG_CONTEXT = 4 << 20, 64 << 20, 32768  # one layer's KV read: fixed cost / read; _long_blocks' tokens


def _summary(errors) -> dict:
    e = np.asarray(errors, dtype=float)
    out = summarize_errors(e)
    if e.size:
        out["p95_abs"] = float(np.quantile(np.abs(e), 0.95))
        out["meets_goal"] = bool(out["median_abs"] <= GOAL_MEDIAN and out["worst_abs"] <= GOAL_WORST)
    return out


def _floor(floors, errors) -> dict:
    """What the rows allow a form monotone in the token count (or context, or message size), beside the held-out
    errors: the tables' own lower bound on the worst |e| (:func:`sdsl._evidence.monotone_floor`), the rows whose
    series puts that bound above the worst-case goal, and the held-out errors of the other rows."""
    f, e = np.asarray(floors, dtype=float), np.asarray(errors, dtype=float)
    allows = f <= GOAL_WORST
    return {"worst_abs": float(f.max()) if f.size else 0.0, "rows_above_goal": int((~allows).sum()),
            "heldout_where_allowed": _summary(e[allows])}


def _stacked(folds) -> tuple:
    """The folds' per-row arrays (each fold a tuple of equal-length arrays) joined, one array per position."""
    return tuple(np.concatenate(parts) for parts in zip(*folds))


def _held_out(rows, column: str, score, groups=None) -> list:
    """``score(value, train, test)`` with each value of ``column`` (``groups``; default its sorted values) held out
    in turn; folds without test rows, or that ``score`` returns None for, are left out."""
    def fold(v):
        test = rows[rows[column] == v]
        return None if test.empty else score(v, rows[rows[column] != v], test)

    groups = sorted(set(rows[column])) if groups is None else groups
    return [f for f in leave_one_group_out(groups, fold).values() if f is not None]


def _provenance(rows) -> dict:
    return {k: sorted(set(rows[k])) for k in ("engine", "engine_version", "kernel_source")}


def _gemm(gpu: str, engine: str) -> dict:
    from sdsl.fit.opdb.kernels import FORMAT_TERMS, GEMM_FORMATS, GEMM_TERMS, fit_gemm, gemm_rows, hardware_of, predict_gemm

    hw = hardware_of(gpu)
    rows = gemm_rows(gpu, engine)
    if rows.empty:
        return {}
    bf16 = rows[rows["dtype"] == "bfloat16"]
    widths = sorted(set(bf16["k"]))
    base = {k: fit_gemm(bf16[bf16["k"] != k], hw, "bf16") for k in widths}  # one bf16 fit per fold
    full = fit_gemm(bf16, hw, "bf16")
    out = {}
    for dtype in sorted(set(rows["dtype"])):
        fmt = GEMM_FORMATS.get(dtype)
        if fmt is None:
            continue
        r = rows[rows["dtype"] == dtype]
        r = r.assign(floor=monotone_floor(r, ["n", "k"], "m"))

        def score(k, train, test, dtype=dtype, fmt=fmt):
            p = base[k] if dtype == "bfloat16" else fit_gemm(train, hw, fmt, base=base[k])
            e = predict_gemm(test, hw, fmt, p) / test["time_s"].to_numpy() - 1.0
            return e, test["m"].to_numpy(), test["floor"].to_numpy()

        folds = _held_out(r, "k", score, widths)
        e, m, f = _stacked(folds)
        fitted = full if dtype == "bfloat16" else fit_gemm(r, hw, fmt, base=full)
        native = "fp4" if fmt == "nvfp4" else "fp8"
        terms = ({**{k: getattr(fitted, k) for k in GEMM_TERMS}, "m_tile": fitted.m_tile} if dtype == "bfloat16" else
                 {f"{native}_{k}": getattr(fitted, f"{native}_{k}") for k in (*FORMAT_TERMS, "m_tile")})
        one = r[(r["m"] == 1)]
        ratio = None
        if dtype != "bfloat16":
            pair = one.merge(bf16[bf16["m"] == 1][["n", "k", "time_s"]], on=["n", "k"], suffixes=("", "_bf16"))
            if len(pair):
                ratio = float(np.median(pair["time_s"] / pair["time_s_bf16"]))
        out[dtype] = {"weight_format": fmt, "rows": int(len(r)), "held_out": "input width k", "folds": len(widths),
                      **_provenance(r), "heldout": _summary(e), "floor": _floor(f, e),
                      "small_m": _summary(e[m <= SMALL_M]), "large_m": _summary(e[m > SMALL_M]),
                      "decode_m": _summary(e[m <= DECODE_M]), "prefill_m": _summary(e[m > DECODE_M]),
                      "fitted": terms, "measured_time_vs_bf16_at_m1": ratio}
    return out


def _attention(gpu: str, engine: str, mla: bool) -> dict:
    from sdsl.fit.opdb.kernels import attention_rows, fit_attention, fit_gemm, gemm_rows, hardware_of, mla_rows, predict_attention

    hw = hardware_of(gpu)
    rows = (mla_rows if mla else attention_rows)(gpu, engine)
    if rows.empty:
        return {}
    gem = gemm_rows(gpu, "vllm", "bfloat16")
    eta_c, eta_s = ((g := fit_gemm(gem, hw, "bf16")).eta_compute, g.eta_memory * mla) if len(gem) else (0.7, 0.8 * mla)
    out = {}
    for kv in sorted(set(rows["kv_cache_dtype"])):
        r = rows[rows["kv_cache_dtype"] == kv]
        r = r.assign(floor=np.maximum(monotone_floor(r, ["shape", "batch_size"], "context"),
                                      monotone_floor(r, ["shape", "context"], "batch_size")))
        folds = _held_out(r, "shape", lambda _, train, test: None if train.empty else (
            predict_attention(test, hw, fit_attention(train, hw, eta_c, eta_s)) / test["time_s"].to_numpy() - 1.0,
            test["floor"].to_numpy()))
        if not folds:
            continue
        e, f = _stacked(folds)
        fit = fit_attention(r, hw, eta_c, eta_s)
        out[kv] = {"rows": int(len(r)), "held_out": "head count" if mla else "heads/KV heads/head dim",
                   "folds": len(folds), **_provenance(r), "heldout": _summary(e), "floor": _floor(f, e),
                   "fitted": {k: float(v) for k, v in fit.to_dict().items()}}
    return out


def _allreduce(gpu: str) -> dict:
    from sdsl.fit.opdb.kernels import (ALLREDUCE_MAX_BYTES, NCCL_TERMS, allreduce_rows, fit_allreduce, fit_nccl, hardware_of,
                                   predict_allreduce, predict_nccl)

    hw = hardware_of(gpu)
    out = {}
    for engine in ("vllm", "sglang", "trtllm", "nccl"):
        rows = allreduce_rows(gpu, engine)
        rows = rows[rows["message_size"] <= ALLREDUCE_MAX_BYTES]
        for mode in sorted(set(rows["mode"])):
            r = rows[rows["mode"] == mode]
            r = r.assign(floor=monotone_floor(r, ["num_gpus"], "message_size"))
            nccl = mode == "nccl"

            def score(_, train, test, nccl=nccl):
                if train.empty:
                    return None
                pred = (predict_nccl(test, hw, fit_nccl(train, hw)) if nccl else
                        predict_allreduce(test, hw, fit_allreduce(train, hw, "custom")))
                return pred / test["time_s"].to_numpy() - 1.0, test["floor"].to_numpy()

            folds = _held_out(r, "num_gpus", score)
            if not folds:
                continue
            e, f = _stacked(folds)
            if nccl:
                p = fit_nccl(r, hw)
                fitted = {k: getattr(p, k) for k in NCCL_TERMS}
            else:
                fitted = fit_allreduce(r, hw, "custom").to_dict()
            out[f"{engine}:{mode}"] = {"rows": int(len(r)), "held_out": "GPU count", "folds": len(folds),
                                       **_provenance(r), "heldout": _summary(e), "floor": _floor(f, e), "fitted": fitted}
    return out


def _moe(gpu: str) -> dict:
    """The fused MoE layer's closed form (:mod:`sdsl.fit.opdb.moe`), one model shape held out at a time, per engine
    kernel and weight format and pooled per format (``all:<format>``)."""
    from sdsl.fit.opdb.moe import moe_kernel_validation

    return {key: {**entry, "heldout": _summary(errors), "floor": _floor(floors, errors)}
            for key, (entry, errors, floors) in moe_kernel_validation(gpu).items()}


def _shipped(gpu: str, engine: str) -> dict:
    """What a user of ``engine``'s newest profile gets (``default_params``), priced on every GEMM row of the tables per
    format and, as a step prices it, on every bf16-KV decode-attention and MLA row (``long_blocks``: few blocks of a long
    context); ``forms``: which form priced each (GQA's is fitted on these rows, in sample; MLA's roofline on none)."""
    from sdsl.fit.opdb.kernels import (GEMM_FORMATS, attention_rows, gemm_rows, hardware_of, mla_rows,
                                       predict_attention_step, predict_gemm)
    from sdsl.roofline.latency_params import calibration_provenance, default_params

    hw = hardware_of(gpu)
    params = default_params(hw, engine)  # the newest profile of the tables' engine: on the H100 its bf16 GEMMs too
    rows = gemm_rows(gpu, engine)
    out = {"calibration": calibration_provenance(hw), "source": params.source, "gemm": {},
           "forms": {"attention": "measured form, in sample" if params.attn_eta_kv else "roofline + one launch",
                     "mla": "roofline + one launch"}}
    for dtype in sorted(set(rows["dtype"])):
        if dtype in GEMM_FORMATS and dtype != "fp8_block":
            r = rows[rows["dtype"] == dtype]
            out["gemm"][dtype] = _summary(predict_gemm(r, hw, GEMM_FORMATS[dtype], params) / r["time_s"].to_numpy() - 1.0)
    for op, att in (("attention", attention_rows(gpu, engine)), ("mla", mla_rows(gpu, "sglang"))):
        att = att[att["kv_cache_dtype"] != "fp8"]
        if len(att):  # the step's own attention op on the bf16-KV rows, all and by one layer's KV read
            err = predict_attention_step(att, hw, params) / att["time_s"].to_numpy() - 1.0
            kv = att["kv_bytes"].to_numpy()
            out[op] = {"all": _summary(err), f"kv <= {SMALL_KV >> 20} MiB": _summary(err[kv <= SMALL_KV]),
                       f"kv > {LARGE_KV >> 20} MiB": _summary(err[kv > LARGE_KV])}
            if "l2_resident" in att and (hot := att["l2_resident"].to_numpy(dtype=bool)).any():  # timed from L2 (opdb.collection)
                out[op].update({"cache beyond L2": _summary(err[~hot]), "L2-resident (timed L2-hot)": _summary(err[hot])})
            if op == "attention" and params.attn_eta_kv:
                out["long_blocks"] = _long_blocks(att, hw, params)
    return out


def _long_blocks(att, hw, params) -> dict:
    """1, 2, 4 or 8 (sequence, KV head) blocks at :data:`LONG_CONTEXT` tokens or more: the measured read's share of the
    bandwidth (KV bytes over the time less t0) and the step's attention error with and without B_blk, medians."""
    from sdsl.fit.opdb.kernels import predict_attention_step

    att = att[att["context"] >= LONG_CONTEXT]
    blocks, time = (att["batch_size"] * att["num_key_value_heads"]).to_numpy(), att["time_s"].to_numpy()
    cols = {"read_share": att["kv_bytes"].to_numpy() / (time - params.attn_t0) / hw.mem_bandwidth,
            **{f"median_signed_{f}": predict_attention_step(att, hw, p) / time - 1.0
               for f, p in (("with", params), ("without", params.replace(attn_block_bandwidth=0.0)))}}
    return {n: {"rows": int((blocks == n).sum()), **{k: float(np.median(v[blocks == n])) for k, v in cols.items()}}
            for n in (1, 2, 4, 8)}


#: The dense layer the fp8 check composes from measured kernels: Qwen3-8B at TP 1 (every GEMM on the tables' grid):
#: QKV 4096 -> 6144, output 4096 -> 4096, gate and up 4096 -> 12288 each, down 12288 -> 4096; GQA 32/8/128.
FP8_LAYER = ("qwen3-8b", ((6144, 4096), (4096, 4096), (12288, 4096), (12288, 4096), (4096, 12288)), (32, 8, 128))
FP8_BATCHES = (1, 8, 32)
FP8_CONTEXT = 1024


def _fp8_layer(gpu: str, engine: str) -> list[dict]:
    """FP8 against bf16 plain decode of a dense target: the ratio of one layer's measured kernels (its five GEMMs in
    fp8 and in bf16, plus the same bf16-KV attention) beside the ratio of sdsl's whole priced steps, per batch."""
    from sdsl.fit.opdb.kernels import attention_rows, gemm_rows, hardware_of
    from sdsl.roofline.deployment import Deployment
    from sdsl.roofline.latency import step_time

    model, shapes, (h, kv, hd) = FP8_LAYER
    hw = hardware_of(gpu)
    att = attention_rows(gpu, engine, "bfloat16")
    out = []
    for b in FP8_BATCHES:
        t = {}
        for dtype in ("bfloat16", "fp8"):
            g = gemm_rows(gpu, engine, dtype)
            g = g[g["m"] == b]
            picked = [g[(g["n"] == n) & (g["k"] == k)]["time_s"] for n, k in shapes]
            if g.empty or any(x.empty for x in picked):
                break
            t[dtype] = sum(float(x.iloc[0]) for x in picked)
        a = att[(att["batch_size"] == b) & (att["context"] == FP8_CONTEXT) & (att["num_heads"] == h)
                & (att["num_key_value_heads"] == kv) & (att["head_dim"] == hd)]
        if len(t) < 2 or a.empty:
            continue
        measured = (t["fp8"] + float(a["time_s"].iloc[0])) / (t["bfloat16"] + float(a["time_s"].iloc[0]))
        steps = {w: float(step_time(model, Deployment(hw, weight_dtype=w), batch=b, context=FP8_CONTEXT).total_s)
                 for w in (None, "fp8")}
        priced = steps["fp8"] / steps[None]
        out.append({"batch": b, "measured_layer_ratio": measured, "priced_step_ratio": priced,
                    "error": priced / measured - 1.0})
    return out


def validate_kernels(gpus=None, ops=OPS, engine: str = ENGINE) -> "KernelValidation":
    """Leave-one-shape-out errors of every fitted kernel term per GPU and op (module docstring). ``gpus``:
    database names (default :data:`DEFAULT_GPUS`); ``ops``: a subset of :data:`OPS`; ``engine``: whose GEMM and
    attention tables are fitted (MLA: SGLang's, the engine whose decode MLA kernel the tables time)."""
    from sdsl.fit.opdb import OPDB_VERSION

    gpus = tuple(gpus or DEFAULT_GPUS)
    out = {"source": f"aiconfigurator-core {OPDB_VERSION} (NVIDIA, Apache-2.0), shipped subset sdsl/data/opdb",
           "goal": {"median_abs": GOAL_MEDIAN, "worst_abs": GOAL_WORST}, "engine": engine, "gpus": {}}
    for gpu in gpus:
        res = {}
        if "gemm" in ops:
            res["gemm"] = _gemm(gpu, engine)
        if "attention" in ops:
            res["attention"] = _attention(gpu, engine, mla=False)
        if "mla" in ops:
            res["mla"] = _attention(gpu, "sglang", mla=True)
            if gpu in MLA_MODULE_GPUS:  # the whole block a step prices against the tables' measured module
                out.setdefault("mla_module", {})[gpu] = mla_module_check(gpu)
        if "allreduce" in ops:
            res["allreduce"] = _allreduce(gpu)
        if "moe" in ops:
            res["moe"] = _moe(gpu)
        out["gpus"][gpu] = res
        if "gemm" in ops:
            out.setdefault("shipped", {})[gpu] = _shipped(gpu, engine)
            out.setdefault("row_tiles", {})[gpu] = row_tile_steps(gpu, engine)
            if "attention" in ops:
                out.setdefault("fp8_decode", {})[gpu] = _fp8_layer(gpu, engine)
    if "h100_sxm" in gpus and "gemm" in ops:
        out["vidur_h100"] = vidur_vs_tables()
    if "allreduce" in ops:  # what the engine profiles price their custom all-reduce with (sdsl.fit.opdb.engines)
        from sdsl.fit.opdb.engines import PROFILE_ENGINES, measured_custom_allreduce

        out["engine_allreduce"] = {e: measured_custom_allreduce(e) for e in sorted(set(PROFILE_ENGINES.values()))}
    return KernelValidation(out)


@dataclass(frozen=True)
class KernelValidation(Result):
    """:func:`validate_kernels`' result: ``data`` the plain summary (``to_dict``), one report line per fitted
    term and fold kind, then the shipped defaults, FP8 decode, the profiles' all-reduce and the H100 sources."""

    data: dict

    def to_dict(self) -> dict:
        return self.data

    def report(self) -> str:
        d = self.data
        lines = [f"Measured kernels: {d['source']}; held-out errors (goal: median <= "
                 f"{100 * d['goal']['median_abs']:.0f}%, worst <= {100 * d['goal']['worst_abs']:.0f}%)"]
        for gpu, res in d["gpus"].items():
            lines.append(f"{gpu}:")
            lines += [_entry_line(op, key, r) for op, entries in res.items() for key, r in entries.items()]
        return "\n".join(lines + _extra_lines(d))

    def plot(self, ax=None):
        """Median and worst held-out error per GPU, op and fit (:func:`sdsl.plots.results.plot_heldout_errors`)."""
        from sdsl.plots.results import plot_heldout_errors
        rows = [(f"{gpu} {op} {key}", r["heldout"]) for gpu, res in self.data["gpus"].items()
                for op, entries in res.items() for key, r in entries.items()]
        goal = self.data["goal"]
        return plot_heldout_errors([k for k, _ in rows], [h["median_abs"] for _, h in rows],
                                   [h["worst_abs"] for _, h in rows], (goal["median_abs"], goal["worst_abs"]), ax=ax)


def _entry_line(op: str, key: str, r: dict) -> str:
    """One fitted term's held-out summary, the tables' floor under the worst case (a monotone form's least worst
    |e|) and the worst where that floor is within the goal, with the GEMM's small/large-m split on a second line."""
    h = r["heldout"]
    versions = ",".join(f"{e} {v}" for e in r["engine"] for v in r["engine_version"])
    mark = "ok" if h.get("meets_goal") else "MISSED"
    fl = r.get("floor", {})
    allowed = fl.get("heldout_where_allowed", {})
    where = f"{100 * allowed['worst_abs']:5.1f}%" if allowed.get("n") else " none"
    floor = f"floor {100 * fl['worst_abs']:5.1f}%, worst where it allows {where}  " if fl else ""
    line = (f"  {op:<10} {key:<16} median {100 * h['median_abs']:5.1f}%  p95 {100 * h['p95_abs']:5.1f}%  "
            f"worst {100 * h['worst_abs']:6.1f}%  bias {100 * h['median_signed']:+5.1f}%  {mark:<6} {floor}"
            f"({r['rows']} rows, {r['folds']} {r['held_out']} folds; {versions}"
            + (f"; {r['order_dependent_rows_left_out']} rows left out: experts set by a sort order)"
               if r.get("order_dependent_rows_left_out") else ")"))
    if "small_m" in r:
        line += (f"\n{'':30}m <= 16: median {100 * r['small_m']['median_abs']:.1f}%, worst "
                 f"{100 * r['small_m']['worst_abs']:.1f}%; m > 16: median {100 * r['large_m']['median_abs']:.1f}%, "
                 f"worst {100 * r['large_m']['worst_abs']:.1f}%")
        if r.get("measured_time_vs_bf16_at_m1"):
            line += f"; measured time / bf16 at m = 1: {r['measured_time_vs_bf16_at_m1']:.2f}x"
    return line


def _extra_lines(d: dict) -> list[str]:
    """The report's lines after the per-GPU fits: shipped defaults, FP8 decode, the profiles' all-reduce, H100."""
    lines = []
    for gpu, sh in d.get("shipped", {}).items():
        cal = sh["calibration"]
        lines.append(f"{gpu} shipped defaults ({cal['kind']}: {'; '.join(cal['sources']) or 'transferred'}) on the "
                     "tables' GEMMs: " + ", ".join(f"{k} median {100 * v['median_abs']:.1f}% bias "
                                                   f"{100 * v['median_signed']:+.1f}%" for k, v in sh["gemm"].items()))
        for op in ("attention", "mla"):
            if op in sh:
                lines.append(f"{gpu} shipped step's decode {op} ({sh['forms'][op]}) on the tables' bf16-KV rows: "
                             + "; ".join(f"{k} median {100 * v['median_abs']:.1f}% worst {100 * v['worst_abs']:.1f}% "
                                         f"bias {100 * v['median_signed']:+.1f}%" for k, v in sh[op].items()))
    for gpu, rows in d.get("fp8_decode", {}).items():
        lines.append(f"{gpu} FP8 plain decode, Qwen3-8B (fp8/bf16: measured layer kernels vs sdsl's step): " + ", ".join(
            f"b{r['batch']} {r['measured_layer_ratio']:.2f} vs {r['priced_step_ratio']:.2f} ({100 * r['error']:+.1f}%)"
            for r in rows))
    for engine, m in d.get("engine_allreduce", {}).items():
        lines.append(f"engine profiles' custom all-reduce, {engine} {m['version']} ({m['kernel_source']}, H100/H200, "
                     f"CUDA graph): a = {1e6 * m['latency_s']:.2f} us, eta = {m['eta']:.3f}; GPU count held out: median "
                     f"{100 * m['heldout_median_abs']:.1f}%")
    return lines + row_tile_lines(d.get("row_tiles")) + vidur_lines(d.get("vidur_h100")) + mla_module_lines(d.get("mla_module"))
