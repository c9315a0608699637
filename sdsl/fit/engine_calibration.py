"""``sdsl calibrate engine``: fit an engine profile's free terms to a user's own measured runs, and write a profile
JSON that ``--engine FILE`` takes (docs/model.md §3.9).

A run is one measured configuration: target, hardware, tensor parallelism, batch (concurrency), context, the
proposer (none for plain decoding) with its chain length k or SGLang tree, the measured mean accepted length (bonus
included) and what was measured: TPOT (ms), output tokens/s of the whole batch, or a speedup. Runs come from
- CSV or JSON files of such rows (:data:`RUN_FIELDS`);
- vLLM ``vllm bench serve --save-result`` JSON (``mean_tpot_ms``, ``max_concurrency``) with the server's log beside
  it (the same name with ``.log``) or named by ``log``, whose ``SpecDecoding metrics`` lines give the accepted length
  (:func:`sdsl.fit.engine_logs.read_acceptance_log`);
- vLLM ``vllm bench latency --output-json`` JSON (``avg_latency``) with ``batch`` and ``output_len`` given;
- SGLang ``python -m sglang.test.send_one`` output (``acc_length=… speed=… token/s``) and ``bench_one_batch``
  output (``Decode.  median latency: … s``).
Fields a file does not carry (target, hardware, proposer, k, ...) come from ``defaults`` (the command's options).

Every run is priced once with the base profile's structure (graphs, overlap, padding, kernels); the free terms
(:data:`sdsl.engine.profiles.FREE_TERMS`, by default host per step, per speculative step and per drafting pass) then
minimise Σ log(predicted / measured)² over the runs, bounded below by zero. Before fitting, the runs must identify
every term: each term must move some prediction, and no two terms may move the predictions in proportion (e.g. a
per-step and a per-pass term with every run at the same k) — otherwise a one-line error says which term and what to
measure. The result reports each run's residual and its leave-one-point-out error (refit without the run, predict it;
``None`` where the other runs cannot identify the terms).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

import numpy as np

from sdsl._evidence import leave_one_group_out, summarize_errors
from sdsl._result import Result
from sdsl.engine.profiles import FREE_TERMS, EngineProfile, host_seconds, resolve_engine
from sdsl.errors import InvalidInputError
from sdsl.fit.engine_runs import RUN_FIELDS, read_runs  # noqa: F401  (read_runs: part of this module's API)

__all__ = ["EnginePoint", "StackedPoints", "read_runs", "price_runs", "fit_engine", "calibrate_engine",
           "EngineCalibration", "RUN_FIELDS", "DEFAULT_TERMS", "TERM_BOUNDS", "identify"]

#: Columns of a runs CSV / keys of a runs JSON object (``tpot_ms``, ``tokens_per_s`` or ``speedup``: one of them).
DEFAULT_TERMS = ("host_step_s", "spec_step_s", "draft_pass_s")
TERM_BOUNDS = {"host_step_s": 0.05, "spec_step_s": 0.05, "draft_pass_s": 0.01, "launch_s": 2e-4,
               "allreduce_latency_s": 5e-5}  # upper bounds (s)


@dataclass
class EnginePoint:
    """One measured run priced once with a profile's structure: its step, what was measured and how much."""

    step: object  # PricedStep (its ``pieces`` carry the GPU times and the step's shape)
    profile: EngineProfile
    metric: str  # "tpot_ms", "tokens_per_s" (all sequences) or "speedup" (over the same engine's plain decoding)
    measured: float
    plain: bool
    batch: float
    label: str = ""


class StackedPoints:
    """Points priced by one profile with their pieces stacked on one axis, so that one :func:`host_seconds` call
    prices them all for any terms (the fits' inner loop)."""

    def __init__(self, points: list):
        from sdsl.engine.profiles import StepPieces

        self.points, self.profile = points, points[0].profile
        pcs = [p.step.pieces for p in points]
        col = lambda name: np.array([float(np.asarray(getattr(x, name))) for x in pcs])  # noqa: E731

        def rows(attr):
            width = max(len(getattr(x, attr)) for x in pcs)
            out = []
            for j in range(width):
                entry = [getattr(x, attr)[j] if j < len(getattr(x, attr)) else (0.0, 0.0, 0.0, False) for x in pcs]
                out.append(tuple(np.array([float(np.asarray(e[i])) for e in entry]) for i in range(3))
                           + (np.array([bool(np.asarray(e[3])) for e in entry]),))
            return tuple(out)

        self.pieces = StepPieces(gpu_step_s=col("gpu_step_s"), gpu_plain_s=col("gpu_plain_s"),
                                 speculative=np.array([bool(np.asarray(x.speculative)) for x in pcs]),
                                 passes=col("passes"), steps=col("steps"), kind=np.array([x.kind for x in pcs]),
                                 eager_step=rows("eager_step"),
                                 eager_plain=rows("eager_plain"), allreduce_step=col("allreduce_step"),
                                 allreduce_plain=col("allreduce_plain"))
        self.batch = np.array([float(p.batch) for p in points])
        self.tau = np.array([float(np.asarray(p.step.tau)) for p in points])
        self.metric = np.array([("plain-" if p.plain else "") + p.metric for p in points])
        self.measured = np.array([float(p.measured) for p in points])

    def predict(self, terms: dict | None = None) -> np.ndarray:
        """Each point's metric with ``terms`` overriding the profile's time terms."""
        hs, hp = host_seconds(self.profile, self.pieces, **(terms or {}))
        t_step, t_plain = self.pieces.gpu_step_s + hs, self.pieces.gpu_plain_s + hp
        m, b, tau = self.metric, self.batch, self.tau
        return np.select([m == "plain-tpot_ms", m == "plain-tokens_per_s", m == "tpot_ms", m == "speedup"],
                         [1e3 * t_plain, b / t_plain, 1e3 * t_step / tau, (tau / t_step) * t_plain], b * tau / t_step)


def _stacks(points: list) -> list:
    groups: dict = {}
    for p in points:
        groups.setdefault(id(p.profile), []).append(p)
    return [StackedPoints(g) for g in groups.values()]


def _log_residuals(stacks, terms: tuple, x) -> np.ndarray:
    values = dict(zip(terms, x))
    return np.concatenate([np.log(s.predict(values) / s.measured) for s in stacks])


def identify(points: list, terms: tuple) -> str | None:
    """None when ``points`` identify every one of ``terms``; else one sentence naming the term and what to measure.
    The check is the Jacobian of the log-predictions at a reference point (each term at 5% of its bound): a term
    whose column is zero moves nothing; two terms whose columns are proportional cannot be told apart."""
    stacks = _stacks(points)
    hi = np.array([TERM_BOUNDS[t] for t in terms])
    x = 0.05 * hi
    base = _log_residuals(stacks, terms, x)
    cols = []
    for j in range(len(terms)):
        probe = x.copy()
        probe[j] += 0.05 * hi[j]
        cols.append((_log_residuals(stacks, terms, probe) - base) / (0.05 * hi[j]))
    J = np.stack(cols, axis=1)
    norms = np.linalg.norm(J, axis=0)
    hints = {"host_step_s": "plain-decoding runs (the engine overlaps its host work there only when the GPU step is "
                            "longer: add runs at batch 1)",
             "spec_step_s": "speculative runs", "draft_pass_s": "speculative runs at two k values or more",
             "launch_s": "runs where the profile executes something eagerly (graphs off)",
             "allreduce_latency_s": "runs at tensor parallelism > 1 on an engine with a custom all-reduce"}
    for j, t in enumerate(terms):
        if norms[j] < 1e-9 * max(1.0, norms.max()):
            return f"The runs cannot identify {t} (no run depends on it); give {hints[t]}."
    unit = J / norms
    for i in range(len(terms)):
        for j in range(i + 1, len(terms)):
            if abs(float(unit[:, i] @ unit[:, j])) > 1 - 1e-6:
                return (f"The runs cannot tell {terms[i]} from {terms[j]} (they move every prediction in proportion); "
                        f"give {hints[terms[j]]}.")
    if np.linalg.matrix_rank(unit, tol=1e-6) < len(terms):
        return f"The runs cannot identify {', '.join(terms)} together; give plain runs and speculative runs at two k values."
    return None


def fit_engine(points: list, terms: tuple = DEFAULT_TERMS) -> dict:
    """Least squares in log of ``terms`` over ``points`` (module docstring): {"values", "residuals", "rms_log"}."""
    from scipy.optimize import least_squares

    stacks = _stacks(points)
    hi = np.array([TERM_BOUNDS[t] for t in terms])
    fit = least_squares(lambda x: _log_residuals(stacks, terms, x), hi / 100.0, bounds=(np.zeros(len(terms)), hi),
                        x_scale=hi / 100.0)
    order = [p for s in stacks for p in s.points]
    res = dict(zip(map(id, order), fit.fun))
    residuals = np.array([res[id(p)] for p in points])
    at_bounds = {t: ("0" if v <= _AT_BOUND * b else f"its upper bound {1e3 * b:g} ms")
                 for t, v, b in zip(terms, fit.x, hi) if v <= _AT_BOUND * b or v >= (1 - _AT_BOUND) * b}
    return {"values": dict(zip(terms, (float(v) for v in fit.x))), "residuals": residuals,
            "rms_log": float(np.sqrt(np.mean(residuals ** 2))), "at_bounds": at_bounds}


#: A term within this fraction of its bound's range sits on the bound (the runs push it past where it may go).
_AT_BOUND = 1e-6
#: The largest rms log residual a fit may keep: beyond it (a factor 2 on a typical run) the base profile's
#: structure cannot price the runs at all (wrong units, hardware or target), and no term values are written.
MAX_RMS_LOG = float(np.log(2.0))


def _check_fit(fit: dict, points: list, base: str) -> None:
    """Refuse a fit that cannot price the runs (``MAX_RMS_LOG``): one sentence naming the worst run."""
    if fit["rms_log"] <= MAX_RMS_LOG:
        return
    worst = int(np.argmax(np.abs(fit["residuals"])))
    p, r = points[worst], float(fit["residuals"][worst])
    pinned = f"; {', '.join(f'{t} at {b}' for t, b in fit['at_bounds'].items())}" if fit["at_bounds"] else ""
    raise InvalidInputError(
        f"The runs cannot be priced with {base}'s structure: the best fit misses them by a factor "
        f"{float(np.exp(fit['rms_log'])):.3g} (rms), worst {p.label} ({p.metric} {p.measured:g}, missed by a factor "
        f"{float(np.exp(abs(r))):.3g}){pinned}; check the runs' units, hardware and target.")


# -- reading runs ------------------------------------------------------------------------------------------------

def price_runs(runs: list[dict], base: EngineProfile) -> list[EnginePoint]:
    """Each run priced once on its deployment with the base profile's structure (:func:`price_step`)."""
    from sdsl.roofline.deployment import Deployment
    from sdsl.speculation.step import price_step

    points = []
    for r in runs:
        dep = Deployment(r["hardware"], tp=r["tp"], dtype=r.get("dtype", "bf16"), context=r["context"], engine=base)
        plain = r["proposer"] is None
        tree = r.get("tree") if not plain else None
        try:
            step = price_step(r["target"], r["proposer"] or "ngram", dep, tau=1.0 if plain else r["accepted_length"],
                              gamma=None if tree else (0 if plain else r["k"]), tree=tree, batch=r["batch"])
        except InvalidInputError as exc:
            raise InvalidInputError(f"{r['where']}: {exc}") from None
        points.append(EnginePoint(step, base, r["metric"], r["measured"], plain, float(r["batch"]),
                                  r.get("label") or r["where"]))
    return points


# -- the command's result -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EngineCalibration(Result):
    """A fitted profile with its fit: values per term, residuals and leave-one-point-out errors per run."""

    profile: EngineProfile
    base: str
    terms: tuple
    runs: list = field(repr=False)
    residuals: np.ndarray = field(repr=False)
    lopo: list = field(repr=False)  # per run: leave-one-point-out error of its speed (1/TPOT), or None
    rms_log: float = 0.0
    kept: tuple = ()  # default terms no run depends on (the base profile's structure hides them): left at its values
    at_bounds: dict = field(default_factory=dict)  # fitted terms pinned at a bound: {term: "0" or "its upper bound …"}

    def summary(self) -> dict:
        s = summarize_errors(e for e in self.lopo if e is not None)
        return {"points": len(self.runs), "rms_log_residual": self.rms_log,
                "median_abs_lopo_error": s.get("median_abs"), "worst_lopo_error": s.get("worst"),
                "lopo_points": s["n"]}

    def to_dict(self) -> dict:
        rows = [{"label": r.get("label") or r["where"], "target": r["target"], "hardware": r["hardware"],
                 "batch": r["batch"], "proposer": r["proposer"], "k": r["k"], "tree": r.get("tree"),
                 "accepted_length": r["accepted_length"], "metric": r["metric"], "measured": r["measured"],
                 "residual": float(np.expm1(-res if r["metric"] == "tpot_ms" else res)), "lopo_error": lo}
                for r, res, lo in zip(self.runs, self.residuals, self.lopo)]
        return {"format": "sdsl-engine-profile", "format_version": 1, "profile": self.profile.to_dict(),
                "fit": {"base": self.base, "terms": list(self.terms), "kept": list(self.kept),
                        "values": {t: getattr(self.profile, t) for t in self.terms}, "at_bounds": dict(self.at_bounds),
                "warnings": self.warnings(), **self.summary(), "runs": rows}}

    def warnings(self) -> list[str]:
        """One sentence per fitted term the runs pinned at a bound: its value is the bound, not a measurement."""
        return [f"{t} is pinned at {b}: the runs push it past its bound (an outlier run, or a term the structure "
                "prices wrongly); look at the residuals, drop the outlier or fit fewer terms." for t, b in self.at_bounds.items()]

    def report(self) -> str:
        s = self.summary()
        lines = [f"engine profile {self.profile.name} (structure of {self.base}), fitted on {s['points']} runs:"]
        lines += [f"  {t:<13} {1e3 * getattr(self.profile, t):8.4f} ms" for t in self.terms]
        lines += [f"  {t:<13} {1e3 * getattr(self.profile, t):8.4f} ms  kept at {self.base}'s value: no run depends on it"
                  for t in self.kept]
        lopo = "n/a" if s["median_abs_lopo_error"] is None else (f"{100 * s['median_abs_lopo_error']:.1f}% median, "
                                                                   f"worst {100 * s['worst_lopo_error']:+.1f}%")
        lines.append(f"  rms log residual {s['rms_log_residual']:.4f}; leave-one-point-out error {lopo} "
                     f"({s['lopo_points']} of {s['points']} runs identifiable without themselves)")
        lines += [f"  warning: {w}" for w in self.warnings()]
        for row in self.to_dict()["fit"]["runs"]:
            lo = "   n/a" if row["lopo_error"] is None else f"{100 * row['lopo_error']:+6.1f}%"
            shape = "plain" if row["proposer"] is None else f"{row['proposer']} k={row['k'] or row['tree']}"
            lines.append(f"  {row['label'][:32]:<32} {shape:<18} b={row['batch']:<4} {row['metric']:<12} "
                         f"{row['measured']:10.3f}  residual {100 * row['residual']:+6.1f}%  lopo {lo}")
        return "\n".join(lines)

    def plot(self, ax=None):
        """Measured against fitted value of every run (:func:`sdsl.plots.results.plot_predicted_vs_measured`)."""
        from sdsl.plots.results import plot_predicted_vs_measured

        measured = np.array([r["measured"] for r in self.runs])
        return plot_predicted_vs_measured(measured, measured * np.exp(self.residuals), ax=ax)


def _lopo_error(points: list, i: int, terms: tuple) -> float | None:
    """Point ``i``'s speed error from a fit on the other points, None where they do not identify ``terms``."""
    rest = points[:i] + points[i + 1:]
    if len(rest) < len(terms) or identify(rest, terms):
        return None
    p = points[i]
    pred = float(StackedPoints([p]).predict(fit_engine(rest, terms)["values"])[0])
    return p.measured / pred - 1.0 if p.metric == "tpot_ms" else pred / p.measured - 1.0


def calibrate_engine(paths, *, base="vllm", terms=None, defaults: dict | None = None,
                     name: str | None = None, lopo: bool = True) -> EngineCalibration:
    """Read the runs of ``paths``, price them with ``base``'s structure, check that they identify ``terms``, fit them
    and (``lopo``) leave each point out in turn (module docstring). ``terms`` None: the default terms, less the host
    time per step (and on a zero-sync build S and d) where the profile overlaps it with GPU steps longer than it in
    every run (it keeps the base profile's value: ``kept``); given terms must all be identified."""
    base_profile = resolve_engine(base)
    auto, terms = terms is None, tuple(dict.fromkeys(DEFAULT_TERMS if terms is None else terms))  # each term once
    bad = [t for t in terms if t not in FREE_TERMS]
    if bad or not terms:
        raise InvalidInputError(f"Unknown engine term(s) {', '.join(bad) or '(none)'}; fit some of {', '.join(FREE_TERMS)}.")
    runs = read_runs(paths, defaults)
    points = price_runs(runs, base_profile)
    overlaps = base_profile.overlap_plain or base_profile.overlap_spec  # host time hidden behind a longer GPU step
    hideable = ("host_step_s",) + (("spec_step_s", "draft_pass_s") if base_profile.spec_host_runs_ahead else ())
    kept = tuple(t for t in hideable if auto and overlaps and identify(points, (t,)) is not None)
    terms = tuple(t for t in terms if t not in kept)
    if not terms:
        raise InvalidInputError(f"{base_profile.name} hides {', '.join(kept)} behind the GPU step of every run (the "
                                "host work is shorter), so these runs measure none of them; add runs at smaller "
                                "steps (a smaller model or batch) or keep the profile as it is.")
    problem = identify(points, terms)
    if problem:
        raise InvalidInputError(problem)
    fit = fit_engine(points, terms)
    _check_fit(fit, points, base_profile.name)
    errors = [None] * len(points)
    if lopo:  # each point left out in turn
        errors = list(leave_one_group_out(range(len(points)), lambda i: _lopo_error(points, i, terms)).values())
    today = datetime.date.today().isoformat()
    sources = {**base_profile.sources, **{t: {"fit": "user-runs", "files": [str(x) for x in paths],
                                              "points": len(points)} for t in terms}}
    # the base build's date stays: it chooses the kernels the runs were priced on (runs_table_gemms)
    profile = base_profile.replace(name=name or f"calibrated-{base_profile.name}",
                                   build=f"{base_profile.build} — terms fitted to {len(points)} measured runs on {today}",
                                   sources=sources, **fit["values"])
    return EngineCalibration(profile, base_profile.name, terms, runs, fit["residuals"], errors, fit["rms_log"], kept,
                             fit["at_bounds"])
