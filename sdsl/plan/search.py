"""Hardware-aware search over draft models × γ × batch × α, one vectorised evaluation. Summary of
docs/model.md §3.2–§3.3.

The grid is laid out on four axes — (draft, γ, batch, α) — and priced by one call of
:func:`sdsl.speculation.step.price_step` with the drafts stacked as :class:`~sdsl.roofline.latency.ModelShapes`
(:func:`price_draft_stack`, which the proposer ranking shares), so there is no Python loop over
configurations. Without measured α, α comes from SDSL's acceptance plane through the Chinchilla loss law
(arXiv 2603.11053), from each draft's and the target's size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdsl._result import Result
from sdsl.acceptance import Acceptance, check_alpha, tau
from sdsl.catalog.models import ModelSpec, get_model, list_models
from sdsl._checks import numbers, numbers_1d
from sdsl.roofline.deployment import Deployment
from sdsl.roofline.latency import LatencyParams, ModelShapes
from sdsl.speculation.priced_step import PricedStep
from sdsl.acceptance.plane import CHINCHILLA, SDSL_PLANE, AcceptancePlane, LossLaw, acceptance_from_sizes
from sdsl.errors import InvalidInputError

__all__ = ["candidate_drafts", "SearchGrid", "evaluate_grid", "search", "price_draft_stack", "ALL_PROPOSERS",
           "expand_proposers"]


def candidate_drafts(target: ModelSpec, *, max_fraction: float = 0.25, same_tokenizer: bool = True) -> list[ModelSpec]:
    """Catalog models no larger than ``max_fraction`` of the target; with ``same_tokenizer`` only
    those whose vocabulary size matches the target's (a draft must share the target's tokenizer). ``target``:
    a ModelSpec, a catalog name or a config.json path."""
    target = get_model(target)
    out = [
        m for m in list_models(target.vocab_size if same_tokenizer else None)  # the target's vocabulary only
        if m.name != target.name and m.total_params <= max_fraction * target.total_params
    ]
    return sorted(out, key=lambda m: m.total_params)


@dataclass(frozen=True, eq=False)  # a result object: equal only to itself
class SearchGrid(Result):
    """Every (draft, γ, batch, α) configuration priced at once; arrays on those four axes.

    Result protocol: ``report()`` (the best γ per draft and batch), ``to_dict()``,
    ``to_json(path=None)``, ``plot(ax=None)`` (tokens/s at the best γ against batch size).
    """

    drafts: tuple
    gammas: np.ndarray
    batches: np.ndarray
    alpha: np.ndarray  # broadcastable to the grid: (n_drafts,1,1,1) from the plane, or (1,1,1,n_alpha) given
    alpha_source: str
    prediction: PricedStep

    @property
    def shape(self) -> tuple:
        return (len(self.drafts), self.gammas.size, self.batches.size, self.alpha.shape[-1])

    def _full(self, x) -> np.ndarray:
        return np.broadcast_to(np.asarray(x), self.shape)

    def best_arrays(self) -> dict:
        """The best γ (highest tokens/s) for every (draft, batch, α): arrays shaped
        (n_drafts, n_batches, n_alpha) — gamma, alpha and every prediction field at that γ."""
        p = self.prediction
        gi = np.argmax(self._full(p.tokens_per_s), axis=1)
        pick = lambda x: np.take_along_axis(self._full(x), gi[:, None], axis=1)[:, 0]  # noqa: E731
        out = {k: pick(getattr(p, k)) for k in ("tau", "tokens_per_s", "plain_tokens_per_s", "speedup", "bound",
                                                "t_draft_s", "t_verify_s", "cost_ratio")}
        return {"gamma": self.gammas[gi].astype(int), "alpha": pick(self.alpha), **out}

    def best(self) -> list[dict]:
        """Best γ for every (draft, batch, α), as records sorted by batch then tokens/s (best first)."""
        best = self.best_arrays()
        rows = []
        for d, b, a in np.ndindex(best["gamma"].shape):
            spec = self.drafts[d]
            rows.append({"draft": spec.name, "draft_params": float(spec.total_params), "batch": int(self.batches[b]),
                         "engine": self.prediction.deployment.engine.name,
                         **{k: v[d, b, a].item() for k, v in best.items()}})
        return sorted(rows, key=lambda r: (r["batch"], r["alpha"] if self.alpha_source == "given" else 0,
                                           -r["tokens_per_s"]))

    def to_dict(self) -> dict:
        """The grid's axes, the α source and the prediction on the full grid (nested lists)."""
        return {"drafts": [d.name for d in self.drafts], "draft_params": [float(d.total_params) for d in self.drafts],
                "gammas": self.gammas.tolist(), "batches": self.batches.tolist(), "alpha": self.alpha.tolist(),
                "alpha_source": self.alpha_source, "engine": self.prediction.deployment.engine.name,
                "prediction": self.prediction.to_dict()}

    def report(self) -> str:
        """One line per (draft, batch, α): the best γ, τ, tokens/s and speedup."""
        lines = [f"{'draft':<18}{'batch':>6}{'alpha':>7}{'gamma':>6}{'tau':>7}{'tokens/s':>11}{'speedup':>9}  bound"]
        for r in self.best():
            lines.append(f"{r['draft']:<18}{r['batch']:>6}{r['alpha']:>7.3f}{r['gamma']:>6}{r['tau']:>7.3f}"
                         f"{r['tokens_per_s']:>11.1f}{r['speedup']:>9.3f}  {r['bound']}")
        return "\n".join(lines)

    def plot(self, ax=None):
        """Tokens/s at the best γ against batch size, one line per draft (:mod:`sdsl.plots.results`)."""
        from sdsl.plots.results import plot_best_by_batch

        return plot_best_by_batch(self.best(), ax=ax)

    def to_frame(self):
        """One row per configuration (pandas DataFrame)."""
        import pandas as pd

        idx = [i.ravel() for i in np.indices(self.shape)]
        names = np.array([d.name for d in self.drafts])
        params = np.array([d.total_params for d in self.drafts], dtype=float)
        p = self.prediction
        flat = lambda x: self._full(x).ravel()  # noqa: E731
        return pd.DataFrame({
            "draft": names[idx[0]], "draft_params": params[idx[0]], "gamma": self.gammas[idx[1]].astype(int),
            "batch": self.batches[idx[2]], "alpha": flat(self.alpha), "alpha_source": self.alpha_source,
            "engine": p.deployment.engine.name,
            **{k: flat(getattr(p, k)) for k in ("tau", "t_draft_s", "t_verify_s", "t_step_s", "tokens_per_s",
                                                "plain_tokens_per_s", "speedup", "cost_ratio", "bound")},
        })


def evaluate_grid(target, deployment, *, drafts=None, gammas=range(0, 11), batch=(1,), alpha=None,
                  draft_params: LatencyParams | None = None, draft_tokens=1e12, target_tokens=1e12,
                  law: LossLaw = CHINCHILLA, plane: AcceptancePlane = SDSL_PLANE) -> SearchGrid:
    """Price every (draft, γ, batch, α) in one vectorised call on ``deployment`` (a
    :class:`~sdsl.roofline.deployment.Deployment` or a hardware name/file/Hardware); see :class:`SearchGrid`.

    Without ``alpha``, each draft's α comes from SDSL's plane through the loss law (D, D′ given).
    ``alpha`` may be an :class:`~sdsl.acceptance.Acceptance` (per-position acceptance).
    """
    target = get_model(target) if not isinstance(target, ModelSpec) else target
    dep = Deployment.of(deployment)
    if drafts is None:
        drafts = candidate_drafts(target)
    drafts = tuple(get_model(d) if not isinstance(d, ModelSpec) else d for d in drafts)
    if not drafts:
        raise InvalidInputError(f"No candidate drafts for {target.name}; pass drafts explicitly.")
    g = numbers_1d(gammas, "gammas", allow_empty=True)
    b = numbers_1d(batch, "batch", allow_empty=True)
    if g.size == 0 or b.size == 0:
        raise InvalidInputError("Need at least one gamma and one batch size.")
    if alpha is None:
        n_params = np.array([d.total_params for d in drafts], dtype=float)
        a_grid = acceptance_from_sizes(n_params, target.total_params, draft_tokens, target_tokens, law=law,
                                       plane=plane).reshape(-1, 1, 1, 1)
        source = "sdsl-plane"
    elif isinstance(alpha, Acceptance):  # per-γ i.i.d.-equivalent α: reproduces the vector's τ(γ) at every γ
        a_grid = np.asarray(alpha.iid_alpha(g.astype(int)), dtype=float).reshape(1, -1, 1, 1)
        source = "given" if alpha.is_iid else alpha.source
    else:
        a_grid = np.atleast_1d(check_alpha(numbers(alpha, "alpha"))).reshape(1, 1, 1, -1)  # τ(1, γ) = γ + 1
        source = "given"
    g_grid = g.reshape(1, -1, 1, 1)
    tau_grid = np.asarray(alpha.tau(g.astype(int)), dtype=float).reshape(1, -1, 1, 1) if isinstance(alpha, Acceptance) \
        else tau(a_grid, g_grid)
    pred = price_draft_stack(target, drafts, dep, tau=tau_grid, gamma=g_grid, batch=b.reshape(1, 1, -1, 1),
                             draft_params=draft_params)
    return SearchGrid(drafts, g, b, a_grid, source, pred)


def price_draft_stack(target, drafts, deployment, *, tau, gamma, batch, draft_params: LatencyParams | None = None,
                      overhead_s=0.0, pass_overhead_s=0.0) -> PricedStep:
    """Every draft of ``drafts`` (ModelSpecs) as one :class:`~sdsl.speculation.proposers.DraftModel` over their stacked
    shapes, priced by one :func:`~sdsl.speculation.step.price_step` call: the drafts lie on axis 0, ``tau``,
    ``gamma`` and ``batch`` broadcast on three trailing axes (the draft grid's (γ, batch, α) and the proposer
    ranking's (k, batch, acceptance))."""
    from sdsl.speculation.proposers import DraftModel
    from sdsl.speculation.step import price_step

    dep = Deployment.of(deployment)
    shapes = ModelShapes.of(list(drafts), dep.draft_tp, extra_dims=3)
    return price_step(target, DraftModel(shapes, params=draft_params), dep, tau=tau, gamma=gamma, batch=batch,
                      overhead_s=overhead_s, pass_overhead_s=pass_overhead_s, tau_source="draft grid")


def search(target, deployment, **kwargs):
    """:func:`evaluate_grid` as a pandas DataFrame, one row per configuration (same arguments,
    everything after the deployment by keyword).

    Columns: draft, draft_params, gamma, batch, alpha, alpha_source, tau, t_draft_s, t_verify_s,
    t_step_s, tokens_per_s, plain_tokens_per_s, speedup, cost_ratio, bound.
    """
    return evaluate_grid(target, deployment, **kwargs).to_frame()


ALL_PROPOSERS = ("eagle", "eagle3", "medusa", "mtp", "ngram")  # what "all" ranks


def expand_proposers(target, proposers) -> list:
    """``proposers`` with ``"all"`` expanded to every head kind and n-gram lookup, MTP only where the target ships
    multi-token-prediction modules (``ModelSpec.mtp_layers``: a dense model has none to run)."""
    from sdsl.catalog.models import get_model

    if not proposers:
        return []
    has_mtp = get_model(target).mtp_layers > 0
    every = tuple(p for p in ALL_PROPOSERS if p != "mtp" or has_mtp)
    return [n for p in proposers for n in (every if p == "all" else (p,))]
