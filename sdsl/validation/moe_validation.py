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

How a row is read (its TP, EP, batch, context and the assumptions each row lists): :mod:`sdsl.validation.moe_rows`.
What prices a row's routed experts: the fused-MoE layer measured on a GPU's operator tables where it has them
(:func:`sdsl.roofline.step_ops.fused_moe_time`), else grouped GEMMs at the dense efficiencies; :func:`roofline_experts`
prices a deployment the second way for a before/after comparison, and :func:`mtp_concurrency_sweep` prices the published
MTP concurrency sweep with either form.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from sdsl.roofline.deployment import Deployment
from sdsl.errors import InvalidInputError
from sdsl.validation.moe_rows import (KV_HEADROOM, MOE_MODELS, MOE_SET, MoERow, first_profile,  # noqa: F401
                                     interpret_moe_decode, interpret_moe_speculative, moe_rows, notes_fields)
from sdsl.validation.published_rows import CHAT_CONTEXT, summarize

__all__ = ["MoERow", "notes_fields", "interpret_moe_decode", "interpret_moe_speculative", "moe_rows",
           "row_engine", "row_deployment", "price_moe_row", "source_label", "validate_moe", "verify_growth", "tp_sensitivity", "GOALS", "KV_HEADROOM",
           "moe_kernel_of", "roofline_experts", "with_experts", "ROOFLINE_EXPERTS", "mtp_concurrency_sweep", "MTP_SWEEP"]

#: The goals (median |error| of plain tokens/s and of the speculative/plain ratio; share of win/loss right).
GOALS = {"plain_median_abs_error_max": 0.15, "ratio_median_abs_error_max": 0.10, "outcome_share_right_min": 0.90,
         "rows_min": 10, "models_min": 2}


ROOFLINE_EXPERTS = " (roofline experts)"


def moe_kernel_of(deployment: Deployment, target) -> str:
    """What prices the target's routed experts on ``deployment``: the measured fused-MoE kernel
    (:func:`sdsl.roofline.step_ops.expert_provenance`) or the roofline's grouped GEMMs (transferred)."""
    from sdsl.roofline.step_ops import expert_provenance

    if not getattr(target, "is_moe", False):
        return "dense"
    if deployment.hardware.name.endswith(ROOFLINE_EXPERTS):
        return "roofline: the grouped GEMMs at the dense efficiencies (measured fused-MoE tables set aside)"
    return expert_provenance(target, deployment)


def roofline_experts(deployment: Deployment) -> Deployment:
    """``deployment`` with its MoE experts priced as before the measured fused-MoE tables: the roofline's grouped
    GEMMs at the dense efficiencies (the same hardware numbers and latency parameters under a name no table
    measures), for before/after comparisons."""
    from dataclasses import replace

    hw = replace(deployment.hardware, name=f"{deployment.hardware.name}{ROOFLINE_EXPERTS}")
    return deployment.replace(hardware=hw, params=deployment.params)


def with_experts(build, experts: str):
    """``build`` (row -> Deployment) with the routed experts priced as ``experts`` says: "measured" (the fused-MoE
    layer where the GPU has tables) as it is, "roofline" through :func:`roofline_experts`."""
    if experts not in ("measured", "roofline"):
        raise InvalidInputError(f"experts is 'measured' or 'roofline'; got {experts!r}.")
    return build if experts == "measured" else (lambda row: roofline_experts(build(row)))


def verify_growth(rows: list[dict], *, min_rows: int = 4, min_spread_s: float = 4e-3) -> list[dict]:
    """Does the step time grow with the verified tokens (and draft depth) as priced? Within one source, model, GPU,
    TP, batch and dataset, the measured step time of each speculative row (b·τ / tokens/s) against the priced one,
    fitted by least squares as measured = a + β·priced: β is the share of the priced growth that was measured (the
    distinct experts a larger tree reads, its extra drafting passes) and a the constant per step the model does not
    price (engine host time, fixed costs). A constant per step cancels in β, so β tests the mixture-of-experts
    pricing apart from the engine. Groups with at least ``min_rows`` rows whose priced step times spread over at
    least ``min_spread_s`` are ``informative`` (a narrow spread makes β mostly noise)."""
    groups: dict = {}
    for r in rows:
        if r["proposer"] is not None:
            groups.setdefault((r["source"], r["target"], r["hardware"], r["tp"], r["batch"], r["dataset"]), []).append(r)
    out = []
    for (source, target, hardware, tp, batch, dataset), members in groups.items():
        if len(members) < 2:
            continue
        measured = np.array([r["batch"] * r["accepted_length"] / r["measured"] for r in members])
        priced = np.array([r["t_step_s"] for r in members])
        design = np.stack([np.ones_like(priced), priced], axis=1)
        (a, beta), *_ = np.linalg.lstsq(design, measured, rcond=None)
        spread = float(priced.max() - priced.min())
        out.append({"source": source, "target": target, "hardware": hardware, "tp": tp, "batch": batch,
                    "dataset": dataset, "rows": [r["row"] for r in members], "slope": float(beta),
                    "intercept_s": float(a), "priced_spread_s": spread,
                    "measured_s": measured.tolist(), "priced_s": priced.tolist(),
                    "informative": len(members) >= min_rows and spread >= min_spread_s})
    return out


#: The published MTP concurrency sweep: SGLang's DeepSeek-V3 docs (sgl-project/sglang@0a9fc02,
#: docs/basic_usage/deepseek.md): «the decoding speed can be improved by **1.8x** for batch size 1 and **1.5x** for
#: batch size 32 respectively on H200 TP8 setting» (speculative.csv rows of that source; settings, context and
#: accepted length not stated, so these rows are not priced above). The sweep prices the page's usage example
#: (--speculative-num-steps 1 --speculative-num-draft-tokens 2: one MTP token) at the accepted length the
#: acceptance catalog holds for DeepSeek-V3's MTP module at depth 1 (the technical report's 85-90% second-token
#: acceptance: tau 1.85-1.90, row deepseek-v3-report-mtp-k1), in DeepSeek-V3's native fp8 weights.
MTP_SWEEP = {"target": "deepseek-v3", "hardware": "h200", "tp": 8, "gamma": 1, "tau": (1.85, 1.90),
             "batches": (1, 2, 4, 8, 16, 32, 64, 128), "measured": {1: 1.8, 32: 1.5}, "context": CHAT_CONTEXT}


def mtp_concurrency_sweep(engines=("ideal", "sglang-2025-10"), sweep: dict = MTP_SWEEP) -> list[dict]:
    """The priced MTP speed-up of the published concurrency sweep (:data:`MTP_SWEEP`) by batch, with the measured
    fused-MoE kernel and with the roofline's grouped GEMMs (:func:`roofline_experts`), per engine profile and
    accepted length: where speculation stops paying follows the expert term and the engine's host time."""
    from sdsl.catalog.models import get_model
    from sdsl.speculation.step import price_step

    out = []
    for engine in engines:
        base = Deployment(sweep["hardware"], tp=sweep["tp"], dtype="bf16", weight_dtype="fp8", expert_dtype="fp8",
                          context=sweep["context"], engine=engine)
        for experts, dep in (("measured fused MoE", base), ("roofline grouped GEMMs", roofline_experts(base))):
            for tau in sweep["tau"]:
                b = np.asarray(sweep["batches"])
                steps = [price_step(sweep["target"], "mtp", dep, tau=tau, gamma=sweep["gamma"], batch=int(x)) for x in b]
                out.append({"engine": dep.engine.name, "experts": experts, "tau": tau, "batch": b.tolist(),
                            "speedup": [float(s.speedup) for s in steps],
                            "t_plain_ms": [1e3 * float(s.t_plain_s) for s in steps],
                            "t_step_ms": [1e3 * float(s.t_step_s) for s in steps],
                            "moe_kernel": moe_kernel_of(dep, get_model(sweep["target"]))})
    return out


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
        first = first_profile(text)
        return first if first and date < first.date else resolve_engine(f"{text}:{date}")  # profile_after_row
    return resolve_engine(engine)


def row_deployment(spec: MoERow, engine=None, **deployment_options) -> Deployment:
    """The deployment a row runs on: its GPU, TP and EP, bf16 compute with the checkpoint's own weight format (as
    ``sdsl predict`` prices it, :func:`sdsl.plan.plan.deployment_for`; the row's ``experts`` format where it names
    one) and KV cache (``kv_cache``, where its recipe sets one), the row's context, the engine profile of
    :func:`row_engine` (default: the roofline alone); ``deployment_options`` passed to :class:`Deployment`."""
    from sdsl.plan.plan import deployment_for

    options = {"expert_dtype": spec.expert_dtype, "kv_dtype": spec.kv_dtype, **deployment_options}
    return deployment_for(spec.target, Deployment(spec.hardware, tp=spec.tp, ep=spec.ep, dtype="bf16",
                                                  context=spec.context, engine=row_engine(spec, engine), **options))


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


def _by_source(rows: list[dict], *, speculative: bool, key: str, group: str = "source") -> dict:
    """{value of ``group`` (the source; a proposer): the error summary of its ``class=moe`` rows' ``key``}, over the
    speculative or the plain rows, with the wins/losses right and the losses predicted on speculative ones."""
    groups: dict = {}
    for r in rows:
        if r["class"] == "moe" and (r["proposer"] is not None) == speculative:
            groups.setdefault(r[group], []).append(r)
    return {name: {**_summary(r[key] for r in part),
                   **({"outcome_right": sum(r["outcome_right"] for r in part),
                       "predicted_losses": sum(r["outcome_predicted"] == "loses" for r in part)} if speculative else {})}
            for name, part in groups.items()}


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
    claims["ratio_by_proposer"] = _by_source(rows, speculative=True, key="ratio_error", group="proposer")
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
