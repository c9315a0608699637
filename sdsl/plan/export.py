"""A pick (proposer, k or tree) and a batch-size → k table in each serving engine's own configuration form.
The table is :meth:`sdsl.plan.ranking.ProposerRanking.k_table` (docs/model.md §3.4–§3.5; JSON: docs/json.md).

Field names follow each engine's documentation (the tests cite the pages):
- vLLM: ``speculative_config`` {"method", "model", "num_speculative_tokens"}; methods "draft_model",
  "eagle", "eagle3", "medusa", "mtp", "ngram" (https://docs.vllm.ai/en/v0.12.0/api/vllm/config/speculative/).
  vLLM verifies chains and has no per-batch k; the table is rendered as one config per batch range.
- SGLang: ``--speculative-algorithm`` EAGLE | EAGLE3 | STANDALONE | NGRAM (MTP checkpoints run as EAGLE),
  ``--speculative-num-steps``, ``--speculative-eagle-topk``, ``--speculative-num-draft-tokens``
  (https://docs.sglang.io/advanced_features/speculative_decoding.html); no Medusa.
- TensorRT-LLM: ``speculative_config`` {"decoding_type", "max_draft_len", "draft_len_schedule"}; the schedule
  maps the largest batch of each range to its draft length, batches beyond the last key run without
  speculation (NVIDIA/TensorRT-LLM PR #10860; https://nvidia.github.io/TensorRT-LLM/1.3.0rc29/llm-api/reference/AutoDecodingConfig.html).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np

from sdsl._checks import draft_length
from sdsl.speculation.step import TreeShape
from sdsl.errors import InvalidInputError, SDSLError, UnknownNameError

__all__ = ["ENGINES", "export_config"]

ENGINES = ("vllm", "sglang", "trtllm")
_VLLM_METHOD = {"draft": "draft_model", "eagle": "eagle", "eagle3": "eagle3", "medusa": "medusa", "mtp": "mtp",
                "ngram": "ngram"}
_SGLANG_ALGORITHM = {"draft": "STANDALONE", "eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "EAGLE", "ngram": "NGRAM"}
_TRTLLM_TYPE = {"draft": "DraftTarget", "eagle": "Eagle", "eagle3": "Eagle3", "medusa": "Medusa", "mtp": "MTP",
                "ngram": "NGram"}


def _k(value, name: str) -> int:
    """One chain length k of a pick or a table row: a non-negative whole number (a float k would be truncated or
    printed as is)."""
    if value is None or np.ndim(value) != 0:
        raise InvalidInputError(f"{name} must be one non-negative whole number of draft tokens; got {value!r}.")
    return int(draft_length(value, name))


def _checked(pick, table) -> tuple[dict, list[dict]]:
    """The pick and table with every k and tree entry checked (one sentence for what is missing or wrong)."""
    if not isinstance(pick, Mapping) or "proposer" not in pick:
        raise InvalidInputError("A pick must be a mapping with 'proposer' (e.g. 'eagle3' or 'draft:<model>') and "
                                "'gamma' (k) or 'tree' ([steps, topk, tokens]).")
    pick = dict(pick)
    if pick.get("tree"):
        tree = pick["tree"]
        if isinstance(tree, str) or np.ndim(tree) != 1 or len(tree) != 3:
            raise InvalidInputError(f"A pick's tree must be [steps, topk, tokens]; got {tree!r}.")
        shape = TreeShape(*(_k(v, f"tree {part}") for v, part in zip(tree, ("steps", "topk", "tokens"))))
        pick["tree"] = [shape.steps, shape.topk, shape.tokens]
    else:
        pick["gamma"] = _k(pick.get("gamma"), "gamma")
    rows = []
    for row in table or []:
        if not isinstance(row, Mapping) or not {"batch_min", "batch_max", "k"} <= set(row):
            raise InvalidInputError(f"A k-table row must have batch_min, batch_max and k; got {row!r}.")
        rows.append({**row, "k": _k(row["k"], "A k-table row's k")})
    return pick, rows


_HEAD_KINDS = ("eagle", "eagle3", "medusa")  # heads trained per target: the engines load their checkpoint


def _kind(pick: dict) -> str:
    return str(pick["proposer"]).split(":")[0]


def _draft_id(pick: dict) -> str:
    """The draft model's Hugging Face id (what engines load), else the name as given."""
    from sdsl.catalog.models import get_model

    name = pick["proposer"].split(":", 1)[1]
    try:
        return get_model(name).hf_id or name
    except SDSLError:  # a path or a name outside the catalog: pass it through
        return name


def _vllm(pick: dict, table: list[dict]) -> str:
    kind = _kind(pick)
    if pick.get("tree") and pick["tree"][1] > 1:
        raise InvalidInputError("vLLM verifies chains only; export a chain pick (no tree, or a top-1 tree) for vLLM.")
    k = pick["gamma"] if pick.get("tree") is None else pick["tree"][0]

    def config(n):
        cfg = {"method": _VLLM_METHOD[kind], "num_speculative_tokens": int(n)}
        if kind == "draft":
            cfg["model"] = _draft_id(pick)
            if pick.get("draft_tp"):  # vLLM runs the draft at the target's TP unless told
                cfg["draft_tensor_parallel_size"] = int(pick["draft_tp"])
        return cfg

    lines = [json.dumps({"speculative_config": config(k) if k > 0 else None})]  # k = 0: plain decoding is faster
    if kind in _HEAD_KINDS:
        lines.append(f'# add "model": the {kind} head checkpoint trained for your target (sdsl priced its shape, '
                     "not a file)")
    for row in table:
        cfg = config(row["k"]) if row["k"] > 0 else None
        lines.append(f"# batch {row['batch_min']}-{row['batch_max']}: " + json.dumps({"speculative_config": cfg}))
    return "\n".join(lines)


def _sglang_flags(kind: str, steps: int, topk: int, tokens: int, pick: dict) -> str:
    flags = [f"--speculative-algorithm {_SGLANG_ALGORITHM[kind]}"]
    if kind == "draft":
        flags.append(f"--speculative-draft-model-path {_draft_id(pick)}")
    flags += [f"--speculative-num-steps {steps}", f"--speculative-eagle-topk {topk}",
              f"--speculative-num-draft-tokens {tokens}"]
    return " ".join(flags)


def _sglang(pick: dict, table: list[dict]) -> str:
    kind = _kind(pick)
    if kind not in _SGLANG_ALGORITHM:
        raise InvalidInputError(f"SGLang has no {kind} speculation; pick another proposer or engine.")
    steps, topk, tokens = pick["tree"] if pick.get("tree") else (pick["gamma"], 1, pick["gamma"] + 1)
    lines = [_sglang_flags(kind, steps, topk, tokens, pick) if steps > 0 else "(no speculation)"]
    if kind in _HEAD_KINDS:
        lines.append(f"# add --speculative-draft-model-path: the {kind} head checkpoint trained for your target "
                     "(sdsl priced its shape, not a file)")
    for row in table:
        flags = _sglang_flags(kind, row["k"], 1, row["k"] + 1, pick) if row["k"] > 0 else "(no speculation)"
        lines.append(f"# batch {row['batch_min']}-{row['batch_max']}: {flags}")
    return "\n".join(lines)


def _trtllm(pick: dict, table: list[dict]) -> str:
    kind = _kind(pick)
    k = pick["gamma"] if pick.get("tree") is None else pick["tree"][0]
    # every range up to the last that speculates, k = 0 included (a dropped range would take the k of the range
    # above it); batches beyond the last key run without speculation
    last = max((i for i, row in enumerate(table) if row["k"] > 0), default=-1)
    schedule = {str(row["batch_max"]): int(row["k"]) for row in table[: last + 1]}
    if max([k, *schedule.values()]) == 0:
        return json.dumps({"speculative_config": None})  # plain decoding is faster at every batch ranked
    cfg = {"decoding_type": _TRTLLM_TYPE[kind], "max_draft_len": int(max([k, *schedule.values()]))}
    if kind == "mtp":
        cfg["num_nextn_predict_layers"] = int(k or cfg["max_draft_len"])
    if kind == "draft":
        cfg["speculative_model"] = _draft_id(pick)
    if schedule:
        cfg["draft_len_schedule"] = schedule
    return json.dumps({"speculative_config": cfg}, indent=2)


def export_config(engine: str, pick: dict, table: list[dict] | None = None) -> str:
    """The engine's configuration text for ``pick`` ({"proposer": "eagle3" | "draft:<model>" ..., "gamma": k,
    "tree": [steps, topk, tokens] or None}) and the batch-size → k ``table`` ([{batch_min, batch_max, k}])."""
    key = str(engine).lower().replace("-", "")
    if key not in ENGINES:
        raise UnknownNameError(f"Unknown engine {engine!r}; expected one of {', '.join(ENGINES)}.")
    pick, table = _checked(pick, table)
    if _kind(pick) not in _VLLM_METHOD:
        raise UnknownNameError(f"Unknown proposer {pick['proposer']!r}.")
    return {"vllm": _vllm, "sglang": _sglang, "trtllm": _trtllm}[key](pick, table)
