"""Proposers: what drafts the tokens a speculative step verifies, each priced on the target's roofline.
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

from dataclasses import dataclass, replace

import numpy as np

from sdsl.catalog.models import ModelSpec, dtype_bytes, get_model
from sdsl.catalog.heads import dense_head_spec, head_config, target_layer_spec
from sdsl.roofline.latency import ModelShapes, gemm_flops_bytes, op_time, padded_step_time, prefill_time_s
from sdsl.errors import InvalidInputError, UnknownNameError

__all__ = ["Proposer", "DraftModel", "EagleHead", "Eagle3Head", "MedusaHeads", "MTPLayers", "NGramLookup",
           "PROPOSER_KINDS", "make_proposer", "forward_time", "forward_step"]


def forward_step(model, deployment, *, batch, q, context, draft=False, params=None):
    """One forward pass of ``model`` (ModelSpec or ModelShapes) priced by :func:`sdsl.roofline.latency.step_time`:
    on the deployment itself (target, heads) or, with ``draft``, on :meth:`Deployment.for_draft` (draft_tp
    GPUs, ``params`` when given). The single place speculation calls the roofline; returns the StepTime."""
    dep = deployment.for_draft(params) if draft else deployment
    return padded_step_time(model, dep, batch=batch, q=q, context=context)


def forward_time(model, deployment, *, batch, q, context, draft=False, params=None) -> np.ndarray:
    """Total seconds of :func:`forward_step`."""
    return forward_step(model, deployment, batch=batch, q=q, context=context, draft=draft, params=params).total_s


def _gemm_time(tokens, n_in, n_out, deployment) -> np.ndarray:
    """One GEMM kernel on the roofline (:func:`sdsl.roofline.latency.op_time`)."""
    hw, params = deployment.hardware, deployment.params
    flops, nbytes = gemm_flops_bytes(tokens, n_in, n_out, dtype_bytes(deployment.dtype))
    return op_time(flops, nbytes, hw.peak_flops_for(deployment.dtype), hw.mem_bandwidth, params)


SELECT_KERNELS = 2  # per drafting depth: softmax over the draft vocabulary, top-k (SGLang draft_forward)
VERIFY_KERNELS = 2  # per step: tree build, greedy tree verification (SGLang eagle_utils)


def _read_time(nbytes, deployment) -> np.ndarray:
    """One memory-bound kernel reading ``nbytes`` (:func:`sdsl.roofline.latency.op_time` with no FLOPs)."""
    hw = deployment.hardware
    return op_time(0.0, nbytes, hw.peak_flops_for(deployment.dtype), hw.mem_bandwidth, deployment.params)


class Proposer:
    """Base class. ``step_time`` prices one drafting pass over ``q`` tokens per sequence;
    ``draft_time`` the drafting of a chain (topk = 1) or an SGLang-style tree (steps × topk)."""

    kind = "proposer"
    max_depth: int | None = None  # deepest draft it can propose (Medusa: its number of heads)
    source = ""

    def step_time(self, target: ModelSpec, deployment, *, batch, q=1, context) -> np.ndarray:
        raise NotImplementedError

    def draft_time(self, target: ModelSpec, deployment, *, batch, steps, topk=1, context) -> np.ndarray:
        """Autoregressive drafting (EAGLE-2 / SGLang tree expansion): the first depth drafts from one
        token per sequence, each further depth from the ``topk`` frontier tokens. ``steps`` broadcasts."""
        s = np.asarray(steps, dtype=float)
        first = self.step_time(target, deployment, batch=batch, q=1, context=context)
        later = first if np.all(np.asarray(topk) == 1) else self.step_time(
            target, deployment, batch=batch, q=topk, context=context)
        return np.where(s > 0, first + np.maximum(s - 1.0, 0.0) * later, 0.0)

    def passes(self, steps) -> np.ndarray:
        """Separate drafting forwards per step (each pays an engine's per-pass host overhead): one per depth."""
        return np.asarray(steps, dtype=float)

    def worker_time(self, target, deployment, *, batch, steps, topk, tau, verify_tokens, context) -> np.ndarray:
        """Work an engine's speculative worker does per step beyond drafting and the target's forward
        (none for the base proposer; see :meth:`EagleHead.worker_time`)."""
        return 0.0 * np.asarray(steps, dtype=float)

    def worker_passes(self) -> float:
        """Separate forwards :meth:`worker_time` launches per step (each pays ``pass_overhead_s``)."""
        return 0.0

    @property
    def name(self) -> str:
        return self.kind

    def to_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "source": self.source}


@dataclass(frozen=True, eq=False)
class DraftModel(Proposer):
    """A separate draft LM: a catalog name, ModelSpec or a stack of shapes (vectorised search);
    ``params`` prices it with other latency parameters than the target's.

    Two terms of how a decoder runs the draft, off by default (docs/model.md §3.7): ``first_pass_tokens``,
    the tokens per sequence its first drafting pass of a step feeds (1, the last verified token; 2 for a
    decoder that re-feeds the last two tokens because the draft's cache may hold a rejected draft, as sdsl's
    reference decoder does), and ``switch_ratio`` ρ ≥ 1, the warm-cache over DRAM read bandwidth when the
    target's forward evicts the draft's weights and KV cache from a cache that otherwise holds them (a CPU:
    the first pass re-reads them, :func:`sdsl.roofline.model_switch.switch_time_s`; 1 on GPUs, whose forwards
    stream weights from HBM anyway)."""

    model: object = None
    params: object = None
    first_pass_tokens: int = 1
    switch_ratio: float = 1.0
    kind = "draft"
    source = "Leviathan, Kalman & Matias, ICML 2023, Alg. 1 (one draft forward per drafted token)"

    def __post_init__(self):
        if isinstance(self.model, str):
            object.__setattr__(self, "model", get_model(self.model))
        if not hasattr(self.model, "d_model"):  # a catalog name, config.json, ModelSpec or ModelShapes stack
            raise InvalidInputError(f"DraftModel needs its draft model (a name or ModelSpec); got {type(self.model).__name__}.")
        if int(self.first_pass_tokens) != self.first_pass_tokens or self.first_pass_tokens < 1:
            raise InvalidInputError(f"first_pass_tokens must be a positive whole number; got {self.first_pass_tokens}.")
        if not (np.isfinite(self.switch_ratio) and self.switch_ratio >= 1):
            raise InvalidInputError(f"switch_ratio (cache over DRAM bandwidth) must be >= 1; got {self.switch_ratio}.")
        if self.switch_ratio != 1.0 and not isinstance(self.model, ModelSpec):
            raise InvalidInputError("switch_ratio needs one draft model (a ModelSpec), not a stack of shapes.")

    def draft_time(self, target, deployment, *, batch, steps, topk=1, context):
        """One forward per depth (:meth:`Proposer.draft_time`), plus what the first pass of a step costs beyond
        a one-token warm pass: ``first_pass_tokens`` − 1 more tokens, and the re-read at ``switch_ratio``."""
        base = super().draft_time(target, deployment, batch=batch, steps=steps, topk=topk, context=context)
        if self.first_pass_tokens == 1 and self.switch_ratio == 1.0:
            return base
        extra = 0.0
        if self.first_pass_tokens != 1:
            extra = (self.step_time(target, deployment, batch=batch, q=self.first_pass_tokens, context=context)
                     - self.step_time(target, deployment, batch=batch, q=1, context=context))
        if self.switch_ratio != 1.0:
            from sdsl.roofline.model_switch import switch_time_s

            extra = extra + switch_time_s(self.model, deployment.for_draft(self.params), batch=batch, context=context,
                                          ratio=self.switch_ratio)
        return base + np.where(np.asarray(steps, dtype=float) > 0, extra, 0.0)

    @property
    def name(self) -> str:
        return f"draft:{self.model.name}" if isinstance(self.model, ModelSpec) else "draft"

    def step_time(self, target, deployment, *, batch, q=1, context):
        return forward_time(self.model, deployment, batch=batch, q=q, context=context, draft=True, params=self.params)


@dataclass(frozen=True, eq=False)
class EagleHead(Proposer):
    """EAGLE-1: FC 2d → d + ``layers`` decoder layers + the target's LM head (``vocab`` None = target's);
    :meth:`worker_time` adds the engine's per-step draft-extend, selection and verification work."""

    layers: int = 1
    vocab: int | None = None
    draft_extend: bool = True  # the head's pass over the accepted tokens (worker_time); it drafts depth 1
    extend_logits: str = "all"  # "last": that pass computes logits at each sequence's last accepted token only
    extend_tokens: str = "accepted"  # "verified": that pass runs over every verified chain slot (steps + 1)
    select_kernels: int = SELECT_KERNELS
    verify_kernels: int = VERIFY_KERNELS
    kind = "eagle"
    fused_features = 2  # FC input is [feature; embedding]
    qkv_input_factor = 1
    source = "Li et al., EAGLE (ICML 2024, arXiv 2401.15077) §4.1; SafeAILab/EAGLE model/cnets.py (fc 2d->d, 1 layer)"

    def head_spec(self, target: ModelSpec) -> ModelSpec:
        """The head's decoder as a ModelSpec: ``layers`` dense layers at the target's width, shaped as the released
        head's config when sdsl/data/heads.toml has one for this target (:func:`sdsl.catalog.heads.dense_head_spec`)."""
        return dense_head_spec(target, self.layers, self.vocab or target.vocab_size, self.kind,
                               head_config(self.kind, target))

    def shapes(self, target: ModelSpec, tp: int, ep: int = 1) -> ModelShapes:
        spec = self.head_spec(target)
        s = ModelShapes.of(spec, tp, ep=ep if spec.is_moe else 1)
        if self.qkv_input_factor == 1:
            return s
        gemm_in = dict(s.gemm_in, attn_pre_proj=s.gemm_in["attn_pre_proj"] * self.qkv_input_factor)
        return replace(s, gemm_in=gemm_in)

    def __post_init__(self):
        if self.extend_logits not in ("all", "last"):
            raise InvalidInputError(f"extend_logits is 'all' or 'last'; got {self.extend_logits!r}.")
        if self.extend_tokens not in ("accepted", "verified"):
            raise InvalidInputError(f"extend_tokens is 'accepted' or 'verified'; got {self.extend_tokens!r}.")

    def draft_time(self, target, deployment, *, batch, steps, topk=1, context):
        """With the draft-extend pass, its logits at the last accepted token give depth 1's candidates, so the
        head drafts ``steps`` − 1 more passes, each over the ``topk`` frontier tokens (SGLang
        ``EAGLEWorker.draft_forward``: "we get 1 token from draft prefill and (#spec steps - 1) tokens here";
        vLLM ``EagleProposer.propose``: the pass over the verified tokens, then num_speculative_tokens − 1;
        SafeAILab/EAGLE ``topK_genrate``; :class:`sdsl.torch.head.HeadProposer`). Without it, ``steps`` passes."""
        if not self.draft_extend:
            return super().draft_time(target, deployment, batch=batch, steps=steps, topk=topk, context=context)
        later = self.step_time(target, deployment, batch=batch, q=topk, context=context)
        return np.maximum(np.asarray(steps, dtype=float) - 1.0, 0.0) * later

    def passes(self, steps) -> np.ndarray:
        s = np.asarray(steps, dtype=float)
        return np.maximum(s - 1.0, 0.0) if self.draft_extend else s  # depth 1 comes out of the draft extend

    def step_time(self, target, deployment, *, batch, q=1, context):
        tokens = np.asarray(batch, dtype=float) * np.asarray(q, dtype=float)
        fc = _gemm_time(tokens, self.fused_features * target.d_model, target.d_model / deployment.tp, deployment)
        body = forward_time(self.shapes(target, deployment.tp, deployment.ep), deployment, batch=batch, q=q,
                            context=context)
        return fc + body

    def extend_rows(self, tau, steps) -> np.ndarray:
        """Tokens per sequence the draft-extend pass runs over: the τ accepted ones, or with
        ``extend_tokens="verified"`` every slot of the verified path (steps + 1), as a decoder that keeps its
        batch rectangular does (:class:`sdsl.torch.head.HeadProposer` feeds the whole accepted path, padded)."""
        if self.extend_tokens == "accepted":
            return np.asarray(tau, dtype=float)
        return np.asarray(steps, dtype=float) + 1.0 + 0.0 * np.asarray(tau, dtype=float)

    def extend_time(self, target, deployment, *, batch, tau, context):
        """The draft-extend pass over ``tau`` tokens per sequence: a :meth:`step_time` at q = τ, or with
        ``extend_logits="last"`` priced as a chunked prefill whose LM head runs at each sequence's last token
        only (:func:`sdsl.roofline.latency.prefill_time_s`; vLLM ``EagleProposer.propose`` computes logits at
        ``last_token_indices``, SGLang's ``LogitsProcessor`` keeps the last position of an extend batch)."""
        if self.extend_logits == "all":
            return self.step_time(target, deployment, batch=batch, q=tau, context=context)
        tokens = np.asarray(batch, dtype=float) * np.asarray(tau, dtype=float)
        fc = _gemm_time(tokens, self.fused_features * target.d_model, target.d_model / deployment.tp, deployment)
        return fc + prefill_time_s(self.shapes(target, deployment.tp, deployment.ep), deployment, batch=batch, prompt=tau,
                                   context=context)

    def worker_time(self, target, deployment, *, batch, steps, topk, tau, verify_tokens, context):
        """EAGLE engine terms per step (docs/model.md §3.5), each priced by the calibrated roofline:

        - draft extend: after verification the head runs once more over the τ accepted tokens to refresh its
          hidden states (SGLang ``EAGLEWorker.forward_draft_extend_after_decode``; SafeAILab/EAGLE
          ``topK_genrate`` over the accepted tokens' features; vLLM ``EagleProposer.propose`` runs its first
          pass over the verified tokens) — :meth:`extend_time` (one :meth:`step_time` at q = τ, or its
          LM head at the last token only with ``extend_logits="last"``; over :meth:`extend_rows` tokens); its
          logits draft depth 1, so :meth:`draft_time` runs steps − 1 passes;
        - per drafting depth, softmax and top-k over the draft vocabulary (SGLang ``draft_forward``:
          ``fast_topk`` + ``select_top_k_tokens``): :data:`SELECT_KERNELS` kernels reading the
          b·topk × V_draft fp32 logits;
        - verification bookkeeping: building the tree and its mask, then accepting along it (SGLang
          ``build_tree_kernel_efficient``, ``verify_tree_greedy``): :data:`VERIFY_KERNELS` kernels, one reading
          the target's fp32 logits of the n − 1 draft tokens beyond plain decoding's one.

        ``draft_extend``, ``select_kernels`` and ``verify_kernels`` switch the terms (for ablations).
        """
        b, s = np.asarray(batch, dtype=float), np.asarray(steps, dtype=float)
        vocab = -(-(self.vocab or target.vocab_size) // deployment.tp)
        extend = self.extend_time(target, deployment, batch=b, tau=self.extend_rows(tau, s),
                                  context=context) if self.draft_extend else 0.0
        select = s * self.select_kernels * _read_time(b * np.asarray(topk, dtype=float) * vocab * 4.0, deployment)
        full_vocab = -(-target.vocab_size // deployment.tp)
        extra_rows = b * np.maximum(np.asarray(verify_tokens, dtype=float) - 1.0, 0.0)
        verify = (_read_time(extra_rows * full_vocab * 4.0, deployment)
                  + (self.verify_kernels - 1) * deployment.params.t_kernel) if self.verify_kernels > 0 else 0.0
        return extend + select + verify + 0.0 * s

    def worker_passes(self) -> float:
        return 1.0 if self.draft_extend else 0.0  # the draft-extend forward


@dataclass(frozen=True, eq=False)
class Eagle3Head(EagleHead):
    """EAGLE-3: FC 3d → d over three feature levels, one layer with a 2d-wide QKV input, LM head over
    ``vocab`` draft tokens (32000 by default, the released heads' ``draft_vocab_size``)."""

    vocab: int | None = 32000
    kind = "eagle3"
    fused_features = 3
    qkv_input_factor = 2
    source = ("Li et al., EAGLE-3 (arXiv 2503.01840) §3; SafeAILab/EAGLE eagle/model/cnets.py "
              "(fc 3d->d, q/k/v over 2d, draft_vocab_size 32000)")


@dataclass(frozen=True, eq=False)
class MTPLayers(EagleHead):
    """DeepSeek-V3 MTP: M_k (2d → d) + ``layers`` Transformer block(s) per module (V3: 1), shared embedding
    and LM head. Each draft depth runs one module (V3 ships one, ``num_nextn_predict_layers = 1``; engines
    reuse it for deeper drafts), so the cost per depth is EAGLE-1's shape at the target's own layer."""

    kind = "mtp"
    source = ("DeepSeek-AI, DeepSeek-V3 Technical Report (arXiv 2412.19437) §2.2, Eqs. 21-23; num_nextn_predict_layers=1; "
              "the block is the target's own (MoE, MLA) layer")

    def head_spec(self, target: ModelSpec) -> ModelSpec:
        """On an MoE or MLA target, ``layers`` copies of the target's last layer (MoE when that layer is, MLA as
        the target has it; local attention only when every target layer is local) with the target's full
        vocabulary head (shared, ``vocab`` None); on a dense target, EAGLE-1's shape."""
        if not (target.is_moe or target.is_mla):  # a dense target's block is EAGLE-1's shape (unchanged)
            return super().head_spec(target)
        return target_layer_spec(target, self.layers, self.vocab or target.vocab_size, self.kind)


@dataclass(frozen=True, eq=False)
class MedusaHeads(Proposer):
    """Medusa-1: ``heads`` residual blocks (d × d) and LM heads (d × V), all run once per step."""

    heads: int = 5
    vocab: int | None = None
    kind = "medusa"
    source = ("Cai et al., Medusa (ICML 2024, arXiv 2401.10774) §2.1.1 Eq. 1; "
              "FasterDecoding/Medusa defaults: medusa_num_heads 5, medusa_num_layers 1")

    def __post_init__(self):
        if int(self.heads) < 1:
            raise InvalidInputError("Medusa needs at least one head.")

    @property
    def max_depth(self) -> int:
        return int(self.heads)

    def step_time(self, target, deployment, *, batch, q=1, context):
        tokens = np.asarray(batch, dtype=float)
        d, v = target.d_model, -(-(self.vocab or target.vocab_size) // deployment.tp)
        return self.heads * (_gemm_time(tokens, d, d, deployment) + _gemm_time(tokens, d, v, deployment))

    def draft_time(self, target, deployment, *, batch, steps, topk=1, context):
        s = np.asarray(steps, dtype=float)
        return np.where(s > 0, self.step_time(target, deployment, batch=batch, context=context), 0.0)

    def passes(self, steps) -> np.ndarray:
        return 0.0 * np.asarray(steps, dtype=float)  # the heads run inside the target's forward


@dataclass(frozen=True, eq=False)
class NGramLookup(Proposer):
    """Prompt lookup: no GPU work; ``cpu_s`` seconds of host time per speculative step (default 0,
    an assumption: set it from a measurement of your engine)."""

    cpu_s: float = 0.0
    kind = "ngram"
    source = "Saxena (2023) Prompt Lookup Decoding; vLLM speculative_config method 'ngram'"

    def __post_init__(self):
        if not (np.isfinite(self.cpu_s) and self.cpu_s >= 0):
            raise InvalidInputError("The n-gram proposer's CPU time per step must be a non-negative number of seconds.")

    def step_time(self, target, deployment, *, batch, q=1, context):
        return np.zeros(np.shape(np.asarray(batch, dtype=float)))

    def draft_time(self, target, deployment, *, batch, steps, topk=1, context):
        s = np.asarray(steps, dtype=float) + 0.0 * np.asarray(batch, dtype=float)
        return np.where(s > 0, self.cpu_s, 0.0)

    def passes(self, steps) -> np.ndarray:
        return 0.0 * np.asarray(steps, dtype=float)  # no GPU forward


PROPOSER_KINDS = {"draft": DraftModel, "eagle": EagleHead, "eagle3": Eagle3Head, "medusa": MedusaHeads,
                  "mtp": MTPLayers, "ngram": NGramLookup}
"""Proposer kind (as ``--proposer`` and :func:`make_proposer` name it) -> the class that prices it."""


def make_proposer(text, **overrides) -> Proposer:
    """``"eagle3"``, ``"medusa"``, ``"draft:llama-3.2-1b"`` ... → a Proposer (a Proposer passes through).
    ``overrides`` set a kind's numbers (layers, vocab, heads, cpu_s; draft_extend, select_kernels,
    verify_kernels for EAGLE-style heads)."""
    if isinstance(text, Proposer):
        return text
    kind, _, arg = str(text).strip().partition(":")
    kind = kind.lower()
    if kind not in PROPOSER_KINDS:
        raise UnknownNameError(f"Unknown proposer {text!r}; expected one of draft:<model>, "
                               f"{', '.join(k for k in PROPOSER_KINDS if k != 'draft')}.")
    if kind == "draft":
        if not arg:
            raise InvalidInputError("A draft-model proposer needs a model: draft:<catalog name or config.json>.")
        return DraftModel(get_model(arg))
    if arg:
        raise InvalidInputError(f"Proposer {kind!r} takes no argument; got {text!r}.")
    try:
        return PROPOSER_KINDS[kind](**overrides)
    except TypeError:
        raise InvalidInputError(f"Proposer {kind!r} does not take {', '.join(sorted(overrides))}.") from None
