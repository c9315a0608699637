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
  token, G_r ~ Geometric: P(a_r >= j) = α_r^j with α_r the request's true acceptance rate. Tokens
  beyond a request's output length are discarded, so every request ends with exactly its length.
- The policy (:mod:`~sdsl.serving.policies`) sets k_r; adaptive policies use the online
  estimates of :mod:`~sdsl.serving.estimators` and :class:`~sdsl.serving.controller.GoodputController`.

Speed: between events (arrival admitted, request finished, controller re-decision) the batch is
fixed, so the simulator draws the accept counts of S steps for all n requests as one (n, S) array,
finds the first event by cumulative sums, commits the steps up to it and discards the rest (the
draws are independent, so discarding them keeps the process exact and the run deterministic).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdsl.errors import InvalidInputError
from sdsl.serving.controller import GoodputController
from sdsl.serving.estimators import make_estimator
from sdsl.serving.metrics import SimResult
from sdsl.serving.policies import Policy, parse_policy
from sdsl.serving.system import ServingSystem
from sdsl.serving.workload import Workload

__all__ = ["SimConfig", "simulate"]


@dataclass(frozen=True)
class SimConfig:
    """Scheduler and controller settings.

    decide_every: adaptive policies re-choose k whenever the batch changes and at least every this
    many steps (TurboSpec re-decides every step; the controller's choice only moves with the batch
    and with α̂, and 1 reproduces the paper exactly at ~4× the simulation cost).
    init_alpha: a new request's α̂ starts at the ``"prior"`` (TurboSpec's 0.7) or at the current
    ``"global"`` batch estimate. ``"global"`` can lock the server into k = 0: one low-α request
    drags the global estimate down, k = 0 is chosen, and k = 0 steps carry no evidence to undo it.
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

    def __post_init__(self) -> None:
        if ((self.max_batch is not None and self.max_batch < 1) or self.max_prefill_tokens < 1
                or self.decide_every < 1 or self.max_chunk < 1):
            raise InvalidInputError("max_batch, max_prefill_tokens, decide_every and max_chunk must be >= 1.")
        if self.max_k < 0:
            raise InvalidInputError("max_k must be >= 0.")
        if self.init_alpha not in ("prior", "global"):
            raise InvalidInputError("init_alpha must be 'prior' or 'global'.")


def simulate(workload: Workload, system: ServingSystem, policy: Policy | str, config: SimConfig | None = None,
             seed: int = 0, qps: float | None = None) -> SimResult:
    """Run ``workload`` through ``system`` under ``policy``; deterministic for a ``seed``."""
    cfg = config or SimConfig()
    pol = parse_policy(policy)
    sm = system.step_model
    max_batch = sm.max_batch if cfg.max_batch is None else cfg.max_batch
    if max_batch > sm.max_batch:
        raise InvalidInputError(f"max_batch {max_batch} exceeds the step model's table ({sm.max_batch}).")
    if pol.uses_draft and not sm.has_draft:
        raise InvalidInputError(f"Policy {pol.name} needs a draft model.")
    max_k = max(cfg.max_k, pol.k) if pol.kind == "fixed" else cfg.max_k
    if max_k > sm.max_k:
        raise InvalidInputError(f"k up to {max_k} exceeds the step model's table (max_k={sm.max_k}).")
    if np.any(~np.isfinite(workload.alpha)) or np.any((workload.alpha <= 0) | (workload.alpha >= 1)):
        raise InvalidInputError("Every request needs a true acceptance rate in (0, 1); use Workload.with_alpha.")

    N = len(workload)
    arr = np.asarray(workload.arrival_s, float)
    prompt = np.asarray(workload.prompt_tokens, np.int64)
    out = np.asarray(workload.output_tokens, np.int64)
    log_alpha = np.log(np.asarray(workload.alpha, float))
    use_draft = pol.uses_draft
    lookahead = (max_k + 1) if use_draft else 1
    reserve = prompt + out + lookahead
    budget = system.kv_budget_tokens(use_draft)
    if reserve.max() > budget:
        raise InvalidInputError(f"A request needs {int(reserve.max())} KV tokens but the budget is {budget}.")

    rng = np.random.default_rng(seed)
    est = make_estimator(cfg.estimator, beta=cfg.ema_beta, window=cfg.window, prior=cfg.prior)
    ctrl = GoodputController(sm, max_k, per_request=pol.kind == "per-request", rule=cfg.rule) if pol.adaptive else None
    fixed_k = pol.k if pol.kind == "fixed" else 0

    first_tok = np.full(N, np.nan)
    finish = np.full(N, np.nan)
    emitted = np.zeros(N, np.int64)
    k_sum = np.zeros(N)
    steps = np.zeros(N, np.int64)

    ids = np.zeros(0, np.int64)
    ctx = np.zeros(0)
    rem = np.zeros(0, np.int64)
    inv_la = np.zeros(0)
    steps_1 = np.arange(1.0, cfg.max_chunk + 1.0)
    s_k = np.zeros(0)  # per-slot Σk and step counts, written to the request arrays at finish
    s_steps = np.zeros(0, np.int64)
    s_em = np.zeros(0, np.int64)  # tokens emitted by decode steps, per slot
    inv_dctx = 1.0 / sm.context_step
    last_cell = len(sm.ctx_grid) - 2
    k_r = np.zeros(0)
    reserved = 0
    peak_reserved = peak_used = 0
    nxt = 0
    n_done = 0
    t = 0.0
    since_decision = 0
    redecide = True
    row, row_n = None, 0
    prefill_s = decode_s = idle_s = 0.0
    n_decode_steps = n_prefill_steps = 0
    batch_steps = 0  # Σ over decode steps of the batch size

    while n_done < N:
        n = ids.size
        # ---- admission + prefill -------------------------------------------------------------
        if nxt < N and arr[nxt] <= t and n < max_batch and reserved + reserve[nxt] <= budget:
            j, tok = nxt, 0
            while (j < N and arr[j] <= t and n + (j - nxt) < max_batch and reserved + reserve[j] <= budget
                   and (j == nxt or tok + prompt[j] <= cfg.max_prefill_tokens)):
                reserved += int(reserve[j])
                tok += int(prompt[j])
                j += 1
            new = np.arange(nxt, j)
            nxt = j
            peak_reserved = max(peak_reserved, reserved)
            dt = sm.prefill_time(new.size, tok, use_draft)
            t += dt
            prefill_s += dt
            n_prefill_steps += 1
            first_tok[new] = t
            emitted[new] = 1
            done = out[new] == 1
            if done.any():
                finish[new[done]] = t
                reserved -= int(reserve[new[done]].sum())
                n_done += int(done.sum())
            keep = new[~done]
            ids = np.concatenate([ids, keep])
            ctx = np.concatenate([ctx, prompt[keep].astype(float)])
            rem = np.concatenate([rem, out[keep] - 1])
            inv_la = np.concatenate([inv_la, 1.0 / log_alpha[keep]])
            s_k = np.concatenate([s_k, np.zeros(keep.size)])
            s_steps = np.concatenate([s_steps, np.zeros(keep.size, np.int64)])
            s_em = np.concatenate([s_em, np.zeros(keep.size, np.int64)])
            est.add(keep.size, cfg.prior if cfg.init_alpha == "prior" else None)
            redecide = True
            continue
        if n == 0:  # idle until the next arrival
            idle_s += max(0.0, float(arr[nxt]) - t)
            t = max(t, arr[nxt])
            continue

        # ---- speculation lengths ------------------------------------------------------------
        ctx_sum = float(ctx.sum())
        if ctrl is None:
            if k_r.size != n:
                k_r = np.full(n, float(fixed_k))
                row = None
        elif redecide or since_decision >= cfg.decide_every:
            k_r = ctrl.choose(est.alpha, ctx_sum / n).astype(float)
            since_decision = 0
            redecide = False
            row = None
        if row is None or row_n != n:
            row, row_n = sm.decode_row(k_r), n
        k_max = int(k_r.max())

        # ---- how many steps to draw: the first finish is at step <= min(rem) ------------------
        S = min(cfg.max_chunk, int(rem.min()))
        if ctrl is not None:
            S = min(S, cfg.decide_every - since_decision)
        admit_next = nxt < N and n < max_batch and reserved + reserve[nxt] <= budget
        if admit_next:
            x = ctx_sum / n * inv_dctx
            i0 = min(int(x), last_cell)
            t_now = float(row[i0] + (row[i0 + 1] - row[i0]) * (x - i0))
            S = min(S, int((arr[nxt] - t) / t_now) + 1)
        S = max(S, 1)

        # ---- draw S steps of accept counts, find the first event -------------------------------
        if k_max > 0:
            u = rng.random((n, S))
            np.subtract(1.0, u, out=u)
            np.log(u, out=u)
            u *= inv_la[:, None]
            np.floor(u, out=u)
            acc = np.minimum(u, k_r[:, None], out=u)
            cum = acc.cumsum(axis=1)
            cum += steps_1[:S]
        else:
            acc = None
            cum = np.broadcast_to(steps_1[:S], (n, S))
        hit = (cum >= rem[:, None]).any(axis=0)
        s_fin = int(hit.argmax()) if hit[-1] else S - 1  # hit is monotone in s
        col = cum.sum(axis=0)
        ctx_mean = np.empty(S)
        ctx_mean[0] = ctx_sum
        ctx_mean[1:] = ctx_sum + col[:-1]
        ctx_mean *= 1.0 / n
        t_steps = sm.interp_row(row, ctx_mean)
        t_cum = t_steps.cumsum()
        s_end = s_fin
        if admit_next:
            s_end = min(s_end, int(np.searchsorted(t_cum, arr[nxt] - t)))  # first step ending at/after it
        s_end = min(s_end, S - 1)
        m = s_end + 1

        # ---- commit m steps -------------------------------------------------------------------
        t += float(t_cum[s_end])
        decode_s += float(t_cum[s_end])
        got = np.minimum(cum[:, s_end], rem).astype(np.int64)
        got_sum = int(got.sum())
        peak_used = max(peak_used, int(ctx_sum) + got_sum + n * (k_max + 1))
        rem -= got
        ctx += got
        s_em += got
        if k_max > 0:
            s_k += k_r * m
        s_steps += m
        n_decode_steps += m
        batch_steps += n * m
        since_decision += m
        if use_draft and acc is not None:
            a_m = acc[:, :m]
            trials = a_m + (a_m < k_r[:, None])
            uniform_k = k_max == int(k_r.min())
            if not uniform_k:
                trials *= (k_r > 0)[:, None]
            est.update(a_m, trials, all_informative=uniform_k)
        fin = rem <= 0
        if fin.any():
            done_ids = ids[fin]
            finish[done_ids] = t
            k_sum[done_ids] = s_k[fin]
            emitted[done_ids] += s_em[fin]
            steps[done_ids] = s_steps[fin]
            reserved -= int(reserve[done_ids].sum())
            n_done += done_ids.size
            live = ~fin
            ids, ctx, rem, inv_la, k_r = ids[live], ctx[live], rem[live], inv_la[live], k_r[live]
            s_k, s_steps, s_em = s_k[live], s_steps[live], s_em[live]
            est.keep(live)
            redecide = True

    return SimResult.from_arrays(
        workload=workload, policy=pol.name, first_token_s=first_tok, finish_s=finish, emitted=emitted,
        k_sum=k_sum, steps=steps, qps=qps if qps is not None else workload.qps,
        stats={"decode_steps": n_decode_steps, "prefill_steps": n_prefill_steps,
               "mean_batch": batch_steps / max(n_decode_steps, 1), "kv_budget_tokens": budget,
               "peak_reserved_tokens": peak_reserved, "peak_used_tokens": peak_used, "prefill_time_s": prefill_s,
               "decode_time_s": decode_s, "idle_time_s": idle_s, "seed": seed},
    )
