"""Write sdsl's filtered subset of NVIDIA's operator database (sdsl/data/opdb/*.csv.gz) from the wheel.

    make opdb                                  # fetches aiconfigurator-core 0.12.0 into .cache/aiconfigurator/
    python tools/make_opdb_subset.py [--source .cache/aiconfigurator/aiconfigurator_core-0.12.0-...whl] [--gpu NAME ...]
                                   [--table NAME ...]

Needs pyarrow (``pip install -e '.[calibrate]'``). Reproducible: the same wheel and model catalog write the same
bytes (rows sorted, gzip without a timestamp); every shipped table is what this script writes from
aiconfigurator-core 0.12.0 with the current catalog, so a new catalog model's attention layout or MoE shape enters the
subset by rerunning it and refitting (``make opdb-calibrate``). What is kept (decode-relevant rows; the full tables stay in the
package, read with ``read_opdb(..., source="wheel")``):

- GPUs :data:`GPUS`; of the GPUs calibrated on the tables alone (:data:`ONE_ENGINE`), only the engine each
  fit reads: vLLM's GEMMs and decode attention, SGLang's decode MLA (every engine's MoE and communication rows);
  MoE rows only in the weight formats sdsl prices (:data:`sdsl.fit.opdb.moe.TABLE_FORMATS`); for GEMM,
  attention, MLA and MoE only the newest version of each engine per GPU
  and dtype (and MoE shape) among those with rows left after the filters below;
  every version of the communication tables (they are small and map to dated engine profiles);
- GEMM: m (tokens) in :data:`GEMM_M` (1-512 for decode, 1024-8192 for prefill and large verify steps, and one
  row past each of 64, 128, 192, 256, 512 and 1024, where a kernel's row tile shows as a step), n and k in
  512..32768 (the grid's values that catalog shapes fall between);
- decode attention: batch <= 512, no sliding window, head dim 64 or 128, the per-GPU (heads, KV heads)
  of catalog models under TP 1/2/4/8; decode MLA: batch <= 512; the decode MLA module (vLLM's and TensorRT-LLM's
  whole attention block): H100, H200 and B200, batch <= 512, DeepSeek's heads per GPU at TP 1/2/4/8, bf16 and
  block-fp8 GEMMs over a bf16 KV cache;
- fused MoE: tokens <= 512, the catalog's MoE shapes (hidden, intermediate, top-k, experts),
  MoE TP x EP <= 8 (one node), all three routing distributions;
- all-reduce (engine custom and NCCL), the MoE all-to-all tables: every row.
"""

from __future__ import annotations

import argparse
import gzip
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from sdsl.fit.opdb import OPDB_TABLES, latest_versions, read_opdb_raw, wheel_path  # noqa: E402
from sdsl.errors import ConfigError  # noqa: E402
from sdsl.fit.opdb.mla_module import MLA_MODULE_GPUS, model_heads  # noqa: E402
from sdsl.fit.opdb.moe import TABLE_FORMATS  # noqa: E402

GPUS = ("h100_sxm", "h200_sxm", "b200_sxm", "a100_sxm", "l40s", "b300_sxm", "gb200", "gb300", "rtx_pro_6000_server")
#: GPUs whose GEMM, attention and MLA rows are kept for one engine only (the fitted one), to keep the subset small.
ONE_ENGINE = {"gpus": ("l40s", "b300_sxm", "gb200", "gb300", "rtx_pro_6000_server"),
              "engines": {"gemm": "vllm", "generation_attention": "vllm", "generation_mla": "sglang"}}
GEMM_M = (1, 2, 3, 4, 6, 8, 12, 16, 32, 48, 64, 65, 96, 128, 129, 192, 193, 256, 257, 512, 513, 1024, 1025, 2048, 4096,
          8192)
TPS = (1, 2, 4, 8)
NEWEST = {"gemm": ("dtype",), "generation_attention": ("kv_cache_dtype",), "generation_mla": ("kv_cache_dtype",),
          "mla_module": ("gemm_type",),
          "moe": ("dtype", "hidden_size", "inter_size", "topk", "num_experts")}
OUT = ROOT / "sdsl" / "data" / "opdb"


def _catalog():
    import tomllib

    with open(ROOT / "sdsl" / "data" / "models.toml", "rb") as f:
        return tomllib.load(f)


def _attention_heads(models) -> set[tuple[int, int, int]]:
    out = set()
    for m in models.values():
        if m.get("kv_lora_rank"):
            continue
        hd = m.get("head_dim") or m["d_model"] // m["n_head"]
        for tp in TPS:
            if m["n_head"] % tp == 0:
                out.add((m["n_head"] // tp, max(1, m.get("n_kv_head", m["n_head"]) // tp), hd))
    return out


def _moe_shapes(models) -> set[tuple[int, int, int, int]]:
    return {(m["d_model"], m["expert_d_ff"], m["experts_per_token"], m["n_experts"])
            for m in models.values() if m.get("n_experts")}


def subset(table: str, source, gpus=GPUS) -> pd.DataFrame:
    models = _catalog()
    df = read_opdb_raw(table, source, gpus=gpus)
    df = df.drop(columns=[c for c in ("power", "power_limit") if c in df.columns])
    if table in ONE_ENGINE["engines"]:
        df = df[~df["gpu"].isin(ONE_ENGINE["gpus"]) | (df["engine"] == ONE_ENGINE["engines"][table])]
    if table == "gemm":
        df = df[df["m"].isin(GEMM_M) & df["n"].between(512, 32768) & df["k"].between(512, 32768)]
    elif table == "generation_attention":
        heads = _attention_heads(models)
        key = list(zip(df["num_heads"], df["num_key_value_heads"], df["head_dim"]))
        df = df[(df["batch_size"] <= 512) & (df["window_size"] == 0) & np.array([k in heads for k in key])]
    elif table == "generation_mla":
        df = df[df["batch_size"] <= 512]
    elif table == "mla_module":  # the GPUs the step's MLA block is checked on, DeepSeek's heads per GPU at TP 1-8
        df = df[df["gpu"].isin(list(MLA_MODULE_GPUS)) & (df["batch_size"] <= 512)
                & df["num_heads"].isin([model_heads() // t for t in TPS])
                & df["gemm_type"].isin(["bfloat16", "fp8_block"]) & (df["kv_cache_dtype"] == "bfloat16")]
    elif table == "moe":
        shapes = _moe_shapes(models)
        key = list(zip(df["hidden_size"], df["inter_size"], df["topk"], df["num_experts"]))
        df = df[(df["num_tokens"] <= 512) & (df["moe_tp_size"] * df["moe_ep_size"] <= 8)
                & np.array([k in shapes for k in key]) & df["dtype"].isin(list(TABLE_FORMATS))]
    if table in NEWEST:  # the newest version per GPU, engine and dtype that has rows left (and per MoE shape)
        keys = NEWEST[table]
        df = pd.concat([latest_versions(g) for _, g in df.groupby(list(keys), sort=True)], ignore_index=True)
    return _sorted(df)


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    cols = list(df.columns)
    return df.sort_values(cols[:-1], kind="mergesort").reset_index(drop=True)


def write(df: pd.DataFrame, path: Path) -> None:
    text = df.to_csv(index=False, float_format="%.6g", lineterminator="\n").encode()
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=9) as gz:
        gz.write(text)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(buf.getvalue())
    tmp.replace(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=None, help="the wheel, or a systems/data folder (default: the wheel in .cache/aiconfigurator/)")
    ap.add_argument("--gpu", action="append", choices=GPUS, default=None,
                    help="rewrite only this GPU's rows (repeatable), keeping every other GPU's rows as shipped")
    ap.add_argument("--table", action="append", choices=OPDB_TABLES, default=None,
                    help="rewrite only this table (repeatable), keeping the others as shipped")
    args = ap.parse_args(argv)
    source = args.source or wheel_path()
    if source is None:
        ap.error("no wheel in .cache/aiconfigurator/ (run `make opdb`) and no --source")
    OUT.mkdir(parents=True, exist_ok=True)
    for table in args.table or OPDB_TABLES:
        path = OUT / f"{table}.csv.gz"
        if args.gpu:
            kept = pd.read_csv(path)
            try:
                new = subset(table, source, tuple(args.gpu))
            except ConfigError:  # the named GPUs have no such table (e.g. no all-to-all on a PCIe node)
                new = kept.iloc[:0]
            df = _sorted(pd.concat([kept[~kept["gpu"].isin(args.gpu)], new], ignore_index=True))
        else:
            df = subset(table, source)
        write(df, path)
        print(f"{table}: {len(df)} rows, {path.stat().st_size / 1e6:.2f} MB -> {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
