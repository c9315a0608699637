"""Speculative sampling is lossless: chi-square of SD samples against the target's exact distribution,
and a deliberately broken acceptance rule that the same test catches."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sdsl.torch.decoder import DraftModel, PromptLookup, generate, logits_to_probs, verify  # noqa: E402

torch.set_num_threads(1)

V, N_SAMPLES = 5, 12000




def exact_three_token_dist(target, prompt, temperature, top_p):
    """p(x1, x2, x3 | prompt) for all V^3 continuations, from full forwards (no cache)."""
    cont = torch.tensor(list(itertools.product(range(V), repeat=3)))
    x = torch.cat([prompt.expand(len(cont), -1), cont], dim=1)
    with torch.no_grad():
        probs = logits_to_probs(target(x)[:, prompt.shape[1] - 1:-1], temperature, top_p)
    return probs.gather(-1, cont[..., None])[..., 0].prod(-1).numpy()


def sd_three_token_counts(target, proposer, prompt, temperature, top_p, verify_fn=verify, gamma=2, seed=0):
    r = generate(target, prompt.expand(N_SAMPLES, -1), 3, proposer, gamma, temperature, top_p, seed, verify_fn)
    toks = np.asarray(r.tokens)
    return np.bincount(toks[:, 0] * V * V + toks[:, 1] * V + toks[:, 2], minlength=V ** 3)


def chi2_pvalue(counts, probs):
    """Chi-square goodness of fit; bins with expected count < 5 are merged into one."""
    from scipy.stats import chisquare

    probs = np.asarray(probs, dtype=np.float64)
    exp = probs / probs.sum() * counts.sum()
    small = exp < 5
    obs, e = list(counts[~small]), list(exp[~small])
    if small.any():
        if exp[small].sum() < 1e-6:  # outcomes of (near-)zero probability must never be drawn
            if counts[small].sum() > 0:
                return 0.0
        else:
            obs.append(counts[small].sum())
            e.append(exp[small].sum())
    obs, e = np.asarray(obs, dtype=float), np.asarray(e)
    return chisquare(obs, e * obs.sum() / e.sum()).pvalue


def broken_verify(p, q, drafts, greedy, gen=None):
    """Accept with min(1, p/q) but resample from p itself (not the residual): biased toward the draft."""
    B, g1, _ = p.shape
    pd = p[:, :-1].gather(-1, drafts[..., None])[..., 0]
    qd = q.gather(-1, drafts[..., None])[..., 0]
    a = (torch.rand(B, g1 - 1, generator=gen) * qd < pd).long().cumprod(1).sum(1)
    nxt = torch.multinomial(p[torch.arange(B), a], 1, generator=gen)[:, 0]
    return a, nxt


@pytest.fixture(scope="module")
def small_vocab_models(tiny_transformer):
    return tiny_transformer(30, vocab=V, scale=8.0), tiny_transformer(31, vocab=V, layers=1, scale=8.0)


@pytest.mark.parametrize("temperature,top_p,gamma", [(1.0, 1.0, 2), (0.8, 0.9, 3)])
def test_speculative_sampling_is_lossless(small_vocab_models, temperature, top_p, gamma):
    target, draft = small_vocab_models
    prompt = torch.tensor([[1, 3, 0, 2]])
    probs = exact_three_token_dist(target, prompt, temperature, top_p)
    counts = sd_three_token_counts(target, DraftModel(draft), prompt, temperature, top_p, gamma=gamma)
    assert chi2_pvalue(counts, probs) > 1e-3
    counts = sd_three_token_counts(target, PromptLookup(), prompt, temperature, top_p, gamma=gamma, seed=1)
    assert chi2_pvalue(counts, probs) > 1e-3


def test_broken_acceptance_rule_fails_the_same_test(small_vocab_models):
    target, draft = small_vocab_models
    prompt = torch.tensor([[1, 3, 0, 2]])
    probs = exact_three_token_dist(target, prompt, 1.0, 1.0)
    counts = sd_three_token_counts(target, DraftModel(draft), prompt, 1.0, 1.0, verify_fn=broken_verify)
    assert chi2_pvalue(counts, probs) < 1e-3
