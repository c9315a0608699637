"""Save and load reference-model weights.

* sdsl's own checkpoints: ``<name>.safetensors`` (fp16 or bf16 tensors with the reference model's
  parameter names) next to ``<name>.json`` (the ModelSpec fields, training log and held-out
  perplexity). :func:`save_checkpoint` writes both atomically; :func:`load_checkpoint` reads them.
* Hugging Face Llama-family weights from a local file: ``model.safetensors`` (HF names,
  ``model.layers.N.self_attn.q_proj.weight`` …) with its ``config.json``, or a GGUF file
  dequantised with the ``gguf`` package (see :mod:`sdsl.torch.gguf_loader`).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from sdsl._io import atomic_write_bytes, atomic_write_text
from sdsl.errors import ConfigError
from sdsl.torch.model import Shape, Transformer, shape_of

__all__ = ["save_checkpoint", "load_checkpoint", "read_meta", "from_hf_state_dict", "load_hf_safetensors",
           "CHECKPOINT_DIR", "list_checkpoints"]

CHECKPOINT_DIR = Path(__file__).resolve().parents[1] / "data" / "checkpoints"

_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def _unique_state(model: Transformer) -> dict[str, torch.Tensor]:
    sd = model.state_dict()
    if model.shape.tied_embeddings:
        sd.pop("output.weight", None)
    return sd


def save_checkpoint(model: Transformer, path: str | Path, meta: dict, dtype: str = "fp16") -> Path:
    """Write ``path`` (.safetensors) and its ``.json`` sidecar atomically; returns the weights path."""
    from safetensors.torch import save

    path = Path(path).with_suffix(".safetensors")
    tensors = {k: v.detach().to(_DTYPES[dtype]).contiguous() for k, v in _unique_state(model).items()}
    atomic_write_bytes(path, save(tensors, metadata={"format": "sdsl-reference", "dtype": dtype}))
    atomic_write_text(path.with_suffix(".json"), json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return path


def read_meta(path: str | Path) -> dict:
    p = Path(path).with_suffix(".json")
    if not p.exists():
        raise ConfigError(f"Checkpoint metadata not found: {p}.")
    return json.loads(p.read_text())


def list_checkpoints(directory: str | Path = CHECKPOINT_DIR) -> list[Path]:
    """All model checkpoints (``*.safetensors`` with a ``.json`` sidecar holding a ``spec``; draft heads
    are left out) in ``directory``, sorted by size."""
    d = Path(directory)
    paths = [p for p in d.glob("*.safetensors") if p.with_suffix(".json").exists() and "spec" in read_meta(p)]
    return sorted(paths, key=lambda p: (read_meta(p)["spec"].get("total_params", 0), p.name))


def load_checkpoint(path_or_name: str | Path, dtype=torch.float32) -> tuple[Transformer, dict]:
    """Load an sdsl checkpoint by path or by name in the committed checkpoint directory."""
    from safetensors.torch import load_file

    path = Path(path_or_name)
    if not path.suffix and not path.exists():
        path = CHECKPOINT_DIR / f"{path_or_name}.safetensors"
    path = path.with_suffix(".safetensors")
    if not path.exists():
        raise ConfigError(f"Checkpoint not found: {path}.")
    meta = read_meta(path)
    model = Transformer(shape_of(meta["spec"]))
    sd = load_file(str(path))
    missing, unexpected = model.load_state_dict({k: v.to(dtype) for k, v in sd.items()}, strict=False)
    missing = [m for m in missing if not (m == "output.weight" and model.shape.tied_embeddings)]
    if missing or unexpected:
        raise ConfigError(f"Checkpoint {path.name} does not match its spec (missing {missing}, unexpected {unexpected}).")
    return model.to(dtype).eval(), meta


def from_hf_state_dict(shape: Shape, get, dtype=torch.float32) -> Transformer:
    """Build a model from HF Llama tensor names; ``get(name)`` returns a tensor or None.

    Q/K/V are fused into ``wqkv`` and gate/up into ``w13`` (rotate-half RoPE, HF layout).
    """
    model = Transformer(shape).to(dtype)
    sd: dict[str, torch.Tensor] = {}

    def need(name):
        t = get(name)
        if t is None:
            raise ConfigError(f"Tensor {name} missing from the weight file.")
        return t.to(dtype)

    sd["tok_embeddings.weight"] = need("model.embed_tokens.weight")
    sd["norm.weight"] = need("model.norm.weight")
    head = get("lm_head.weight")
    sd["output.weight"] = head.to(dtype) if head is not None else sd["tok_embeddings.weight"]
    for i in range(shape.n_layer):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        sd[f"layers.{i}.attention.wqkv.weight"] = torch.cat([need(a + "q_proj.weight"), need(a + "k_proj.weight"),
                                                             need(a + "v_proj.weight")])
        sd[f"layers.{i}.attention.wo.weight"] = need(a + "o_proj.weight")
        m = p + "mlp."
        sd[f"layers.{i}.feed_forward.w13.weight"] = torch.cat([need(m + "gate_proj.weight"), need(m + "up_proj.weight")])
        sd[f"layers.{i}.feed_forward.w2.weight"] = need(m + "down_proj.weight")
        sd[f"layers.{i}.attention_norm.weight"] = need(p + "input_layernorm.weight")
        sd[f"layers.{i}.ffn_norm.weight"] = need(p + "post_attention_layernorm.weight")
    if shape.tied_embeddings:
        sd.pop("output.weight")
    model.load_state_dict(sd, strict=not shape.tied_embeddings)
    return model.eval()


def hf_config_shape(cfg: dict, max_context: int | None = None) -> Shape:
    """A :class:`Shape` from a Hugging Face Llama ``config.json`` dict."""
    n_head = cfg["num_attention_heads"]
    return Shape(
        n_layer=cfg["num_hidden_layers"], d_model=cfg["hidden_size"], n_head=n_head,
        n_kv_head=cfg.get("num_key_value_heads", n_head), d_ff=cfg["intermediate_size"], vocab_size=cfg["vocab_size"],
        head_dim=cfg.get("head_dim") or cfg["hidden_size"] // n_head, tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        max_context=int(max_context or min(cfg.get("max_position_embeddings", 4096), 8192)),
        rope_theta=float(cfg.get("rope_theta", 10000.0)), norm_eps=float(cfg.get("rms_norm_eps", 1e-5)),
    )


def load_hf_safetensors(path: str | Path, config: str | Path | None = None, dtype=torch.float32) -> Transformer:
    """Load a HF Llama-family ``model.safetensors`` (with ``config.json`` beside it, or given)."""
    from safetensors import safe_open

    path = Path(path)
    cfg_path = Path(config) if config else path.with_name("config.json")
    if not cfg_path.exists():
        raise ConfigError(f"HF config not found: {cfg_path}.")
    shape = hf_config_shape(json.loads(cfg_path.read_text()))
    with safe_open(str(path), framework="pt") as f:
        names = set(f.keys())
        return from_hf_state_dict(shape, lambda n: f.get_tensor(n) if n in names else None, dtype)
