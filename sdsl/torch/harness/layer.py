"""A minimal decoder layer with a static KV cache, built from a ModelSpec, for timing only.

Pre-norm Llama-style block (RMSNorm or LayerNorm; fused QKV; rotary embedding; grouped-query
attention through ``scaled_dot_product_attention``; output projection; gated-SiLU or GELU MLP;
residual adds). Weights are random: only shapes and kernels matter for time.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["DecoderLayer", "TORCH_DTYPES"]

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class DecoderLayer:
    """One decoder layer on ``device`` whose KV cache holds ``batch`` sequences of ``max_len`` tokens."""

    def __init__(self, spec, device: torch.device, dtype: torch.dtype, batch: int, max_len: int, seed: int = 0):
        g = torch.Generator(device="cpu").manual_seed(seed)
        shapes = spec.linear_layers(1)
        self.spec, self.device, self.dtype = spec, device, dtype
        self.nh, self.nkv, self.hd = spec.n_head, spec.n_kv_head, spec.head_dim

        def w(op):
            n_in, n_out = shapes[op]
            return (torch.randn(n_out, n_in, generator=g) / n_in**0.5).to(device=device, dtype=dtype)

        self.w_qkv, self.w_o = w("attn_pre_proj"), w("attn_post_proj")
        self.w_up, self.w_down = w("mlp_up_proj"), w("mlp_down_proj")
        self.norm1 = torch.ones(spec.d_model, device=device, dtype=dtype)
        self.norm2 = torch.ones(spec.d_model, device=device, dtype=dtype)
        self.k_cache = torch.zeros(batch, self.nkv, max_len, self.hd, device=device, dtype=dtype)
        self.v_cache = torch.zeros_like(self.k_cache)
        inv = 1.0 / (10000.0 ** (torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd))
        ang = torch.outer(torch.arange(max_len, dtype=torch.float32), inv)
        self.cos = ang.cos().to(device=device, dtype=dtype)
        self.sin = ang.sin().to(device=device, dtype=dtype)

    def _norm(self, x, weight):
        if self.spec.norm == "layernorm":
            return F.layer_norm(x, (x.shape[-1],), weight)
        return F.rms_norm(x, (x.shape[-1],), weight) if hasattr(F, "rms_norm") else (
            x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight)

    def _rope(self, x, pos: int):
        q = x.shape[-2]
        cos, sin = self.cos[pos:pos + q], self.sin[pos:pos + q]
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)

    @torch.inference_mode()
    def __call__(self, x: torch.Tensor, context: int) -> torch.Tensor:
        """One step: ``x`` is ``[b, q, d_model]`` new tokens after ``context`` cached ones."""
        b, q, _ = x.shape
        h = self._norm(x, self.norm1)
        qkv = F.linear(h, self.w_qkv)
        qs, ks, vs = qkv.split((self.nh * self.hd, self.nkv * self.hd, self.nkv * self.hd), dim=-1)
        qs = self._rope(qs.view(b, q, self.nh, self.hd).transpose(1, 2), context)
        ks = self._rope(ks.view(b, q, self.nkv, self.hd).transpose(1, 2), context)
        self.k_cache[:b, :, context:context + q] = ks
        self.v_cache[:b, :, context:context + q] = vs.view(b, q, self.nkv, self.hd).transpose(1, 2)
        keys = self.k_cache[:b, :, :context + q]
        vals = self.v_cache[:b, :, :context + q]
        mask = None
        if q > 1:  # new token i sees the cache and new tokens 0..i
            mask = torch.ones(q, context + q, dtype=torch.bool, device=x.device).tril(diagonal=context)
        if self.nkv == self.nh:
            o = F.scaled_dot_product_attention(qs, keys, vals, attn_mask=mask)
        else:  # grouped-query attention: each KV head serves n_head / n_kv_head query heads
            try:
                o = F.scaled_dot_product_attention(qs, keys, vals, attn_mask=mask, enable_gqa=True)
            except TypeError:  # torch < 2.5
                rep = self.nh // self.nkv
                o = F.scaled_dot_product_attention(qs, keys.repeat_interleave(rep, 1),
                                                   vals.repeat_interleave(rep, 1), attn_mask=mask)
        x = x + F.linear(o.transpose(1, 2).reshape(b, q, self.nh * self.hd), self.w_o)
        h = self._norm(x, self.norm2)
        up = F.linear(h, self.w_up)
        if self.spec.gated_mlp:
            gate, up = up.chunk(2, dim=-1)
            act = F.silu(gate) * up
        else:
            act = F.gelu(up)
        return x + F.linear(act, self.w_down)
