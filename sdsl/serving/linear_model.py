"""TurboSpec's linear step-time model, fitted by least squares (docs/model.md §3.4).

Liu et al. (arXiv 2406.14066, §4.2) model the target's step time from vLLM logs as

    T_target = c_kv · N_kv + c_tok · N_tok + c_b · n + c_0      (milliseconds)

with N_kv the tokens held in the KV cache by the batch, N_tok the tokens processed in the step
(n·(k+1) for verification) and n the number of requests. sdsl fits the same form to any rows
(batch, q, context, time_s) — from the roofline model or from a measured profile — and reports
the R² on held-out rows, so the linear form can be compared with the roofline it approximates.
:data:`TURBOSPEC_PUBLISHED` holds the paper's H100 coefficients.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import numpy as np

from sdsl._result import Result
from sdsl.errors import InvalidInputError

__all__ = ["LinearStepModel", "LinearFit", "TURBOSPEC_PUBLISHED", "linear_features", "fit_linear_step_model",
           "r_squared"]

_SOURCE = ("Liu et al., 'Optimizing Speculative Decoding for Serving Large Language Models Using Goodput' "
           "(TurboSpec), arXiv 2406.14066, fitted on H100 vLLM logs; coefficients in ms as quoted in docs/model.md §3.4")


@dataclass(frozen=True)
class LinearStepModel:
    """T = c_kv·N_kv + c_tok·N_tok + c_b·n + c_0, coefficients in **milliseconds** (as the paper)."""

    c_kv: float
    c_tok: float
    c_b: float
    c_0: float
    r2: float | None = None
    source: str = ""

    def time_s(self, n_kv, n_tok, n) -> np.ndarray:
        """Step time in seconds from batch totals (broadcast)."""
        n_kv, n_tok, n = (np.asarray(x, dtype=float) for x in (n_kv, n_tok, n))
        return (self.c_kv * n_kv + self.c_tok * n_tok + self.c_b * n + self.c_0) * 1e-3

    def step_fn(self, batch, q, context) -> np.ndarray:
        """``step_fn(batch, q, context)`` → seconds, so the model can drive a BatchStepModel."""
        b = np.asarray(batch, dtype=float)
        return self.time_s(b * np.asarray(context, dtype=float), b * np.asarray(q, dtype=float), b)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


TURBOSPEC_PUBLISHED: dict[str, LinearStepModel] = {
    "llama-3.1-70b-tp4-h100": LinearStepModel(c_kv=6.24e-5, c_tok=0.064, c_b=-0.040, c_0=18.35, r2=0.985,
                                              source=_SOURCE + " (Llama-3.1-70B, TP4, test R² 0.985)"),
    "llama-3.1-8b-h100": LinearStepModel(c_kv=4.86e-5, c_tok=0.0184, c_b=-0.043, c_0=6.94, r2=0.96,
                                         source=_SOURCE + " (Llama-3.1-8B, R² 0.96)"),
}


def linear_features(batch, q, context) -> np.ndarray:
    """Design matrix [N_kv, N_tok, n, 1] for rows (batch, q, context)."""
    b = np.asarray(batch, dtype=float).ravel()
    qq = np.broadcast_to(np.asarray(q, dtype=float), b.shape).ravel()
    L = np.broadcast_to(np.asarray(context, dtype=float), b.shape).ravel()
    return np.column_stack([b * L, b * qq, b, np.ones_like(b)])


def r_squared(y, y_hat) -> float:
    """Coefficient of determination 1 − SS_res / SS_tot."""
    y = np.asarray(y, dtype=float)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return 1.0 - float(((y - np.asarray(y_hat, dtype=float)) ** 2).sum()) / ss_tot if ss_tot > 0 else float("nan")


@dataclass(frozen=True)
class LinearFit(Result):
    """A fitted :class:`LinearStepModel` with train and held-out R² and relative errors.

    Result protocol: ``report()``, ``to_dict()``, ``to_json(path=None)``, ``plot(ax=None)`` (the
    fitted step time against batch size at a few contexts).
    """

    model: LinearStepModel
    r2_train: float
    r2_test: float
    mape_test: float
    n_train: int
    n_test: int

    def report(self) -> str:
        m = self.model
        return (f"T = {m.c_kv:.3e}·N_kv + {m.c_tok:.4g}·N_tok + {m.c_b:.4g}·n + {m.c_0:.4g} ms; "
                f"R² train {self.r2_train:.4f} ({self.n_train} rows), held-out {self.r2_test:.4f} "
                f"({self.n_test} rows), held-out mean |rel. error| {100 * self.mape_test:.1f}%")

    def to_dict(self) -> dict:
        return {"model": self.model.to_dict(), "r2_train": self.r2_train, "r2_test": self.r2_test,
                "mape_test": self.mape_test, "n_train": self.n_train, "n_test": self.n_test}

    def plot(self, ax=None):
        """The fitted step time against batch size, one line per context (:mod:`sdsl.plots.results`)."""
        from sdsl.plots.results import plot_linear_step_model

        return plot_linear_step_model(self.model.to_dict(), ax=ax)


def fit_linear_step_model(batch, q, context, time_s, test_fraction: float = 0.25, seed: int = 0,
                          source: str = "least-squares fit") -> LinearFit:
    """Least-squares fit of TurboSpec's linear form to rows; R² on a random held-out split.

    Rows are (batch, q, context, time_s): batch = requests n, q = new tokens per request (so N_tok
    = batch·q), context = mean KV tokens per request (N_kv = batch·context). ``test_fraction`` = 0
    fits on every row and reports the train R² twice.
    """
    X = linear_features(batch, q, context)
    y = np.asarray(time_s, dtype=float).ravel() * 1e3
    if y.shape[0] != X.shape[0]:
        raise InvalidInputError("time_s needs one value per (batch, q, context) row.")
    if X.shape[0] < 5 or not np.all(np.isfinite(y)) or not np.all(np.isfinite(X)):
        raise InvalidInputError("The linear fit needs at least 5 finite rows.")
    if not 0.0 <= test_fraction < 1.0:
        raise InvalidInputError("test_fraction must be in [0, 1).")
    idx = np.random.default_rng(seed).permutation(X.shape[0])
    n_test = int(round(test_fraction * X.shape[0]))
    test, train = idx[:n_test], idx[n_test:]
    if train.size < 4:
        raise InvalidInputError("Too few training rows for four coefficients.")
    coef, *_ = np.linalg.lstsq(X[train], y[train], rcond=None)
    pred = X @ coef
    r2_train = r_squared(y[train], pred[train])
    if n_test:
        r2_test = r_squared(y[test], pred[test])
        mape = float(np.mean(np.abs(pred[test] - y[test]) / np.abs(y[test])))
    else:
        r2_test, mape = r2_train, float(np.mean(np.abs(pred - y) / np.abs(y)))
    model = LinearStepModel(*(float(c) for c in coef), r2=r2_test, source=source)
    return LinearFit(model, r2_train, r2_test, mape, int(train.size), int(n_test))
