"""Train sdsl's reference model family: byte-level Llama-style models on Python's own stdlib.

* Tokenizer: bytes (vocabulary 256), no merges, no special tokens.
* Corpus: every ``.py`` file of the running interpreter's standard library, test directories and
  site-packages excluded, sorted by relative path; a file goes to the held-out split when
  ``crc32(relative path) % 10 == 0``. Files are joined with a blank line.
* Family rule (:func:`family_shape`): head_dim 32, ``n_head = d_model/32``, ``n_kv_head`` the largest
  divisor of n_head not above n_head/2 (GQA), ``n_layer = d_model/32`` (aspect ratio 32),
  ``d_ff`` = 8/3·d_model rounded to 32, tied embeddings. Sizes d_model ∈ {64, 96, 128, 192, 288}
  give ≈0.10M … 8.0M parameters. Two variants at the 0.77M member's parameter count test depth
  against width (Yan et al., NAACL 2025): ``wide`` (d=256, 1 layer) and ``deep`` (d=64, 17 layers),
  their ``d_ff`` adjusted so all three have equal parameters within 1%.
* Training: every model sees the same token budget (SDSL's D = D′ setting), AdamW, cosine LR,
  seeds fixed per model, batches drawn from ``(seed, step)`` so a resumed run is bit-identical
  to an uninterrupted one. State is saved atomically every ``save_every`` steps under ``work_dir``.
"""

from __future__ import annotations

import io
import json
import math
import platform
import sys
import sysconfig
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from sdsl._io import atomic_write_bytes
from sdsl.torch.checkpoint import CHECKPOINT_DIR, save_checkpoint
from sdsl.torch.model import Shape, Transformer, count_params

__all__ = ["encode", "decode", "corpus_files", "load_corpus", "family_shape", "family", "TrainConfig", "WindowSchedule", "training_batch",
           "train_model", "train_family", "heldout_perplexity"]

VOCAB = 256
EXCLUDED_DIRS = {"site-packages", "dist-packages", "test", "tests", "idle_test"}


def encode(text: str | bytes) -> list[int]:
    return list(text.encode("utf-8") if isinstance(text, str) else text)


def decode(tokens) -> str:
    return bytes(int(t) for t in tokens).decode("utf-8", errors="replace")


def corpus_files(root: str | Path | None = None) -> list[Path]:
    """The stdlib ``.py`` files, sorted by path relative to ``root``."""
    root = Path(root or sysconfig.get_paths()["stdlib"])
    files = [p for p in root.rglob("*.py") if not (EXCLUDED_DIRS & set(p.relative_to(root).parts[:-1]))]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def load_corpus(root: str | Path | None = None) -> dict:
    """``{"train": uint8 array, "heldout": uint8 array, "files": n, "sha": digest}``."""
    root = Path(root or sysconfig.get_paths()["stdlib"])
    parts: dict[str, list[bytes]] = {"train": [], "heldout": []}
    crc = 0
    for p in corpus_files(root):
        rel = p.relative_to(root).as_posix()
        data = p.read_bytes()
        crc = zlib.crc32(rel.encode() + data, crc)
        parts["heldout" if zlib.crc32(rel.encode()) % 10 == 0 else "train"].append(data + b"\n\n")
    out = {k: np.frombuffer(b"".join(v), dtype=np.uint8) for k, v in parts.items()}
    out["files"] = sum(len(v) for v in parts.values())
    out["crc32"] = f"{crc:08x}"
    return out


def _kv_heads(n_head: int) -> int:
    return max(d for d in range(1, max(1, n_head // 2) + 1) if n_head % d == 0)


def family_shape(d_model: int, n_layer: int | None = None, d_ff: int | None = None, max_context: int = 1024) -> Shape:
    n_head = d_model // 32
    return Shape(n_layer=n_layer or d_model // 32, d_model=d_model, n_head=n_head, n_kv_head=_kv_heads(n_head),
                 d_ff=d_ff or 32 * round(8 * d_model / 3 / 32), vocab_size=VOCAB, head_dim=32,
                 tied_embeddings=True, max_context=max_context)


def _params(s: Shape) -> int:
    return count_params(Transformer(s))


def _match_dff(d_model: int, n_layer: int, target: int) -> Shape:
    """Pick d_ff (multiple of 8) so the shape's parameter count is closest to ``target``."""
    base = family_shape(d_model, n_layer, d_ff=8)
    per_ff = 3 * d_model * n_layer  # each extra d_ff unit adds gate, up and down columns in every layer
    d_ff = max(8, 8 * round((target - _params(base)) / per_ff / 8 + 1))
    return family_shape(d_model, n_layer, d_ff=d_ff)


def family() -> dict[str, Shape]:
    """The committed family: five sizes from one rule plus equal-parameter wide/deep variants."""
    fam = {f"byte-d{d}": family_shape(d) for d in (64, 96, 128, 192, 288)}
    mid = _params(fam["byte-d128"])
    fam["byte-wide"] = _match_dff(256, 1, mid)
    fam["byte-deep"] = _match_dff(64, 17, mid)
    return fam


def spec_dict(name: str, s: Shape) -> dict:
    """ModelSpec-compatible field dict (plus RoPE/norm constants and the parameter count)."""
    d = asdict(s)
    d.update(name=name, family="sdsl-byte", gated_mlp=True, total_params=_params(s),
             source="sdsl train-family: byte-level Llama-style model trained on the CPython stdlib")
    return d


@dataclass(frozen=True)
class WindowSchedule:
    """The training run both trainers share (the byte family here, the draft head in :mod:`sdsl.torch.head_train`):
    ``steps`` AdamW steps on ``batch`` random windows of ``seq_len`` tokens, the learning rate rising linearly to its
    peak over ``warmup`` steps then decaying on a cosine (:meth:`lr_at`), a resumable state every ``save_every``
    steps, ``seed``. The defaults are the byte family's."""

    steps: int = 240
    batch: int = 16
    seq_len: int = 256
    lr: float = 3e-3          # at d_model=64; scaled by (64/d_model)**0.5
    warmup: int = 20
    weight_decay: float = 0.1
    save_every: int = 40
    seed: int = 1234

    def lr_at(self, step: int, peak: float, floor: float) -> float:
        """The learning rate of step ``step``: linear warmup to ``peak``, then a cosine decay to ``floor`` × peak."""
        if step < self.warmup:
            return peak * (step + 1) / self.warmup
        frac = (step - self.warmup) / max(1, self.steps - self.warmup)
        return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * frac)))


@dataclass(frozen=True)
class TrainConfig(WindowSchedule):
    """The byte family's run: :class:`WindowSchedule`, decaying to ``min_lr_frac`` of the peak, and the held-out
    perplexity measured on ``eval_batches`` batches."""

    min_lr_frac: float = 0.1
    eval_batches: int = 16


def training_batch(data: np.ndarray, cfg: TrainConfig, step: int, seed: int) -> torch.Tensor:
    """The token windows of training step ``step``: ``cfg.batch`` random windows of ``cfg.seq_len + 1``
    tokens, seeded by (seed, step) so a resumed run sees the same batches."""
    rng = np.random.default_rng([seed, step])
    starts = rng.integers(0, len(data) - cfg.seq_len - 1, size=cfg.batch)
    idx = starts[:, None] + np.arange(cfg.seq_len + 1)
    return torch.from_numpy(data[idx].astype(np.int64))


@torch.no_grad()
def heldout_perplexity(model: Transformer, heldout: np.ndarray, batches: int = 16, batch: int = 16,
                       seq_len: int = 256) -> float:
    """exp(mean next-byte cross-entropy) over fixed, evenly spaced held-out windows."""
    model.eval()
    n = batches * batch
    starts = np.linspace(0, len(heldout) - seq_len - 2, n).astype(np.int64)
    total = 0.0
    for i in range(batches):
        idx = starts[i * batch:(i + 1) * batch, None] + np.arange(seq_len + 1)
        x = torch.from_numpy(heldout[idx].astype(np.int64))
        total += F.cross_entropy(model(x[:, :-1]).reshape(-1, VOCAB), x[:, 1:].reshape(-1)).item()
    return math.exp(total / batches)


def train_model(name: str, shape: Shape, corpus: dict, cfg: TrainConfig, out_dir: Path, work_dir: Path,
                seed: int, progress=True) -> dict:
    """Train one model (resuming from ``work_dir`` if a state file exists); returns its metadata."""
    from tqdm.auto import tqdm

    torch.manual_seed(seed)
    model = Transformer(shape).init_weights(seed)
    peak = cfg.lr * (64 / shape.d_model) ** 0.5
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=peak, betas=(0.9, 0.95))
    state_path = work_dir / f"{name}.state.pt"
    start, log, elapsed = 0, [], 0.0
    if state_path.exists():
        st = torch.load(state_path, weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        start, log, elapsed = st["step"], st["log"], st["elapsed"]
    bar = tqdm(total=cfg.steps, initial=start, desc=name, disable=not progress, dynamic_ncols=True)
    t0 = time.perf_counter()
    model.train()
    for step in range(start, cfg.steps):
        for g in opt.param_groups:
            g["lr"] = cfg.lr_at(step, peak, cfg.min_lr_frac)
        x = training_batch(corpus["train"], cfg, step, seed)
        loss = F.cross_entropy(model(x[:, :-1]).reshape(-1, VOCAB), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        log.append([step + 1, round(loss.item(), 4)])
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.3f}")
        if (step + 1) % cfg.save_every == 0 and step + 1 < cfg.steps:
            buf = io.BytesIO()
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1, "log": log,
                        "elapsed": elapsed + time.perf_counter() - t0}, buf)
            atomic_write_bytes(state_path, buf.getvalue())
            model.train()
    bar.close()
    elapsed += time.perf_counter() - t0
    ppl = heldout_perplexity(model, corpus["heldout"], cfg.eval_batches, cfg.batch, cfg.seq_len)
    meta = {
        "name": name, "spec": spec_dict(name, shape), "seed": seed, "train_config": asdict(cfg),
        "tokens_seen": cfg.steps * cfg.batch * cfg.seq_len, "train_seconds": round(elapsed, 1),
        "heldout_ppl": round(ppl, 4), "heldout_bits_per_byte": round(math.log2(ppl), 4),
        "final_train_loss": log[-1][1] if log else None, "loss_log": log[::10] + ([log[-1]] if log else []),
        "corpus": {"python": platform.python_version(), "files": corpus["files"], "crc32": corpus["crc32"],
                   "train_bytes": int(len(corpus["train"])), "heldout_bytes": int(len(corpus["heldout"]))},
        "torch": torch.__version__, "threads": torch.get_num_threads(), "storage_dtype": "fp16",
    }
    save_checkpoint(model, out_dir / f"{name}.safetensors", meta)
    state_path.unlink(missing_ok=True)
    return meta


def train_family(out_dir: str | Path = CHECKPOINT_DIR, work_dir: str | Path | None = None, cfg: TrainConfig = TrainConfig(),
                 only: list[str] | None = None, threads: int = 2, force: bool = False, progress: bool = True) -> dict:
    """Train every family member not yet present in ``out_dir``; write ``family.json``; return it."""
    torch.set_num_threads(threads)
    out_dir = Path(out_dir)
    work_dir = Path(work_dir or out_dir / ".work")
    work_dir.mkdir(parents=True, exist_ok=True)
    corpus = load_corpus()
    results = {}
    for i, (name, shape) in enumerate(family().items()):
        if only and name not in only:
            continue
        done = out_dir / f"{name}.json"
        if done.exists() and not force:
            results[name] = json.loads(done.read_text())
            continue
        results[name] = train_model(name, shape, corpus, cfg, out_dir, work_dir, cfg.seed + 1000 * i, progress)
    for name in family():
        if name not in results and (out_dir / f"{name}.json").exists():
            results[name] = json.loads((out_dir / f"{name}.json").read_text())
    summary = {n: {k: m[k] for k in ("heldout_ppl", "heldout_bits_per_byte", "train_seconds", "tokens_seen")}
               | {"params": m["spec"]["total_params"], "n_layer": m["spec"]["n_layer"], "d_model": m["spec"]["d_model"]}
               for n, m in results.items()}
    from sdsl._io import atomic_write_text
    atomic_write_text(out_dir / "family.json", json.dumps({"python": sys.version.split()[0], "models": summary},
                                                          indent=2, sort_keys=True) + "\n")
    return summary
