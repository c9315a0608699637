"""Helpers shared by the test tiers (unit/, cli/, evidence/, integrity/, statistical/, research/)."""

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


@pytest.fixture(scope="session")
def family_models():
    """The committed byte-level family, loaded once: {name: Transformer}."""
    pytest.importorskip("torch")
    from sdsl.torch.checkpoint import CHECKPOINT_DIR, list_checkpoints, load_checkpoint

    paths = list_checkpoints(CHECKPOINT_DIR)
    if not paths:
        pytest.skip("no committed reference checkpoints")
    return {p.stem: load_checkpoint(p)[0] for p in paths}


@pytest.fixture(scope="session")
def heldout_prompts():
    """Four 48-byte prompts from the held-out stdlib split."""
    import numpy as np
    import torch

    from sdsl.torch.train import load_corpus

    held = load_corpus()["heldout"]
    starts = np.linspace(0, len(held) - 100, 4).astype(int)
    return torch.from_numpy(np.stack([held[s:s + 48] for s in starts]).astype(np.int64))


#: SHA-256 of every committed measurement that an integrity test reads back (``sha256sum`` format).
INTEGRITY_MANIFEST = REPO_ROOT / "tests" / "committed_results.sha256"


def committed_hashes() -> dict[str, str]:
    """{repository-relative path: SHA-256} of :data:`INTEGRITY_MANIFEST`."""
    out = {}
    for line in INTEGRITY_MANIFEST.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, path = line.split(maxsplit=1)
            out[path.strip()] = digest
    return out


def sha256_of(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def _integrity_files_unchanged(request):
    """A test marked ``@pytest.mark.integrity(path, ...)`` reads back committed measurements (runs that cannot be
    repeated here: CPU timings, trained checkpoints); it checks them against the documents, not a recomputation.
    Its files must still be the ones whose numbers it pins: their SHA-256 is checked first."""
    marker = request.node.get_closest_marker("integrity")
    if marker is not None:
        known = committed_hashes()
        for rel in marker.args:
            if rel not in known:
                pytest.fail(f"{rel} is read back by an integrity test but not listed in {INTEGRITY_MANIFEST.name}")
            if sha256_of(REPO_ROOT / rel) != known[rel]:
                pytest.fail(f"{rel} changed since its numbers were pinned: re-derive what the integrity tests state "
                            f"from it, then update its line in tests/{INTEGRITY_MANIFEST.name}")
    yield
