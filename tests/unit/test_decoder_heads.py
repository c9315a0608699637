"""The committed EAGLE-style draft head: budget, exact greedy decoding, real acceptance, and the committed
head/tree validation recomputed from its rows."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sdsl.torch.decoder import generate  # noqa: E402
from sdsl.torch.head import HeadProposer, load_head  # noqa: E402


@pytest.fixture(scope="module")
def head_and_target(family_models):
    target = family_models["byte-d288"]
    head, meta = load_head("byte-d288-head", target.shape)
    return head, target, meta


def test_committed_head_fits_the_budget(head_and_target):
    from sdsl.torch.checkpoint import CHECKPOINT_DIR, list_checkpoints

    head, _, meta = head_and_target
    size = (CHECKPOINT_DIR / "byte-d288-head.safetensors").stat().st_size
    assert size <= 10e6 and meta["kind"] == "eagle-head" and meta["target"] == "byte-d288"
    assert sum(p.numel() for p in head.parameters()) == meta["params"]
    assert "byte-d288-head" not in {p.stem for p in list_checkpoints(CHECKPOINT_DIR)}  # not a family member
    assert meta["train_cpu_seconds"] < 600  # "minutes on 2 CPU cores" (CPU time; the wall time was shared)


def test_trained_head_decodes_exactly_and_accepts(head_and_target, heldout_prompts):
    """Greedy decoding with the head (chain and tree) equals the target's; the trained head accepts far
    more than an untrained one (τ recorded in VALIDATION.md: seeded, greedy, deterministic)."""
    head, target, _ = head_and_target
    prompts = heldout_prompts[:2]
    ref = generate(target, prompts, 32).tokens
    taus = {}
    for tree in ("chain4", "3x2x1x1"):
        out = generate(target, prompts, 32, HeadProposer(head, target), tree=tree)
        assert out.tokens == ref, tree
        taus[tree] = out.tau
    assert taus["chain4"] > 2.5 and taus["3x2x1x1"] > taus["chain4"]


@pytest.fixture(scope="module")
def committed(repo_root):
    return json.loads((repo_root / "benchmarks" / "results" / "validate_decoder_heads.json").read_text())


def test_committed_head_tree_summary_recomputes(committed):
    from sdsl.experiments.decoder_heads import summarise_heads

    again = summarise_heads(committed["heads"]["rows"])
    # the numbers VALIDATION.md states (issue 10 goals: head >= 1.8x, a tree beating the best chain; both missed)
    assert committed["head_best_speedup"] == pytest.approx(1.1831, rel=1e-3)
    assert committed["tree_best_speedup"] == pytest.approx(1.3095, rel=1e-3)
    assert committed["chain_best_speedup"] == pytest.approx(1.4924, rel=1e-3)
    assert committed["heads"]["head_best"]["tau"] == pytest.approx(2.9213, rel=1e-3)
    for key in ("head_best_speedup", "tree_best_speedup", "chain_best_speedup"):
        assert again[key] == pytest.approx(committed[key], rel=1e-9)
    from sdsl.experiments.decoder_heads import _price_chains
    from sdsl.torch.checkpoint import load_checkpoint

    drafts = sorted({r["proposer"] for r in committed["heads"]["rows"] if r["proposer"] != "head"})
    settings = committed["heads"]["settings"]
    priced = _price_chains([{k: v for k, v in r.items() if k not in ("pred_speedup", "speedup_error", "alpha")}
                            for r in committed["heads"]["rows"]], load_checkpoint("byte-d288")[1],
                           {d: load_checkpoint(d)[1] for d in drafts}, settings["prompt_len"] + settings["max_new"] // 2)
    for a, b in zip(priced, committed["heads"]["rows"]):  # VALIDATION.md's "predicted" column (chains)
        if b["kind"] == "chain":
            assert a["pred_speedup"] == pytest.approx(b["pred_speedup"], rel=1e-3)
    for r in committed["heads"]["rows"]:
        assert r["speedup"] == pytest.approx(r["tokens_per_s"] / committed["heads"]["plain"]["tokens_per_s"])
        c = np.asarray(r["accept_counts"])
        assert r["tau"] == pytest.approx((np.arange(len(c)) * c).sum() / c.sum() + 1)
