"""Discrete-event simulation of a continuously batched LLM server with speculative decoding.

Scheduling follows vLLM v0 (the system TurboSpec is built on; Liu et al., arXiv 2406.14066):

- Requests queue FCFS. Before each step, waiting requests are admitted while a batch slot is free
  (``max_batch``) and their KV reservation fits the budget (hardware memory × fraction − target and
  draft weights; :func:`~sdsl.serving.step_model.memory_budget`). A request reserves its whole
  footprint, prompt + output + (K+1) lookahead tokens, at admission (static reservation: no
  preemption, so the budget can never be exceeded). Admitted prompts run in one prefill step
  (at most ``max_prefill_tokens`` tokens, at least one prompt) that emits each first token.
- Otherwise one decode step runs over all running requests: the draft proposes k_r tokens per
  request, the target verifies them; request r accepts a_r = min(G_r, k_r) tokens plus the bonus
  token, G_r ~ Geometric: P(G_r >= j) = α_r^j with α_r the request's true acceptance rate (drawn
  once per request and step: :class:`~sdsl.serving.batch.AcceptanceTape`). Tokens beyond a
  request's output length are discarded, so every request ends with exactly its length.
- The policy (:mod:`~sdsl.serving.policies`) sets k_r; adaptive policies use the online
  estimates of :mod:`~sdsl.serving.estimators` and :class:`~sdsl.serving.controller.GoodputController`,
  which prices steps with TurboSpec's linear model fitted online to the step times it has seen
  (:class:`~sdsl.serving.online_model.OnlineStepModel`; ``pricing="table"`` reads the exact table).

Speed: between events (an admissible arrival, a request finishing, a controller decision) the
batch is fixed, so one block reads S steps of acceptance draws for all n requests as an (n, S)
array, finds the first event with cumulative sums, and commits the steps up to it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdsl.errors import InvalidInputError
from sdsl.serving.batch import AcceptanceTape, RunningBatch
from sdsl.serving.controller import GoodputController
from sdsl.serving.estimators import make_estimator
from sdsl.serving.metrics import SimResult
from sdsl.serving.online_model import OnlineStepModel, profile_prior
from sdsl.serving.policies import Policy, parse_policy
from sdsl.serving.system import ServingSystem
from sdsl.serving.workload import Workload

__all__ = ["SimConfig", "simulate"]

# ndarray.sum/any/max/min without their Python wrappers
_sum, _any, _max, _min = np.add.reduce, np.logical_or.reduce, np.maximum.reduce, np.minimum.reduce


@dataclass(frozen=True)
class SimConfig:
    """Scheduler and controller settings.

    decide_every: adaptive policies re-choose k whenever the batch changes and at least every this
    many steps (TurboSpec re-decides every step; 1 reproduces that at several times the cost).
    init_alpha: a new request's α̂ starts at the ``"prior"`` (TurboSpec's 0.7) or at the current
    ``"global"`` batch estimate. Either can lock a saturated server into k = 0 when the starting
    α̂ is low: k = 0 is chosen for the newcomers and k = 0 steps carry no evidence to undo it
    (VALIDATION.md: α̂₀ = 0.5 on the 70b deployment at 16 QPS).
    pricing: ``"online"`` (TurboSpec: a linear step-time model fitted to the observed steps over the
    last ``fit_window`` steps, ridge-anchored at ``step_prior``, by default a least-squares fit to a
    coarse offline profile of the deployment) or ``"table"`` (the simulator's exact step table).
    alpha_source: ``"estimate"`` (online α̂) or ``"oracle"`` (each request's true α).
    """

    max_batch: int | None = None  # None: the step model's max_batch
    max_k: int = 7
    max_prefill_tokens: int = 8192
    decide_every: int = 8
    max_chunk: int = 512
    estimator: str = "ema"
    ema_beta: float = 0.85
    window: int = 16
    prior: float = 0.7
    rule: str = "proportional"
    init_alpha: str = "prior"
    pricing: str = "online"
    alpha_source: str = "estimate"
    fit_window: int = 256
    prior_weight: float = 1.0
    step_prior: tuple | None = None  # 7 coefficients (seconds) of online_model.step_features

    def __post_init__(self) -> None:
        if ((self.max_batch is not None and self.max_batch < 1) or self.max_prefill_tokens < 1
                or self.decide_every < 1 or self.max_chunk < 1 or self.fit_window < 1):
            raise InvalidInputError("max_batch, max_prefill_tokens, decide_every, max_chunk and fit_window must be >= 1.")
        if self.max_k < 0:
            raise InvalidInputError("max_k must be >= 0.")
        for name, allowed in (("init_alpha", ("prior", "global")), ("pricing", ("online", "table")),
                              ("alpha_source", ("estimate", "oracle"))):
            if getattr(self, name) not in allowed:
                raise InvalidInputError(f"{name} must be one of {', '.join(allowed)}.")


def simulate(workload: Workload, system: ServingSystem, policy: Policy | str, config: SimConfig | None = None,
             seed: int = 0, qps: float | None = None) -> SimResult:
    """Run ``workload`` through ``system`` under ``policy``; deterministic for a ``seed``."""
    server = _Server(workload, system, parse_policy(policy), config or SimConfig(), seed)
    while server.waiting_or_running():
        if server.admit():
            continue
        if server.batch.size == 0:
            server.idle_until_next_arrival()
            continue
        server.decode_block()
    return server.result(qps if qps is not None else workload.qps)


def _max_k(pol: Policy, cfg: SimConfig, system: ServingSystem) -> int:
    """The largest k the run can use, checked against the step tables and the draft."""
    sm = system.step_model
    if pol.uses_draft and not sm.has_draft:
        raise InvalidInputError(f"Policy {pol.name} needs a draft model.")
    max_k = max(cfg.max_k, pol.k) if pol.kind == "fixed" else cfg.max_k
    if max_k > sm.max_k:
        raise InvalidInputError(f"k up to {max_k} exceeds the step model's table (max_k={sm.max_k}).")
    return max_k


def _check_workload(workload: Workload) -> None:
    a = np.asarray(workload.alpha, float)
    if np.any(~np.isfinite(a)) or np.any((a <= 0) | (a >= 1)):
        raise InvalidInputError("Every request needs a true acceptance rate in (0, 1); use Workload.with_alpha.")


class _Server:
    """The simulated server: clock, FCFS queue, KV reservations, running batch, controller, tallies."""

    def __init__(self, workload: Workload, system: ServingSystem, pol: Policy, cfg: SimConfig, seed: int) -> None:
        _check_workload(workload)
        sm = self.sm = system.step_model
        self.max_batch = sm.max_batch if cfg.max_batch is None else cfg.max_batch
        if self.max_batch > sm.max_batch:
            raise InvalidInputError(f"max_batch {self.max_batch} exceeds the step model's table ({sm.max_batch}).")
        self.pol, self.cfg, self.seed, self.workload = pol, cfg, seed, workload
        self.max_k = _max_k(pol, cfg, system)
        self.arrival = np.asarray(workload.arrival_s, float)
        self.prompt = np.asarray(workload.prompt_tokens, np.int64)
        self.output = np.asarray(workload.output_tokens, np.int64)
        self.reserve = self.prompt + self.output + ((self.max_k + 1) if pol.uses_draft else 1)
        self.budget = system.kv_budget_tokens(pol.uses_draft)
        if self.reserve.max() > self.budget:
            raise InvalidInputError(f"A request needs {int(self.reserve.max())} KV tokens but the budget is {self.budget}.")
        self.tape = AcceptanceTape(workload.alpha, self.output, self.max_k, np.random.default_rng(seed),
                                   pad=cfg.max_chunk + 1)
        self.batch = RunningBatch()
        self._init_controller()
        n = len(workload)
        self.first_token, self.finish = np.full(n, np.nan), np.full(n, np.nan)
        self.k_steps, self.steps = np.zeros(n), np.zeros(n, np.int64)
        self.drawn = np.zeros(n, np.int64)
        self.t, self.next_id, self.done, self.reserved = 0.0, 0, 0, 0
        self.row = None  # step time on the context grid for the batch's current k_r
        self.since_decision, self.redecide = 0, True
        self.k_max, self.k_uniform = 0, True  # max k_r of the batch and whether all k_r are equal, set with the row
        with np.errstate(invalid="ignore"):  # without a draft the k > 0 rows are inf (never used)
            self._decode_slope = sm.decode[..., 1:] - sm.decode[..., :-1]  # uniform-k rows' slopes, once
        # Python copies for the scalar lookups of the event loop (numpy scalar indexing costs more)
        self._arrival, self._reserve, self._prompt = self.arrival.tolist(), self.reserve.tolist(), self.prompt.tolist()
        self.stats = dict(decode_steps=0, prefill_steps=0, batch_steps=0, peak_reserved_tokens=0,
                          peak_used_tokens=0, prefill_time_s=0.0, decode_time_s=0.0, idle_time_s=0.0)
        self._steps_1 = np.arange(1, cfg.max_chunk + 1)
        self._plain_tokens = np.broadcast_to(self._steps_1, (self.max_batch, cfg.max_chunk))  # k = 0: j tokens by step j

    def _init_controller(self) -> None:
        cfg, pol = self.cfg, self.pol
        self.est = make_estimator(cfg.estimator, beta=cfg.ema_beta, window=cfg.window, prior=cfg.prior)
        self.online = None
        self.ctrl = None
        if not pol.adaptive:
            return
        pricer = self.sm
        if cfg.pricing == "online":
            prior = profile_prior(self.sm) if cfg.step_prior is None else np.asarray(cfg.step_prior, float)
            pricer = self.online = OnlineStepModel(prior, self.max_k, window=cfg.fit_window,
                                                   prior_weight=cfg.prior_weight)
        self.ctrl = GoodputController(pricer, self.max_k, per_request=pol.kind == "per-request", rule=cfg.rule)

    def waiting_or_running(self) -> bool:
        return self.done < self.arrival.size

    def idle_until_next_arrival(self) -> None:
        t_next = float(self.arrival[self.next_id])
        self.stats["idle_time_s"] += max(0.0, t_next - self.t)
        self.t = max(self.t, t_next)

    def _admissible(self) -> int:
        """How many queued requests the next prefill admits (FCFS: slots, KV budget, prefill tokens)."""
        lo, arrival = self.next_id, self._arrival
        slots = self.max_batch - self.batch.size
        if lo >= len(arrival) or slots <= 0 or arrival[lo] > self.t:
            return 0
        if slots == 1 or lo + 1 == len(arrival) or arrival[lo + 1] > self.t:  # one candidate
            return int(self.reserved + self._reserve[lo] <= self.budget)
        hi = min(int(np.searchsorted(self.arrival, self.t, side="right")), lo + slots)
        kv = np.cumsum(self.reserve[lo:hi]) + self.reserved
        tok = np.cumsum(self.prompt[lo:hi])
        fits = (kv <= self.budget) & ((tok <= self.cfg.max_prefill_tokens) | (np.arange(hi - lo) == 0))
        return int(fits.argmin()) if not fits.all() else hi - lo

    def admit(self) -> bool:
        """Run one prefill step over the admissible queued requests; False when none is admissible."""
        count = self._admissible()
        if count == 0:
            return False
        lo = self.next_id
        hi = self.next_id = lo + count
        new = np.arange(lo, hi)
        self.reserved += sum(self._reserve[lo:hi])
        st = self.stats
        st["peak_reserved_tokens"] = max(st["peak_reserved_tokens"], self.reserved)
        dt = self.sm.prefill_time(count, sum(self._prompt[lo:hi]), self.pol.uses_draft)
        self.t += dt
        st["prefill_time_s"] += dt
        st["prefill_steps"] += 1
        self.first_token[lo:hi] = self.t
        one = self.output[lo:hi] == 1
        if one.any():
            self._finish(new[one], np.zeros(int(one.sum())), np.zeros(int(one.sum()), np.int64),
                         np.zeros(int(one.sum()), np.int64))
            keep = new[~one]
            self.batch.admit(keep, self.prompt[keep], self.output[keep] - 1, self.tape.start[keep])
        else:
            keep = new
            self.batch.admit(keep, self.prompt[lo:hi], self.output[lo:hi] - 1, self.tape.start[lo:hi])
        if self.ctrl is not None:
            self.est.add(keep.size, self.cfg.prior if self.cfg.init_alpha == "prior" else None)
        self.redecide = True
        return True

    def _finish(self, ids: np.ndarray, k_steps, steps, drawn) -> None:
        self.finish[ids] = self.t
        self.k_steps[ids], self.steps[ids], self.drawn[ids] = k_steps, steps, drawn
        self.reserved -= int(self.reserve[ids].sum())
        self.done += ids.size

    def choose_k(self, kv_tokens: float) -> None:
        """Set the batch's k_r: the fixed k, or the controller's choice when a decision is due."""
        b = self.batch
        if self.ctrl is None:
            if self.row is None or self.redecide:
                b.k[:] = self.pol.k
                self._set_uniform_row(self.pol.k)
                self.redecide = False
            return
        if not (self.redecide or self.since_decision >= self.cfg.decide_every):
            return
        alpha = self.workload.alpha[b.ids] if self.cfg.alpha_source == "oracle" else self.est.alpha
        if self.online is not None:
            self.online.refit_if_due()
        ctrl = self.ctrl
        if not ctrl.per_request:
            b.k[:] = k = ctrl.uniform_k(alpha, kv_tokens / b.size)
            self._set_uniform_row(k)
        else:
            b.k[:] = ctrl.choose(alpha, kv_tokens / b.size)
            k_max = int(_max(b.k))
            if k_max == int(_min(b.k)):
                self._set_uniform_row(k_max)
            else:
                self.row, self.k_max, self.k_uniform = self.sm.decode_row(b.k), k_max, False
                self._slope = self.row[1:] - self.row[:-1]  # BatchStepModel.at_context's table[i+1] - table[i]
        self.since_decision, self.redecide = 0, False

    def _set_uniform_row(self, k: int) -> None:
        """The step-time row on the context grid for k proposals per request, with its precomputed slopes."""
        n = self.batch.size
        self.row, self._slope, self.k_max, self.k_uniform = self.sm.decode[n - 1, k], self._decode_slope[n - 1, k], k, True

    def _horizon(self, n: int, kv_tokens: float) -> tuple[int, float | None]:
        """Steps to read ahead, and the offset of the next arrival that could be admitted (None if none)."""
        b = self.batch
        steps = min(self.cfg.max_chunk, int(b.remaining.min()))
        if self.ctrl is not None:
            steps = min(steps, self.cfg.decide_every - self.since_decision)
        nxt = self.next_id
        if nxt < len(self._arrival) and n < self.max_batch and self.reserved + self._reserve[nxt] <= self.budget:
            wait = self._arrival[nxt] - self.t
            step_now = float(self.sm.at_context(self.row, kv_tokens / n))
            return max(1, min(steps, int(wait / step_now) + 1)), wait
        return max(1, steps), None

    def decode_block(self) -> None:
        """Decode up to the first event: a request finishes, an arrival becomes admissible, or a decision."""
        b, n = self.batch, self.batch.size
        kv0 = float(_sum(b.context))
        self.choose_k(kv0)
        k_max = self.k_max
        steps, wait = self._horizon(n, kv0)
        steps_1 = self._steps_1[:steps]
        if k_max > 0:
            draws = self.tape.window(b.position, steps) if n > 1 else self.tape.draws[None, b.position[0]:][:, :steps]
            accepted = np.minimum(draws, b.k[:, None])
            tokens = accepted.cumsum(axis=1)
            tokens += steps_1
        else:
            accepted, tokens = None, self._plain_tokens[:n, :steps]
        last, finished = steps - 1, False
        if _any(tokens[:, -1] >= b.remaining):  # hit is monotone in the step
            hit = (tokens >= b.remaining[:, None]).any(axis=0)
            last, finished = int(hit.argmax()), True
        kv = np.empty(steps)
        kv[0] = kv0
        kv[1:] = tokens[0, :-1] if n == 1 else tokens[:, :-1].sum(axis=0)  # integers: exact in any order
        kv[1:] += kv0
        times = self._step_times(kv * (1.0 / n))
        elapsed = times.cumsum()
        if wait is not None:
            arrival_step = int(np.searchsorted(elapsed, wait))  # the step ending at/after the arrival
            if arrival_step < last:
                last, finished = arrival_step, False
        m = last + 1
        self._commit(m, tokens[:, last], elapsed[last], accepted, kv[:m], times[:m], finished)

    def _step_times(self, context: np.ndarray) -> np.ndarray:
        """``BatchStepModel.at_context(self.row, context)`` with the row's slopes precomputed (same floats)."""
        x = context * self.sm._inv_dctx
        i0 = np.minimum(x.astype(np.int64), self.sm._last_cell)
        return self.row[i0] + self._slope[i0] * (x - i0)

    def _commit(self, m: int, tokens, seconds: float, accepted, kv, times, finished: bool) -> None:
        b, st, k_max = self.batch, self.stats, self.k_max
        n = b.size
        self.t += seconds
        st["decode_time_s"] += seconds
        kept = np.minimum(tokens, b.remaining) if finished else tokens  # unfinished: nothing is cut
        st["peak_used_tokens"] = max(st["peak_used_tokens"], int(kv[0]) + int(_sum(kept)) + n * (k_max + 1))
        st["decode_steps"] += m
        st["batch_steps"] += n * m
        self.since_decision += m
        b.advance(m, tokens, kept)
        if accepted is not None:
            self._observe(accepted[:, :m], k_max, kv, times)
        if finished:
            keep, out = b.retire()
            self._finish(out["ids"], out["k_steps"], out["steps"], out["drawn"])
            if self.ctrl is not None:
                self.est.keep(keep)
            self.redecide = True

    def _observe(self, accepted, k_max: int, kv, times) -> None:
        """Feed the acceptance estimator and the online step-time fit with the committed steps."""
        if self.ctrl is None:
            return
        k_r = self.batch.k
        uniform = self.k_uniform
        trials = accepted + (accepted < (k_max if uniform else k_r[:, None]))
        if not uniform:
            trials *= (k_r > 0)[:, None]
        self.est.update(accepted, trials, all_informative=uniform)
        if self.online is not None:
            self.online.observe(kv, k_r.size, float(k_max * k_r.size if uniform else k_r.sum()), k_max, times)

    def result(self, qps: float) -> SimResult:
        st = self.stats
        stats = {"decode_steps": st["decode_steps"], "prefill_steps": st["prefill_steps"],
                 "mean_batch": st["batch_steps"] / max(st["decode_steps"], 1), "kv_budget_tokens": self.budget,
                 "peak_reserved_tokens": st["peak_reserved_tokens"], "peak_used_tokens": st["peak_used_tokens"],
                 "prefill_time_s": st["prefill_time_s"], "decode_time_s": st["decode_time_s"],
                 "idle_time_s": st["idle_time_s"], "seed": self.seed}
        if self.online is not None:
            stats["step_model_coef"] = [float(c) for c in self.online.coef]
        return SimResult.from_arrays(
            workload=self.workload, policy=self.pol.name, first_token_s=self.first_token, finish_s=self.finish,
            emitted=self.output.copy(), k_sum=self.k_steps, steps=self.steps, qps=qps, stats=stats,
            drawn=self.drawn)
