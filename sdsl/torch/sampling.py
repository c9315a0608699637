"""Next-token distributions and exact draws, shared by the decoder, the proposers and tree verification."""

from __future__ import annotations

import torch

__all__ = ["logits_to_probs", "sample"]


def logits_to_probs(logits: torch.Tensor, temperature: float = 0.0, top_p: float = 1.0) -> torch.Tensor:
    """Next-token distribution after temperature and nucleus (top-p; Holtzman et al. 2020, §3.1) filtering;
    temperature 0 = one-hot argmax."""
    logits = logits.float()
    if temperature <= 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        keep = (sorted_probs.cumsum(-1) - sorted_probs) < top_p  # smallest prefix with mass >= top_p
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_probs * keep)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def sample(probs: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
    """One draw per row by inverting the CDF (exact; a few kernels instead of torch.multinomial's many)."""
    cdf = probs.cumsum(-1)
    u = torch.rand(probs.shape[:-1] + (1,), generator=gen) * cdf[..., -1:]
    return torch.searchsorted(cdf, u, right=True)[..., 0].clamp_max(probs.shape[-1] - 1)
