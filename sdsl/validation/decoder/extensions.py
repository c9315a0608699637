"""What ``sdsl validate decoder --heads / --synthetic`` add to the decoder report.

``--heads``: :func:`sdsl.validation.decoder.heads.head_tree_validation` (trained draft head and token
trees on the largest family target, batch 1); its summary keys ``head_best_speedup``,
``tree_best_speedup`` and ``chain_best_speedup`` go to the top level, the rest under ``heads``.
``--synthetic``: :func:`sdsl.validation.decoder.synthetic.synthetic_sweep` (forced acceptance at real
shapes) under ``synthetic``, with ``median_speedup_error``, ``median_signed_error`` and ``rows``.
"""

from __future__ import annotations

__all__ = ["extend_report", "extension_lines"]


def extend_report(report: dict, *, heads: bool = False, synthetic: bool = False, smollm2=None,
                  cache_dir: str | None = ".cache", progress: bool = True) -> dict:
    """``report`` with the head/tree, synthetic and (``smollm2``: a GGUF path or folder) SmolLM2 prompt-lookup
    results added (each run cached under ``cache_dir``; SmolLM2 priced on the shipped CPU calibration)."""
    from pathlib import Path

    cache = (lambda name: str(Path(cache_dir) / name)) if cache_dir else (lambda name: None)
    if heads:
        from sdsl.validation.decoder.heads import head_tree_validation

        out = head_tree_validation(cache_path=cache("validate_decoder_heads.json"), progress=progress)
        for key in ("head_best_speedup", "tree_best_speedup", "chain_best_speedup"):
            report[key] = out.pop(key)
        report["heads"] = out
    if synthetic:
        from sdsl.validation.decoder.synthetic import synthetic_sweep

        report["synthetic"] = synthetic_sweep(cache_path=cache("validate_decoder_synthetic.json"), progress=progress)
    if smollm2:
        from sdsl.validation.decoder.validation import calibrated_params
        from sdsl.validation.decoder.row_cache import RowCache
        from sdsl.validation.decoder.smollm2_pricing import price_smollm2
        from sdsl.torch.smollm2 import smollm2_rows

        measured = smollm2_rows(smollm2, RowCache(cache("validate_decoder_smollm2.json")), temperature=0.0)
        report["smollm2"] = price_smollm2(measured, calibrated_params()[0])
    return report


def extension_lines(report: dict) -> list[str]:
    """Human-readable summary lines of the added results."""
    from sdsl._evidence import error_phrase

    lines = []
    if "heads" in report:
        h = report["heads"]
        lines.append(f"byte-d288, batch 1: best head {report['head_best_speedup']:.2f}x ({h['head_best']['tree']}, "
                     f"per-position acceptance {', '.join(f'{p:.2f}' for p in h['head_best']['per_position'])}); "
                     f"best tree {report['tree_best_speedup']:.2f}x ({h['tree_best']['proposer']} "
                     f"{h['tree_best']['tree']}); best chain {report['chain_best_speedup']:.2f}x "
                     f"({h['chain_best']['proposer']} {h['chain_best']['tree']})")
    if "synthetic" in report:
        s = report["synthetic"]
        lines.append(f"synthetic sweep ({s['settings']['target']} target, {s['n_rows']} rows): " + error_phrase(
            s, ("median |speedup error|", "median_speedup_error"), ("median signed", "median_signed_error", "+"),
            ("mean |error|", "mean_abs_error"), ("worst", "worst_error", "+")))
    for r in report.get("smollm2", {}).get("rows", []):
        lines.append(f"SmolLM2-135M prompt lookup, gamma {r['gamma']}: alpha {r['alpha']:.3f}, measured {r['speedup']:.2f}x, "
                     f"predicted {r['pred_speedup']:.2f}x ({100 * r['speedup_error']:+.0f}%)")
    return lines
