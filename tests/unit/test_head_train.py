"""`sdsl train-head`'s knobs and loss: validated configuration, and EAGLE's classification target."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from sdsl.cli import cli  # noqa: E402
from sdsl.errors import InvalidInputError  # noqa: E402
from sdsl.torch.head_train import HeadConfig, head_loss  # noqa: E402


@pytest.mark.parametrize("bad", [{"steps": 0}, {"pool": 0}, {"batch": -1}, {"unroll": 0}, {"lr": 0.0},
                                 {"lr": float("nan")}, {"lr": -1e-3}, {"labels": "soft"}, {"seq_len": 3},
                                 {"pool": 2.5}])
def test_head_config_rejects_bad_values(bad):
    with pytest.raises(InvalidInputError):
        HeadConfig(**bad)


@pytest.mark.parametrize("args", [["--pool", "0"], ["--steps", "0"], ["--lr", "0"], ["--lr", "nan"],
                                  ["--lr", "-1"], ["--threads", "0"]])
def test_train_head_cli_bad_values_exit_2(args):
    res = CliRunner().invoke(cli, ["train-head", *args])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1


def _perfect_head(features):
    """A stand-in head that returns the target's true next features (a head with zero regression error)."""
    return lambda inputs, embeddings: features[:, 1:-1]


def test_target_labels_are_the_targets_distribution(tiny_transformer):
    """labels="target": the classification term is CE(p_{t+2}, p̂_{t+2}) with p_{t+2} the target's own
    distribution (EAGLE §4.2), so a head predicting the true feature scores the target's entropy, its minimum
    over heads; labels="tokens" scores the target's cross-entropy on the corpus bytes instead."""
    target = tiny_transformer(3)
    tokens = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        features = target(tokens, return_hidden=True)[1]
        logp = target.output(features[:, 1:-1]).float().log_softmax(-1)
    head = _perfect_head(features)
    for labels, expected in (("target", -(logp.exp() * logp).sum(-1).mean()),
                             ("tokens", -logp.gather(-1, tokens[:, 2:, None]).mean())):
        cfg = HeadConfig(labels=labels, unroll=1, noise=0.0, seq_len=12)
        loss, stats = head_loss(head, target, tokens, features, cfg)
        assert stats["regression"] == 0.0 and stats["top1"] == 1.0
        assert stats["classification"] == pytest.approx(float(expected), rel=1e-5)
        assert loss.item() == pytest.approx(cfg.class_weight * float(expected), rel=1e-5)


def test_both_trainers_share_one_warmup_cosine_schedule():
    """The head and the byte family step their learning rate on one schedule: linear warmup to the peak, then a
    cosine decay to the floor (0.1 of the peak for both), bit for bit the closed form."""
    from sdsl.torch.head_train import MIN_LR_FRAC
    from sdsl.torch.train import TrainConfig

    def closed_form(steps, warmup, peak, floor, step):
        if step < warmup:
            return peak * (step + 1) / warmup
        frac = (step - warmup) / max(1, steps - warmup)
        return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * frac)))

    for cfg, peak, floor in ((HeadConfig(), HeadConfig().lr, MIN_LR_FRAC),
                             (TrainConfig(), 0.5 * TrainConfig().lr, TrainConfig().min_lr_frac)):
        got = [cfg.lr_at(s, peak, floor) for s in range(cfg.steps)]
        assert got == [closed_form(cfg.steps, cfg.warmup, peak, floor, s) for s in range(cfg.steps)]
        assert got[cfg.warmup - 1] == pytest.approx(peak) and got[-1] == pytest.approx(floor * peak, rel=1e-3)


def test_shipped_defaults_are_the_committed_heads():
    import json

    from sdsl.torch.checkpoint import CHECKPOINT_DIR

    meta = json.loads((CHECKPOINT_DIR / "byte-d288-head.json").read_text())
    assert meta["train_config"] == {k: v for k, v in HeadConfig().__dict__.items()}
    assert math.isfinite(meta["heldout_top1_agreement"])
    shown = CliRunner().invoke(cli, ["train-head", "--help"]).output.replace("\n", " ")
    cfg = HeadConfig()
    for value in (cfg.steps, cfg.pool, cfg.lr, cfg.labels):  # the CLI states the defaults without importing torch
        assert f"[default: {value}]" in " ".join(shown.split())


@pytest.mark.integrity('benchmarks/results/head_labels_ablation.json')
def test_label_ablation_as_stated(repo_root):
    """Integrity check (reads back committed measurements; nothing is re-run).
    VALIDATION.md's label ablation (corpus byte vs the target's distribution), from its committed runs."""
    import json

    import numpy as np

    runs = json.loads((repo_root / "benchmarks" / "results" / "head_labels_ablation.json").read_text())["runs"]
    tokens, target = (np.asarray(runs[k]["log"]) for k in ("tokens", "target"))
    assert (runs["tokens"]["step"], runs["target"]["step"]) == (400, 480) == (len(tokens), len(target))
    assert runs["tokens"]["heldout_top1_by_depth"] == [0.7426, 0.7327, 0.7192]
    assert runs["target"]["heldout_top1_by_depth"] == [0.8135, 0.794, 0.7932]
    assert round(float(np.mean(target[:400, 2] > tokens[:, 2])), 2) == 0.95  # "95% of the first 400 steps"
    assert (round(float(target[360:400, 2].mean()), 3), round(float(tokens[360:400, 2].mean()), 3)) == (0.817, 0.733)
