"""One summary of signed relative errors, shared by every validation: the median beside the pooled
mean, the worst case and the signed bias (a median alone hides a systematically optimistic model)."""

from __future__ import annotations

import numpy as np

__all__ = ["summarize_errors"]


def summarize_errors(errors) -> dict:
    """Signed errors e = predicted/measured − 1 → n, median |e|, pooled (mean) |e|, median and mean signed
    e, the worst e (signed, at the largest |e|) and its size, and the share over-predicted (e > 0)."""
    e = np.asarray(list(errors), dtype=float)
    if e.size == 0:
        return {"n": 0}
    worst = e[np.argmax(np.abs(e))]
    return {"n": int(e.size), "median_abs": float(np.median(np.abs(e))), "pooled_abs": float(np.mean(np.abs(e))),
            "median_signed": float(np.median(e)), "mean_signed": float(np.mean(e)), "worst": float(worst),
            "worst_abs": float(abs(worst)), "share_over": float(np.mean(e > 0))}
