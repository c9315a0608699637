"""Robust, deployable picks: the tolerance within which speculation lengths are one choice, the batch → k table
that prefers the smaller k and the fewest ranges, what a target cannot run, and where a pick goes past the k its
acceptance was measured at.

**Tolerance.** Two speculation lengths whose predicted tokens/s lie within :data:`K_TOLERANCE` (5%) of each other
are one choice. sdsl cannot tell them apart: the speculative tokens/s it predicts are off by a median 13% held out
(VALIDATION.md, engine speculative tokens/s) and a catalog acceptance by a median 21%; what separates neighbouring k
at one batch is mostly where batch × (k + 1) crosses a GEMM row tile (every 64 or 128 rows) or a CUDA-graph capture
size, a sawtooth of 1-15%. 5% is under half the median error: a table keeps a change of k only where it is worth more than the
model can resolve. For Llama-3.1-8B + EAGLE-3 on the default vLLM profile (H100) the table over batch 1-256 has 3 ranges
at 5% (k 5, 3, 2), 6 at 3%, 42 with no tolerance (2, 4 and 27 under vLLM's V1 runner, whose exposed speculative host
time flattens the sawtooth); batch 32 prices k = 5 (192 GEMM rows) at 2.50x, k = 6 (224 rows) at 2.43x. Those profiles
price the H100's GEMMs on vLLM 0.24's measured kernels, which step a median +3.1% one row past a tile edge, as 64-row
tiles price (VALIDATION.md "GEMM row tiles on the operator tables"); priced on Vidur's 2024 GEMMs instead (128-row
tiles, 18-51% slower at 65-512 rows), the same profile's table has 10 ranges at 5% (VALIDATION.md "The two sources on
the H100").

**Table.** :func:`robust_k_ranges` covers the batches with the fewest ranges whose k is within the tolerance of the
per-batch best at every batch of its range (greedy interval covering: from the first uncovered batch, the k that
stays within the tolerance longest, the smaller k on a tie; greedy furthest reach is optimal for covering a line
with intervals). Whether to speculate follows the best k (k = 0 where plain decoding is fastest, a k ≥ 1 wherever
speculation pays at all), so the table and "where speculation pays" agree; the tolerance chooses among k ≥ 1.

**What cannot run.** :func:`deploy_blocker` names why a target cannot run a proposer (MTP without MTP modules, a
draft model with another vocabulary); such a proposer is ranked and shown, marked, last, and never the pick.

**Measured k.** :func:`measured_k` is the largest k the acceptance behind a proposer was measured at (a catalog
row's k, an ``--accepted-at``); a pick beyond it is extrapolated by the one rule across k that every command uses
(the proposer group's decay ratio, :func:`sdsl.acceptance.group_decay`: 0.825 for EAGLE-1 heads, 0.71 for a single
MTP module reused at every depth, 1 for the rest; VALIDATION.md "Per-position rates across k") and flagged: MTP
measured at k = 1 and carried to k = 2-3 that way is 6-8% above LMSYS's DeepSeek-V3 runs at those k (18-31% i.i.d.),
and an MTP drafter with one module per position carried i.i.d. to k = 8 is 6-12% above its own runs (Inkling).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = ["K_TOLERANCE", "acceptable_k", "robust_k_ranges", "table_k_index", "holding_range", "deploy_blocker",
           "measured_k", "beyond_measured"]

#: Relative tokens/s within which two speculation lengths are one choice (module docstring).
K_TOLERANCE = 0.05


def acceptable_k(tokens_per_s: np.ndarray, tolerance: float = K_TOLERANCE, gammas=None) -> np.ndarray:
    """(k, batch) mask: k's tokens/s is within ``tolerance`` of the best k at that batch (-inf: k not draftable).
    With ``gammas``, whether to speculate follows the best: k = 0 is acceptable only where it is the best, and a
    k ≥ 1 only where some k ≥ 1 is (so the table speculates exactly where speculation pays)."""
    tps = np.asarray(tokens_per_s, dtype=float)
    best = np.max(tps, axis=0, keepdims=True)
    ok = np.isfinite(tps) & (tps >= (1.0 - float(tolerance)) * best)
    if gammas is None:
        return ok
    plain = np.asarray(gammas) == 0
    if not plain.any():
        return ok
    plain_best = (tps[plain].max(axis=0) >= best[0])[None, :]
    return np.where(plain[:, None], plain_best, ok & ~plain_best)


def _runs(ok: np.ndarray) -> np.ndarray:
    """(k, batch): how many consecutive batches from each batch on k stays acceptable (0 where it is not)."""
    n = ok.shape[1]
    idx = np.arange(n)
    # index of the next unacceptable batch at or after each batch (n when none)
    stops = np.where(~ok, idx[None, :], n)
    next_stop = np.minimum.accumulate(stops[:, ::-1], axis=1)[:, ::-1]
    return np.where(ok, next_stop - idx[None, :], 0)


def robust_k_ranges(tokens_per_s: np.ndarray, gammas, batches, tolerance: float = K_TOLERANCE) -> list[dict]:
    """The batch → k table {batch_min, batch_max, k} of one proposer from its tokens/s on (k, batch) (``gammas``
    ascending, ``batches`` ascending): the fewest ranges whose k is within ``tolerance`` of the per-batch best
    everywhere in the range, the smaller k on a tie (module docstring). ``tolerance = 0`` is the per-batch best."""
    g = np.asarray(gammas).astype(int)
    b = np.asarray(batches).astype(int)
    order = np.argsort(g, kind="stable")  # ties in reach go to the smaller k
    runs = _runs(acceptable_k(np.asarray(tokens_per_s)[order], tolerance, g[order]))
    rows, i = [], 0
    while i < b.size:  # one pass per range: a handful, not one per batch
        j = int(np.argmax(runs[:, i]))
        end = i + int(runs[j, i])
        rows.append({"batch_min": int(b[i]), "batch_max": int(b[end - 1]), "k": int(g[order][j])})
        i = end
    return rows


def table_k_index(tokens_per_s: np.ndarray, gammas, batches, tolerance: float = K_TOLERANCE) -> np.ndarray:
    """(batch,) index into ``gammas`` of the k that :func:`robust_k_ranges`' table gives each batch: the k to deploy
    there, within ``tolerance`` of the per-batch best."""
    g = np.asarray(gammas).astype(int)
    rows = robust_k_ranges(tokens_per_s, g, batches, tolerance)
    where = {int(k): i for i, k in enumerate(g)}
    lengths = np.searchsorted(np.asarray(batches), [r["batch_max"] for r in rows], side="right")
    return np.repeat([where[r["k"]] for r in rows], np.diff(np.concatenate([[0], lengths])))


def holding_range(tokens_per_s: np.ndarray, gammas, batches, k: int, batch: int,
                  tolerance: float = K_TOLERANCE) -> dict | None:
    """{batch_min, batch_max}: the contiguous batches around ``batch`` at which ``k`` stays within ``tolerance``
    of the best k (None when it is not within it at ``batch``)."""
    g, b = np.asarray(gammas).astype(int), np.asarray(batches).astype(int)
    ok = acceptable_k(tokens_per_s, tolerance, g)[int(np.flatnonzero(g == int(k))[0])]
    at = int(np.flatnonzero(b == int(batch))[0])
    if not ok[at]:
        return None
    lo = at - int(np.argmin(ok[at::-1])) + 1 if not ok[: at + 1].all() else 0
    hi = at + int(np.argmin(ok[at:])) - 1 if not ok[at:].all() else b.size - 1
    return {"batch_min": int(b[lo]), "batch_max": int(b[hi])}


def deploy_blocker(target, proposer) -> str | None:
    """Why ``target`` cannot run ``proposer`` as engines do, or None: MTP on a target that ships no MTP module
    (``ModelSpec.mtp_layers``), a separate draft model whose vocabulary is not the target's (sizes more than 1% apart:
    one tokenizer is often padded to different embedding sizes, e.g. Qwen2.5's 151,936 and 152,064)."""
    if proposer.kind == "mtp" and target.mtp_layers == 0:
        return f"{target.name} ships no MTP module, so no engine's mtp method can run it"
    draft = getattr(proposer, "model", None)
    vocab = getattr(draft, "vocab_size", None)
    if proposer.kind == "draft" and vocab and abs(vocab - target.vocab_size) > 0.01 * target.vocab_size:
        return (f"{draft.name}'s vocabulary ({vocab} tokens) is not {target.name}'s ({target.vocab_size}): standard "
                "speculative decoding needs the target's tokenizer")
    return None


def measured_k(acceptance) -> int | None:
    """The largest k the acceptance was measured at: a measured per-position vector's length, an accepted length's
    k (``Acceptance.measured_k``), the largest chain k of the catalog rows behind a default (of those that state one);
    None for a what-if α or SDSL's plane (no k was measured)."""
    if acceptance is None:
        return None
    if acceptance.tail_ratio is None:
        return acceptance.k
    if getattr(acceptance, "measured_k", None):
        return int(acceptance.measured_k)
    rows = (acceptance.evidence or {}).get("rows")
    if not rows:
        return None
    methods = tuple((acceptance.evidence or {}).get("methods") or ())
    row_k = _catalog_row_k(methods) if methods else {}
    if not all(r in row_k for r in rows):  # rows of other methods: look in the whole catalog
        row_k = _catalog_row_k(None)
    ks = [row_k[r] for r in rows if r in row_k]
    return max(ks) if ks else None


@lru_cache(maxsize=None)
def _catalog_row_k(methods: tuple | None) -> dict:
    """Catalog row id → its chain k, where the row states one (:func:`sdsl.acceptance.catalog.catalog_rows`; only the
    rows of ``methods`` when given, :func:`sdsl.acceptance.catalog.method_rows`)."""
    from sdsl.acceptance.catalog import catalog_rows, method_rows

    rows = catalog_rows() if methods is None else method_rows(methods)
    return {r.row_id: int(r.k) for r in rows if r.k is not None and r.k == r.k}


def beyond_measured(name: str, acceptance, k: int) -> str | None:
    """A sentence when ``k`` is past the k ``acceptance`` was measured at (:func:`measured_k`), else None."""
    at = measured_k(acceptance)
    if at is None or k is None or int(k) <= at:
        return None
    return (f"{name} at k = {int(k)} is beyond the largest k its acceptance was measured at ({at}); tau there is "
            "extrapolated across k (sdsl's one rule: the proposer group's decay ratio, fitted for EAGLE-1 heads and a "
            "chained MTP module, i.i.d. for the rest), which errs where this drafter's acceptance falls with depth "
            "otherwise than its group's")
