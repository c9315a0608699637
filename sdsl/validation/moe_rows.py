"""The published mixture-of-experts rows as :class:`MoERow` specs (sdsl/data/published, ``row_set`` = ``moe``), read for
``sdsl validate moe`` (:mod:`sdsl.validation.moe_validation`).

Assumptions, the same for every row they touch (each row lists the ones it uses):

- context: a row stating ``ISL n, OSL m`` (decode.csv's ``context_tokens``, a speculative row's notes ``context``) runs
  at the mean KV context n + m/2; MT-bench and GSM8K prompts are
  priced at the development set's chat context (512 tokens, :data:`sdsl.validation.published_rows.CHAT_CONTEXT`;
  not measured).
- a mean TPOT (ms) measured at concurrency b is compared as b · 1000 / TPOT tokens/s (``tpot_as_rate``): every
  request in flight decodes one token per step.
- "H100" without a form factor is the SXM part (as in the development set).
- SpecBundle's dashboard data (SGLang on H200) states no TP: priced on the fewest GPUs, a power of two, whose
  memory holds the bf16 weights with at least :data:`KV_HEADROOM` of it left (``assumed_tp``); the sensitivity
  to the next TP up is reported beside (:func:`tp_sensitivity`).
- SpecForge's harness (``benchmarks/bench_eagle3.py``: "mtbench:20 means only run 20 samples in the dataset";
  ``run_batch(..., num_threads=batch_size)``) runs at most as many requests at once as it has prompts, so a
  row's batch is capped at the prompts its dataset field names (``batch_capped``).
- tokens/s "incl. prefill" is compared with decode tokens/s (as in the development set).
- expert parallelism: the degree the row states (``assumed_ep`` where the row says it is inferred), 1 where it says
  none or "default off"; ``experts``: the routed experts' weight format where the checkpoint is not the catalog's
  (an nvfp4 checkpoint of DeepSeek-R1), the rest of the model in bf16; ``kv_cache``: the KV cache's element type where
  the run's recipe sets one (``fp8``: InferenceX's Blackwell DeepSeek-R1 recipes; read by
  :func:`~sdsl.validation.published_rows.row_kv_dtype`), else the compute dtype.
- a row dated before every profile of its engine is priced with that engine's first profile (``profile_after_row``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sdsl.roofline.deployment import Deployment
from sdsl.validation.published_rows import (CHAT_CONTEXT, RowSpec, Unpriceable, _hardware, _shape, load_rows,
                                            row_context, row_kv_dtype)

__all__ = ["MoERow", "MOE_SET", "MOE_MODELS", "KV_HEADROOM", "notes_fields", "interpret_moe_decode",
           "interpret_moe_speculative", "moe_rows", "first_profile"]

MOE_SET = ("moe",)
#: Published name -> catalog model (the catalog names the MoE rows already use, and the dense comparisons).
MOE_MODELS = {"qwen3-30b-a3b": "qwen3-30b-a3b", "qwen3-235b-a22b": "qwen3-235b-a22b", "llama-4-scout": "llama-4-scout",
              "llama-3.3-70b-instruct": "llama-3.3-70b", "qwen/qwen3-8b": "qwen3-8b", "deepseek-v3": "deepseek-v3",
              "deepseek-r1": "deepseek-r1", "deepseek-r1-0528": "deepseek-r1", "gpt-oss-20b": "gpt-oss-20b",
              "gpt-oss-120b": "gpt-oss-120b", "glm-4.5-air": "glm-4.5-air"}
#: Share of each GPU's memory left for the KV cache and activations when a row's TP is not stated.
KV_HEADROOM = 0.10


@dataclass
class MoERow(RowSpec):
    """A priceable MoE row: the :class:`RowSpec` fields, the expert-parallel degree, the row's class
    (moe | dense-comparison), and on speculative rows the source's plain value and outcome."""

    ep: int = 1
    expert_dtype: str | None = None  # the routed experts' weight format where the row's checkpoint has its own
    row_class: str = "moe"
    dataset: str = ""
    plain_measured: float | None = None
    outcome: str | None = None
    ratio_measured: float | None = None
    notes: dict = field(default_factory=dict)


_QUOTE = re.compile(r"quote=«.*?»", re.S)


def notes_fields(notes: str) -> dict:
    """The ``key=value`` fields of an MoE row's notes (``quote=«…»`` and the free text after it dropped)."""
    head = _QUOTE.split(notes, maxsplit=1)[0]
    out = {}
    for part in head.split("; "):
        key, sep, value = part.partition("=")
        if sep and re.fullmatch(r"[a-z_]+", key.strip()):
            out[key.strip()] = value.strip().rstrip(";")
    return out


def _model(name: str):
    from sdsl.catalog.models import get_model

    key = name.strip().lower()
    if key not in MOE_MODELS:
        raise Unpriceable(f"model {name!r} is not in sdsl's catalog")
    return get_model(MOE_MODELS[key])


def _gpu(gpu: str, assumptions: list) -> str:
    g = gpu.strip().lower()
    if g.startswith("not stated") or g.startswith("unstated"):
        raise Unpriceable("the GPU is not stated")
    if g.startswith("h100") and "sxm" not in g:
        assumptions.append("assumed_sxm: H100 form factor not stated, priced as H100-SXM")
    for blackwell in ("b200", "b300"):
        if g.startswith(blackwell):
            return blackwell
    if g.startswith("rtx pro 6000"):
        if "server" not in g:
            assumptions.append("assumed_server_edition: an RTX PRO 6000 Blackwell whose edition is not stated, priced "
                               "as the Server Edition the operator tables measured (the same GB202 die and 96 GB)")
        return "rtx-pro-6000"
    try:
        return _hardware(gpu, assumptions)
    except Unpriceable:
        raise Unpriceable(f"GPU {gpu.split(' (')[0]!r} is not in sdsl's hardware catalog") from None


def _ep(text: str, engine: str, assumptions: list) -> int:
    t = text.strip().lower()
    if m := re.match(r"(\d+)\b", t):
        if "assumed" in t:
            assumptions.append(f"assumed_ep: {text.strip()}")
        return int(m.group(1))
    if t.startswith("none") or "default off" in t:
        return 1
    if t == "not stated" and engine == "sglang":
        assumptions.append("assumed_ep: EP not stated, SGLang's default (off) taken")
        return 1
    raise Unpriceable(f"expert parallelism {text!r} is not stated as a degree")


def _context(row: dict, notes: dict) -> int:
    """ISL + OSL/2 from the row's ``context_tokens`` (decode.csv) or its notes' ``context`` (speculative.csv)."""
    return row_context({"context_tokens": row.get("context_tokens") or notes.get("context", "")}, CHAT_CONTEXT)


def first_profile(engine: str):
    """The oldest dated profile of engine family ``engine`` (:func:`sdsl.engine.profiles.engine_profiles`), or None:
    what prices a row older than every profile of its engine (``profile_after_row``)."""
    from sdsl.engine.profiles import engine_profiles

    dated = [p for p in engine_profiles().values() if p.engine == engine.strip().lower() and p.date]
    return min(dated, key=lambda p: p.date) if dated else None


def _profile_dates(engine: str, date: str, assumptions: list) -> None:
    """Records ``profile_after_row`` where the row predates every profile of its engine."""
    first = first_profile(engine)
    if first and re.fullmatch(r"\d{4}-\d{2}-\d{2}", date) and date < first.date:
        assumptions.append(f"profile_after_row: the row ({date}) predates every {engine} profile; priced with the "
                           f"first ({first.date})")


def _fits_tp(model, hardware: str) -> int:
    """The fewest GPUs (a power of two, at most 8) whose memory holds the weights with KV_HEADROOM left."""
    from sdsl.catalog.hardware import get_hardware
    from sdsl.roofline.latency import weight_bytes_per_gpu

    from sdsl.plan.plan import deployment_for

    capacity = get_hardware(hardware).mem_capacity
    for tp in (1, 2, 4, 8):
        if weight_bytes_per_gpu(model, deployment_for(model, Deployment(hardware, tp=tp))) <= (1.0 - KV_HEADROOM) * capacity:
            return tp
    raise Unpriceable(f"{model.name} does not fit on 8 {hardware} GPUs")


def _prompts_cap(dataset: str) -> int | None:
    m = re.fullmatch(r"[a-z0-9_]+:(\d+)", dataset.strip().lower())
    return int(m.group(1)) if m else None


def _common(row: dict, file: str, index: int, model_key: str) -> MoERow:
    notes = notes_fields(row["notes"])
    assumptions: list = []
    target = _model(row[model_key])
    hardware = _gpu(row["gpu"], assumptions)
    if row["tp"].strip().isdigit():
        tp = int(row["tp"])
    elif row["tp"].strip().lower().startswith("not stated") and "count not stated" in row["gpu"].lower():
        tp = _fits_tp(target, hardware)
        assumptions.append(f"assumed_tp: TP not stated, priced at tp={tp} (fewest GPUs holding the weights)")
    else:
        raise Unpriceable(f"tp {row['tp']!r} is not a tensor-parallel degree")
    ep = _ep(notes.get("ep", "not stated"), row.get("engine", ""), assumptions) if target.is_moe else 1
    _profile_dates(row.get("engine", ""), notes.get("date", ""), assumptions)
    batch = int(row["batch"])
    cap = _prompts_cap(notes.get("dataset", ""))
    if cap is not None and batch > cap:
        assumptions.append(f"batch_capped: batch {batch} runs at most the {cap} prompts of {notes['dataset']}")
        batch = cap
    metric, measured = row["metric"], float(row["value"])
    if metric == "TPOT":  # every one of the b requests decodes a token per step of TPOT ms
        assumptions.append("tpot_as_rate: a mean TPOT at concurrency b compared as b * 1000 / TPOT tokens/s")
        measured = batch * 1000.0 / measured
    elif metric not in ("decode_tok_per_s", "output_tok_per_s", "output_tok_per_s_incl_prefill"):
        raise Unpriceable(f"metric {metric!r} is not tokens/s of one deployment")
    return MoERow(file=file, index=index, source=row["source"], engine=row.get("engine", ""), target=target,
                  hardware=hardware, tp=tp, batch=batch, context=_context(row, notes), metric=metric,
                  measured=measured, assumptions=assumptions, ep=ep, expert_dtype=notes.get("experts"),
                  kv_dtype=row_kv_dtype(row),
                  row_class=notes.get("class", "moe"), dataset=notes.get("dataset", ""), notes=notes)


def interpret_moe_decode(row: dict, index: int) -> MoERow:
    """A plain-decode MoE row (or its dense comparison)."""
    return _common(row, "decode", index, "model")


def _plain_value(text: str) -> float:
    m = re.match(r"\s*([0-9.]+)\s*tok/s", text)
    if not m:
        raise Unpriceable(f"the plain baseline {text!r} is not tokens/s")
    return float(m.group(1))


def interpret_moe_speculative(row: dict, index: int) -> MoERow:
    """A speculative MoE row: EAGLE-3 or MTP, its chain or tree, the measured accepted length (oracle τ), and
    the same source's plain tokens/s, outcome and ratio."""
    draft = row["draft"].lower()
    if draft.startswith("eagle-3"):
        proposer = "eagle3"
    elif draft.startswith("mtp"):
        proposer = "mtp"
    else:
        raise Unpriceable(f"proposer {row['draft'].split(' (')[0]!r} has no sdsl proposer")
    if not row["mean_accepted_len"].strip():
        raise Unpriceable("no accepted length is stated, so tau is unknown")
    spec = _common(row, "speculative", index, "target")
    spec.proposer = proposer
    spec.accepted_length = float(row["mean_accepted_len"])
    _shape(row, proposer, spec)
    notes = spec.notes
    spec.plain_measured = _plain_value(notes.get("plain", ""))
    spec.outcome = notes.get("outcome")
    spec.ratio_measured = spec.measured / spec.plain_measured
    return spec


def moe_rows() -> tuple[list[MoERow], list[dict]]:
    """(priceable MoE rows, unpriced rows with the reason) over decode.csv and speculative.csv."""
    specs, unpriced = [], []
    for name, interpret in (("decode", interpret_moe_decode), ("speculative", interpret_moe_speculative)):
        for i, row in enumerate(load_rows(name, MOE_SET)):
            try:
                specs.append(interpret(row, i))
            except Unpriceable as exc:
                model = row.get("model") or row.get("target")
                unpriced.append({"file": name, "row": i, "source": row["source"], "model": model, "gpu": row["gpu"],
                                 "reason": str(exc)})
    return specs, unpriced
