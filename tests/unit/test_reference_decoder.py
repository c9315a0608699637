"""Reference speculative decoder: exactness (greedy), losslessness (sampling), KV-cache rollback."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sdsl.torch.decoder import DraftModel, PromptLookup, generate, logits_to_probs, verify  # noqa: E402
from sdsl.torch.model import Shape, Transformer  # noqa: E402
from sdsl.errors import InvalidInputError  # noqa: E402

torch.set_num_threads(1)


def tiny(seed: int, vocab: int = 256, d: int = 32, layers: int = 2, scale: float = 1.0) -> Transformer:
    s = Shape(n_layer=layers, d_model=d, n_head=2, n_kv_head=1, d_ff=64, vocab_size=vocab, head_dim=16, max_context=128)
    m = Transformer(s).init_weights(seed)
    with torch.no_grad():
        m.output.weight.mul_(scale)
    return m.eval()


def prompts(batch: int, length: int = 12, vocab: int = 256, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------- KV cache


def test_kv_cache_incremental_matches_full_forward_and_rolls_back():
    m = tiny(1)
    x = prompts(3, 20)
    with torch.no_grad():
        full = m(x)
        cache = m.new_cache(3, 64)
        m(x[:, :8], cache)
        junk = torch.randint(0, 256, (3, 5))
        m(junk, cache)                      # speculative tokens that will be rejected
        cache.rollback(torch.tensor([5, 5, 5]))
        inc = torch.cat([m(x[:, 8:9], cache)] + [m(x[:, i:i + 1], cache) for i in range(9, 20)], dim=1)
    assert torch.equal(cache.lengths, torch.tensor([20, 20, 20]))
    torch.testing.assert_close(inc, full[:, 8:], atol=1e-4, rtol=1e-4)


def test_kv_cache_per_sequence_lengths():
    """Two sequences score 3 speculative tokens; sequence 0 rejects all, sequence 1 keeps all."""
    m = tiny(2)
    x = prompts(2, 16)
    with torch.no_grad():
        ref0, ref1 = m(x[:1, :11])[0, -1], m(x[1:, :14])[0, -1]
        cache = m.new_cache(2, 64)
        m(x[:, :10], cache)
        m(torch.stack([torch.tensor([7, 7, 7]), x[1, 10:13]]), cache)
        cache.set_lengths(torch.tensor([10, 13]))
        out = m(torch.stack([x[0, 10:11], x[1, 13:14]]), cache)[:, -1]
    torch.testing.assert_close(out[0], ref0, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(out[1], ref1, atol=1e-4, rtol=1e-4)
    assert torch.equal(cache.lengths, torch.tensor([11, 14]))
    with pytest.raises(InvalidInputError):
        cache.set_lengths(-1)


# ---------------------------------------------------------------- greedy exactness


@pytest.mark.parametrize("batch", [1, 4])
def test_batched_plain_decoding_equals_one_by_one(batch):
    m = tiny(3)
    p = prompts(batch, 10, seed=batch)
    together = generate(m, p, 12).tokens
    alone = [generate(m, p[i:i + 1], 12).tokens[0] for i in range(batch)]
    assert together == alone


@pytest.mark.parametrize("gamma", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("batch", [1, 5])
def test_greedy_sd_equals_target_greedy_random_models(gamma, batch):
    """Random-init draft vs target disagree often, so rejections at every position are exercised."""
    target, draft = tiny(10, layers=3), tiny(11, layers=1)
    p = prompts(batch, 10, seed=gamma)
    ref = generate(target, p, 20)
    for proposer in (DraftModel(draft), PromptLookup()):
        out = generate(target, p, 20, proposer, gamma)
        assert out.tokens == ref.tokens
        assert out.accept_counts.sum() > 0


def test_greedy_sd_equals_target_greedy_family(family_models, heldout_prompts):
    """Every (draft, target) pair of the committed family, every γ = 1…8, batch 1 and 3."""
    names = list(family_models)
    for t_name, d_name in itertools.permutations(names, 2):
        target, draft = family_models[t_name], family_models[d_name]
        if target.shape.n_layer * target.shape.d_model ** 2 < draft.shape.n_layer * draft.shape.d_model ** 2:
            continue
        for batch in (1, 3):
            p = heldout_prompts[:batch]
            ref = generate(target, p, 8).tokens
            for gamma in range(1, 9):
                assert generate(target, p, 8, DraftModel(draft), gamma).tokens == ref, (d_name, t_name, gamma, batch)


def test_accept_histogram_and_positions():
    target, draft = tiny(20), tiny(20)  # identical models: every draft accepted under greedy
    r = generate(target, prompts(2, 8), 18, DraftModel(draft), 4)
    assert r.accept_counts[:-1].sum() == 0 and r.alpha == 1.0 and r.tau == 5.0
    np.testing.assert_allclose(r.per_position, 1.0)
    r = generate(tiny(21), prompts(2, 8), 18, DraftModel(tiny(22)), 4)
    assert 0 <= r.alpha < 1 and len(r.per_position) == 4
    assert r.accept_counts.sum() <= r.steps * 2 and all(len(t) == 18 for t in r.tokens)


def test_logits_to_probs_top_p_and_greedy():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    assert torch.equal(logits_to_probs(logits, 0.0), torch.tensor([[1.0, 0, 0, 0]]))
    p = logits_to_probs(logits, 1.0, 0.7)
    assert p[0, 2:].sum() == 0 and abs(p.sum().item() - 1) < 1e-6
