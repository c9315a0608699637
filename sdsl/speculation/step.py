"""One speculative step of any proposer, chain or tree, priced on the roofline: :func:`price_step`, the one
function every sdsl caller prices a step with (``predict``, the draft grid, the proposer ranking, the serving
simulator's step tables, the validations). Summary of docs/model.md §3.3 and §3.5.

A step drafts (``proposer.draft_time``: γ passes for a chain, steps passes over the top-k frontier for
an SGLang-style tree, one pass for Medusa, CPU time for n-gram lookup), then the target verifies
n tokens per sequence in one forward (n = γ + 1 for a chain; n = the tree's draft tokens, root
included). A tree's tokens attend to every tree position under a mask (the kernel computes the whole
n × n block, not the causal half), priced as context L + n/2. Emitted tokens per step τ come from the
acceptance (Leviathan et al. 2023 Eq. 1 for i.i.d. α, the per-position sum for a vector, the
SpecInfer/Sequoia tree sum for a tree; :func:`step_tau`) or are given (a measured accepted length):

    tokens/s = b·τ / (T_draft + T_verify(b, n) + T_worker + T_host),   TPOT = T_step / τ.

T_worker is what an engine's speculative worker runs on the GPU besides drafting and verifying
(:meth:`Proposer.worker_time`; for EAGLE heads the draft-extend pass over the τ accepted tokens, top-k
selection per depth and the tree-verification kernels; docs/model.md §3.5). T_host is the host time the
GPU waits for, from :func:`_host_seconds` alone (the one place an engine's execution is priced).

Everything broadcasts over batch, γ (or arrays of trees), τ and context; γ = 0 is plain decoding.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from sdsl.acceptance import Acceptance, chain_tau
from sdsl.speculation.resolve import resolve_acceptance
from sdsl._checks import broadcast_shapes, count, draft_length, non_negative, numbers
from sdsl.roofline.deployment import Deployment
from sdsl.speculation.priced_step import PricedStep
from sdsl.speculation.proposers import forward_step, make_proposer
from sdsl.errors import InvalidInputError

__all__ = ["TreeShape", "parse_tree", "price_step", "step_tau", "price_speculation"]


@dataclass(frozen=True)
class TreeShape:
    """SGLang's (``--speculative-num-steps``, ``--speculative-eagle-topk``, ``--speculative-num-draft-tokens``):
    draft depth, branching per depth, and tokens the target verifies (root included)."""

    steps: int
    topk: int
    tokens: int

    def __post_init__(self):
        s, k, n = self.steps, self.topk, self.tokens
        if min(s, k) < 1 or n < 2:
            raise InvalidInputError(f"Tree {s},{k},{n} cannot exist: steps and topk must be >= 1 and tokens >= 2.")
        most = 1 + k + (s - 1) * k * k  # the root + every candidate the expansion scores
        if k == 1 and n > s + 1 or n > most:
            raise InvalidInputError(f"Tree {s},{k},{n} cannot exist: {s} steps of top-{k} draft at most "
                                    f"{min(most, s + 1) if k == 1 else most} tokens (root included).")

    @property
    def is_chain(self) -> bool:
        return self.topk == 1


def parse_tree(text) -> TreeShape:
    """'8,8,64' or (8, 8, 64) (as a JSON result lists it) → TreeShape(8, 8, 64); anything else is a one-line
    InvalidInputError."""
    if isinstance(text, TreeShape):
        return text
    parts = list(text) if isinstance(text, (tuple, list, np.ndarray)) else str(text).split(",")
    try:
        s, k, n = (int(v) if float(v) == int(float(v)) else None for v in parts)
        if None in (s, k, n):
            raise ValueError
    except (ValueError, TypeError, OverflowError):  # OverflowError: an infinite entry
        raise InvalidInputError(f"A tree is STEPS,TOPK,TOKENS (three whole numbers, e.g. 8,8,64); got {text!r}.") from None
    return TreeShape(s, k, n)


def _chain(gamma, proposer):
    g = draft_length(gamma)
    if proposer.max_depth is not None and np.any(g > proposer.max_depth):
        raise InvalidInputError(f"{proposer.name} drafts at most {proposer.max_depth} tokens; got gamma={int(np.max(g))}.")
    return g, 1, g + 1.0, 0.0


def _trees(tree, proposer):
    """(steps, topk, verified tokens, extra attention context of the mask) of one tree or of arrays of trees
    (a dict with ``steps``, ``topk``, ``tokens``; each must satisfy :class:`TreeShape`'s bounds)."""
    if isinstance(tree, dict):
        s, k, n = (np.asarray(tree[key], dtype=float) for key in ("steps", "topk", "tokens"))
        bad = (s < 1) | (k < 1) | (n < 2) | (n > np.where(k == 1, s + 1, 1 + k + (s - 1) * k * k))
        if np.any(bad):
            raise InvalidInputError("A tree (steps, topk, tokens) in the grid cannot exist.")
    else:
        shape = parse_tree(tree)
        s, k, n = shape.steps, shape.topk, float(shape.tokens)
    if proposer.max_depth is not None and np.any(s > proposer.max_depth):
        raise InvalidInputError(f"{proposer.name} drafts at most {proposer.max_depth} levels; a tree has {int(np.max(s))}.")
    return s, k, n, np.where(np.asarray(k) == 1, 0.0, np.asarray(n) / 2.0)



def _price_distinct_shapes(price, x, y, many: bool):
    """``price(x, y)`` (a StepTime-like dataclass or an array) for every (x, y). With ``many`` (an array of trees on
    axis 0, shape (T, 1, ...)), each distinct (x, y) pair is priced once and every field gathered back: a
    949-triple SGLang grid has 128 verify sizes and 32 drafting shapes."""
    if not many:
        return price(x, y)
    x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    pairs, inverse = np.unique(np.stack([x.reshape(len(x), -1)[:, 0], y.reshape(len(y), -1)[:, 0]], axis=1), axis=0,
                               return_inverse=True)
    lead = (-1,) + (1,) * (x.ndim - 1)
    out = price(pairs[:, 0].reshape(lead), pairs[:, 1].reshape(lead))

    def gather(a):
        a = np.asarray(a)
        return np.take(np.broadcast_to(a, (len(pairs),) + a.shape[1:]), inverse.ravel(), axis=0)

    if hasattr(out, "__dataclass_fields__"):
        return replace(out, **{f.name: gather(getattr(out, f.name)) for f in fields(out)})
    return gather(out)


def _host_seconds(proposer, deployment, *, pieces, overhead_s, pass_overhead_s, plain_overhead_s):
    """Exposed host seconds (the GPU waits for them) of one speculative step and of one plain step: every host-time
    term of :func:`price_step` comes from here, and only here. The deployment's engine profile prices its terms
    (:func:`sdsl.engine.profiles.host_seconds`: host per step and whether it overlaps the GPU, eager launches beyond the
    GPU time, host per speculative step and per separate forward; docs/model.md §3.9) from ``pieces``
    (:class:`~sdsl.engine.profiles.StepPieces`: the step's GPU seconds and shape).

    The explicit terms are added on top, with no overlap: ``overhead_s`` once per speculative step;
    ``pass_overhead_s`` per forward — the verify pass, every separate drafting pass (:meth:`Proposer.passes`) and
    every worker pass (:meth:`Proposer.worker_passes`) of the step, and the plain step's one forward;
    ``plain_overhead_s`` once per plain step (sdsl's reference decoder, whose host times are measured, gives them
    with the ``ideal`` engine)."""
    from sdsl.engine.profiles import host_seconds

    engine_step, engine_plain = host_seconds(deployment.engine, pieces)
    forwards = 1.0 + pieces.passes
    spec = overhead_s + pass_overhead_s * forwards
    return engine_step + spec + 0.0 * pieces.gpu_step_s, engine_plain + plain_overhead_s + pass_overhead_s + 0.0 * pieces.gpu_plain_s


def _check_seconds(**values):
    out = {}
    for name, v in values.items():
        a = numbers(v, name)
        if np.any(~np.isfinite(a)) or np.any(a < 0):
            raise InvalidInputError("Overheads (per step and per forward pass) must be finite non-negative seconds.")
        out[name] = a
    return out


def step_tau(acceptance, *, gamma=None, tree=None, rank_ratio=None):
    """(τ, its source) of a chain of ``gamma`` drafts or an SGLang ``tree`` (TreeShape or "S,K,N") under
    ``acceptance`` — an :class:`~sdsl.acceptance.Acceptance`, or for a chain an i.i.d. α (number/array):
    Leviathan et al. Eq. (1), its per-position sum, or the tree model (:func:`sdsl.acceptance.trees.sglang_tree_tau`)."""
    if tree is None:
        return chain_tau(acceptance, gamma), getattr(acceptance, "source", "given")
    if isinstance(tree, dict):
        raise InvalidInputError("An array of trees needs its tau given (e.g. from sdsl.plan.tree_search.sglang_grid).")
    if not isinstance(acceptance, Acceptance):
        acceptance = Acceptance.from_iid(float(acceptance))
    from sdsl.acceptance.trees import sglang_tree_tau

    shape = parse_tree(tree)
    t = sglang_tree_tau(acceptance, shape.steps, shape.topk, shape.tokens, rank_ratio)
    return np.asarray(t), acceptance.source if shape.is_chain else f"{acceptance.source} (tree model)"


def _resolve_tau(target, proposer, tau, acceptance, gamma, tree, rank_ratio, tau_source, options):
    """(τ, the Acceptance or None, source): ``tau`` as given, else from ``acceptance`` (an i.i.d. α array for a
    chain is used as is) or, without either, :func:`sdsl.speculation.resolve.resolve_acceptance`."""
    if tau is not None:
        if acceptance is not None:
            raise InvalidInputError("Give tau or an acceptance, not both.")
        return numbers(tau, "tau"), None, tau_source
    if acceptance is not None and not isinstance(acceptance, (Acceptance, dict)) and not hasattr(acceptance, "tau"):
        acceptance = numbers(acceptance, "acceptance")
    if acceptance is None or isinstance(acceptance, dict) or tree is not None and not isinstance(acceptance, Acceptance):
        acceptance = resolve_acceptance(proposer, target, acceptance, **options)
    t, source = step_tau(acceptance, gamma=gamma, tree=tree, rank_ratio=rank_ratio)
    return np.asarray(t, dtype=float), acceptance if isinstance(acceptance, Acceptance) else None, source


def price_step(target, proposer, deployment, *, tau=None, acceptance=None, gamma=None, tree=None, batch=1,
               context=None, overhead_s=0.0, pass_overhead_s=0.0, plain_overhead_s=0.0, rank_ratio=None,
               tau_source: str = "given", acceptance_options: dict | None = None, engine=None) -> PricedStep:
    """Price one speculative step (module docstring) → :class:`~sdsl.speculation.priced_step.PricedStep`.

    ``target``: ModelSpec or catalog name; ``proposer``: a :class:`~sdsl.speculation.proposers.Proposer` or its name
    ("eagle3", "draft:llama-3.2-1b", ...); ``deployment``: a Deployment or anything ``Deployment.of`` takes.
    Give ``gamma`` (chain lengths, broadcast) or ``tree`` (a TreeShape, "S,K,N", or a dict of arrays
    steps/topk/tokens). τ: ``tau`` (expected emitted tokens per step, e.g. a measured accepted length; its
    ``tau_source`` is recorded), else from ``acceptance`` (an Acceptance; an i.i.d. α, number or array, for a
    chain; a mapping proposer → either), else resolved (:func:`sdsl.speculation.resolve.resolve_acceptance`:
    SDSL's plane for a draft model; ``acceptance_options``, e.g. ``{"draft_tokens": 3e11}``, go to its
    rules). ``context`` (default the deployment's) broadcasts. ``engine`` (default the deployment's own, whose
    default is the newest vLLM profile on a GPU) is any :func:`sdsl.engine.profiles.resolve_engine` spec: ``"ideal"``,
    ``"vllm"``, ``"vllm:2025-04"``, a profile name or file. Host time (:func:`_host_seconds`): the engine's terms,
    plus ``overhead_s`` once per speculative step, ``pass_overhead_s`` per forward (plain step included) and
    ``plain_overhead_s`` once per plain step, added without overlap. ``gamma=0`` prices a speculative step that
    drafts nothing, which still pays the engine's drafter tax (docs/model.md §3.9); decoding with speculation off is
    the result's ``plain_tokens_per_s``, which is what a ranking reports at k = 0.
    """
    from sdsl.catalog.models import get_model

    dep = Deployment.of(deployment)
    if engine is not None:
        dep = dep.replace(engine=engine)
    proposer = make_proposer(proposer)
    target = target if hasattr(target, "d_model") else get_model(target)
    if (gamma is None) == (tree is None):
        raise InvalidInputError("Give a chain length gamma or a tree shape, not both.")
    b = count(batch)
    ctx = non_negative(dep.context if context is None else context, "context", "a non-negative number of tokens")
    steps, topk, n_verify, mask_extra = _chain(gamma, proposer) if tree is None else _trees(tree, proposer)
    if np.any(np.asarray(n_verify, dtype=float) > target.max_context):
        raise InvalidInputError(f"A step verifying {float(np.max(n_verify)):g} tokens does not fit {target.name}'s "
                                f"{target.max_context}-token context; draft fewer tokens per step.")
    if dep.engine.chains_only and np.any(np.asarray(topk) > 1):
        raise InvalidInputError(f"Engine profile {dep.engine.name} verifies chains only (top-1 drafts): price a chain, "
                                "or a tree under an engine that runs trees (sglang).")
    t, acc, source = _resolve_tau(target, proposer, tau, acceptance, gamma, tree, rank_ratio, tau_source,
                                  acceptance_options or {})
    broadcast_shapes(**{"gamma": steps} if tree is None else {}, tau=t, batch=b, context=ctx)
    most = np.minimum(n_verify, np.asarray(steps, dtype=float) + 1.0)  # one token per draft level + the bonus token
    if np.any(~np.isfinite(t)) or np.any(t < 1) or np.any(t > most + 1e-9):
        raise InvalidInputError(f"Expected tokens per step must lie in [1, {float(np.max(most)):g}]: a step emits at most "
                                "one token per draft level plus one, and no more than it verifies.")
    host = _check_seconds(overhead_s=overhead_s, pass_overhead_s=pass_overhead_s, plain_overhead_s=plain_overhead_s)
    plain, verify, t_propose, worker, pieces = _gpu_parts(target, proposer, dep, b, ctx, steps, topk, n_verify,
                                                          mask_extra, t, isinstance(tree, dict))
    t_draft = proposer.step_time(target, dep, batch=b, q=1, context=ctx)
    host_step, host_plain = _host_seconds(proposer, dep, pieces=pieces, **host)
    t_plain = plain.total_s + host_plain
    # k = 0 of a proposer with no drafter left running is plain decoding: the plain step, host and kernels included
    host_step = np.where(np.asarray(pieces.speculative, dtype=bool), host_step, t_plain - pieces.gpu_step_s)
    t_step = pieces.gpu_step_s + host_step
    tps, plain_tps = b * t / t_step, b / t_plain
    return PricedStep(
        tau=t, t_draft_s=t_draft, t_propose_s=t_propose, t_verify_s=verify.total_s, t_worker_s=worker + 0.0 * t_step,
        t_host_s=host_step + 0.0 * t_step, t_step_s=t_step, t_plain_s=t_plain, tokens_per_s=tps,
        plain_tokens_per_s=plain_tps, speedup=tps / plain_tps, tpot_s=t_step / t, cost_ratio=t_draft / t_plain,
        bound=verify.bound, verify_tokens=n_verify, verify_time=verify, plain_time=plain,
        target=getattr(target, "name", ""), proposer=proposer.name, gamma=gamma,
        tree=_tree_input(tree), batch=np.asarray(batch), deployment=dep, acceptance=acc, acceptance_source=source,
        pieces=pieces)


def _gpu_parts(target, proposer, dep, b, ctx, steps, topk, n_verify, mask_extra, tau, many):
    """(plain forward, verify forward, all drafting, worker GPU seconds, StepPieces) of a step on the deployment's
    engine: the target's forwards at the batch the engine pads them to, the rejection sampler's probabilities where
    the engine writes them."""
    engine = dep.engine
    plain = _padded_forward(target, dep, engine, b, 1.0, ctx)
    verify = _price_distinct_shapes(lambda n, m: _padded_forward(target, dep, engine, b, n, ctx + m),
                                    n_verify, mask_extra, many)
    t_propose = _price_distinct_shapes(lambda s_, k_: proposer.draft_time(target, dep, batch=b, steps=s_, topk=k_,
                                                                          context=ctx), steps, topk, many)
    worker = proposer.worker_time(target, dep, batch=b, steps=steps, topk=topk, tau=tau, verify_tokens=n_verify,
                                  context=ctx)
    speculative = (np.asarray(steps, dtype=float) > 0) | (proposer.worker_passes() > 0)
    if engine.rejection_probs:
        worker = worker + np.where(speculative & (n_verify > 1), _rejection_probs_s(target, dep, b, n_verify), 0.0)
    gpu_step = t_propose + verify.total_s + worker
    pieces = _pieces(target, proposer, dep, engine, b, steps, topk, tau, ctx, n_verify, speculative, gpu_step,
                     t_propose, verify.total_s, plain.total_s)
    return plain, verify, t_propose, worker, pieces


def _padded_forward(target, dep, engine, b, q, context):
    """The target's forward over ``q`` tokens of ``b`` sequences, priced at the batch the engine pads it to
    (:func:`sdsl.engine.profiles.padded_batch`); the padded rows hold no context, so the KV read stays that of the
    ``b`` real sequences (context scaled by b / padded batch)."""
    from sdsl.engine.profiles import padded_batch

    if not engine.capture_sizes:
        return forward_step(target, dep, batch=b, q=q, context=context)
    pb, _ = padded_batch(engine, b, q)
    ctx = np.where(pb == b, context, np.asarray(context, dtype=float) * b / pb)
    return forward_step(target, dep, batch=pb, q=q, context=ctx)


def _rejection_probs_s(target, dep, b, n_verify):
    """The rejection sampler's fp32 probabilities of every verified position over the (local) vocabulary, written
    once and read once: two memory-bound kernels of b·n·V·4 bytes (docs/model.md §3.9)."""
    from sdsl.roofline.latency import op_time

    hw = dep.hardware
    nbytes = b * np.asarray(n_verify, dtype=float) * (-(-target.vocab_size // dep.tp)) * 4.0
    return 2.0 * op_time(0.0, nbytes, hw.peak_flops_for(dep.dtype), hw.mem_bandwidth, dep.params)


def _pieces(target, proposer, dep, engine, b, steps, topk, tau, ctx, n_verify, speculative, gpu_step, t_propose,
            t_verify, t_plain):
    """The :class:`~sdsl.engine.profiles.StepPieces` of a priced step: GPU times, separate forwards, and every forward
    that may run eagerly (verify and plain forwards without graphs or above the largest captured size; drafting
    passes and the draft-extend pass where the engine does not graph them) with its kernels counted from the
    model's structure (:func:`sdsl.engine.profiles.forward_kernels`)."""
    from sdsl.engine.profiles import StepPieces, forward_kernels, padded_batch, proposer_kernels

    style, tp = engine.kernels, dep.tp
    passes = np.asarray(proposer.passes(steps), dtype=float)
    workers = float(proposer.worker_passes())
    rows_step, rows_plain = [], []
    if not engine.is_ideal:
        grouped = target.n_kv_head != target.n_head
        k_draft, k_extend = proposer_kernels(proposer, target, style, dep.draft_tp if proposer.kind == "draft" else tp)
        k_verify = forward_kernels(style, target.n_layer, grouped_kv=grouped, tp=tp, loop_step=False)
        if proposer.kind == "medusa":  # the heads run inside the target's forward
            k_verify = k_verify + k_draft
        k_plain = forward_kernels(style, target.n_layer, grouped_kv=grouped, tp=tp, loop_step=True)
        eager_v = padded_batch(engine, b, n_verify)[1] | (not engine.graphs_target)
        eager_p = padded_batch(engine, b, 1.0)[1] | (not engine.graphs_target)
        rows_step.append((1.0, k_verify, t_verify, eager_v))
        rows_plain.append((1.0, k_plain, t_plain, eager_p))
        if not engine.graphs_draft and np.any(np.asarray(k_draft) > 0):
            per_pass = np.where(passes > 0, t_propose / np.maximum(passes, 1.0), 0.0)
            rows_step.append((passes, k_draft, per_pass, True))
        if not engine.graphs_extend and workers > 0 and hasattr(proposer, "extend_time"):
            extend = proposer.extend_time(target, dep, batch=b, tau=proposer.extend_rows(tau, steps), context=ctx)
            rows_step.append((workers, k_extend, extend, True))
    ar_step, ar_plain = _allreduce_counts(target, proposer, dep, engine, b, topk, tau, n_verify, passes, workers)
    return StepPieces(gpu_step_s=gpu_step, gpu_plain_s=t_plain, speculative=speculative, passes=passes + workers,
                      steps=np.asarray(steps, dtype=float), kind=proposer.kind, eager_step=tuple(rows_step),
                      eager_plain=tuple(rows_plain), allreduce_step=ar_step, allreduce_plain=ar_plain)


def _allreduce_counts(target, proposer, dep, engine, b, topk, tau, n_verify, passes, workers):
    """(custom all-reduce latencies in the step's GPU time, in the plain step's): two all-reduces per layer of the
    target's verify and plain forwards at the batch the engine pads them to, of an EAGLE-style head's passes and
    draft extend at the target's tp, of a draft model's passes at ``draft_tp``; each one-shot call one latency, a
    two-shot call two (:func:`sdsl.engine.profiles.allreduce_latencies`). Zero without a custom all-reduce."""
    from sdsl.catalog.models import dtype_bytes
    from sdsl.engine.profiles import allreduce_latencies, padded_batch

    if engine.allreduce != "custom":
        return 0.0, 0.0
    dt, d, tp = dtype_bytes(dep.dtype), target.d_model, dep.tp
    calls = lambda layers, tokens, degree, width=d: 2.0 * layers * allreduce_latencies(engine, tokens * width * dt, degree)  # noqa: E731
    plain = calls(target.n_layer, padded_batch(engine, b, 1.0)[0], tp)
    step = calls(target.n_layer, padded_batch(engine, b, n_verify)[0] * n_verify, tp)
    kind = proposer.kind
    if kind in ("eagle", "eagle3", "mtp"):
        layers = getattr(proposer, "layers", 1)
        step = step + passes * calls(layers, b * np.asarray(topk, dtype=float), tp)
        step = step + workers * calls(layers, b * np.asarray(tau, dtype=float), tp)
    elif kind == "draft":
        model = proposer.model
        step = step + passes * calls(model.n_layer, b, dep.draft_tp, model.d_model)
    return step, plain


def _tree_input(tree):
    if tree is None or isinstance(tree, dict):
        return tree
    shape = parse_tree(tree)
    return [shape.steps, shape.topk, shape.tokens]


def price_speculation(target, proposer, deployment, *, tau_value, **kwargs) -> PricedStep:
    """:func:`price_step` under its earlier name and τ keyword (``tau_value``)."""
    return price_step(target, proposer, deployment, tau=tau_value, **kwargs)
