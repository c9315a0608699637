"""A Llama-style decoder in torch (RMSNorm, RoPE, grouped-query attention, SwiGLU).

The shape comes from a :class:`sdsl.catalog.models.ModelSpec` (any object with its field names works:
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

__all__ = ["Shape", "shape_of", "RMSNorm", "KVCache", "StepInputs", "Block", "step_inputs", "causal_mask",
           "Transformer", "count_params"]


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
    norm: str = "rmsnorm"       # or "layernorm"
    gated_mlp: bool = True      # SwiGLU; False = GELU MLP


def shape_of(spec, rope_theta: float | None = None, norm_eps: float | None = None) -> Shape:
    """Read a :class:`Shape` off a ``ModelSpec`` (or any object/dict with the same field names)."""
    get = (lambda k, d=None: spec.get(k, d)) if isinstance(spec, dict) else (lambda k, d=None: getattr(spec, k, d))
    n_head = int(get("n_head"))
    d_model = int(get("d_model"))
    head_dim = get("head_dim") or d_model // n_head
    return Shape(
        n_layer=int(get("n_layer")), d_model=d_model, n_head=n_head, n_kv_head=int(get("n_kv_head") or n_head),
        d_ff=int(get("d_ff")), vocab_size=int(get("vocab_size")), head_dim=int(head_dim),
        tied_embeddings=bool(get("tied_embeddings", False)), max_context=int(get("max_context", 4096) or 4096),
        rope_theta=float(rope_theta if rope_theta is not None else get("rope_theta", 10000.0) or 10000.0),
        norm_eps=float(norm_eps if norm_eps is not None else get("norm_eps", 1e-5) or 1e-5),
        norm=str(get("norm", "rmsnorm") or "rmsnorm"), gated_mlp=bool(get("gated_mlp", True)),
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
    (batch,)) is the number of valid tokens of each sequence; a forward writes its ``q`` tokens into the
    slots ``lengths .. lengths+q-1`` (:meth:`update`) and advances ``lengths``.
    """

    def __init__(self, shape: Shape, batch: int, capacity: int, dtype=torch.float32, device=None):
        self.batch, self.capacity = batch, capacity
        kv = (shape.n_layer, batch, shape.n_kv_head, capacity, shape.head_dim)
        self.k = torch.zeros(kv, dtype=dtype, device=device)
        self.v = torch.zeros(kv, dtype=dtype, device=device)
        self.lengths = torch.zeros(batch, dtype=torch.long, device=device)

    def update(self, layer: int, slots: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
               kv_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Write ``keys``/``values`` (B, n_kv, q, hd) at ``slots`` (B, q); return the first ``kv_len`` slots."""
        rows = torch.arange(slots.shape[0], device=slots.device)[:, None]
        # advanced indexing puts (B, q) first: (B, q, n_kv, hd)
        self.k[layer][rows, :, slots] = keys.transpose(1, 2).to(self.k.dtype)
        self.v[layer][rows, :, slots] = values.transpose(1, 2).to(self.v.dtype)
        return self.k[layer, :, :, :kv_len], self.v[layer, :, :, :kv_len]

    def move(self, source: torch.Tensor, destination: torch.Tensor) -> None:
        """Copy every layer's entries at slots ``source`` (B, m) to ``destination`` (B, m) (tree commit)."""
        rows = torch.arange(self.batch, device=source.device)[:, None]
        for buffer in (self.k, self.v):
            buffer[:, rows, :, destination] = buffer[:, rows, :, source]

    def rollback(self, n: torch.Tensor | int) -> None:
        """Forget the last ``n`` tokens of each sequence (``n`` scalar or per-sequence)."""
        self.set_lengths(self.lengths - n)

    def set_lengths(self, lengths: torch.Tensor | int) -> None:
        lengths = torch.as_tensor(lengths, dtype=torch.long, device=self.lengths.device).expand(self.batch).clone()
        if bool(((lengths < 0) | (lengths > self.capacity)).any()):
            raise InvalidInputError("KV-cache lengths out of range.")
        self.lengths = lengths

    def reset(self) -> None:
        self.lengths.zero_()


@dataclass
class StepInputs:
    """What every layer of one forward shares: RoPE tables at the tokens' positions, the attention mask
    (B, 1, q, kv_len) or None for plain causal attention, and where the new K/V go in the cache."""

    cos: torch.Tensor
    sin: torch.Tensor
    mask: torch.Tensor | None
    cache: KVCache | None = None
    slots: torch.Tensor | None = None
    kv_len: int = 0


class Attention(nn.Module):
    def __init__(self, s: Shape):
        super().__init__()
        self.s = s
        self.wqkv = nn.Linear(s.d_model, (s.n_head + 2 * s.n_kv_head) * s.head_dim, bias=False)
        self.wo = nn.Linear(s.n_head * s.head_dim, s.d_model, bias=False)

    def forward(self, x: torch.Tensor, step: StepInputs, layer: int) -> torch.Tensor:
        s, (batch, q, _) = self.s, x.shape
        qkv = self.wqkv(x).view(batch, q, s.n_head + 2 * s.n_kv_head, s.head_dim).transpose(1, 2)
        query_key, values = qkv.split([s.n_head + s.n_kv_head, s.n_kv_head], dim=1)
        queries, keys = apply_rope(query_key, step.cos, step.sin).split([s.n_head, s.n_kv_head], dim=1)
        if step.cache is not None:
            keys, values = step.cache.update(layer, step.slots, keys, values, step.kv_len)
            keys, values = keys.to(queries.dtype), values.to(queries.dtype)
        gqa = s.n_kv_head != s.n_head
        if step.mask is None:
            y = F.scaled_dot_product_attention(queries, keys, values, is_causal=True, enable_gqa=gqa)
        else:
            y = F.scaled_dot_product_attention(queries, keys, values, attn_mask=step.mask, enable_gqa=gqa)
        return self.wo(y.transpose(1, 2).reshape(batch, q, s.n_head * s.head_dim))


class MLP(nn.Module):
    """SwiGLU (gate and up fused in ``w13``), or GELU with ``w13`` the up projection alone."""

    def __init__(self, s: Shape):
        super().__init__()
        self.d_ff, self.gated = s.d_ff, s.gated_mlp
        self.w13 = nn.Linear(s.d_model, (2 if s.gated_mlp else 1) * s.d_ff, bias=False)
        self.w2 = nn.Linear(s.d_ff, s.d_model, bias=False)

    def forward(self, x):
        if not self.gated:
            return self.w2(F.gelu(self.w13(x)))
        gate, up = self.w13(x).split(self.d_ff, dim=-1)
        return self.w2(F.silu(gate) * up)


def make_norm(s: Shape) -> nn.Module:
    return nn.LayerNorm(s.d_model, eps=s.norm_eps) if s.norm == "layernorm" else RMSNorm(s.d_model, s.norm_eps)


class Block(nn.Module):
    """One pre-norm decoder layer (also what :mod:`sdsl.torch.harness.layer` times)."""

    def __init__(self, s: Shape):
        super().__init__()
        self.attention_norm = make_norm(s)
        self.attention = Attention(s)
        self.ffn_norm = make_norm(s)
        self.feed_forward = MLP(s)

    def forward(self, x: torch.Tensor, step: StepInputs, layer: int = 0) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), step, layer)
        return x + self.feed_forward(self.ffn_norm(x))


def causal_mask(slots: torch.Tensor, kv_len: int) -> torch.Tensor:
    """(B, 1, q, kv_len): each new token sees every cached slot up to its own."""
    keys = torch.arange(kv_len, device=slots.device)
    return (keys[None, None, :] <= slots[:, :, None])[:, None]


def step_inputs(rope_cos: torch.Tensor, rope_sin: torch.Tensor, batch: int, q: int, cache: KVCache | None,
                positions: torch.Tensor | None = None, mask: torch.Tensor | None = None) -> StepInputs:
    """Slots, positions and mask of ``q`` new tokens per sequence (``positions``/``mask`` override the
    contiguous defaults, as token trees need: see :mod:`sdsl.torch.tree`)."""
    device = rope_cos.device
    if cache is None:  # training / scoring a full window
        positions = torch.arange(q, device=device).expand(batch, q) if positions is None else positions
        return StepInputs(rope_cos[positions][:, None], rope_sin[positions][:, None], mask)
    if cache.batch != batch:
        raise InvalidInputError(f"The KV cache holds {cache.batch} sequences but the tokens have {batch}.")
    slots = cache.lengths[:, None] + torch.arange(q, device=device)
    kv_len = int(cache.lengths.max()) + q
    if kv_len > cache.capacity:
        raise InvalidInputError(f"KV cache overflow: {kv_len} tokens > capacity {cache.capacity}.")
    positions = slots if positions is None else positions
    mask = causal_mask(slots, kv_len) if mask is None else mask[:, None]
    return StepInputs(rope_cos[positions][:, None], rope_sin[positions][:, None], mask, cache, slots, kv_len)


class Transformer(nn.Module):
    """Llama-style decoder. ``forward(tokens, cache=None)`` returns logits (B, q, vocab).

    With ``positions`` (B, q) and ``mask`` (B, q, kv_len) the new tokens take those RoPE positions and
    attend where the mask allows (a token tree); ``return_hidden`` also returns the features (the last
    layer's output after the final norm, the LM head's input: what an EAGLE draft head reads).
    """

    def __init__(self, spec):
        super().__init__()
        s = spec if isinstance(spec, Shape) else shape_of(spec)
        self.shape, self.spec = s, spec
        self.tok_embeddings = nn.Embedding(s.vocab_size, s.d_model)
        self.layers = nn.ModuleList(Block(s) for _ in range(s.n_layer))
        self.norm = make_norm(s)
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
                    p.fill_(1.0 if name.endswith("weight") else 0.0)
                else:
                    std = std_res if name.endswith(("wo.weight", "w2.weight")) else 0.02
                    p.copy_(torch.randn(p.shape, generator=g) * std)
        return self

    def new_cache(self, batch: int, capacity: int | None = None, dtype=None) -> KVCache:
        p = next(self.parameters())
        return KVCache(self.shape, batch, capacity or self.shape.max_context, dtype or p.dtype, p.device)


    def forward(self, tokens: torch.Tensor, cache: KVCache | None = None, *, positions: torch.Tensor | None = None,
                mask: torch.Tensor | None = None, return_hidden: bool = False):
        batch, q = tokens.shape
        step = step_inputs(self.rope_cos, self.rope_sin, batch, q, cache, positions, mask)
        x = self.tok_embeddings(tokens)
        for i, layer in enumerate(self.layers):
            x = layer(x, step, i)
        if cache is not None:
            cache.lengths = cache.lengths + q
        features = self.norm(x)
        logits = self.output(features).float()
        return (logits, features) if return_hidden else logits


def count_params(model: nn.Module) -> int:
    """Unique parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
