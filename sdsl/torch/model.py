"""A Llama-style decoder in torch (RMSNorm, RoPE, grouped-query attention, SwiGLU).

The shape comes from a :class:`sdsl.core.architecture.ModelSpec` (any object with its field names works:
``n_layer, d_model, n_head, n_kv_head, d_ff, vocab_size, tied_embeddings, max_context, head_dim``).
QKV and gate/up projections are fused, as in Vidur's operator names (``attn_pre_proj``,
``mlp_up_proj``), so one forward pass launches as few kernels as possible on a CPU.

The KV cache (:class:`KVCache`) is preallocated. A forward pass over ``q`` new tokens writes them at
each sequence's own positions ``lengths[b] .. lengths[b]+q-1`` and advances ``lengths``; rejected
speculative tokens are rolled back by lowering ``lengths`` (:meth:`KVCache.rollback`,
:meth:`KVCache.set_lengths`). Stale entries past ``lengths`` are never attended to (causal mask by
position) and are overwritten by the next write.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from sdsl.errors import InvalidInputError

__all__ = ["Shape", "shape_of", "RMSNorm", "KVCache", "Transformer", "count_params"]


@dataclass(frozen=True)
class Shape:
    """The subset of ``ModelSpec`` the reference model needs (plus RoPE/norm constants)."""

    n_layer: int
    d_model: int
    n_head: int
    n_kv_head: int
    d_ff: int
    vocab_size: int
    head_dim: int
    tied_embeddings: bool = False
    max_context: int = 4096
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5


def shape_of(spec, rope_theta: float | None = None, norm_eps: float | None = None) -> Shape:
    """Read a :class:`Shape` off a ``ModelSpec`` (or any object/dict with the same field names)."""
    get = (lambda k, d=None: spec.get(k, d)) if isinstance(spec, dict) else (lambda k, d=None: getattr(spec, k, d))
    n_head = int(get("n_head"))
    d_model = int(get("d_model"))
    head_dim = get("head_dim") or d_model // n_head
    if get("gated_mlp", True) is False:
        raise InvalidInputError("The reference model implements gated (SwiGLU) MLPs only.")
    return Shape(
        n_layer=int(get("n_layer")), d_model=d_model, n_head=n_head, n_kv_head=int(get("n_kv_head") or n_head),
        d_ff=int(get("d_ff")), vocab_size=int(get("vocab_size")), head_dim=int(head_dim),
        tied_embeddings=bool(get("tied_embeddings", False)), max_context=int(get("max_context", 4096) or 4096),
        rope_theta=float(rope_theta if rope_theta is not None else get("rope_theta", 10000.0) or 10000.0),
        norm_eps=float(norm_eps if norm_eps is not None else get("norm_eps", 1e-5) or 1e-5),
    )


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rope_tables(head_dim: int, max_pos: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables of shape (max_pos, head_dim/2) for the rotate-half (HF Llama) layout."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    ang = torch.outer(torch.arange(max_pos, dtype=torch.float64), inv)
    return ang.cos().float(), ang.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (B, H, q, hd); cos/sin: (B, 1, q, hd/2)."""
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).type_as(x)


class KVCache:
    """Preallocated per-layer K/V buffers with one length per sequence.

    ``k[l]``/``v[l]`` have shape (batch, n_kv_head, capacity, head_dim). ``lengths`` (int64, shape
    (batch,)) is the number of valid tokens of each sequence.
    """

    def __init__(self, shape: Shape, batch: int, capacity: int, dtype=torch.float32, device="cpu"):
        self.batch, self.capacity = batch, capacity
        kv = (shape.n_layer, batch, shape.n_kv_head, capacity, shape.head_dim)
        self.k = torch.zeros(kv, dtype=dtype, device=device)
        self.v = torch.zeros(kv, dtype=dtype, device=device)
        self.lengths = torch.zeros(batch, dtype=torch.long, device=device)

    def rollback(self, n: torch.Tensor | int) -> None:
        """Forget the last ``n`` tokens of each sequence (``n`` scalar or per-sequence)."""
        self.set_lengths(self.lengths - n)

    def set_lengths(self, lengths: torch.Tensor | int) -> None:
        lengths = torch.as_tensor(lengths, dtype=torch.long, device=self.lengths.device).expand(self.batch).clone()
        if (lengths < 0).any() or (lengths > self.capacity).any():
            raise InvalidInputError("KV-cache lengths out of range.")
        self.lengths = lengths

    def reset(self) -> None:
        self.lengths.zero_()


class Attention(nn.Module):
    def __init__(self, s: Shape):
        super().__init__()
        self.s = s
        self.wqkv = nn.Linear(s.d_model, (s.n_head + 2 * s.n_kv_head) * s.head_dim, bias=False)
        self.wo = nn.Linear(s.n_head * s.head_dim, s.d_model, bias=False)

    def forward(self, x, cos, sin, layer: int, cache: KVCache | None, pos, kv_len: int, mask):
        s, (B, q, _) = self.s, x.shape
        qkv = self.wqkv(x).view(B, q, s.n_head + 2 * s.n_kv_head, s.head_dim).transpose(1, 2)
        qk, xv = qkv.split([s.n_head + s.n_kv_head, s.n_kv_head], dim=1)
        xq, xk = apply_rope(qk, cos, sin).split([s.n_head, s.n_kv_head], dim=1)  # one RoPE call for Q and K
        if cache is not None:
            bidx = torch.arange(B, device=x.device)[:, None]
            # advanced indexing puts (B, q) first: (B, q, n_kv, hd)
            cache.k[layer][bidx, :, pos] = xk.transpose(1, 2).to(cache.k.dtype)
            cache.v[layer][bidx, :, pos] = xv.transpose(1, 2).to(cache.v.dtype)
            xk = cache.k[layer, :, :, :kv_len].to(xq.dtype)
            xv = cache.v[layer, :, :, :kv_len].to(xq.dtype)
        gqa = s.n_kv_head != s.n_head
        if mask is None:
            y = F.scaled_dot_product_attention(xq, xk, xv, is_causal=True, enable_gqa=gqa)
        else:
            y = F.scaled_dot_product_attention(xq, xk, xv, attn_mask=mask, enable_gqa=gqa)
        return self.wo(y.transpose(1, 2).reshape(B, q, s.n_head * s.head_dim))


class MLP(nn.Module):
    def __init__(self, s: Shape):
        super().__init__()
        self.d_ff = s.d_ff
        self.w13 = nn.Linear(s.d_model, 2 * s.d_ff, bias=False)  # gate ; up
        self.w2 = nn.Linear(s.d_ff, s.d_model, bias=False)

    def forward(self, x):
        g, u = self.w13(x).split(self.d_ff, dim=-1)
        return self.w2(F.silu(g) * u)


class Block(nn.Module):
    def __init__(self, s: Shape):
        super().__init__()
        self.attention_norm = RMSNorm(s.d_model, s.norm_eps)
        self.attention = Attention(s)
        self.ffn_norm = RMSNorm(s.d_model, s.norm_eps)
        self.feed_forward = MLP(s)

    def forward(self, x, cos, sin, layer, cache, pos, kv_len, mask):
        x = x + self.attention(self.attention_norm(x), cos, sin, layer, cache, pos, kv_len, mask)
        return x + self.feed_forward(self.ffn_norm(x))


class Transformer(nn.Module):
    """Llama-style decoder. ``forward(tokens, cache=None)`` returns logits (B, q, vocab)."""

    def __init__(self, spec):
        super().__init__()
        s = spec if isinstance(spec, Shape) else shape_of(spec)
        self.shape, self.spec = s, spec
        self.tok_embeddings = nn.Embedding(s.vocab_size, s.d_model)
        self.layers = nn.ModuleList(Block(s) for _ in range(s.n_layer))
        self.norm = RMSNorm(s.d_model, s.norm_eps)
        self.output = nn.Linear(s.d_model, s.vocab_size, bias=False)
        if s.tied_embeddings:
            self.output.weight = self.tok_embeddings.weight
        cos, sin = rope_tables(s.head_dim, s.max_context, s.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def init_weights(self, seed: int) -> "Transformer":
        """Deterministic GPT-2-style init (N(0, 0.02), residual projections scaled by 1/sqrt(2L))."""
        g = torch.Generator().manual_seed(seed)
        std_res = 0.02 / math.sqrt(2 * self.shape.n_layer)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.ndim == 1:
                    p.fill_(1.0)
                else:
                    std = std_res if name.endswith(("wo.weight", "w2.weight")) else 0.02
                    p.copy_(torch.randn(p.shape, generator=g) * std)
        return self

    def new_cache(self, batch: int, capacity: int | None = None, dtype=None) -> KVCache:
        p = next(self.parameters())
        return KVCache(self.shape, batch, capacity or self.shape.max_context, dtype or p.dtype, p.device)

    def forward(self, tokens: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        B, q = tokens.shape
        if cache is None:  # training / scoring a full window
            pos = torch.arange(q, device=tokens.device).expand(B, q)
            kv_len, mask = q, None
        else:
            if cache.batch != B:
                raise InvalidInputError(f"The KV cache holds {cache.batch} sequences but the tokens have {B}.")
            pos = cache.lengths[:, None] + torch.arange(q, device=tokens.device)
            kv_len = int(cache.lengths.max()) + q
            if kv_len > cache.capacity:
                raise InvalidInputError(f"KV cache overflow: {kv_len} tokens > capacity {cache.capacity}.")
            keys = torch.arange(kv_len, device=tokens.device)
            mask = (keys[None, None, :] <= pos[:, :, None])[:, None]  # (B, 1, q, kv_len)
        cos = self.rope_cos[pos][:, None]
        sin = self.rope_sin[pos][:, None]
        x = self.tok_embeddings(tokens)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, i, cache, pos, kv_len, mask)
        if cache is not None:
            cache.lengths = cache.lengths + q
        return self.output(self.norm(x)).float()


def count_params(model: nn.Module) -> int:
    """Unique parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
