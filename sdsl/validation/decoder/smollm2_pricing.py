"""sdsl's prediction for the SmolLM2-135M prompt-lookup rows (``sdsl validate decoder --smollm2``).

A row's predicted speedup is :func:`sdsl.speculation.throughput.predict` from its measured α (prompt lookup costs no
model forward), on hardware ``cpu`` with the given calibration (the shipped one is fitted to the byte-level
family and llama-68m: SmolLM2 is held out of it), with two changes that match what the row measures:

* tokens per step: only the first ``max_new`` tokens of a prompt count, so max_new / E[steps]
  (:func:`sdsl.speculation.finish.effective_tau`) in place of τ(α, γ) (Leviathan et al. 2023, Eq. 1);
* the CPU GEMM row factor κ(rows, weight bytes) (:mod:`sdsl.validation.decoder.synthetic_terms`, measured on weight
  shapes of neither SmolLM2's width nor the synthetic sweep's): verifying γ + 1 tokens runs every GEMM over
  γ + 1 rows, which this CPU's BLAS prices far above a GEMV.

``pred_speedup_roofline`` keeps the prediction without κ.
"""

from __future__ import annotations

__all__ = ["price_smollm2"]


def price_smollm2(result: dict, params, hardware: str = "cpu") -> dict:
    """``result`` (:func:`sdsl.torch.smollm2.smollm2_rows`) with ``pred_speedup``, ``pred_speedup_roofline`` and
    ``speedup_error`` (pred / measured − 1) on every row."""
    from sdsl.catalog.models import get_model
    from sdsl.roofline.deployment import Deployment
    from sdsl.speculation.finish import effective_tau
    from sdsl.speculation.throughput import predict
    from sdsl.validation.decoder.synthetic_terms import model_extra_s

    spec = get_model("smollm2-135m")
    deployment = Deployment(hardware, dtype="fp32", context=result["prompt_len"] + result["max_new"] // 2, params=params)
    extra = (lambda q: model_extra_s(spec, deployment, q)) if hardware == "cpu" else (lambda q: 0.0)
    rows = []
    for r in result["rows"]:
        g, alpha = r["gamma"], min(r["alpha"], 1 - 1e-9)
        p = predict(spec, None, deployment, gamma=g, alpha=alpha, batch=1)
        tokens = float(effective_tau(alpha, g, result["max_new"]))
        roofline = tokens * float(p.t_plain_s) / float(p.t_step_s)
        pred = tokens * (float(p.t_plain_s) + extra(1)) / (float(p.t_step_s) + extra(g + 1))
        rows.append(r | {"pred_speedup": pred, "pred_speedup_roofline": roofline, "speedup_error": pred / r["speedup"] - 1})
    return result | {"rows": rows, "hardware": hardware}
