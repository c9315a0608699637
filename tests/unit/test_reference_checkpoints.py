"""Committed reference checkpoints, their loaders, the training recipe (never retrains the family)."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sdsl.torch.checkpoint import (  # noqa: E402
    CHECKPOINT_DIR, from_hf_state_dict, list_checkpoints, load_checkpoint, load_hf_safetensors, save_checkpoint)
from sdsl.torch.model import Shape, Transformer, count_params  # noqa: E402
from sdsl.torch.train import family  # noqa: E402

FAMILY = family()


@pytest.fixture(scope="module")
def committed():
    paths = list_checkpoints(CHECKPOINT_DIR)
    if not paths:
        pytest.skip("no committed checkpoints")
    return paths


def test_family_rule():
    sizes = {n: count_params(Transformer(s)) for n, s in FAMILY.items()}
    five = [sizes[f"byte-d{d}"] for d in (64, 96, 128, 192, 288)]
    assert five == sorted(five) and five[0] < 1.5e5 and five[-1] > 5e6
    for v in ("byte-wide", "byte-deep"):  # equal parameters, very different depth
        assert abs(sizes[v] / sizes["byte-d128"] - 1) < 0.01
    assert FAMILY["byte-deep"].n_layer > 4 * FAMILY["byte-d128"].n_layer > 4 * FAMILY["byte-wide"].n_layer


def test_every_member_is_committed_and_loads(committed):
    names = {p.stem for p in committed}
    assert names == set(FAMILY)
    total = sum(p.stat().st_size for p in committed)
    assert total <= 40e6
    for p in committed:
        model, meta = load_checkpoint(p)
        assert meta["spec"]["total_params"] == count_params(model)
        assert meta["heldout_ppl"] > 1 and meta["loss_log"]
        assert model.shape == FAMILY[p.stem]
    summary = json.loads((CHECKPOINT_DIR / "family.json").read_text())["models"]
    ppl = [summary[f"byte-d{d}"]["heldout_ppl"] for d in (64, 96, 128, 192, 288)]
    assert ppl == sorted(ppl, reverse=True)  # bigger is better at equal training tokens


def test_load_by_name_and_heldout_perplexity_reproduces(committed):
    from sdsl.torch.train import TrainConfig, heldout_perplexity, load_corpus

    model, meta = load_checkpoint("byte-d64")
    cfg = TrainConfig()
    ppl = heldout_perplexity(model, load_corpus()["heldout"], 2, 4, cfg.seq_len)
    assert abs(np.log(ppl) / np.log(meta["heldout_ppl"]) - 1) < 0.2  # fp16 storage, 8 of 256 windows


def test_save_load_roundtrip(tmp_path):
    s = Shape(n_layer=2, d_model=32, n_head=2, n_kv_head=1, d_ff=64, vocab_size=256, head_dim=16, tied_embeddings=True)
    m = Transformer(s).init_weights(5)
    meta = {"spec": {"name": "t", "family": "x", "n_layer": 2, "d_model": 32, "n_head": 2, "n_kv_head": 1, "d_ff": 64,
                     "vocab_size": 256, "head_dim": 16, "tied_embeddings": True, "max_context": 4096, "total_params": 1}}
    save_checkpoint(m, tmp_path / "t", meta, dtype="fp32")
    m2, meta2 = load_checkpoint(tmp_path / "t.safetensors")
    x = torch.randint(0, 256, (1, 9))
    with torch.no_grad():
        assert torch.equal(m(x), m2(x))
    assert meta2 == meta


def test_hf_llama_safetensors_loader(tmp_path):
    """HF names (separate q/k/v, gate/up) load into the fused layout and compute the same function."""
    from safetensors.torch import save_file

    s = Shape(n_layer=2, d_model=32, n_head=4, n_kv_head=2, d_ff=48, vocab_size=50, head_dim=8)
    m = Transformer(s).init_weights(7).eval()
    hf = {"model.embed_tokens.weight": m.tok_embeddings.weight, "model.norm.weight": m.norm.weight,
          "lm_head.weight": m.output.weight}
    for i, layer in enumerate(m.layers):
        q, k, v = layer.attention.wqkv.weight.split([32, 16, 16])
        g, u = layer.feed_forward.w13.weight.split(48)
        p = f"model.layers.{i}."
        hf |= {p + "self_attn.q_proj.weight": q, p + "self_attn.k_proj.weight": k, p + "self_attn.v_proj.weight": v,
               p + "self_attn.o_proj.weight": layer.attention.wo.weight, p + "mlp.gate_proj.weight": g,
               p + "mlp.up_proj.weight": u, p + "mlp.down_proj.weight": layer.feed_forward.w2.weight,
               p + "input_layernorm.weight": layer.attention_norm.weight,
               p + "post_attention_layernorm.weight": layer.ffn_norm.weight}
    save_file({k: v.detach().contiguous() for k, v in hf.items()}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({
        "num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 48, "vocab_size": 50, "tie_word_embeddings": False, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "max_position_embeddings": 128}))
    m2 = load_hf_safetensors(tmp_path / "model.safetensors")
    x = torch.randint(0, 50, (2, 7))
    with torch.no_grad():
        torch.testing.assert_close(m(x), m2(x))
    assert from_hf_state_dict is not None


def test_training_is_deterministic_and_resumable(tmp_path, monkeypatch):
    import sdsl.torch.train as tr

    rng = np.random.default_rng(0)
    corpus = {"train": rng.integers(97, 110, 20000).astype(np.uint8), "heldout": rng.integers(97, 110, 4000).astype(np.uint8),
              "files": 1, "crc32": "0"}
    cfg = tr.TrainConfig(steps=4, batch=2, seq_len=32, eval_batches=1, save_every=2, warmup=1)
    shape = tr.family_shape(64, 1)
    a = tr.train_model("a", shape, corpus, cfg, tmp_path / "a", tmp_path / "wa", seed=3, progress=False)
    a2 = tr.train_model("a", shape, corpus, cfg, tmp_path / "a2", tmp_path / "wa2", seed=3, progress=False)
    assert a["loss_log"] == a2["loss_log"]

    real_batch = tr.training_batch

    def crash_at_step_3(data, cfg_, step, seed):
        if step == 3:
            raise KeyboardInterrupt
        return real_batch(data, cfg_, step, seed)

    monkeypatch.setattr(tr, "training_batch", crash_at_step_3)
    with pytest.raises(KeyboardInterrupt):
        tr.train_model("b", shape, corpus, cfg, tmp_path / "b", tmp_path / "wb", seed=3, progress=False)
    assert (tmp_path / "wb" / "b.state.pt").exists()
    monkeypatch.setattr(tr, "training_batch", real_batch)
    b = tr.train_model("b", shape, corpus, cfg, tmp_path / "b", tmp_path / "wb", seed=3, progress=False)
    assert not (tmp_path / "wb" / "b.state.pt").exists()
    assert [x[1] for x in b["loss_log"]] == pytest.approx([x[1] for x in a["loss_log"]], abs=1e-3)
