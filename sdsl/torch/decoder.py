"""Plain and speculative decoding over the reference model, batched, with exact bookkeeping.

One loop does both: no proposer is plain autoregressive decoding. Each :func:`speculative_step`

1. **draft**: the proposer drafts a token tree per sequence (a chain of ``gamma`` tokens is the
   special case): a draft model, an EAGLE-style draft head (:mod:`sdsl.torch.head`) or prompt lookup;
2. **verify**: the target scores ``[last token, drafted nodes]`` in ONE forward pass — a chain with the
   causal mask, a tree with its tree mask and positions (:mod:`sdsl.torch.tree`) — and the acceptance
   rule decides how many drafted tokens each sequence keeps and draws the next token:
   greedy (temperature 0): keep the longest prefix equal to the target's argmax, then the argmax;
   sampling: keep draft i with probability min(1, p_i(d_i)/q_i(d_i)) (Leviathan et al. 2023,
   Algorithm 1; Chen et al. 2023), at the first rejection draw from norm(max(p − q, 0)), and when
   all are kept draw the bonus token from p_{gamma+1} (trees: :func:`sdsl.torch.tree.verify_tree`);
   or, with ``acceptance``, a forced per-position acceptance (synthetic mode, :func:`forced_acceptance`);
3. **accept**: the tokens are appended, the accepted path's K/V entries are moved into place and each
   cache is rolled back to its sequence's own accepted length.

Tokens are held in a buffer with one length per sequence. Timing stays in :func:`generate`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch

from sdsl._result import Result
from sdsl.errors import InvalidInputError
from sdsl.torch.model import Transformer
from sdsl.torch.dynamic_tree import DynamicSpine, parse_tree
from sdsl.torch.proposers import Draft, DraftModel, PromptLookup, StepOutcome
from sdsl.torch.sampling import logits_to_probs, sample
from sdsl.torch.tree import TokenTree, commit_path, tree_mask, verify_tree

__all__ = ["logits_to_probs", "sample", "verify", "forced_acceptance", "DraftModel", "PromptLookup", "DecodeResult",
           "speculative_step", "generate"]


def verify(p: torch.Tensor, q: torch.Tensor | None, drafts: torch.Tensor, greedy: bool,
           gen: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Accepted draft count ``a`` (B,) and the next token (B,) for each sequence of a chain.

    Speculative sampling (Leviathan et al. 2023, Algorithm 1; Chen et al. 2023, Algorithm 2): keep draft i
    with probability min(1, p_i(d_i)/q_i(d_i)), at the first rejection sample norm(max(p − q, 0)), and
    after γ acceptances sample the bonus token from p_{γ+1}; ``greedy`` keeps the longest argmax-equal prefix.

    p: target probabilities (B, gamma+1, V); q: draft probabilities (B, gamma, V) (None = the drafts
    are deterministic, i.e. one-hot); drafts: (B, gamma).
    """
    batch, _, vocab = p.shape
    gamma = drafts.shape[1]
    rows = torch.arange(batch)
    if greedy:
        target_tokens = p.argmax(-1)
        accepted = (drafts == target_tokens[:, :gamma]).long().cumprod(1).sum(1)
        return accepted, target_tokens[rows, accepted]
    if q is None:
        q = torch.nn.functional.one_hot(drafts, vocab).float()
    p_draft = p[:, :gamma].gather(-1, drafts[..., None])[..., 0]
    q_draft = q.gather(-1, drafts[..., None])[..., 0]
    u = torch.rand(batch, gamma, generator=gen)
    accepted = (u * q_draft < p_draft).long().cumprod(1).sum(1)  # u < min(1, p/q); q(d) > 0 for every draft
    q_padded = torch.cat([q, torch.zeros(batch, 1, vocab)], dim=1)  # at a == gamma the residual is p itself
    residual = (p[rows, accepted] - q_padded[rows, accepted]).clamp_min(0)
    mass = residual.sum(-1, keepdim=True)
    residual = torch.where(mass > 0, residual / mass.clamp_min(1e-30), p[rows, accepted])
    return accepted, sample(residual, gen)


def forced_acceptance(per_position, tree: TokenTree, p: torch.Tensor, gen: torch.Generator | None):
    """Synthetic acceptance: depth i is accepted with probability ``per_position[i-1]`` given depths
    1..i-1 were (its rank-0 candidate is kept); the next token is the target's argmax at the last kept
    node. Returns (path, accepted, next token) like :func:`sdsl.torch.tree.verify_tree`."""
    batch = p.shape[0]
    rates = torch.as_tensor(per_position, dtype=torch.float32, device=p.device)[: tree.max_depth]
    accepted = (torch.rand(batch, tree.max_depth, generator=gen) < rates).long().cumprod(1).sum(1)
    path = torch.zeros(batch, tree.max_depth + 1, dtype=torch.long)
    for depth in range(1, tree.max_depth + 1):
        path[:, depth] = torch.where(accepted >= depth, tree.children[path[:, depth - 1], 0], 0)
    node = path.gather(1, accepted[:, None])[:, 0]
    return path, accepted, p[torch.arange(batch), node].argmax(-1)


@dataclass
class DecodeResult(Result):
    """Tokens and measurements of one :func:`generate` run.

    Result protocol: ``report()``, ``to_dict()`` (measurements, not the tokens),
    ``to_json(path=None)``, ``plot(ax=None)`` (the acceptance histogram).
    """

    tokens: list[list[int]]          # new tokens per sequence (exactly max_new_tokens each)
    gamma: int                       # drafted depth (a chain's length; a tree's depth)
    batch: int
    steps: int                       # target forward passes after the prefill
    accept_counts: np.ndarray        # accept_counts[i] = sequence-steps with i drafts accepted (len gamma+1)
    decode_s: float                  # wall time of the decode loop (prefill excluded)
    prefill_s: float
    draft_s: float                   # part of decode_s spent in the proposer
    target_s: float                  # the rest of decode_s: target forwards, verification, bookkeeping
    new_tokens: int = 0              # tokens emitted in the loop, over all sequences (incl. overshoot)
    tree: str = ""                   # "chainN" or "tree(w1+w2+...)", empty for plain decoding
    nodes: int = 0                   # drafted nodes per sequence per step

    @property
    def tau(self) -> float:
        """Mean tokens emitted per sequence per target step (bonus token included)."""
        c = self.accept_counts
        return float((np.arange(len(c)) * c).sum() / max(c.sum(), 1) + 1)

    @property
    def per_position(self) -> np.ndarray:
        """P(draft i accepted | drafts 1..i-1 accepted), i = 1..gamma."""
        c = self.accept_counts
        reach = c[::-1].cumsum()[::-1]  # reach[i] = steps with >= i accepted
        return reach[1:] / np.maximum(reach[:-1], 1)

    @property
    def alpha(self) -> float:
        from sdsl.acceptance import alpha_from_accept_histogram
        return float(alpha_from_accept_histogram(self.accept_counts)) if self.gamma else float("nan")

    @property
    def tokens_per_s(self) -> float:
        """Requested tokens per second: only the first ``max_new_tokens`` of each sequence count (the last step
        can overshoot by up to γ tokens that nobody asked for; they cost time, they are not output)."""
        return sum(map(len, self.tokens)) / self.decode_s

    @property
    def emitted_tokens_per_s(self) -> float:
        """Every token the loop emitted, overshoot included (``new_tokens``)."""
        return self.new_tokens / self.decode_s

    def to_dict(self) -> dict:
        return {"gamma": self.gamma, "batch": self.batch, "steps": self.steps, "tau": self.tau,
                "alpha": self.alpha if self.gamma else None, "accept_counts": self.accept_counts.tolist(),
                "per_position": self.per_position.tolist(), "tokens_per_s": self.tokens_per_s,
                "emitted_tokens_per_s": self.emitted_tokens_per_s,
                "decode_s": self.decode_s, "prefill_s": self.prefill_s, "draft_s": self.draft_s,
                "target_s": self.target_s, "new_tokens": self.new_tokens, "tree": self.tree, "nodes": self.nodes}

    def report(self) -> str:
        """One line: γ (the tree, if any), batch, steps, τ, α and tokens/s."""
        alpha = f"{self.alpha:.3f}" if self.gamma else "-"
        shape = f" ({self.tree})" if self.tree and not self.tree.startswith("chain") else ""
        return (f"gamma {self.gamma}{shape}, batch {self.batch}: {self.steps} target steps, tau {self.tau:.3f}, "
                f"alpha {alpha}, {self.tokens_per_s:.1f} tokens/s ({sum(map(len, self.tokens))} tokens, "
                f"{self.new_tokens} emitted, in {self.decode_s:.3f} s)")

    def plot(self, ax=None):
        """Bars of how many sequence-steps accepted 0..γ drafts (:mod:`sdsl.plots.results`)."""
        from sdsl.plots.results import plot_acceptance_histogram

        return plot_acceptance_histogram(self.accept_counts, ax=ax, title=self.report().split(":")[0])


@dataclass
class DecodeState:
    """The token buffer (B, capacity), each sequence's length, and the target's KV cache."""

    tokens: torch.Tensor
    lengths: torch.Tensor
    cache: object
    prompt_len: int
    max_new_tokens: int

    @property
    def active(self) -> torch.Tensor:
        return (self.lengths - self.prompt_len) < self.max_new_tokens


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0
    top_p: float = 1.0
    generator: torch.Generator | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0


def speculative_step(target: Transformer, proposer, tree: TokenTree | None, state: DecodeState, sampling: Sampling,
                     verify_fn=verify, tree_verify_fn=verify_tree, acceptance=None) -> torch.Tensor:
    """One draft → verify → accept step; returns the accepted draft count per sequence (B,)."""
    lengths, rows, active = state.lengths, torch.arange(state.tokens.shape[0]), state.active
    root = state.tokens[rows, lengths - 1]
    # draft
    draft = (proposer.propose(state.tokens, lengths, tree, sampling) if tree is not None
             else Draft(tokens=root[:, None], probs=None))
    tree = draft.tree if draft.tree is not None else tree  # a dynamic tree names the shape it drafted
    # verify
    logits, features = _score(target, draft.tokens, state.cache, tree, lengths, getattr(proposer, "needs_features", False))
    p = logits_to_probs(logits, sampling.temperature, sampling.top_p)
    if tree is None:
        path, accepted, next_token = torch.zeros(len(rows), 1, dtype=torch.long), torch.zeros_like(lengths), _pick(p[:, 0], sampling)
    elif acceptance is not None:
        path, accepted, next_token = forced_acceptance(acceptance, tree, p, sampling.generator)
    elif tree.is_chain:
        q = None if sampling.greedy or draft.probs is None else draft.probs[:, :tree.size]
        accepted, next_token = verify_fn(p, q, draft.tokens[:, 1:], sampling.greedy, sampling.generator)
        path = torch.arange(tree.max_depth + 1).expand(len(rows), -1)
    else:
        path, accepted, next_token = tree_verify_fn(tree, p, draft.probs, draft.tokens, sampling.greedy,
                                                    sampling.generator)
    # accept
    accepted = torch.where(active, accepted, 0)  # finished sequences idle in place (batch tail)
    depth = path.shape[1] - 1
    kept = draft.tokens.gather(1, path[:, 1:])
    state.tokens[rows[:, None], lengths[:, None] + torch.arange(depth + 1)] = torch.cat([kept, next_token[:, None]], 1)
    state.tokens[rows, lengths + accepted] = next_token
    if tree is not None and not tree.is_chain:
        commit_path(state.cache, path, accepted, lengths - 1, tree.target_slots)
    state.cache.set_lengths(torch.where(active, lengths + accepted, lengths - 1))
    if tree is not None:
        proposer.commit(StepOutcome(path=path, accepted=accepted, next_token=next_token, lengths=lengths,
                                    active=active, tokens=draft.tokens, features=features))
    state.lengths = torch.where(active, lengths + accepted + 1, lengths)
    return accepted


def _pick(probs: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    return probs.argmax(-1) if sampling.greedy else sample(probs, sampling.generator)


def _score(target, tokens, cache, tree, lengths, needs_features):
    """The target's logits (and features for a draft head) over the root and the drafted nodes."""
    if tree is None or tree.is_chain:
        if not needs_features:
            return target(tokens, cache), None
        return target(tokens, cache, return_hidden=True)
    base = lengths - 1
    kv_len = int(cache.lengths.max()) + tokens.shape[1]
    mask = tree_mask(tree, base, tree.target_slots, tree.target_slots, kv_len)
    out = target(tokens, cache, positions=base[:, None] + tree.depths, mask=mask, return_hidden=needs_features)
    return out if needs_features else (out, None)


class _TimedProposer:
    """Wraps a proposer and adds the seconds spent in its ``propose`` to ``seconds`` (timing kept out of the step)."""

    def __init__(self, proposer, now):
        self.proposer, self.now, self.seconds = proposer, now, 0.0
        self.needs_features = getattr(proposer, "needs_features", False)

    def propose(self, *args):
        start = self.now()
        draft = self.proposer.propose(*args)
        self.seconds += self.now() - start
        return draft

    def commit(self, outcome):
        self.proposer.commit(outcome)


def _tree_of(proposer, gamma: int, tree) -> TokenTree | DynamicSpine | None:
    if proposer is None or (tree is None and gamma == 0):
        return None
    tree = parse_tree(tree) if isinstance(tree, str) else tree
    return tree if tree is not None else TokenTree.chain(gamma)


@torch.inference_mode()
def generate(target: Transformer, prompts: torch.Tensor, max_new_tokens: int, proposer=None, gamma: int = 0,
             temperature: float = 0.0, top_p: float = 1.0, seed: int | None = 0, verify_fn=verify,
             clock: str = "wall", *, tree: TokenTree | DynamicSpine | str | None = None, tree_verify_fn=verify_tree,
             acceptance=None) -> DecodeResult:
    """Decode ``max_new_tokens`` per sequence from ``prompts`` (B, P >= 2, equal lengths).

    ``proposer=None`` or ``gamma=0`` (and no ``tree``) is plain decoding; ``tree`` (a :class:`TokenTree`
    or "3x2x1"/"chain4", or a :class:`~sdsl.torch.dynamic_tree.DynamicSpine` "dspine6@0.7" whose shape the
    proposer picks each step) drafts a token tree instead of a chain of ``gamma``. ``verify_fn`` /
    ``tree_verify_fn`` are the acceptance rules (swappable so that tests can show a broken rule is
    caught); ``acceptance`` (per-position probabilities) forces synthetic acceptance. ``clock="cpu"``
    times with the process CPU clock instead of the wall clock: with one torch thread it equals wall time
    on an idle core and ignores time the process spent descheduled on a shared machine.

    On a GPU, pass ``prompts`` on the device and set ``torch.set_default_device`` to it: every
    bookkeeping tensor is then created there (the loop synchronises once per step, so wall-clock
    timing is exact).
    """
    now = time.process_time if clock == "cpu" else time.perf_counter
    tree = _tree_of(proposer, gamma, tree)
    prompts = torch.as_tensor(prompts, dtype=torch.long)
    batch, prompt_len = prompts.shape
    if prompt_len < 2:
        raise InvalidInputError("Prompts need at least two tokens.")
    capacity = prompt_len + max_new_tokens + 2 * (tree.size + 1 if tree else 0) + 2
    generator = torch.Generator(device=prompts.device).manual_seed(seed) if seed is not None else None
    sampling = Sampling(temperature, top_p, generator)
    buffer = torch.zeros(batch, capacity, dtype=torch.long)
    buffer[:, :prompt_len] = prompts
    start = now()
    state = DecodeState(tokens=buffer, lengths=torch.full((batch,), prompt_len, dtype=torch.long),
                        cache=target.new_cache(batch, capacity), prompt_len=prompt_len, max_new_tokens=max_new_tokens)
    timed = None
    if tree is not None:
        timed = _TimedProposer(proposer, now)
        _prefill(target, proposer, prompts, state, capacity)
    else:
        target(prompts[:, :-1], state.cache)
    prefill_s = now() - start
    counts = np.zeros((tree.max_depth if tree else 0) + 1, dtype=np.int64)
    steps = 0
    start = now()
    while bool(state.active.any()):
        active = state.active
        accepted = speculative_step(target, timed, tree, state, sampling, verify_fn, tree_verify_fn, acceptance)
        counts += np.bincount(accepted[active].cpu().numpy(), minlength=len(counts))
        steps += 1
    decode_s = now() - start
    draft_s = timed.seconds if timed else 0.0
    return DecodeResult(tokens=[state.tokens[b, prompt_len:prompt_len + max_new_tokens].tolist() for b in range(batch)],
                        gamma=len(counts) - 1, batch=batch, steps=steps, accept_counts=counts, decode_s=decode_s,
                        prefill_s=prefill_s, draft_s=draft_s, target_s=decode_s - draft_s,
                        new_tokens=int((state.lengths - prompt_len).sum()), tree=tree.describe() if tree else "",
                        nodes=tree.size if tree else 0)


def _prefill(target, proposer, prompts, state, capacity) -> None:
    if getattr(proposer, "needs_features", False):
        _, features = target(prompts[:, :-1], state.cache, return_hidden=True)
        proposer.prefill(prompts, capacity, features)
    else:
        target(prompts[:, :-1], state.cache)
        proposer.prefill(prompts, capacity)


broken_tree_verify = partial(verify_tree, broken=True)
