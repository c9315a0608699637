"""How each row of sdsl/data/published/{decode,speculative}.csv maps to something sdsl can price.

Every mapping is stated here once, with the assumption it makes; a row that cannot be mapped gets
the reason (:class:`Unpriceable`). Nothing is tuned per row: the hardware's shipped calibration and the
proposer's shape (sdsl.speculation.proposers) price it; the measured accepted length is the oracle τ.

Assumptions (the same for every row they touch):
- context: gpt-fast rows run a 5-token prompt and ~200 new tokens, so the mean KV context is 105;
  MT-bench and single-prompt rows use 512 (a chat prompt plus half a reply; not measured).
- "H100" is the SXM part; rows with an unstated GPU are priced as H100-SXM (the vLLM authors' other runs are on
  H100) and flagged ``assumed_gpu``; "RTX 3090" is the catalog's ``rtx-3090``.
- engine: each row is priced with the execution profile of its engine and date (:func:`row_engine`): the newest
  profile of the row's ``engine`` column dated no later than the row (an undated row: the newest), SGLang rows
  of speculative v2 with the ``sglang-spec-v2`` profile, and rows the source ran without CUDA graphs with the
  profile's graphs switched off (the one difference their ``engine_version`` states).
- tokens/s "incl. prefill" is compared with decode tokens/s (prefill of a short prompt is ~1% of a
  few hundred decode steps).
- rows whose context is stated as ``ISL n, OSL m`` (input and output tokens per request) run at the mean KV context
  n + m/2 of their decode steps.
- weights: a row whose ``dtype`` starts with "fp8" (the ``fp8`` set: W8A8 dense checkpoints) is priced with fp8 linear
  layers (``Deployment.weight_dtype`` "fp8": fp8 bytes at the fp8 tensor-core peak with the GEMM format terms measured
  on NVIDIA's operator tables), its activations, KV cache and LM head in bf16; every other row in bf16.
- KV cache: fp8 where the row states the run's (``dtype`` "... fp8 KV cache", or ``kv_cache=fp8`` in an MoE row's
  notes, quoting the recipe that set it: :func:`row_kv_dtype`), else bf16.
- trees whose top-k / size is not stated use SGLang's recipe quoted in the same set (top-k 8, 64 tokens);
  Spec-Bench's "method default" trees are the methods' shipped ones (see ``_DEFAULT_TREES``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sdsl.catalog.models import ModelSpec, get_model
from sdsl.speculation.step import TreeShape

__all__ = ["summarize", "speed_error", "Unpriceable", "RowSpec", "load_rows", "interpret_decode", "interpret_speculative", "row_engine", "source_key",
           "VICUNA_33B", "FP8_SET", "ISL_OSL", "row_context", "row_kv_dtype"]

# LLaMA-1 33B shapes (Touvron et al. 2023, Table 2: 6656 wide, 52 heads, 60 layers); d_ff and vocab from
# lmsys/vicuna-33b-v1.3 config.json. Not a catalog model: used only to price Spec-Bench's Vicuna-33B rows.
VICUNA_33B = ModelSpec(name="vicuna-33b-v1.3", family="llama", n_layer=60, d_model=6656, n_head=52, n_kv_head=52,
                       d_ff=17920, vocab_size=32000, max_context=2048,
                       source="LLaMA-1 33B (Touvron et al. 2023 Table 2); lmsys/vicuna-33b-v1.3 config.json",
                       hf_id="lmsys/vicuna-33b-v1.3")

# published name -> (catalog model, note). Vicuna-v1.3 is a LLaMA-1 fine-tune: 7B/13B share Llama-2's shapes.
MODELS = {
    "llama-2-7b": "llama-2-7b", "llama-2-7b-chat": "llama-2-7b", "llama-2-70b": "llama-2-70b",
    "llama-3.1-8b": "llama-3.1-8b", "llama-3.1-8b-instruct": "llama-3.1-8b", "llama-3.1-70b": "llama-3.1-70b",
    "llama-3-8b-instruct": "llama-3-8b", "vicuna-7b-v1.3": "llama-2-7b", "vicuna-13b-v1.3": "llama-2-13b",
    "llama-2-13b-chat": "llama-2-13b", "llama-3.3-70b-instruct": "llama-3.1-70b",  # 3.3-70B: 3.1-70B's config shapes
    "mistral-7b": "mistral-7b",
}
GPT_FAST_CONTEXT = 105
CHAT_CONTEXT = 512


class Unpriceable(Exception):
    """A row sdsl cannot price; the message says why."""


@dataclass
class RowSpec:
    """One priceable row: what to price and what it measured."""

    file: str
    index: int
    source: str
    engine: str
    target: object
    hardware: str
    tp: int
    batch: int
    context: int
    metric: str
    measured: float
    proposer: str | None = None
    gamma: int | None = None
    tree: TreeShape | None = None
    accepted_length: float | None = None
    assumptions: list = field(default_factory=list)
    engine_column: str = ""  # the CSV's engine (vllm, sglang, trtllm, gpt-fast, hf-eager, eager-pytorch)
    engine_version: str = ""
    date: str = ""
    concurrency: int = 1
    row_set: str = "dev"
    weight_dtype: str | None = None  # the linear layers' weight format (Deployment.weight_dtype); None: bf16
    kv_dtype: str | None = None  # the KV cache's element type where the run set one (row_kv_dtype); None: bf16


DEV_SET = ("dev",)
ENGINE_SETS = ("dev", "engine")  # what `sdsl validate published` prices and the engine fits read (not `moe`)
FP8_SET = ("fp8",)  # dense FP8 plain decode and its bf16 pairs: priced apart, read by no fit (fp8_decode)
ISL_OSL = re.compile(r"^ISL ([\d,]+), OSL ([\d,]+)")
#: "128K context + 1024 output": a prompt of n·1024 tokens (K as context lengths count it) and m generated.
CONTEXT_OUTPUT = re.compile(r"^([\d,]+)K context \+ ([\d,]+) output")


def load_rows(name: str, row_sets: tuple | None = DEV_SET) -> list[dict]:
    """The rows of sdsl/data/published/<name>.csv as dicts whose ``row_set`` is in ``row_sets`` (None: every row).
    ``dev`` is the development set ``sdsl validate published`` prices; ``engine`` rows (accepted length with TPOT or
    tokens/s per engine build, sdsl/data/published/README.md) wait for the engine execution profiles."""
    from sdsl._evidence import published_rows

    return published_rows(name, row_sets)


def _engine(source: str) -> str:
    s = source.lower()
    for key, name in (("sglang", "sglang"), ("vllm", "vllm"), ("spec-bench", "spec-bench"), ("gpt-fast", "gpt-fast"),
                      ("pytorch.github.io", "gpt-fast"), ("safeailab/eagle@", "gpt-fast")):
        if key in s:
            return name
    return "sglang" if "safeailab/eagle#173" in s else "other"


def _target(name: str):
    key = name.strip().lower()
    if key == "vicuna-33b-v1.3":
        return VICUNA_33B
    if key not in MODELS:
        raise Unpriceable(f"model {name!r} is not in sdsl's catalog")
    return get_model(MODELS[key])


def _hardware(gpu: str, assumptions: list) -> str:
    g = gpu.lower()
    if g.startswith("a100-80gb"):
        return "a100-80gb"
    if g.startswith("h100"):
        return "h100-sxm"
    if g.startswith("h200"):
        return "h200"
    if g.startswith("rtx 3090"):
        return "rtx-3090"
    if g.startswith("unstated"):
        assumptions.append("assumed_gpu: GPU unstated, priced as H100-SXM")
        return "h100-sxm"
    raise Unpriceable(f"GPU {gpu!r} is not in sdsl's hardware catalog")


def row_context(row: dict, default: int) -> int:
    """A row's mean KV context: ISL + OSL/2 where ``context_tokens`` states ``ISL n, OSL m`` (or ``nK context + m
    output``, n·1024 prompt tokens), else ``default``."""
    text = row.get("context_tokens", "")
    if m := ISL_OSL.match(text):
        isl, osl = (int(v.replace(",", "")) for v in m.groups())
        return isl + osl // 2
    if m := CONTEXT_OUTPUT.match(text):
        kilo, osl = (int(v.replace(",", "")) for v in m.groups())
        return 1024 * kilo + osl // 2
    return default


_KV_NOTE = re.compile(r"(?:^|; )kv_cache=(\w+)")


def row_kv_dtype(row: dict) -> str | None:
    """The KV cache's element type a published row's run set: "fp8" where its ``dtype`` says "fp8 KV cache", else the
    first word of a ``kv_cache=`` field in its notes; None (the compute dtype) where it states none."""
    if "fp8 kv cache" in row.get("dtype", "").lower():
        return "fp8"
    m = _KV_NOTE.search(row.get("notes", "").split("quote=«")[0])
    return m.group(1) if m else None


def _common(row: dict, file: str, index: int, model_key: str) -> RowSpec:
    assumptions: list = []
    if not row["tp"].isdigit():
        raise Unpriceable(f"tp {row['tp']!r} is not tensor parallelism")
    context = row_context(row, GPT_FAST_CONTEXT if row.get("context_tokens", "").startswith("5 prompt") else CHAT_CONTEXT)
    weights = "fp8" if row.get("dtype", "").strip().lower().startswith("fp8") else None
    return RowSpec(file=file, index=index, source=row["source"], engine=_engine(row["source"]),
                   target=_target(row[model_key]), hardware=_hardware(row["gpu"], assumptions), tp=int(row["tp"]),
                   batch=int(row["batch"]), context=context, metric=row["metric"], measured=float(row["value"]),
                   assumptions=assumptions, engine_column=(row.get("engine") or "").strip(),
                   engine_version=row.get("engine_version") or "", date=(row.get("date") or "").strip(),
                   concurrency=int(row.get("concurrency") or row["batch"] or 1), row_set=row.get("row_set") or "dev",
                   weight_dtype=weights, kv_dtype=row_kv_dtype(row))


def source_key(source: str) -> str:
    """The publication a row comes from (a PR, a README, a docs page), without the comment detail."""
    return source.split(" (")[0].strip()


def row_engine(spec: RowSpec):
    """The engine profile that prices ``spec`` (module docstring): its engine's newest profile dated no later than
    the row (undated: the newest), ``sglang-spec-v2`` for SGLang's speculative v2, graphs off where the source ran
    without CUDA graphs."""
    from sdsl.engine.profiles import engine_profiles

    version = spec.engine_version.lower()
    family = spec.engine_column or "ideal"
    if family == "sglang" and ("speculative v2" in version or "spec_v2" in version):
        family = "sglang-spec-v2"
    candidates = [p for p in engine_profiles().values() if p.engine == family]
    if not candidates:
        raise Unpriceable(f"engine {spec.engine_column!r} has no execution profile")
    dated = [p for p in candidates if not spec.date or p.date <= spec.date]
    profile = max(dated or candidates, key=lambda p: p.date)
    if "cuda graphs off" in version:
        profile = profile.replace(name=f"{profile.name}+no-cuda-graphs", graphs_target=False, graphs_draft=False,
                                  graphs_extend=False, capture_sizes=())
    return profile


def interpret_decode(row: dict, index: int) -> RowSpec:
    """A plain-decode row; the eager-PyTorch blog row is priced but marked not engine-grade."""
    spec = _common(row, "decode", index, "model")
    if "naive eager" in row["notes"].lower():
        spec.engine = "eager-pytorch"
    elif "short prompt" in row.get("context_tokens", ""):
        spec.context = GPT_FAST_CONTEXT  # the blog is gpt-fast's origin: same 200-token generation
    return spec


# Static trees: Medusa's mc_sim_7b_63 (FasterDecoding/Medusa medusa/model/medusa_choices.py: 63 nodes, depth 4,
# top-10 per head) and EAGLE-1's own mc_sim_7b_63 (SafeAILab/EAGLE model/choices.py: 25 nodes, depth 5, ranks
# 0-3); dynamic trees: the EAGLE repository's defaults (total_token 60, top_k 10, depth 5 for EAGLE-2, 7 for
# EAGLE-3). Tokens include the root. Steps count tree levels, one per drafting pass plus the draft-extend pass's
# (EagleHead.draft_time): EAGLE's dynamic topK_genrate takes level 1 from the extend pass and then runs
# ``for i in range(depth)`` passes, so depth 5 (7) drafts 6 (8) levels; the static mc_sim_7b_63 tree has 5 levels.
_DEFAULT_TREES = {"medusa": TreeShape(4, 10, 64), "eagle:": TreeShape(5, 4, 26), "eagle2": TreeShape(6, 10, 61),
                  "eagle3": TreeShape(8, 10, 61)}


def _proposer(draft: str) -> str:
    d = draft.lower()
    for prefix, name in (("sps", "draft:llama-68m"), ("medusa", "medusa"), ("eagle3", "eagle3"), ("eagle-3", "eagle3"),
                         ("eagle", "eagle"), ("pld", "ngram")):
        if d.startswith(prefix):
            return name
    raise Unpriceable(f"proposer {draft.split(':')[0]!r} has no sdsl proposer (sdsl prices draft, EAGLE, "
                      "EAGLE-3, Medusa, MTP and n-gram)")


def _shape(row: dict, proposer: str, spec: RowSpec) -> None:
    g, d = row["gamma"].strip(), row["draft"].lower()
    if g.isdigit():
        spec.gamma = int(g)
    elif g.startswith("adaptive"):
        spec.gamma = 5
        spec.assumptions.append("HF assisted generation's adaptive length taken as its starting 5")
    elif m := re.match(r"num_steps=(\d+), topk=(\d+), num_draft_tokens=(\d+)", g):
        spec.tree = TreeShape(*(int(v) for v in m.groups()))
    elif m := re.match(r"num_steps=(\d+) \(topk/num_draft_tokens not stated\)", g):
        spec.tree = TreeShape(int(m.group(1)), 8, 64)
        spec.assumptions.append("top-k 8 and 64 draft tokens assumed (not stated)")
    elif g.startswith("method default") and proposer == "ngram":
        spec.gamma = 10
        spec.assumptions.append("Spec-Bench PLD proposes num_pred_tokens = 10")
    elif g.startswith("method default"):
        key = next(k for k in _DEFAULT_TREES if d.startswith(k) or (k == "medusa" and proposer == "medusa"))
        spec.tree = _DEFAULT_TREES[key]
        spec.assumptions.append(f"method's default tree taken as {key.rstrip(':')} "
                                f"{spec.tree.steps},{spec.tree.topk},{spec.tree.tokens}")
    else:
        raise Unpriceable(f"speculation length {g!r} is not stated")


def interpret_speculative(row: dict, index: int) -> RowSpec:
    """A speculative row: proposer, chain length or tree, and the measured accepted length (oracle τ)."""
    spec = _common(row, "speculative", index, "target")
    spec.proposer = _proposer(row["draft"])
    if not row["mean_accepted_len"].strip():
        raise Unpriceable("no accepted length is stated, so tau is unknown")
    spec.accepted_length = float(row["mean_accepted_len"])
    _shape(row, spec.proposer, spec)
    return spec


SUMMARY_KEYS = {"median_abs_error": "median_abs", "mean_abs_error": "pooled_abs", "worst_error": "worst",
                "median_signed_error": "median_signed"}


def summarize(errors, extra: dict | None = None) -> dict:
    """Median |error| beside the pooled mean |error|, the worst case and the signed median bias (and the
    figures of :func:`sdsl._evidence.summarize_errors` named in ``extra``)."""
    from sdsl._evidence import summarize_errors

    return summarize_errors(errors, {**SUMMARY_KEYS, **(extra or {})})


def speed_error(predicted: float, measured: float, metric: str) -> float:
    """Signed error of speed (positive: sdsl predicts faster): predicted / measured − 1, or measured / predicted − 1 of a TPOT."""
    return measured / predicted - 1.0 if metric == "TPOT" else predicted / measured - 1.0
