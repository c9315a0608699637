"""One decoder layer of the reference model (:class:`sdsl.torch.model.Block`) with a static KV cache,
built from a ModelSpec, for timing only.

The layer is the reference model's own block (pre-norm; RMSNorm or LayerNorm; fused QKV; rotary
embedding; grouped-query attention through ``scaled_dot_product_attention``; output projection;
SwiGLU or GELU MLP; residual adds), so the profiler times exactly what the decoder runs. Weights are
random: only shapes and kernels matter for time.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from sdsl.torch.model import Block, KVCache, rope_tables, shape_of, step_inputs

__all__ = ["DecoderLayer", "TORCH_DTYPES"]

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class DecoderLayer:
    """One decoder layer on ``device`` whose KV cache holds ``batch`` sequences of ``max_len`` tokens."""

    def __init__(self, spec, device: torch.device, dtype: torch.dtype, batch: int, max_len: int, seed: int = 0):
        torch.manual_seed(seed)
        self.shape = shape_of(spec)
        with torch.device(device):
            self.block = Block(self.shape).to(dtype).eval()
        cos, sin = rope_tables(self.shape.head_dim, max_len, self.shape.rope_theta)
        self.rope_cos, self.rope_sin = cos.to(device), sin.to(device)
        self.cache = KVCache(replace(self.shape, n_layer=1), batch, max_len, dtype, device)
        self._step_key, self._step = None, None

    @torch.inference_mode()
    def __call__(self, x: torch.Tensor, context: int) -> torch.Tensor:
        """One step: ``x`` is ``[b, q, d_model]`` new tokens after ``context`` cached ones."""
        b, q, _ = x.shape
        if self._step_key != (b, q, context):  # slots, RoPE rows and mask built once per grid point
            cache = self.cache if b == self.cache.batch else _leading_rows(self.cache, b)
            cache.set_lengths(context)
            self._step = step_inputs(self.rope_cos, self.rope_sin, b, q, cache)
            self._step_key = (b, q, context)
        return self.block(x, self._step, 0)


def _leading_rows(cache: KVCache, batch: int) -> KVCache:
    """A view of ``cache``'s first ``batch`` sequences (shares its storage)."""
    view = KVCache.__new__(KVCache)
    view.batch, view.capacity = batch, cache.capacity
    view.k, view.v = cache.k[:, :batch], cache.v[:, :batch]
    view.lengths = cache.lengths[:batch].clone()
    return view
