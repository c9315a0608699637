"""Plain and speculative decoding over the reference model, batched, with exact bookkeeping.

One loop does both: ``gamma = 0`` (no proposer) is plain autoregressive decoding. Each step

1. the proposer drafts ``gamma`` tokens per sequence (a draft model, or prompt lookup),
2. the target scores ``[last token, drafts]`` in ONE forward pass (q = gamma + 1),
3. :func:`verify` decides per sequence how many drafts to keep (``a``) and draws the next token:
   greedy (temperature 0): keep the longest prefix equal to the target's argmax, then the argmax;
   sampling: keep draft i with probability min(1, p_i(d_i)/q_i(d_i)) (Leviathan et al. 2023,
   Algorithm 1; Chen et al. 2023), at the first rejection draw from norm(max(p − q, 0)), and when
   all gamma are kept draw the bonus token from p_{gamma+1},
4. the target's KV cache is rolled back to each sequence's own accepted length.

Tokens are held in a buffer with one length per sequence; the draft model's cache is re-synced at
the start of each step by re-writing the last two tokens (q = 2), which covers both the
"all accepted" case (the draft never saw its own last draft) and rejection.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from sdsl._result import Result
from sdsl.errors import InvalidInputError
from sdsl.torch.model import Transformer

__all__ = ["logits_to_probs", "verify", "DraftModel", "PromptLookup", "DecodeResult", "generate"]


def logits_to_probs(logits: torch.Tensor, temperature: float = 0.0, top_p: float = 1.0) -> torch.Tensor:
    """Next-token distribution after temperature and nucleus (top-p; Holtzman et al. 2020, §3.1) filtering;
    temperature 0 = one-hot argmax."""
    logits = logits.float()
    if temperature <= 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sp, idx = probs.sort(dim=-1, descending=True)
        keep = (sp.cumsum(-1) - sp) < top_p  # smallest prefix with mass >= top_p (always keeps the top token)
        sp = sp * keep
        probs = torch.zeros_like(probs).scatter_(-1, idx, sp)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def _sample(probs: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
    """One draw per row by inverting the CDF (exact; a few kernels instead of torch.multinomial's many)."""
    cdf = probs.cumsum(-1)
    u = torch.rand(probs.shape[:-1] + (1,), generator=gen) * cdf[..., -1:]
    return torch.searchsorted(cdf, u, right=True)[..., 0].clamp_max(probs.shape[-1] - 1)


def verify(p: torch.Tensor, q: torch.Tensor | None, drafts: torch.Tensor, greedy: bool,
           gen: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Accepted draft count ``a`` (B,) and the next token (B,) for each sequence.

    Speculative sampling (Leviathan et al. 2023, Algorithm 1; Chen et al. 2023, Algorithm 2): keep draft i
    with probability min(1, p_i(d_i)/q_i(d_i)), at the first rejection sample norm(max(p − q, 0)), and
    after γ acceptances sample the bonus token from p_{γ+1}; ``greedy`` keeps the longest argmax-equal prefix.

    p: target probabilities (B, gamma+1, V); q: draft probabilities (B, gamma, V) (None = the drafts
    are deterministic, i.e. one-hot); drafts: (B, gamma).
    """
    B, g1, V = p.shape
    gamma = g1 - 1
    rows = torch.arange(B)
    if greedy:
        tgt = p.argmax(-1)
        ok = drafts == tgt[:, :gamma]
        a = ok.long().cumprod(1).sum(1)
        return a, tgt[rows, a]
    if q is None:
        q = torch.nn.functional.one_hot(drafts, V).float()
    pd = p[:, :gamma].gather(-1, drafts[..., None])[..., 0]
    qd = q.gather(-1, drafts[..., None])[..., 0]
    u = torch.rand(B, gamma, generator=gen)
    ok = u * qd < pd  # u < min(1, p/q); q(d) > 0 for every drafted token
    a = ok.long().cumprod(1).sum(1)
    q_pad = torch.cat([q, torch.zeros(B, 1, V)], dim=1)  # at a == gamma the residual is p itself
    resid = (p[rows, a] - q_pad[rows, a]).clamp_min(0)
    mass = resid.sum(-1, keepdim=True)
    resid = torch.where(mass > 0, resid / mass.clamp_min(1e-30), p[rows, a])
    return a, _sample(resid, gen)


class DraftModel:
    """Proposer backed by a small reference model with its own KV cache."""

    def __init__(self, model: Transformer, name: str = "draft"):
        self.model, self.name = model, name

    def prefill(self, prompts: torch.Tensor, capacity: int) -> None:
        self.cache = self.model.new_cache(prompts.shape[0], capacity)
        self.model(prompts[:, :-2], self.cache)  # the last two prompt tokens are (re)written at step 1

    def propose(self, seq: torch.Tensor, n: torch.Tensor, gamma: int, temperature: float, top_p: float,
                gen: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        rows = torch.arange(seq.shape[0])
        self.cache.set_lengths(n - 2)
        x = torch.stack([seq[rows, n - 2], seq[rows, n - 1]], dim=1)
        drafts, probs = [], []
        for i in range(gamma):
            qi = logits_to_probs(self.model(x, self.cache)[:, -1], temperature, top_p)
            di = qi.argmax(-1) if temperature <= 0 else _sample(qi, gen)
            drafts.append(di)
            probs.append(qi)
            x = di[:, None]
        return torch.stack(drafts, 1), (None if temperature <= 0 else torch.stack(probs, 1))


class PromptLookup:
    """Model-free proposer: copy what followed the latest earlier match of the trailing n-gram.

    Tries n-gram sizes ``max_ngram`` … ``min_ngram``; with no match (or a short continuation) the
    missing drafts repeat the last token. Drafts are deterministic (q one-hot).
    """

    name = "prompt-lookup"

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1):
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def prefill(self, prompts: torch.Tensor, capacity: int) -> None:
        pass

    def _one(self, s: np.ndarray, gamma: int) -> list[int]:
        n = len(s)
        for k in range(self.max_ngram, self.min_ngram - 1, -1):
            if n <= k:
                continue
            win = np.lib.stride_tricks.sliding_window_view(s[:-1], k)  # windows ending before the last token
            hits = np.flatnonzero((win == s[-k:]).all(1))
            if hits.size:
                start = hits[-1] + k
                cont = s[start:start + gamma].tolist()
                return cont + [int(s[-1])] * (gamma - len(cont))
        return [int(s[-1])] * gamma

    def propose(self, seq, n, gamma, temperature, top_p, gen):
        arr = seq.numpy()
        drafts = [self._one(arr[b, :int(n[b])], gamma) for b in range(arr.shape[0])]
        return torch.tensor(drafts, dtype=torch.long).reshape(len(drafts), gamma), None


@dataclass
class DecodeResult(Result):
    """Tokens and measurements of one :func:`generate` run.

    Result protocol: ``report()``, ``to_dict()`` (measurements, not the tokens),
    ``to_json(path=None)``, ``plot(ax=None)`` (the acceptance histogram).
    """

    tokens: list[list[int]]          # new tokens per sequence (exactly max_new_tokens each)
    gamma: int
    batch: int
    steps: int                       # target forward passes after the prefill
    accept_counts: np.ndarray        # accept_counts[i] = sequence-steps with i drafts accepted (len gamma+1)
    decode_s: float                  # wall time of the decode loop (prefill excluded)
    prefill_s: float
    draft_s: float                   # part of decode_s spent in the proposer
    target_s: float                  # part of decode_s spent in target forwards
    new_tokens: int = field(default=0)  # tokens emitted in the loop, over all sequences (incl. overshoot)

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
        from sdsl.core.acceptance import alpha_from_accept_histogram
        return float(alpha_from_accept_histogram(self.accept_counts)) if self.gamma else float("nan")

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.decode_s

    def to_dict(self) -> dict:
        return {"gamma": self.gamma, "batch": self.batch, "steps": self.steps, "tau": self.tau,
                "alpha": self.alpha if self.gamma else None, "accept_counts": self.accept_counts.tolist(),
                "per_position": self.per_position.tolist(), "tokens_per_s": self.tokens_per_s,
                "decode_s": self.decode_s, "prefill_s": self.prefill_s, "draft_s": self.draft_s,
                "target_s": self.target_s, "new_tokens": self.new_tokens}

    def report(self) -> str:
        """One line: γ, batch, steps, τ, α and tokens/s."""
        alpha = f"{self.alpha:.3f}" if self.gamma else "-"
        return (f"gamma {self.gamma}, batch {self.batch}: {self.steps} target steps, tau {self.tau:.3f}, "
                f"alpha {alpha}, {self.tokens_per_s:.1f} tokens/s ({self.new_tokens} tokens in {self.decode_s:.3f} s)")

    def plot(self, ax=None):
        """Bars of how many sequence-steps accepted 0..γ drafts (:mod:`sdsl.plots.results`)."""
        from sdsl.plots.results import plot_acceptance_histogram

        return plot_acceptance_histogram(self.accept_counts, ax=ax, title=self.report().split(":")[0])


@torch.no_grad()
def generate(target: Transformer, prompts: torch.Tensor, max_new_tokens: int, proposer=None, gamma: int = 0,
             temperature: float = 0.0, top_p: float = 1.0, seed: int | None = 0, verify_fn=verify,
             clock: str = "wall") -> DecodeResult:
    """Decode ``max_new_tokens`` per sequence from ``prompts`` (B, P >= 2, equal lengths).

    ``proposer=None`` or ``gamma=0`` is plain decoding. ``verify_fn`` is the acceptance rule
    (swappable so that tests can show a broken rule is caught). ``clock="cpu"`` times with the
    process CPU clock instead of the wall clock: with one torch thread it equals wall time on an
    idle core and ignores time the process spent descheduled on a shared machine.
    """
    now = time.process_time if clock == "cpu" else time.perf_counter
    if proposer is None:
        gamma = 0
    prompts = torch.as_tensor(prompts, dtype=torch.long)
    B, P = prompts.shape
    if P < 2:
        raise InvalidInputError("Prompts need at least two tokens.")
    cap = P + max_new_tokens + 2 * gamma + 2
    gen = torch.Generator().manual_seed(seed) if seed is not None else None
    seq = torch.zeros(B, cap, dtype=torch.long)
    seq[:, :P] = prompts
    n = torch.full((B,), P, dtype=torch.long)
    rows = torch.arange(B)
    greedy = temperature <= 0
    t0 = now()
    cache = target.new_cache(B, cap)
    target(prompts[:, :-1], cache)
    if proposer is not None:
        proposer.prefill(prompts, cap)
    prefill_s = now() - t0
    counts = np.zeros(gamma + 1, dtype=np.int64)
    steps, draft_s, target_s = 0, 0.0, 0.0
    t0 = now()
    while int((n - P).min()) < max_new_tokens:
        active = (n - P) < max_new_tokens
        ta = now()
        if gamma:
            drafts, q = proposer.propose(seq, n, gamma, temperature, top_p, gen)
        else:
            drafts, q = torch.zeros(B, 0, dtype=torch.long), None
        tb = now()
        x = torch.cat([seq[rows, n - 1][:, None], drafts], dim=1)
        p = logits_to_probs(target(x, cache), temperature, top_p)
        a, nxt = verify_fn(p, q, drafts, greedy, gen)
        a = torch.where(active, a, 0)  # finished sequences idle in place (batch tail)
        tc = now()
        draft_s += tb - ta
        target_s += tc - tb
        idx = n[:, None] + torch.arange(gamma + 1)
        seq[rows[:, None], idx] = torch.cat([drafts, nxt[:, None]], dim=1)
        seq[rows, n + a] = nxt
        cache.set_lengths(torch.where(active, n + a, n - 1))
        n = torch.where(active, n + a + 1, n)
        counts += np.bincount(a[active].numpy(), minlength=gamma + 1)
        steps += 1
    decode_s = now() - t0
    new = int((n - P).sum())
    tokens = [seq[b, P:P + max_new_tokens].tolist() for b in range(B)]
    return DecodeResult(tokens, gamma, B, steps, counts, decode_s, prefill_s, draft_s, target_s, new)
