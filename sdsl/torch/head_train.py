"""Train an EAGLE-style draft head (:class:`sdsl.torch.head.DraftHead`) on a frozen family target.

Data: the same stdlib byte corpus as the family (:func:`sdsl.torch.train.load_corpus`): a pool of
``pool`` windows drawn from ``seed``, whose features f_t the frozen target computes once (that forward
is most of the cost on a CPU); each step trains on ``batch`` pool windows drawn from ``(seed, step)``,
so a resumed run is bit-identical to an uninterrupted one. The head reads (f_t + noise, embedding of x_{t+1}) and is trained
on EAGLE's loss (Li et al. 2024, §4.2): smooth-L1 regression of f_{t+1} plus ``class_weight`` × the
cross-entropy CE(p_{t+2}, p̂_{t+2}) of the target's LM head on the prediction against the target's own
distribution p_{t+2} = softmax(LM head(f_{t+1})) (``labels="target"``, EAGLE's form; ``"tokens"`` uses the
corpus byte x_{t+2} instead, a noisier label for agreement with the target); uniform feature noise
U(−0.1, 0.1)·std as in EAGLE's data augmentation. Training-time test (EAGLE-3, Li et al. 2025, §3.2):
with ``unroll`` = k the head is also run k − 1 more times on its own predicted features (depth j reads
the depth-(j−1) prediction, as when it drafts j tokens ahead; here attending causally to that depth's own
predictions) and those depths' losses are added with weight 1/k each. AdamW, cosine LR; state saved atomically every
``save_every`` steps under ``work_dir``; the result is written next to the family as
``<target>-head.safetensors`` (fp16) with a ``.json`` sidecar (training log, held-out top-1 agreement
with the target).
"""

from __future__ import annotations

import io
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from sdsl._io import atomic_write_bytes
from sdsl.torch.checkpoint import CHECKPOINT_DIR, load_checkpoint
from sdsl.torch.head import DraftHead, save_head
from sdsl.torch.train import WindowSchedule, load_corpus

__all__ = ["HeadConfig", "train_head", "head_agreement"]

MIN_LR_FRAC = 0.1  #: the head's learning rate decays to this fraction of its peak


@dataclass(frozen=True)
class HeadConfig(WindowSchedule):
    """The head's run: :class:`~sdsl.torch.train.WindowSchedule` with the head's lengths, decaying to
    ``MIN_LR_FRAC`` of the peak, and the head's loss, pool and test-time unroll."""

    steps: int = 1600
    batch: int = 8
    seq_len: int = 128
    weight_decay: float = 0.0
    save_every: int = 80
    seed: int = 4321
    class_weight: float = 0.5
    noise: float = 0.1
    pool: int = 2048
    unroll: int = 3  # training-time test: depths 2..unroll read the head's own predicted features
    labels: str = "target"  # classification target: "target" (EAGLE's p_{t+2}) or "tokens" (the corpus byte x_{t+2})

    def __post_init__(self):
        from sdsl.errors import InvalidInputError

        for name in ("steps", "batch", "pool", "save_every", "unroll"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise InvalidInputError(f"HeadConfig.{name} must be an integer >= 1, got {getattr(self, name)!r}.")
        if not isinstance(self.seq_len, int) or self.seq_len < self.unroll + 2:
            raise InvalidInputError(f"HeadConfig.seq_len must be an integer >= unroll + 2, got {self.seq_len!r}.")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise InvalidInputError(f"HeadConfig.lr must be a finite number > 0, got {self.lr!r}.")
        if self.labels not in ("tokens", "target"):
            raise InvalidInputError(f"HeadConfig.labels must be 'tokens' or 'target', got {self.labels!r}.")


def _pool(data: np.ndarray, cfg: HeadConfig) -> torch.Tensor:
    rng = np.random.default_rng(cfg.seed)
    starts = rng.integers(0, len(data) - cfg.seq_len - 1, size=cfg.pool)
    return torch.from_numpy(data[starts[:, None] + np.arange(cfg.seq_len)].astype(np.int64))


@torch.no_grad()
def target_features(target, tokens: torch.Tensor, chunk: int = 16) -> torch.Tensor:
    """The frozen target's features (after the final norm) for every window, ``chunk`` windows at a time."""
    return torch.cat([target(tokens[i:i + chunk], return_hidden=True)[1] for i in range(0, len(tokens), chunk)])


def head_loss(head: DraftHead, target, tokens: torch.Tensor, features: torch.Tensor, cfg: HeadConfig,
              noise_gen=None) -> tuple[torch.Tensor, dict]:
    """EAGLE's loss on windows ``tokens`` with the target's ``features``; returns (loss, {"regression",
    "classification", "top1"}) where top1 is the agreement with the target's own next-next token."""
    inputs = features[:, :-2]
    if cfg.noise and noise_gen is not None:
        scale = cfg.noise * features.std()
        inputs = inputs + (torch.rand(inputs.shape, generator=noise_gen) * 2 - 1) * scale
    embeddings = target.tok_embeddings(tokens[:, 1:-1]).detach()
    with torch.no_grad():
        teacher = target.output(features[:, 1:-1]).float()
    vocab = teacher.shape[-1]
    if cfg.labels == "target":  # EAGLE §4.2: L_cls = CrossEntropy(p_{t+2}, p̂_{t+2}) with p_{t+2} the target's
        labels = teacher.softmax(-1)

        def label(k):
            return labels[:, k:].reshape(-1, vocab)
    else:
        def label(k):
            return tokens[:, 2 + k:].reshape(-1)
    predicted = head(inputs, embeddings)
    regression = F.smooth_l1_loss(predicted, features[:, 1:-1])
    logits = target.output(predicted).float()
    classification = F.cross_entropy(logits.reshape(-1, vocab), label(0))
    with torch.no_grad():
        top1 = (logits.argmax(-1) == teacher.argmax(-1)).float().mean()
    loss = regression + cfg.class_weight * classification
    for k in range(1, cfg.unroll):  # depth k+1 of a draft reads the head's own prediction of the feature before it
        predicted = head(predicted[:, :-1], embeddings[:, k:])
        logits = target.output(predicted).float()
        loss = loss + (F.smooth_l1_loss(predicted, features[:, 1 + k:-1]) + cfg.class_weight * F.cross_entropy(
            logits.reshape(-1, vocab), label(k))) / cfg.unroll
    return loss, {"regression": regression.item(), "classification": classification.item(), "top1": top1.item()}


@torch.no_grad()
def head_agreement(head: DraftHead, target, heldout: np.ndarray, windows: int = 8, seq_len: int = 256,
                   depths: int = 1) -> float | list[float]:
    """Held-out top-1 agreement between the head's prediction and the target's next-next token (teacher
    features). With ``depths`` > 1, a list: depth k reads the head's own depth-(k−1) predictions (as in drafting)."""
    starts = np.linspace(0, len(heldout) - seq_len - 2, windows).astype(np.int64)
    tokens = torch.from_numpy(heldout[starts[:, None] + np.arange(seq_len)].astype(np.int64))
    features = target_features(target, tokens)
    embeddings = target.tok_embeddings(tokens[:, 1:-1])
    head.eval()
    predicted, agreement = features[:, :-2], []
    for k in range(depths):
        predicted = head(predicted if k == 0 else predicted[:, :-1], embeddings[:, k:])
        teacher = target.output(features[:, 1 + k:-1]).argmax(-1)
        agreement.append(float((target.output(predicted).argmax(-1) == teacher).float().mean()))
    return agreement[0] if depths == 1 else agreement


def train_head(target_name: str = "byte-d288", out_dir: str | Path = CHECKPOINT_DIR, work_dir: str | Path | None = None,
               cfg: HeadConfig = HeadConfig(), threads: int = 2, progress: bool = True) -> dict:
    """Train (or resume) the head of ``target_name``; write ``<target>-head`` in ``out_dir``; return its metadata."""
    from tqdm.auto import tqdm

    torch.set_num_threads(threads)
    out_dir = Path(out_dir)
    work_dir = Path(work_dir or out_dir / ".work")
    work_dir.mkdir(parents=True, exist_ok=True)
    target, target_meta = load_checkpoint(target_name)
    target.requires_grad_(False)
    corpus = load_corpus()
    torch.manual_seed(cfg.seed)
    head = DraftHead(target.shape)
    opt = torch.optim.AdamW(head.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    state_path = work_dir / f"{target_name}-head.state.pt"
    start, log, elapsed, cpu = 0, [], 0.0, 0.0
    if state_path.exists():
        state = torch.load(state_path, weights_only=False)
        head.load_state_dict(state["head"])
        opt.load_state_dict(state["opt"])
        start, log, elapsed, cpu = state["step"], state["log"], state["elapsed"], state["cpu"]
    t0, cpu0 = time.perf_counter(), time.process_time()
    tokens = _pool(corpus["train"], cfg)
    features = target_features(target, tokens) if start < cfg.steps else None
    bar = tqdm(total=cfg.steps, initial=start, desc=f"{target_name} head", disable=not progress, dynamic_ncols=True)
    head.train()
    for step in range(start, cfg.steps):
        for group in opt.param_groups:
            group["lr"] = cfg.lr_at(step, cfg.lr, MIN_LR_FRAC)
        pick = torch.from_numpy(np.random.default_rng([cfg.seed, step]).integers(0, cfg.pool, cfg.batch))
        loss, stats = head_loss(head, target, tokens[pick], features[pick], cfg,
                                torch.Generator().manual_seed(cfg.seed + step))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        log.append([step + 1, round(loss.item(), 4), round(stats["top1"], 4)])
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.3f}", top1=f"{stats['top1']:.2f}")
        if (step + 1) % cfg.save_every == 0 and step + 1 < cfg.steps:
            buffer = io.BytesIO()
            torch.save({"head": head.state_dict(), "opt": opt.state_dict(), "step": step + 1, "log": log,
                        "elapsed": elapsed + time.perf_counter() - t0,
                        "cpu": cpu + time.process_time() - cpu0}, buffer)
            atomic_write_bytes(state_path, buffer.getvalue())
    bar.close()
    elapsed += time.perf_counter() - t0
    cpu += time.process_time() - cpu0
    meta = {"name": f"{target_name}-head", "kind": "eagle-head", "target": target_name,
            "target_spec": target_meta["spec"], "train_config": asdict(cfg), "train_seconds": round(elapsed, 1),
            "train_cpu_seconds": round(cpu, 1),
            "threads": threads, "params": sum(p.numel() for p in head.parameters()),
            "heldout_top1_agreement": round(head_agreement(head, target, corpus["heldout"]), 4),
            "heldout_top1_by_depth": [round(a, 4) for a in head_agreement(head, target, corpus["heldout"], depths=3)],
            "loss_log": log[::10] + ([log[-1]] if log else []), "torch": torch.__version__, "storage_dtype": "fp16",
            "source": "sdsl train-head: EAGLE-style head (fc + one decoder layer) on the frozen target's features"}
    save_head(head, out_dir / f"{target_name}-head.safetensors", meta)
    state_path.unlink(missing_ok=True)
    return meta
