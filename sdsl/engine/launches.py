"""Kernels an eager forward launches, counted from the model's structure for each engine's implementation of a
Llama-style block (:attr:`EngineProfile.kernels`; docs/model.md §3.9 counts them operation by operation). Numpy only;
everything broadcasts."""

from __future__ import annotations

import numpy as np

__all__ = ["KERNEL_STYLES", "ALLREDUCES_PER_LAYER", "HEAD_EXTRA_KERNELS", "forward_kernels", "proposer_kernels"]

#: Kernels one forward launches, per decoder layer and per model, for each engine's implementation of a Llama-style
#: block (docs/model.md §3.9 counts them operation by operation):
#: - ``fused`` — vLLM's ``LlamaDecoderLayer`` (vllm/model_executor/models/llama.py; SGLang's and TensorRT-LLM's
#:   PyTorch backend have the same fused kernels): fused add + RMSNorm, QKV GEMM, rotary, KV-cache write,
#:   attention, O GEMM, fused add + RMSNorm, gate-up GEMM, SiLU-and-mul, down GEMM = 10 per layer (+ 2
#:   all-reduces under tensor parallelism); embedding, final norm, LM head and the sampler's argmax = 4 per model.
#: - ``hf`` — Hugging Face transformers 4.37.1 ``LlamaDecoderLayer`` with SDPA attention at decode:
#:   ``LlamaRMSNorm`` 8 (to fp32, pow, mean, + eps, rsqrt, mul, to fp16, mul weight) × 2, q/k/v GEMMs 3,
#:   ``apply_rotary_pos_emb`` 12 (cos and sin gathers, then per q and k: mul, neg, cat, mul, add), ``DynamicCache``
#:   cat 2, SDPA 1, O GEMM 1, gate and up GEMMs, SiLU, mul, down GEMM 5, residual adds 2 = 42 per layer
#:   (+ 2 ``repeat_kv`` copies with grouped KV heads); per forward the position ids, embedding, the mask check
#:   (2), final norm (8), LM head and ``logits.float()`` = 14, and ``generate``'s greedy step (argmax, token
#:   update 3, input and mask cats 3, stopping criteria 6, ``prepare_inputs_for_generation`` 2) = 15.
#: - ``gpt-fast`` — gpt-fast ``model.py`` run eagerly: ``RMSNorm`` 8 × 2, fused QKV GEMM 1, ``apply_rotary_emb`` 9 × 2
#:   (to fp32, 4 mul, sub, add, stack, to bf16), KV-cache index writes 2, ``repeat_interleave`` 2, SDPA 1,
#:   O GEMM 1, w1, SiLU, w3, mul, w2 5, residual adds 2 = 48 per layer; embedding, RoPE and mask gathers, final norm
#:   8, output GEMM = 12 per forward, and the sampling step (logits to probabilities and the no-sync sample) = 11.
#: Values: (kernels per layer, extra per layer with grouped KV heads, per forward, per plain step of the loop).
KERNEL_STYLES = {"fused": (10, 0, 4, 0), "hf": (42, 2, 14, 15), "gpt-fast": (48, 0, 12, 11)}
ALLREDUCES_PER_LAYER = 2  # tensor parallelism: after the attention output and the MLP output projections
HEAD_EXTRA_KERNELS = 4  # an EAGLE-style head beyond its layer: embedding, feature concat, FC, LM head


def forward_kernels(style: str, n_layer, *, grouped_kv=False, tp: int = 1, loop_step: bool = True) -> np.ndarray:
    """Kernels one forward of an ``n_layer`` model launches in ``style`` (:data:`KERNEL_STYLES`): per layer, the
    grouped-KV extra, two all-reduces per layer under tensor parallelism, per forward, and (``loop_step``) the
    decode loop's own operations of one step. Broadcasts over ``n_layer`` (a stack of drafts)."""
    per_layer, gqa, per_forward, loop = KERNEL_STYLES[style]
    layer = per_layer + gqa * np.asarray(grouped_kv, dtype=float) + (ALLREDUCES_PER_LAYER if tp > 1 else 0)
    return np.asarray(n_layer, dtype=float) * layer + per_forward + (loop if loop_step else 0)


def _grouped(model) -> object:
    return np.asarray(model.n_kv_head) != np.asarray(model.n_head) if hasattr(model, "n_kv_head") else \
        np.asarray(model.kv_width) != np.asarray(model.q_width)


def proposer_kernels(proposer, target, style: str, tp: int = 1) -> tuple:
    """(kernels of one drafting pass, kernels of the worker's draft-extend pass) of ``proposer`` in ``style``: a draft
    model's own forward; an EAGLE-style head's ``layers`` decoder layers plus :data:`HEAD_EXTRA_KERNELS`; Medusa's
    heads run inside the target's forward (residual block and LM head per head: 4 each); n-gram lookup none."""
    kind = getattr(proposer, "kind", "")
    if kind == "draft":
        model = proposer.model
        k = forward_kernels(style, model.n_layer, grouped_kv=_grouped(model), tp=tp, loop_step=False)
        return k, 0.0
    if kind in ("eagle", "eagle3", "mtp"):
        k = forward_kernels(style, proposer.layers, grouped_kv=target.n_kv_head != target.n_head, tp=tp,
                            loop_step=False) - KERNEL_STYLES[style][2] + HEAD_EXTRA_KERNELS
        return k, k
    if kind == "medusa":
        return 4.0 * proposer.heads, 0.0
    return 0.0, 0.0
