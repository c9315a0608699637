"""An EAGLE-style draft head (Li et al., "EAGLE: Speculative Sampling Requires Rethinking Feature
Uncertainty", ICML 2024, §4) and its proposer.

The head drafts in the target's feature space: at position t it reads the target's feature f_t (the
last layer's output after the final norm — the LM head's input) and the embedding of the next token
x_{t+1}, fuses them with one linear map ``fc`` (2d → d), runs ONE decoder layer at the target's width
and predicts f_{t+1}; the target's own LM head turns that into the distribution of x_{t+2}. Deeper
drafts feed the head's predicted feature back in. The head shares the target's embedding and LM head
(it stores only ``fc`` and its layer), and keeps its own one-layer KV cache.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from sdsl._io import atomic_write_bytes, atomic_write_text
from sdsl.errors import ConfigError
from sdsl.torch.model import Block, KVCache, rope_tables, shape_of, step_inputs
from sdsl.torch.proposers import Draft, StepOutcome, grow_tree
from sdsl.torch.tree import TreeLayout, tree_mask

__all__ = ["DraftHead", "HeadProposer", "save_head", "load_head"]


class DraftHead(nn.Module):
    """``fc`` + one decoder layer at the target's width; see the module docstring."""

    def __init__(self, target_shape):
        super().__init__()
        self.shape = replace(target_shape, n_layer=1)
        d = self.shape.d_model
        self.fc = nn.Linear(2 * d, d, bias=True)
        self.layer = Block(self.shape)
        cos, sin = rope_tables(self.shape.head_dim, self.shape.max_context, self.shape.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def new_cache(self, batch: int, capacity: int) -> KVCache:
        p = next(self.parameters())
        return KVCache(self.shape, batch, capacity, p.dtype, p.device)

    def forward(self, features: torch.Tensor, next_embeddings: torch.Tensor, cache: KVCache | None = None, *,
                positions: torch.Tensor | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Predicted next features (B, q, d) from features f_t and embeddings of x_{t+1} (both (B, q, d))."""
        batch, q, _ = features.shape
        step = step_inputs(self.rope_cos, self.rope_sin, batch, q, cache, positions, mask)
        x = self.layer(self.fc(torch.cat([next_embeddings, features.to(next_embeddings.dtype)], dim=-1)), step, 0)
        if cache is not None:
            cache.lengths = cache.lengths + q
        return x


class HeadProposer:
    """Drafts a token tree with a :class:`DraftHead` over ``target``'s features (EAGLE's drafting stage)."""

    needs_features = True

    def __init__(self, head: DraftHead, target, name: str = "head"):
        self.head, self.target, self.name = head, target, name

    def _draft_logits(self, predicted: torch.Tensor) -> torch.Tensor:
        return self.target.output(predicted).float()

    def prefill(self, prompts: torch.Tensor, capacity: int, features: torch.Tensor) -> None:
        """``features`` are the target's over ``prompts[:, :-1]``: pairs (f_t, x_{t+1}) for t < P-1."""
        self.cache = self.head.new_cache(prompts.shape[0], capacity)
        self.pending_features, self.pending_tokens = features, prompts[:, 1:]
        self.pending_count = torch.full((prompts.shape[0],), prompts.shape[1] - 1, dtype=torch.long)

    def propose(self, seq: torch.Tensor, lengths: torch.Tensor, tree: TreeLayout, sampling) -> Draft:
        rows = torch.arange(seq.shape[0])
        embed = self.target.tok_embeddings
        predicted = self.head(self.pending_features, embed(self.pending_tokens), self.cache)
        self.cache.set_lengths(lengths - 1)  # pairs up to position n-2 (the root's token) are cached
        node_features = predicted.new_zeros(seq.shape[0], tree.size + 1, predicted.shape[-1])
        node_features[:, 0] = predicted[rows, self.pending_count - 1]

        def expand(nodes, tokens, depth):
            parents = tree.expand_plan(depth)[1]
            if tree.drafts_chain:  # one node per depth, in consecutive slots: plain causal attention
                positions, mask = None, None
            else:
                positions = (lengths - 2)[:, None] + depth
                mask = tree_mask(tree, lengths - 2, nodes, tree.draft_slots, int(self.cache.lengths.max()) + len(nodes))
            out = self.head(node_features[:, parents], embed(tokens), self.cache, positions=positions, mask=mask)
            node_features[:, nodes] = out
            return self._draft_logits(out)

        draft = grow_tree(tree, seq[rows, lengths - 1], self._draft_logits(node_features[:, 0]), expand, sampling,
                          skip_leaves=True)
        self.tree = draft.tree or tree
        return draft

    def commit(self, outcome: StepOutcome) -> None:
        """Queue the accepted path's true pairs (target feature, next token) and roll the tree back."""
        rows = torch.arange(outcome.path.shape[0])[:, None]
        depth = torch.arange(outcome.path.shape[1])
        path = torch.where(depth[None, :] <= outcome.accepted[:, None], outcome.path, 0)
        self.pending_features = outcome.features[rows, path]
        following = outcome.tokens[rows, torch.roll(path, -1, dims=1)]
        self.pending_tokens = following.scatter(1, outcome.accepted[:, None], outcome.next_token[:, None])
        self.pending_count = outcome.accepted + 1
        self.cache.set_lengths(outcome.lengths - 1)


def save_head(head: DraftHead, path: str | Path, meta: dict) -> Path:
    """Write the head's weights (fp16 safetensors) and its ``.json`` sidecar atomically."""
    from safetensors.torch import save

    path = Path(path).with_suffix(".safetensors")
    tensors = {k: v.detach().to(torch.float16).contiguous() for k, v in head.state_dict().items()}
    atomic_write_bytes(path, save(tensors, metadata={"format": "sdsl-eagle-head", "dtype": "fp16"}))
    atomic_write_text(path.with_suffix(".json"), json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return path


def load_head(path_or_name: str | Path, target_shape=None) -> tuple[DraftHead, dict]:
    """Load a head by path or by name in the committed checkpoint directory (fp32)."""
    from safetensors.torch import load_file

    from sdsl.torch.checkpoint import CHECKPOINT_DIR

    path = Path(path_or_name)
    if not path.suffix and not path.exists():
        path = CHECKPOINT_DIR / f"{path_or_name}.safetensors"
    path = path.with_suffix(".safetensors")
    if not path.exists() or not path.with_suffix(".json").exists():
        raise ConfigError(f"Draft head not found: {path}.")
    meta = json.loads(path.with_suffix(".json").read_text())
    head = DraftHead(target_shape or shape_of(meta["target_spec"]))
    head.load_state_dict({k: v.float() for k, v in load_file(str(path)).items()})
    return head.eval(), meta
