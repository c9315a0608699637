"""``sdsl validate moe``: price the published mixture-of-experts rows (sdsl/data/published, ``row_set`` = ``moe``).

Three claims are checked (VALIDATION.md, mixture-of-experts section): plain-decode tokens/s, the
speculative/plain ratio of the same source, and whether speculation wins (ratio > 1) or loses. Plain rows are
priced as b / T_target(b, 1, L); speculative rows with :func:`sdsl.speculation.step.price_step` — the row's
proposer shape (the released head's config, :mod:`sdsl.catalog.heads`), its chain or tree, and the measured
accepted length as τ (an **oracle input**: these rows test the step time, not the acceptance model). The
speculative/plain ratio is the priced speedup (both sides on the same deployment) against the source's own
speculative value over its own plain value.

Every row is priced on a deployment built by ``deployment_for(row)`` (default :func:`row_deployment`): by default
with the profile of the engine and build each row ran on (:func:`row_engine`), with ``engine=None`` on the roofline
alone; ``deployment_options`` go to :class:`~sdsl.roofline.deployment.Deployment`. Nothing is fitted to these rows.

Assumptions, the same for every row they touch (each row lists the ones it uses):

- context: a row stating ``ISL n, OSL m`` runs at the mean KV context n + m/2; MT-bench and GSM8K prompts are
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
- expert parallelism: ``ep`` 1 where the row says 1, none, or "default off".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace, field

import numpy as np

from sdsl.roofline.deployment import Deployment
from sdsl.errors import InvalidInputError
from sdsl.validation.moe_experts import (MTP_SWEEP, ROOFLINE_EXPERTS, moe_kernel_of, mtp_concurrency_sweep,  # noqa: F401
                                         roofline_experts, verify_growth, with_experts)
from sdsl.validation.published_rows import (CHAT_CONTEXT, RowSpec, Unpriceable, _hardware, _shape, load_rows,
                                            row_context, summarize)

__all__ = ["MoERow", "notes_fields", "interpret_moe_decode", "interpret_moe_speculative", "moe_rows",
           "row_engine", "row_deployment", "price_moe_row", "source_label", "validate_moe", "verify_growth", "tp_sensitivity", "GOALS", "KV_HEADROOM",
           "moe_kernel_of", "roofline_experts", "mtp_concurrency_sweep", "MTP_SWEEP"]

MOE_SET = ("moe",)
#: Published name -> catalog model (the catalog names the MoE rows already use, and the dense comparisons).
MOE_MODELS = {"qwen3-30b-a3b": "qwen3-30b-a3b", "qwen3-235b-a22b": "qwen3-235b-a22b", "llama-4-scout": "llama-4-scout",
              "llama-3.3-70b-instruct": "llama-3.3-70b", "qwen/qwen3-8b": "qwen3-8b", "deepseek-v3": "deepseek-v3",
              "deepseek-r1": "deepseek-r1", "deepseek-r1-0528": "deepseek-r1", "gpt-oss-20b": "gpt-oss-20b",
              "gpt-oss-120b": "gpt-oss-120b", "glm-4.5-air": "glm-4.5-air"}
#: Share of each GPU's memory left for the KV cache and activations when a row's TP is not stated.
KV_HEADROOM = 0.10
#: The goals (median |error| of plain tokens/s and of the speculative/plain ratio; share of win/loss right).
GOALS = {"plain_median_abs_error_max": 0.15, "ratio_median_abs_error_max": 0.10, "outcome_share_right_min": 0.90,
         "rows_min": 10, "models_min": 2}


@dataclass
class MoERow(RowSpec):
    """A priceable MoE row: the :class:`RowSpec` fields, the expert-parallel degree, the row's class
    (moe | dense-comparison), and on speculative rows the source's plain value and outcome."""

    ep: int = 1
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
    try:
        return _hardware(gpu, assumptions)
    except Unpriceable:
        raise Unpriceable(f"GPU {gpu.split(' (')[0]!r} is not in sdsl's hardware catalog") from None


def _ep(text: str, engine: str, assumptions: list) -> int:
    t = text.strip().lower()
    if t.startswith(("1", "none")) or "default off" in t:
        return 1
    if t == "not stated" and engine == "sglang":
        assumptions.append("assumed_ep: EP not stated, SGLang's default (off) taken")
        return 1
    raise Unpriceable(f"expert parallelism {text!r} is not stated as a degree")


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
                  hardware=hardware, tp=tp, batch=batch, context=row_context(row, CHAT_CONTEXT), metric=metric,
                  measured=measured, assumptions=assumptions, ep=ep,
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


def row_engine(spec: MoERow, engine=None):
    """The engine profile a row is priced with: ``"row"`` (``sdsl validate moe``'s default) the newest profile of the
    row's own engine dated no later than the row; ``None`` or ``"ideal"`` the roofline alone; an engine family
    (``"sglang"``) that engine's newest profile dated no later than the row (the family's newest where the row has no
    date); any other :func:`~sdsl.engine.profiles.resolve_engine` spec the same profile for every row."""
    from sdsl.engine.profiles import EngineProfile, engine_profiles, resolve_engine

    if engine is None or isinstance(engine, EngineProfile):
        return resolve_engine("ideal" if engine is None else engine)
    families = {p.engine for p in engine_profiles().values()}
    if str(engine).strip().lower() == "row":
        if spec.engine.strip().lower() not in families:
            raise InvalidInputError(f"row {spec.file}#{spec.index} ran on engine {spec.engine!r}, which has no "
                                    "execution profile; price it with --engine ideal or a profile `sdsl engines` lists")
        engine = spec.engine
    text, date = str(engine).strip().lower(), spec.notes.get("date", "")
    if text in families and text not in engine_profiles() and re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
        return resolve_engine(f"{text}:{date[:7]}")
    return resolve_engine(engine)


def row_deployment(spec: MoERow, engine=None, **deployment_options) -> Deployment:
    """The deployment a row runs on: its GPU, TP and EP, bf16 compute with the checkpoint's own weight format (as
    ``sdsl predict`` prices it, :func:`sdsl.plan.plan.deployment_for`), the row's context, the engine profile of
    :func:`row_engine` (default: the roofline alone); ``deployment_options`` passed to :class:`Deployment`."""
    from sdsl.plan.plan import deployment_for

    return deployment_for(spec.target, Deployment(spec.hardware, tp=spec.tp, ep=spec.ep, dtype="bf16",
                                                  context=spec.context, engine=row_engine(spec, engine),
                                                  **deployment_options))


def price_moe_row(spec: MoERow, deployment: Deployment, **price_options):
    """The :class:`~sdsl.speculation.priced_step.PricedStep` of one row (γ = 0 for a plain row; τ = the accepted length);
    ``price_options`` go to :func:`~sdsl.speculation.step.price_step`."""
    from sdsl.speculation.step import price_step

    if spec.proposer is None:
        return price_step(spec.target, "eagle3", deployment, tau=1.0, gamma=0, batch=spec.batch, **price_options)
    return price_step(spec.target, spec.proposer, deployment, tau=spec.accepted_length,
                      gamma=None if spec.tree else spec.gamma, tree=spec.tree, batch=spec.batch, **price_options)


def source_label(source: str) -> str:
    """A short name of a row's publication: owner/repo#N for an issue or PR, repo:file for a file at a commit."""
    key = source.split(" (")[0].strip()
    kind, _, rest = key.partition(":")
    if kind == "github":
        repo, _, path = rest.partition(":")
        return f"{repo.split('@')[0]}:{path.rsplit('/', 1)[-1]}"
    return rest if kind.startswith("github-") else key


def _record(spec: MoERow, step) -> dict:
    speculative = spec.proposer is not None
    predicted = float(step.tokens_per_s if speculative else step.plain_tokens_per_s)
    verify = step.verify_time if speculative else step.plain_time
    out = {"file": spec.file, "row": spec.index, "source": source_label(spec.source), "class": spec.row_class,
           "target": spec.target.name, "hardware": spec.hardware, "tp": spec.tp, "ep": spec.ep, "batch": spec.batch,
           "context": spec.context, "dataset": spec.dataset, "proposer": spec.proposer, "gamma": spec.gamma,
           "tree": None if spec.tree is None else [spec.tree.steps, spec.tree.topk, spec.tree.tokens],
           "accepted_length": spec.accepted_length, "measured": spec.measured, "predicted": predicted,
           "error": predicted / spec.measured - 1.0, "bound": str(np.asarray(verify.bound)),
           "distinct_experts": float(np.asarray(verify.distinct_experts)),
           "t_step_s": float(step.t_step_s if speculative else step.t_plain_s), "t_plain_s": float(step.t_plain_s),
           "assumptions": list(spec.assumptions)}
    if speculative:
        ratio = float(step.speedup)
        out.update({"plain_measured": spec.plain_measured, "ratio_measured": spec.ratio_measured,
                    "ratio_predicted": ratio, "ratio_error": ratio / spec.ratio_measured - 1.0,
                    "outcome": spec.outcome, "outcome_predicted": "wins" if ratio > 1.0 else "loses",
                    "t_verify_s": float(step.t_verify_s), "t_propose_s": float(step.t_propose_s),
                    "t_worker_s": float(step.t_worker_s), "t_host_s": float(step.t_host_s)})
        out["outcome_right"] = out["outcome_predicted"] == spec.outcome
    return out


def _summary(errors) -> dict:
    return summarize(errors, {"share_over": "share_over"})


def _claims(rows: list[dict]) -> dict:
    moe = [r for r in rows if r["class"] == "moe"]
    plain = [r for r in moe if r["proposer"] is None]
    spec = [r for r in moe if r["proposer"] is not None]
    out = {"plain": _summary(r["error"] for r in plain),
           "ratio": _summary(r["ratio_error"] for r in spec),
           "speculative_tokens_per_s": _summary(r["error"] for r in spec),
           "outcome": {"n": len(spec), "right": sum(r["outcome_right"] for r in spec),
                       "share_right": (sum(r["outcome_right"] for r in spec) / len(spec)) if spec else None,
                       "measured_losses": sum(r["outcome"] == "loses" for r in spec),
                       "predicted_losses": sum(r["outcome_predicted"] == "loses" for r in spec)},
           "models": sorted({r["target"] for r in moe}), "rows": len(moe)}
    bands = (("1", 1, 1), ("2-8", 2, 8), (">8", 9, 10 ** 9))
    out["plain_by_batch"] = {k: _summary(r["error"] for r in plain if lo <= r["batch"] <= hi) for k, lo, hi in bands}
    out["ratio_by_batch"] = {k: _summary(r["ratio_error"] for r in spec if lo <= r["batch"] <= hi) for k, lo, hi in bands}
    dense = [r for r in rows if r["class"] != "moe"]
    out["dense_comparison"] = {"plain": _summary(r["error"] for r in dense if r["proposer"] is None),
                               "ratio": _summary(r["ratio_error"] for r in dense if r["proposer"] is not None)}
    return out


def _by_source(rows: list[dict], *, speculative: bool, key: str) -> dict:
    """{source: the error summary of its ``class=moe`` rows' ``key``}, over its speculative or its plain rows."""
    groups: dict = {}
    for r in rows:
        if r["class"] == "moe" and (r["proposer"] is not None) == speculative:
            groups.setdefault(r["source"], []).append(r[key])
    return {source: _summary(errors) for source, errors in groups.items()}


def _goals(claims: dict) -> dict:
    g = GOALS
    ok = lambda s, key: bool(s.get("n")) and s["median_abs_error"] <= g[key]  # noqa: E731
    return {"plain": ok(claims["plain"], "plain_median_abs_error_max"),
            "ratio": ok(claims["ratio"], "ratio_median_abs_error_max"),
            "outcome": bool(claims["outcome"]["n"]) and claims["outcome"]["share_right"] >= g["outcome_share_right_min"],
            "coverage": claims["rows"] >= g["rows_min"] and len(claims["models"]) >= g["models_min"]}


def validate_moe(deployment_for=None, *, engine="row", label: str | None = None, price_options: dict | None = None,
                 experts: str = "measured", routing_locality: float | None = None, **deployment_options) -> dict:
    """Price every priceable MoE row on ``deployment_for(row)`` (default :func:`row_deployment` with ``engine`` —
    ``"row"``: the execution profile of each row's own engine and date; None: the roofline alone; ``"sglang"``:
    each row's SGLang build by its date, :func:`row_engine` — and
    ``deployment_options``; ``experts`` "measured": the routed experts as the measured fused-MoE kernel where the
    row's GPU has tables, "roofline": the roofline's grouped GEMMs everywhere, :func:`roofline_experts`), with
    ``price_options`` passed to
    :func:`~sdsl.speculation.step.price_step` (e.g. ``{"overhead_s": ...}``, a host time per speculative step):
    per-row records, the unpriced rows and why, the three claims (plain tokens/s, speculative/plain ratio,
    win/loss) over the ``class=moe`` rows, the dense comparisons apart, the verify-growth check
    (:func:`verify_growth`) and the goals. ``label`` names the step model in the output (default: "roofline, no
    engine host time" when nothing changes the deployment or the pricing). ``routing_locality``: every target's
    (``ModelSpec.routing_locality``; None: each model's own, the measured default)."""
    specs, unpriced = moe_rows()
    if routing_locality is not None:  # a ModelSpec checks the value (one sentence, InvalidInputError)
        specs = [replace(s, target=replace(s.target, routing_locality=routing_locality)) for s in specs]
    build = with_experts(deployment_for or (lambda s: row_deployment(s, engine, **deployment_options)), experts)
    deps = [build(s) for s in specs]
    rows = [{**_record(s, price_moe_row(s, d, **(price_options or {}))), "moe_kernel": moe_kernel_of(d, s.target)}
            for s, d in zip(specs, deps)]
    claims = _claims(rows)
    # each publication's rows apart: no source's misses hide behind another's rows
    claims["ratio_by_source"] = _by_source(rows, speculative=True, key="ratio_error")
    claims["plain_by_source"] = _by_source(rows, speculative=False, key="error")
    stated = [r for r in rows if r["class"] == "moe" and r["proposer"] is not None
              and not any(a.startswith("assumed_tp") for a in r["assumptions"])]
    claims["ratio_tp_stated"] = _summary(r["ratio_error"] for r in stated)
    plain = not deployment_options and deployment_for is None and not price_options
    profiles = sorted({d.engine.name for d in deps})
    if label is None and plain:
        label = ("roofline, no engine host time" if profiles == ["ideal"] else
                 f"roofline with the engine profile of each row ({', '.join(profiles)})") + \
            ("; routed experts as the roofline's grouped GEMMs" if experts == "roofline" else "") + \
            ("" if routing_locality is None else f"; routing locality {routing_locality:g} for every target")
    return {"model": label or "custom deployment or pricing", "engine_profiles": profiles,
            "oracle_inputs": ["accepted length (tau) of every speculative row"],
            "moe_kernels": sorted({r["moe_kernel"] for r in rows if r["class"] == "moe"}),
            "rows": rows, "unpriced": unpriced, "claims": claims, "verify_growth": verify_growth(rows),
            "goals": GOALS, "goals_met": _goals(claims)}


def tp_sensitivity(engine=None, experts: str = "measured", **deployment_options) -> list[dict]:
    """The rows priced at an assumed TP, re-priced at twice that TP: (row, tp, ratio error) at both (``engine`` as in
    :func:`row_engine`, default the roofline alone; ``experts`` as in :func:`validate_moe`)."""
    specs, _ = moe_rows()
    out = []
    for s in specs:
        if not any(a.startswith("assumed_tp") for a in s.assumptions) or s.proposer is None:
            continue
        errs = {}
        for tp in (s.tp, 2 * s.tp):
            dep = with_experts(lambda r: row_deployment(replace(r, tp=tp), engine, **deployment_options), experts)(s)
            errs[tp] = float(price_moe_row(s, dep).speedup) / s.ratio_measured - 1.0
        out.append({"file": s.file, "row": s.index, "target": s.target.name, "ratio_error_by_tp": errs})
    return out
