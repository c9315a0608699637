"""Real model shapes with random weights, for synthetic-acceptance runs of the decoder.

:func:`random_model` builds the reference model from a catalog :class:`~sdsl.catalog.models.ModelSpec`
(any Llama-style entry; weights N(0, 0.02), seeded). :func:`synthetic_proposer` builds a proposer of a
given kind for a target: a separate draft model (its vocabulary set to the target's: a draft shares the
target's tokenizer), or an EAGLE-shaped head at the target's width. With ``acceptance=`` the decoder
then runs the configuration's real draft and verify work at a chosen per-position acceptance
(:func:`sdsl.torch.decoder.forced_acceptance`). :class:`NullModel` and :func:`loop_overhead` time the
decoder's own per-step work (sampling, verification, bookkeeping) with zero-cost stand-ins.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from sdsl.torch.decoder import generate
from sdsl.torch.head import DraftHead, HeadProposer
from sdsl.torch.model import KVCache, Shape, Transformer, shape_of
from sdsl.torch.proposers import DraftModel

__all__ = ["draft_spec_for", "head_spec_for", "random_model", "synthetic_proposer", "NullModel", "loop_overhead"]


def draft_spec_for(draft, target):
    """The draft's catalog shape with the target's vocabulary (what a real draft for that target has)."""
    return replace(draft, name=f"{draft.name}@{target.name}-vocab", vocab_size=target.vocab_size, published_params=None)


def head_spec_for(target):
    """An EAGLE-shaped head priced as a one-layer model at the target's width with its vocabulary (the head
    runs the target's LM head; its 2d→d fusion layer is left out of the price)."""
    return replace(target, name=f"{target.name}-eagle-head", n_layer=1, published_params=None)


def _context_shape(spec, max_context: int) -> Shape:
    return replace(shape_of(spec), max_context=max_context)


@torch.no_grad()
def random_model(spec, seed: int = 0, max_context: int = 2048, dtype=torch.float32) -> Transformer:
    """The reference model shaped like ``spec`` (catalog ModelSpec), weights N(0, 0.02) drawn in place
    (seeded; norms 1), eval mode."""
    model = Transformer(_context_shape(spec, max_context))
    g = torch.Generator(device=model.rope_cos.device).manual_seed(seed)
    for name, p in model.named_parameters():
        p.fill_(1.0 if name.endswith("weight") else 0.0) if p.ndim == 1 else p.normal_(0.0, 0.02, generator=g)
    return model.to(dtype).eval()


def synthetic_proposer(kind: str, target: Transformer, draft_spec=None, seed: int = 1, dtype=torch.float32):
    """``kind`` "draft" (a random model shaped like ``draft_spec``) or "head" (a random EAGLE head)."""
    if kind == "head":
        torch.manual_seed(seed)
        return HeadProposer(DraftHead(target.shape).to(dtype).eval(), target, name="eagle-head")
    model = random_model(draft_spec, seed, target.shape.max_context, dtype)
    return DraftModel(model, name=draft_spec.name)


class NullModel:
    """A zero-cost stand-in target or draft (uniform logits, zero features) with the real vocabulary."""

    def __init__(self, vocab: int, d_model: int = 8):
        self.shape = Shape(n_layer=1, d_model=d_model, n_head=1, n_kv_head=1, d_ff=1, vocab_size=vocab, head_dim=1)
        self.tok_embeddings = lambda tokens: torch.zeros(*tokens.shape, d_model)
        self.output = lambda features: torch.zeros(*features.shape[:-1], vocab)

    def new_cache(self, batch, capacity=None, dtype=None):
        return KVCache(self.shape, batch, capacity or 4096)

    def __call__(self, tokens, cache=None, *, positions=None, mask=None, return_hidden=False):
        if cache is not None:
            cache.lengths = cache.lengths + tokens.shape[1]
        logits = torch.zeros(*tokens.shape, self.shape.vocab_size)
        return (logits, torch.zeros(*tokens.shape, self.shape.d_model)) if return_hidden else logits


class _NullHead:
    def __init__(self, d_model: int):
        self.d_model = d_model

    def new_cache(self, batch, capacity):
        return KVCache(Shape(n_layer=1, d_model=1, n_head=1, n_kv_head=1, d_ff=1, vocab_size=1, head_dim=1), batch, capacity)

    def __call__(self, features, embeddings, cache=None, **_):
        if cache is not None:
            cache.lengths = cache.lengths + features.shape[1]
        return torch.zeros(*features.shape[:-1], self.d_model)


def loop_overhead(kind: str, vocab: int, batch: int, tree, acceptance=None, prompt_len: int = 16, max_new: int = 32,
                  repeats: int = 3) -> float:
    """CPU seconds per step outside model forwards, from decoding with zero-cost stand-ins (DESIGN §3.3's
    T_overhead). ``kind``: "plain", "draft" or "head"."""
    null = NullModel(vocab)
    prompts = torch.zeros(batch, prompt_len, dtype=torch.long)
    proposer = {"plain": None, "draft": DraftModel(NullModel(vocab)), "head": HeadProposer(_NullHead(8), null)}[kind]
    best = float("inf")
    for _ in range(repeats):
        r = generate(null, prompts, max_new, proposer, tree=None if kind == "plain" else tree, acceptance=acceptance,
                     clock="cpu")
        best = min(best, r.decode_s / r.steps)
    return best
