"""The decay form: per-position acceptance when only a mean accepted length is known. Summary of the
acceptance notes in docs/model.md §2; its evidence is VALIDATION.md "Acceptance decay form".

Measured acceptance is front-loaded for draft models and EAGLE heads (later positions are accepted less
often, given the earlier ones were) and back-loaded for n-gram lookup (a matched n-gram keeps matching),
so the i.i.d. α of Leviathan et al. (ICML 2023, Eq. (1)) mis-predicts how τ moves with k. sdsl uses a
geometric decay of the *conditional* rate,

    p_i = min(1, a · r^{i−1}),  i = 1, 2, …,

with r shared (fitted on published per-position rates, :func:`fit_decay_ratio`) and a solved per
measurement so that τ(k) = 1 + Σ_{i≤k} Π_{j≤i} p_j equals the engine's mean accepted length exactly
(:func:`solve_decay`). r = 1 is the i.i.d. model. When even a = 1 cannot reach the measured τ with the
shared r < 1, r is raised (a = 1) until it does: every τ in [1, k + 1] maps to one vector.
The fit and its leave-one-source-out check are in VALIDATION.md "Acceptance decay form".
"""

from __future__ import annotations

import numpy as np

from sdsl.acceptance.tau import tau_from_conditional
from sdsl.errors import InvalidInputError

__all__ = ["DEFAULT_DECAY", "DECAY_GROUPS", "GROUP_DECAY", "MULTI_MODULE_MTP_TARGETS", "decay_group", "group_decay",
           "decay_conditional", "decay_tau", "solve_decay", "fit_decay_ratio"]

# r fitted on the model-based proposers' vectors (draft models, EAGLE/MTP heads; n-gram lookup excluded,
# its acceptance rises with position) of sdsl/data/published/per_position.csv; recomputed by
# tests/evidence/test_acceptance_fit.py; reported leave-one-source-out in VALIDATION.md.
DEFAULT_DECAY = 0.915

# r per proposer group, from the acceptance catalog's k-sweeps and per-position vectors (sdsl/data/acceptance;
# sdsl.fit.acceptance_fit.fit_decay_groups, recomputed by tests/unit/test_catalog_acceptance.py; held out by
# source in VALIDATION.md "Per-position rates across k"). Drafters trained to predict one position and run chained
# for deeper drafts lose acceptance with position: EAGLE-1 heads (EAGLE-2's dynamic tree drafts with the same head;
# three vLLM threads agree, r = 0.805-0.855 each fitted with the other two) and, faster, a target's single MTP module
# reused at every depth, which is what sdsl's MTP proposer prices (TensorRT-LLM's DeepSeek-R1 sweep k = 1-5 and vLLM's
# DeepSeek-V4 per-position rates: r = 0.735 and 0.615 each fitted on the other). Every other proposer (EAGLE-3,
# trained over several steps; block drafters; n-gram lookup; an MTP drafter with one module per position) is priced
# by the i.i.d. model, r = 1, no fitted term: fitting their r gives 1.015 and predicts held-out sweeps worse than
# r = 1. Proposer-aware paths use these; DEFAULT_DECAY stays the fit for an accepted length of an unnamed proposer.
DECAY_GROUPS = {"eagle1": ("eagle", "eagle2"), "mtp_chained": ("mtp",)}
GROUP_DECAY = {"eagle1": 0.825, "mtp_chained": 0.71, "other": 1.0}
#: Catalog targets whose MTP drafter has one module per draft position (nothing chained): the "other" group.
#: vLLM PR #48892: "Inkling multi-module MTP (one MTP layer per draft position)".
MULTI_MODULE_MTP_TARGETS = ("Inkling",)

_ITER = 64  # bisection halvings: below float resolution for a, r in [0, 1]


def decay_group(method: str, target: str | None = None) -> str:
    """The decay group of a catalog method or sdsl proposer kind: "eagle1" for EAGLE-1 heads, "mtp_chained" for an
    MTP module reused at every depth (not the drafter of a ``target`` in :data:`MULTI_MODULE_MTP_TARGETS`), else
    "other"."""
    if method == "mtp" and target in MULTI_MODULE_MTP_TARGETS:
        return "other"
    return next((g for g, methods in DECAY_GROUPS.items() if method in methods), "other")


def group_decay(method: str, ratios: dict | None = None, target: str | None = None) -> float:
    """r of ``method``'s group (:data:`GROUP_DECAY`, or ``ratios`` fitted elsewhere, e.g. with a source held out)."""
    return float((GROUP_DECAY if ratios is None else ratios)[decay_group(method, target)])


def decay_conditional(a, r, k: int) -> np.ndarray:
    """p_1..p_k = min(1, a·r^{i−1}) on a new last axis; ``a`` and ``r`` broadcast."""
    a = np.asarray(a, dtype=float)[..., None]
    r = np.asarray(r, dtype=float)[..., None]
    i = np.arange(int(k), dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        powers = np.where(i == 0, 1.0, r ** i)
    return np.minimum(1.0, a * powers)


def decay_tau(a, r, k: int) -> np.ndarray:
    """τ(k) = 1 + Σ_{i≤k} Π_{j≤i} p_j of the decay form (Leviathan Eq. (1) generalised per position)."""
    return tau_from_conditional(decay_conditional(a, r, k))


def _bisect(f, target, lo, hi):
    """Vectorised bisection for increasing f on [lo, hi]: f(x) = target."""
    lo, hi = np.broadcast_arrays(np.asarray(lo, dtype=float), np.asarray(hi, dtype=float))
    lo, hi = lo.copy(), hi.copy()
    for _ in range(_ITER):
        mid = 0.5 * (lo + hi)
        above = f(mid) > target
        hi = np.where(above, mid, hi)
        lo = np.where(above, lo, mid)
    return 0.5 * (lo + hi)


def solve_decay(tau_value, k: int, r=DEFAULT_DECAY):
    """(a, r′) of the decay form whose τ(k) equals ``tau_value`` (bonus included), vectorised.

    a solves τ(k; a, r) = τ on [0, 1] (τ increases with a). If τ(k; 1, r) still falls short (r < 1),
    a = 1 and r′ ∈ [r, 1] solves τ(k; 1, r′) = τ instead.
    """
    k = int(k)
    if k < 1:
        raise InvalidInputError(f"k must be at least 1 to fit a decay form; got {k}.")
    t = np.asarray(tau_value, dtype=float)
    r = np.asarray(r, dtype=float)
    if np.any(~np.isfinite(r)) or np.any(r <= 0):
        raise InvalidInputError(f"The decay ratio r must be positive; got {float(np.min(r)):g}.")
    bad = ~np.isfinite(t) | (t < 1) | (t > k + 1 + 1e-9)
    if np.any(bad):
        raise InvalidInputError(f"A mean accepted length of {float(t[bad].ravel()[0]):g} is impossible with k = {k} "
                                f"drafts (it lies in [1, k + 1] with the bonus token).")
    t, r = np.broadcast_arrays(np.minimum(t, k + 1.0), r)
    a = _bisect(lambda x: decay_tau(x, r, k), t, 0.0, 1.0)
    short = decay_tau(1.0, r, k) < t
    if np.any(short):
        r_raised = _bisect(lambda x: decay_tau(1.0, x, k), t, np.minimum(r, 1.0), 1.0)
        a = np.where(short, 1.0, a)
        r = np.where(short, r_raised, r)
    return (a[()], r[()]) if a.ndim == 0 else (a, r)


def fit_decay_ratio(marginals, *, grid=np.linspace(0.3, 1.5, 1201)) -> float:
    """Shared r minimising the squared error of marginal per-position rates over ``marginals`` (a list of
    measured marginal vectors, vLLM's convention), each with a solved so its τ(K) is reproduced exactly
    — the way the form is used when only a mean accepted length is known. Grid search over ``grid``."""
    if not marginals:
        raise InvalidInputError("Need at least one per-position vector to fit the decay ratio.")
    sse = np.zeros(grid.size)
    for m in marginals:
        m = np.asarray(m, dtype=float)
        t = np.full(grid.size, 1.0 + m.sum())
        a, r = solve_decay(t, m.size, grid)
        fitted = np.cumprod(decay_conditional(a, r, m.size), axis=-1)
        sse += ((fitted - m) ** 2).sum(axis=-1)
    return float(grid[int(np.argmin(sse))])
