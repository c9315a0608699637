"""The table of ranked speculative configurations: one row schema for draft models, heads, lookup and trees.
Summary of docs/model.md §3.5; the schema is documented field by field in docs/json.md.

A row is one (proposer, k or tree, batch, acceptance level) read from that proposer's
:class:`~sdsl.speculation.priced_step.PricedStep`: the ranking's table (:meth:`ProposerRanking.records`), its CSV
(:meth:`ProposerRanking.to_frame`), the tree ranking's rows and ``sdsl optimize --json``'s ``configs`` all
carry exactly :data:`ROW_KEYS`.
"""

from __future__ import annotations

import numpy as np

from sdsl.speculation.bands import BAND_FIELDS
from sdsl.speculation.priced_step import ARRAY_FIELDS

__all__ = ["ROW_KEYS", "config_row", "frame_columns", "report_rows", "tokens_band", "tpot_band", "speedup_band"]

#: Every row's keys, in order (docs/json.md).
ROW_KEYS = ("proposer", "draft", "draft_params", "gamma", "best_gamma", "best_gamma_gain", "tree", "batch", "acceptance_index", "alpha",
            "acceptance_source", "tau", "tokens_per_s", "plain_tokens_per_s", "speedup", "tpot_s", "tokens_per_s_low",
            "tokens_per_s_high", "plain_tokens_per_s_low", "plain_tokens_per_s_high", "speedup_low", "speedup_high",
            "tpot_s_low", "tpot_s_high", "bound", "t_draft_s", "t_propose_s", "t_verify_s", "t_worker_s", "t_host_s", "t_step_s", "cost_ratio",
            "distinct_experts", "engine")
_PRICED = ("tau", "tokens_per_s", "plain_tokens_per_s", "speedup", "tpot_s", *BAND_FIELDS, "bound", "t_draft_s",
           "t_propose_s", "t_verify_s", "t_worker_s", "t_host_s", "t_step_s", "cost_ratio", "distinct_experts")


def _draft(proposer) -> tuple:
    """(draft model name, its parameters) of a draft-model proposer with a catalog shape, else (None, None)."""
    from sdsl.catalog.models import ModelSpec

    model = getattr(proposer, "model", None)
    return (model.name, float(model.total_params)) if isinstance(model, ModelSpec) else (None, None)


def _engine(step) -> str | None:
    """The name of the engine profile that priced ``step``."""
    return None if step.engine is None else step.engine.name


def _full(step, name: str, shape):
    if name == "distinct_experts":  # routed experts per MoE layer of the verify forward (0 for a dense target)
        return np.broadcast_to(np.asarray(step.verify_time.distinct_experts, dtype=float), shape)
    return np.broadcast_to(np.asarray(getattr(step, name)), shape)


def _plain_full(step, name: str, shape):
    """The same column for plain decoding (no speculation): what a k = 0 row is. The priced step at γ = 0 would
    still charge a speculative worker's host time and draft extend, which a step without speculation does not
    run; the ranking prices k = 0 as plain (:func:`sdsl.plan.ranking.rank_proposers`) and its rows say so."""
    plain = {"tau": 1.0, "tokens_per_s": step.plain_tokens_per_s, "speedup": 1.0, "tpot_s": step.t_plain_s,
             "t_draft_s": 0.0, "t_propose_s": 0.0, "t_verify_s": step.t_plain_s, "t_worker_s": 0.0, "t_host_s": 0.0,
             "t_step_s": step.t_plain_s, "tokens_per_s_low": step.plain_tokens_per_s_low,
             "tokens_per_s_high": step.plain_tokens_per_s_high, "speedup_low": 1.0, "speedup_high": 1.0,
             "tpot_s_low": step.t_plain_s * step.plain_tokens_per_s / step.plain_tokens_per_s_high,
             "tpot_s_high": step.t_plain_s * step.plain_tokens_per_s / step.plain_tokens_per_s_low}
    if name == "distinct_experts":
        source = step.plain_time if step.plain_time is not None else step.verify_time
        return np.broadcast_to(np.asarray(source.distinct_experts, dtype=float), shape)
    return np.broadcast_to(np.asarray(plain[name]), shape) if name in plain else _full(step, name, shape)


def _column(step, name: str, shape, gammas_on_shape):
    """Column ``name`` on ``shape``, plain decoding where k = 0."""
    return np.where(gammas_on_shape == 0, _plain_full(step, name, shape), _full(step, name, shape))


def config_row(proposer, step, index: tuple, acceptance, *, gamma, batch: int, acceptance_index: int,
               tree=None, best_gamma=None, best_gamma_gain=None) -> dict:
    """One row (:data:`ROW_KEYS`) of ``step`` at ``index``. ``alpha`` is the i.i.d. α with the same τ at that k
    (Leviathan Eq. (1) inverted; the α itself for an i.i.d. acceptance), None for a tree; ``best_gamma`` the
    proposer's best k at this batch and ``best_gamma_gain`` its tokens/s over this row's − 1 (None for a tree)."""
    shape = np.broadcast_shapes(*(np.shape(getattr(step, k)) for k in ARRAY_FIELDS))
    full = _plain_full if tree is None and int(gamma) == 0 else _full
    values = {k: full(step, k, shape)[index].item() for k in _PRICED}
    draft, params = _draft(proposer)
    alpha = None if tree is not None else float(acceptance.iid_alpha(int(gamma)))
    row = {"proposer": proposer.name, "draft": draft, "draft_params": params, "gamma": gamma,
           "best_gamma": best_gamma, "best_gamma_gain": best_gamma_gain, "tree": tree,
           "batch": batch, "acceptance_index": acceptance_index, "alpha": alpha,
           "acceptance_source": step.acceptance_source, **values, "engine": _engine(step)}
    return {k: row[k] for k in ROW_KEYS}


def frame_columns(proposer, step, levels, gammas, batches, keep, finite, best=None) -> dict:
    """Columns (:data:`ROW_KEYS`) of every (k, batch in ``keep``, acceptance level) of one proposer's ``step``
    where ``finite`` (k, batch, acceptance) holds, in C order; ``best`` = (best k, its tokens/s) on (batch,
    acceptance) sets ``best_gamma`` and ``best_gamma_gain``."""
    shape = (gammas.size, batches.size, len(levels))
    mask = np.broadcast_to(np.asarray(finite), shape) & keep[None, :, None]
    k_idx, b_idx, a_idx = np.nonzero(mask)
    alpha = np.stack([np.asarray(a.iid_alpha(gammas.astype(int)), dtype=float) for a in levels], axis=-1)
    draft, params = _draft(proposer)
    n = k_idx.size
    cols = {"proposer": [proposer.name] * n, "draft": [draft] * n, "draft_params": [params] * n,
            "gamma": gammas[k_idx].astype(int), "tree": [None] * n, "batch": batches[b_idx].astype(int),
            "acceptance_index": a_idx, "alpha": alpha[k_idx, a_idx], "acceptance_source": [step.acceptance_source] * n}
    k_on_shape = np.broadcast_to(gammas.reshape(-1, 1, 1), shape)
    cols.update({k: _column(step, k, shape, k_on_shape)[mask] for k in _PRICED})
    if best is None:
        cols["best_gamma"] = cols["best_gamma_gain"] = [None] * n
    else:
        cols["best_gamma"] = np.asarray(best[0]).astype(int)[b_idx, a_idx]
        cols["best_gamma_gain"] = np.asarray(best[1])[b_idx, a_idx] / cols["tokens_per_s"] - 1.0
    cols["engine"] = [_engine(step)] * n
    return {k: cols[k] for k in ROW_KEYS}


def tokens_band(row: dict) -> str:
    """A row's tokens/s 80% band as compact text, low-high."""
    return f"{row['tokens_per_s_low']:.0f}-{row['tokens_per_s_high']:.0f}"


def tpot_band(row: dict) -> str:
    """A row's TPOT 80% band in ms, low-high."""
    return f"{1e3 * row['tpot_s_low']:.2f}-{1e3 * row['tpot_s_high']:.2f}"


def speedup_band(row: dict) -> str:
    """A row's speedup 80% band, low-high."""
    return f"{row['speedup_low']:.2f}-{row['speedup_high']:.2f}"


def report_rows(rows: list[dict]) -> str:
    """Text table of rows: batch, proposer, k or tree, τ, tokens/s, TPOT and speedup, the last three with their 80%
    band (low-high)."""
    lines = [f"{'batch':>6} {'proposer':<22} {'k/tree':>9} {'tau':>6} {'tokens/s':>10} {'80% band':>15} {'TPOT ms':>8} "
             f"{'80% band':>11} {'speedup':>8} {'80% band':>11}"]
    for r in rows:
        shape = ",".join(map(str, r["tree"])) if r.get("tree") else str(r["gamma"])
        lines.append(f"{r['batch']:>6} {r['proposer']:<22} {shape:>9} {r['tau']:6.2f} {r['tokens_per_s']:10.1f} "
                     f"{tokens_band(r):>15} {1e3 * r['tpot_s']:8.2f} {tpot_band(r):>11} {r['speedup']:8.2f} "
                     f"{speedup_band(r):>11}")
    return "\n".join(lines)
