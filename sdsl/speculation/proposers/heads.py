"""Draft heads on the target's features: EAGLE-1 and EAGLE-3 heads, DeepSeek-V3 MTP layers and Medusa heads (the
package docstring names each paper and equation)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from sdsl.catalog.heads import dense_head_spec, head_config, target_layer_spec
from sdsl.catalog.models import ModelSpec
from sdsl.errors import InvalidInputError
from sdsl.roofline.latency import ModelShapes, prefill_time_s
from sdsl.speculation.proposers.base import SELECT_KERNELS, VERIFY_KERNELS, Proposer, _gemm_time, _read_time, forward_time

__all__ = ["EagleHead", "Eagle3Head", "MTPLayers", "MedusaHeads"]


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
