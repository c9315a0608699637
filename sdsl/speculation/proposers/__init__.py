"""Proposers, one module per kind (base, draft, heads, ngram): what drafts the tokens a speculative step verifies, each priced on the target's roofline.
Summary of docs/model.md §3.5 (and §3.7 for a draft model's resync and switch terms).

Every proposer's cost is one or more forward passes priced by :mod:`sdsl.roofline.latency` (the same
kernels, calibrated efficiencies, launch overheads and tensor-parallel all-reduces as the target);
nothing here is a second roofline. Sizes come from the target's :class:`ModelSpec`, with the numbers
each method ships as overridable defaults:

- :class:`DraftModel` — a separate small LM (Leviathan et al., ICML 2023): one forward per drafted token.
- :class:`EagleHead` — EAGLE-1 (Li et al., "EAGLE", ICML 2024, arXiv 2401.15077, §4.1 and
  SafeAILab/EAGLE ``model/cnets.py``): an FC layer 2d → d over [target feature; token embedding], one
  decoder layer at the target's width, and the target's LM head; the draft-extend pass drafts depth 1, then
  one pass per further depth.
- :class:`Eagle3Head` — EAGLE-3 (Li et al., arXiv 2503.01840, §3): FC 3d → d fusing low, middle and
  high target features, one decoder layer whose QKV projection reads [embedding; fused feature] (2d),
  and an LM head over a reduced draft vocabulary (``draft_vocab_size`` = 32000 in the released heads); on an
  MoE target the layer is dense with the released head's shape (:mod:`sdsl.catalog.heads`).
- :class:`MedusaHeads` — Medusa-1 (Cai et al., ICML 2024, arXiv 2401.10774, §2.1.1, Eq. 1): head k is
  softmax(W2ᵏ·(SiLU(W1ᵏ·h) + h)), W1 ∈ R^{d×d}, W2 ∈ R^{d×V}; all heads run once per step on the last
  hidden state, so drafting costs one pass however deep the tree.
- :class:`MTPLayers` — DeepSeek-V3 multi-token prediction (DeepSeek-AI, arXiv 2412.19437, §2.2, Eqs.
  21–23): module k projects [RMSNorm(h); RMSNorm(Emb(t))] with M_k ∈ R^{d×2d} and runs one
  Transformer block sharing the target's embedding and output head (V3 ships one module,
  ``num_nextn_predict_layers = 1``); engines reuse it for deeper drafts, one pass per depth. The block is
  the target's own layer: on DeepSeek-V3 and GLM-4.5 an MoE layer (with MLA on DeepSeek-V3), its routed
  experts priced by the tokens it drafts (the checkpoints' MTP layer holds the full expert set).
- :class:`NGramLookup` — prompt lookup / n-gram matching (Saxena 2023, "Prompt Lookup Decoding";
  vLLM ``method="ngram"``): no GPU work, a settable CPU time per step.
"""

from __future__ import annotations

from importlib import import_module

from sdsl.catalog.models import get_model
from sdsl.errors import InvalidInputError, UnknownNameError
from sdsl.speculation.proposers.base import (SELECT_KERNELS, VERIFY_KERNELS, Proposer, _gemm_time,  # noqa: F401
                                             _read_time, forward_step, forward_time)
from sdsl.speculation.proposers.draft import DraftModel

__all__ = ["Proposer", "DraftModel", "EagleHead", "Eagle3Head", "MedusaHeads", "MTPLayers", "NGramLookup",
           "PROPOSER_KINDS", "make_proposer", "forward_time", "forward_step"]

# the head and lookup classes, imported on first use (ranking draft models does not build their dataclasses)
_LAZY = {"EagleHead": "sdsl.speculation.proposers.heads", "Eagle3Head": "sdsl.speculation.proposers.heads",
         "MedusaHeads": "sdsl.speculation.proposers.heads", "MTPLayers": "sdsl.speculation.proposers.heads",
         "NGramLookup": "sdsl.speculation.proposers.ngram"}
_KINDS = {"draft": "DraftModel", "eagle": "EagleHead", "eagle3": "Eagle3Head", "medusa": "MedusaHeads",
          "mtp": "MTPLayers", "ngram": "NGramLookup"}


def __getattr__(name: str):
    """``EagleHead`` ... ``NGramLookup`` and ``PROPOSER_KINDS``: proposer kind (as ``--proposer`` and
    :func:`make_proposer` name it) -> the class that prices it."""
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
    elif name == "PROPOSER_KINDS":
        value = {kind: _kind_class(kind) for kind in _KINDS}
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


def _kind_class(kind: str) -> type:
    return DraftModel if kind == "draft" else __getattr__(_KINDS[kind])


def make_proposer(text, **overrides) -> Proposer:
    """``"eagle3"``, ``"medusa"``, ``"draft:llama-3.2-1b"`` ... → a Proposer (a Proposer passes through).
    ``overrides`` set a kind's numbers (layers, vocab, heads, cpu_s; draft_extend, select_kernels,
    verify_kernels for EAGLE-style heads)."""
    if isinstance(text, Proposer):
        return text
    kind, _, arg = str(text).strip().partition(":")
    kind = kind.lower()
    if kind not in _KINDS:
        raise UnknownNameError(f"Unknown proposer {text!r}; expected one of draft:<model>, "
                               f"{', '.join(k for k in _KINDS if k != 'draft')}.")
    if kind == "draft":
        if not arg:
            raise InvalidInputError("A draft-model proposer needs a model: draft:<catalog name or config.json>.")
        return DraftModel(get_model(arg))
    if arg:
        raise InvalidInputError(f"Proposer {kind!r} takes no argument; got {text!r}.")
    try:
        return _kind_class(kind)(**overrides)
    except TypeError:
        raise InvalidInputError(f"Proposer {kind!r} does not take {', '.join(sorted(overrides))}.") from None
