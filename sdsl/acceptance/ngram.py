"""Prompt-lookup (n-gram) acceptance computed exactly by replaying the lookup over known responses.

Under greedy decoding the target's output is a fixed text, so whether a prompt-lookup draft is
accepted is a property of the text alone: replaying the proposer over prompt + response reproduces
every draft and every acceptance an engine would log, with no model run.

Matching rule: vLLM's ``NgramProposer`` (``vllm/v1/spec_decode/ngram_proposer.py`` at commit
016e8ede870e3c087fdcdfb36ed3622112712f10, ``_find_longest_matched_ngram_and_propose_tokens``). With
context c = prompt + response so far (length L):

- the n-gram is the longest suffix of c with n in [min_n, max_n] that also occurs earlier in c (an
  occurrence ending at index L − 2 or before; it may overlap the suffix);
- among the occurrences of that longest suffix the *earliest* one is used (vLLM scans the reversed
  context and keeps the last match found, i.e. the first in reading order);
- the draft is the up to k tokens that follow that occurrence, cut at the end of c; no match (or
  L < min_n) means no draft: the step decodes one token without speculation.

A step with a draft of d ≤ k tokens accepts the longest prefix of the draft that equals the
response's next tokens and emits it plus one token from the target (the bonus). Counts follow vLLM's
spec-decode metrics: ``drafts`` = steps with a draft, per-position ``accepted[i]`` = drafts whose
position i was accepted. Two marginal vectors result: ``marginal_over_drafts`` = accepted / drafts
(vLLM's "acceptance at token i") and ``marginal`` = accepted / all target passes (steps without a draft
count as zero accepted), whose τ = 1 + Σ m_i is the tokens per target pass, vLLM's "seq normalized
acceptance length". The first response token comes from the prefill pass and is not replayed (engines
propose drafts from the first decode step on); a response's final step may accept through the end of
the text, its bonus token (the engine's stop token) counted as the other bonus tokens are.

Tokens are the UTF-8 bytes of the text (a byte-level tokenizer: exact for byte-level models, a proxy
for BPE vocabularies, where one token spans several bytes), or token ids the caller supplies.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from sdsl._result import Result
from sdsl.errors import ConfigError, InvalidInputError

__all__ = ["draft_starts", "accepted_runs", "replay_sequence", "NgramReplay", "prompt_lookup_acceptance",
           "read_pairs", "VLLM_NGRAM_COMMIT"]

VLLM_NGRAM_COMMIT = "016e8ede870e3c087fdcdfb36ed3622112712f10"


def _check_sizes(min_n: int, max_n: int, k: int | None = None) -> None:
    if int(min_n) != min_n or int(max_n) != max_n or min_n < 1 or max_n < min_n:
        raise InvalidInputError(f"n-gram sizes need 1 <= min_n <= max_n; got min_n={min_n}, max_n={max_n}.")
    if k is not None and (int(k) != k or k < 1):
        raise InvalidInputError(f"k (draft tokens per step) must be a positive integer; got {k}.")


def draft_starts(tokens, min_n: int, max_n: int) -> np.ndarray:
    """For every context length L = 0..len(tokens), the index of the first drafted token (the token after
    the matched n-gram) that vLLM's rule proposes for context ``tokens[:L]``, or −1 when it proposes none.
    Vectorised per n: each n-gram's first occurrence comes from ``np.unique`` over all windows."""
    _check_sizes(min_n, max_n)
    t = np.asarray(tokens)
    N = t.size
    start = np.full(N + 1, -1, dtype=np.int64)
    for n in range(int(min_n), int(max_n) + 1):  # larger n overwrite: the longest match wins
        if N < n + 1:
            break
        windows = np.lib.stride_tricks.sliding_window_view(t, n)  # windows[p] = t[p:p+n]
        _, first_index, inverse = np.unique(windows, axis=0, return_index=True, return_inverse=True)
        first = first_index[inverse.ravel()]  # first occurrence of the n-gram starting at p
        p = np.arange(windows.shape[0])
        earlier = first < p  # an occurrence of the suffix t[p:p+n] ending at or before p+n-2
        L = p[earlier] + n  # the context whose suffix is that window
        start[L] = first[earlier] + n
    return start


def accepted_runs(tokens, starts: np.ndarray, k_max: int) -> np.ndarray:
    """For every context length L: how many of the up to ``k_max`` drafted tokens ``tokens[s:s+d]``
    (s = starts[L], d = min(k_max, L − s)) equal the text's next tokens ``tokens[L:]``, counted up to the
    first mismatch (or the end of the text). 0 where there is no draft."""
    t = np.asarray(tokens)
    N = t.size
    L = np.arange(starts.size)
    j = np.arange(int(k_max))
    src = starts[:, None] + j[None, :]
    dst = L[:, None] + j[None, :]
    valid = (starts[:, None] >= 0) & (src < L[:, None]) & (dst < N)
    eq = np.zeros(valid.shape, dtype=bool)
    eq[valid] = t[src[valid]] == t[dst[valid]]
    return np.cumprod(eq, axis=1).sum(axis=1)


def replay_sequence(tokens, prompt_len: int, k: int, starts: np.ndarray, runs: np.ndarray):
    """Walk one response at draft length ``k``: returns (steps, drafts, accepted counts per position).
    ``starts``/``runs`` come from :func:`draft_starts` and :func:`accepted_runs` (computed once for the
    largest k of interest: the draft at a context does not depend on k, only its length does)."""
    N = int(np.asarray(tokens).size)
    counts = np.zeros(int(k), dtype=np.int64)
    st, rn = starts.tolist(), np.minimum(runs, int(k)).tolist()
    steps = drafts = 0
    L = int(prompt_len) + 1  # the prefill pass emits the first response token; decode steps start after it
    while L < N:  # sequential by nature: the next context depends on how much this step accepted
        steps += 1
        if st[L] >= 0:
            drafts += 1
            a = rn[L]
            counts[:a] += 1
            L += a + 1
        else:
            L += 1
    return steps, drafts, counts


@dataclass(frozen=True)
class NgramReplay(Result):
    """Prompt-lookup acceptance of a set of responses at one (k, min_n, max_n)."""

    k: int
    min_n: int
    max_n: int
    responses: int
    response_tokens: int
    steps: int
    drafts: int
    accepted: tuple
    tokenizer: str = "bytes"
    source: str = "ngram-replay"

    @property
    def marginal_over_drafts(self) -> np.ndarray:
        """accepted at position i / steps with a draft (vLLM's per-position acceptance)."""
        return np.asarray(self.accepted, dtype=float) / max(self.drafts, 1)

    @property
    def marginal(self) -> np.ndarray:
        """accepted at position i / all target passes (steps without a match count as zero accepted)."""
        return np.asarray(self.accepted, dtype=float) / max(self.steps, 1)

    @property
    def tau(self) -> float:
        """Tokens per target pass, bonus included: 1 + Σ marginal (vLLM's seq normalized length)."""
        return 1.0 + float(self.marginal.sum())

    @property
    def tau_over_drafts(self) -> float:
        """vLLM's "mean acceptance length": 1 + accepted / drafts, over steps that had a draft."""
        return 1.0 + float(self.marginal_over_drafts.sum())

    def acceptance(self):
        """The all-steps marginal vector as an :class:`~sdsl.acceptance.Acceptance`."""
        from sdsl.acceptance import Acceptance

        return Acceptance.from_marginal(self.marginal, source=self.source)

    def to_dict(self) -> dict:
        """The Acceptance JSON (``--acceptance-file`` reads its ``positions``) plus the replay counts."""
        d = self.acceptance().to_dict()
        d["ngram_replay"] = {
            "k": self.k, "prompt_lookup_min": self.min_n, "prompt_lookup_max": self.max_n,
            "tokenizer": self.tokenizer, "responses": self.responses, "response_tokens": self.response_tokens,
            "steps": self.steps, "drafts": self.drafts, "steps_without_draft": self.steps - self.drafts,
            "accepted_per_position": list(self.accepted), "marginal_over_drafts": self.marginal_over_drafts.tolist(),
            "tau_over_drafts": self.tau_over_drafts,
            "rule": f"vLLM NgramProposer, vllm/v1/spec_decode/ngram_proposer.py @ {VLLM_NGRAM_COMMIT}",
        }
        return d

    def report(self) -> str:
        fmt = lambda xs: ", ".join(f"{x:.3f}" for x in xs)  # noqa: E731
        return (f"prompt lookup (n-gram {self.min_n}-{self.max_n}, k = {self.k}, {self.tokenizer} tokens) over "
                f"{self.responses} responses, {self.response_tokens} tokens: {self.steps} target passes, "
                f"{self.drafts} with a draft\n"
                f"  tau (all passes) = {self.tau:.3f};  mean acceptance length over drafts = {self.tau_over_drafts:.3f}\n"
                f"  marginal m_i (all passes):  {fmt(self.marginal)}\n"
                f"  marginal m_i (over drafts): {fmt(self.marginal_over_drafts)}")

    def plot(self, ax=None):
        return self.acceptance().plot(ax)


def _encode(value, what: str, line_no: int, path: str):
    if isinstance(value, str):
        return np.frombuffer(value.encode("utf-8"), dtype=np.uint8).astype(np.int64)
    if isinstance(value, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        return np.asarray(value, dtype=np.int64)
    raise ConfigError(f"{path} line {line_no}: '{what}' must be a string (or '{what}_ids', a list of token ids).")


def read_pairs(path: str):
    """(prompt tokens, response tokens, tokenizer) per line of a JSONL file of {"prompt", "response"}
    strings (UTF-8 bytes as tokens) or {"prompt_ids", "response_ids"} integer lists. Blank lines are
    skipped; anything else malformed raises ConfigError naming the line."""
    pairs, kinds = [], set()
    try:
        fh = open(path, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"Cannot read {path}: {exc.strerror or exc}.") from None
    with fh:
        try:
            lines = fh.read().splitlines()
        except UnicodeDecodeError:
            raise ConfigError(f"{path} is not UTF-8 text.") from None
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path} line {i} is not valid JSON ({exc.msg}).") from None
        if not isinstance(rec, dict):
            raise ConfigError(f"{path} line {i}: expected a JSON object with 'prompt' and 'response'.")
        if "prompt_ids" in rec or "response_ids" in rec:
            keys, kind = ("prompt_ids", "response_ids"), "token ids"
        else:
            keys, kind = ("prompt", "response"), "bytes"
        missing = [key for key in keys if key not in rec]
        if missing:
            raise ConfigError(f"{path} line {i}: missing {', '.join(repr(m) for m in missing)}.")
        prompt = _encode(rec[keys[0]], keys[0].removesuffix("_ids"), i, path)
        response = _encode(rec[keys[1]], keys[1].removesuffix("_ids"), i, path)
        pairs.append((prompt, response))
        kinds.add(kind)
    if not pairs:
        raise ConfigError(f"{path} holds no prompt/response pairs.")
    if len(kinds) > 1:
        raise ConfigError(f"{path} mixes text pairs and token-id pairs; use one kind per file.")
    if all(len(response) < 2 for _, response in pairs):
        raise ConfigError(f"{path} has no response tokens to replay: every response is empty or one token long "
                          "(the first comes from the prefill).")
    return pairs, kinds.pop()


def prompt_lookup_acceptance(pairs, *, k, min_n: int = 2, max_n: int = 5, tokenizer: str = "bytes",
                             source: str = "ngram-replay"):
    """Replay prompt lookup over (prompt tokens, response tokens) pairs at draft length ``k`` (an int, or
    a sequence of ints: one :class:`NgramReplay` per k, sharing the n-gram search)."""
    ks = [k] if np.ndim(k) == 0 else list(k)
    for kk in ks:
        _check_sizes(min_n, max_n, kk)
    k_max = int(max(ks))
    totals = {int(kk): [0, 0, np.zeros(int(kk), dtype=np.int64)] for kk in ks}
    n_tokens = 0
    for prompt, response in pairs:
        seq = np.concatenate([np.asarray(prompt, dtype=np.int64), np.asarray(response, dtype=np.int64)])
        n_tokens += max(int(np.asarray(response).size) - 1, 0)  # decode-phase tokens (the first comes from prefill)
        starts = draft_starts(seq, min_n, max_n)
        runs = accepted_runs(seq, starts, k_max)
        for kk, acc in totals.items():
            steps, drafts, counts = replay_sequence(seq, len(prompt), kk, starts, runs)
            acc[0] += steps
            acc[1] += drafts
            acc[2] += counts
    if n_tokens == 0:
        raise InvalidInputError("No response tokens to replay: every response is empty or one token long (the first "
                                "comes from the prefill).")
    out = [NgramReplay(kk, int(min_n), int(max_n), len(pairs), n_tokens, s, d, tuple(int(x) for x in c), tokenizer,
                       f"{source} (n-gram {min_n}-{max_n}, k = {kk})")
           for kk, (s, d, c) in totals.items()]
    return out[0] if np.ndim(k) == 0 else out
