"""Torch reference implementation (imports torch; never imported by ``import sdsl``).

- :mod:`.model` — Llama-style decoder (RMSNorm, RoPE, GQA, SwiGLU) shaped by a ``ModelSpec``, static KV cache
  with per-sequence lengths and rollback.
- :mod:`.checkpoint` / :mod:`.gguf_loader` — sdsl's safetensors checkpoints, HF Llama safetensors, GGUF (SmolLM2).
- :mod:`.decoder` — plain and speculative decoding (greedy and lossless sampling; draft model or prompt lookup).
- :mod:`.train` — the byte-level model family trained on the CPython stdlib (``sdsl train-family``).
- :mod:`.validation` / :mod:`.smollm2` — measured vs predicted speedups (``sdsl validate decoder``).
"""
