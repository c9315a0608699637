"""Helpers shared by the test kinds (unit/, statistical/, cli/)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The source checkout's root (README.md, profiles/, notebooks/ ...)."""
    return REPO_ROOT


def _tiny_transformer(seed: int, vocab: int = 256, d: int = 32, layers: int = 2, scale: float = 1.0):
    """A small random Llama-style reference model (torch), seeded."""
    import torch

    from sdsl.torch.model import Shape, Transformer

    s = Shape(n_layer=layers, d_model=d, n_head=2, n_kv_head=1, d_ff=64, vocab_size=vocab, head_dim=16, max_context=128)
    m = Transformer(s).init_weights(seed)
    with torch.no_grad():
        m.output.weight.mul_(scale)
    return m.eval()


@pytest.fixture(scope="session")
def tiny_transformer():
    """Factory fixture: ``tiny_transformer(seed, vocab=256, d=32, layers=2, scale=1.0)``."""
    pytest.importorskip("torch")
    return _tiny_transformer
