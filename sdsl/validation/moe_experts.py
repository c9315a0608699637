"""What prices the routed experts of an MoE row, and the published MTP concurrency sweep priced with either expert form
(``sdsl validate moe``'s companions, VALIDATION.md's mixture-of-experts section).

The roofline prices the routed experts as the fused-MoE layer measured on a GPU's operator tables where it has them
(:func:`sdsl.roofline.step_ops.fused_moe_time`), else as grouped GEMMs at the dense efficiencies;
:func:`roofline_experts` prices a deployment the second way for a before/after comparison.
"""

from __future__ import annotations

import numpy as np

from sdsl.errors import InvalidInputError
from sdsl.roofline.deployment import Deployment
from sdsl.validation.published_rows import CHAT_CONTEXT

__all__ = ["ROOFLINE_EXPERTS", "moe_kernel_of", "roofline_experts", "with_experts", "verify_growth", "MTP_SWEEP",
           "mtp_concurrency_sweep"]

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
