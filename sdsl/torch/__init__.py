"""Torch reference implementation (imports torch; never imported by ``import sdsl``).

- :mod:`.model` — Llama-style decoder (RMSNorm/LayerNorm, RoPE, GQA, SwiGLU/GELU) shaped by a ``ModelSpec``,
  one preallocated ``KVCache`` (``update``, ``move``, per-sequence lengths and rollback).
- :mod:`.decoder` — plain and speculative decoding: ``speculative_step`` (draft, verify, accept), greedy and
  lossless sampling, chains and token trees, forced (synthetic) acceptance.
- :mod:`.proposers` / :mod:`.head` — draft model, prompt lookup, EAGLE-style draft head; :mod:`.tree` — token
  trees (mask, path commit, tree verification).
- :mod:`.checkpoint` / :mod:`.gguf_loader` — sdsl's safetensors checkpoints, HF Llama safetensors, GGUF (SmolLM2).
- :mod:`.train` / :mod:`.head_train` — the byte-level family (``sdsl train-family``) and its draft head
  (``sdsl train-head``), trained on the CPython stdlib.
- :mod:`.synthetic` — random-weight models at catalog shapes and decoder-overhead stand-ins.
- :mod:`.smollm2` — SmolLM2-135M rows of ``sdsl validate decoder``; :mod:`.harness` — ``sdsl profile``.
"""
