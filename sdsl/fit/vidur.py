"""Vidur's per-operator profiles (Agrawal et al., "Vidur", MLSys 2024; shipped in ``sdsl/data/vidur``).

:func:`read_vidur_file` / :func:`read_vidur` convert the four GEMMs of each ``mlp.csv`` into the
long format of :mod:`sdsl.fit.profiles` (per-worker shapes from the file's own model columns);
:func:`read_vidur_elementwise` does the same for the norm, RoPE, activation and residual-add kernels.
Times in the files are milliseconds; every returned time is in seconds.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from sdsl.errors import ConfigError, ProfileError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["GEMM_OPS", "VIDUR_COLUMNS", "VIDUR_ELEMENTWISE", "read_vidur_file", "read_vidur", "read_vidur_elementwise"]

#: Vidur's names for the four GEMMs of a decoder layer.
GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
_VIDUR_SHAPE = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp",
                "num_tokens", "num_tensor_parallel_workers")
VIDUR_COLUMNS = ("hardware", "model", "op", "num_tokens", "tp", "in_features", "out_features",
                 "time_s", "time_std_s", "dtype")


def _vidur_shapes(df: "pd.DataFrame") -> dict[str, tuple[Any, Any]]:
    """Per-worker ``(in, out)`` features of Vidur's four GEMMs (columns of ``df``)."""
    tp = df["num_tensor_parallel_workers"]
    head_dim = df["n_embd"] // df["n_head"]
    gated = df["use_gated_mlp"].astype(str).str.lower().isin(("true", "1"))
    return {
        "attn_pre_proj": (df["n_embd"], (df["n_head"] + 2 * df["n_kv_head"]) * head_dim // tp),
        "attn_post_proj": (df["n_head"] * head_dim // tp, df["n_embd"]),
        "mlp_up_proj": (df["n_embd"], df["n_expanded_embd"] * (1 + gated.astype(int)) // tp),
        "mlp_down_proj": (df["n_expanded_embd"] // tp, df["n_embd"]),
    }


def read_vidur_file(path: str | os.PathLike, *, model: str | None = None, hardware: str | None = None,
                    ops: Iterable[str] = GEMM_OPS) -> "pd.DataFrame":
    """One Vidur ``mlp.csv`` (times in ms) in long format, :data:`VIDUR_COLUMNS`, times in seconds.

    ``model`` defaults to ``org/name`` from the path, ``hardware`` to the folder above the org.
    Repeated measurements of one ``(op, num_tokens, tp)`` are kept as separate rows.
    """
    import numpy as np
    import pandas as pd

    path = Path(path)
    ops = tuple(ops)
    bad = [o for o in ops if o not in GEMM_OPS]
    if bad:
        raise ProfileError(f"Vidur reader: only the GEMM operators {GEMM_OPS} have shapes, not {bad[0]!r}.")
    try:
        df = pd.read_csv(path)
    except FileNotFoundError:
        raise ProfileError(f"Vidur file {path} not found.") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: malformed CSV ({str(exc).strip().splitlines()[0]}).") from None
    needed = list(_VIDUR_SHAPE) + [f"time_stats.{o}.{s}" for o in ops for s in ("median", "std")]
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise ProfileError(f"{path}: missing column {missing[0]!r} (not a Vidur mlp.csv?).")
    num = df[[c for c in needed if c != "use_gated_mlp"]].apply(pd.to_numeric, errors="coerce")
    bad_rows = num.isna().any(axis=1) | df["use_gated_mlp"].isna()
    times = num[[f"time_stats.{o}.median" for o in ops]]
    bad_rows |= ~(np.isfinite(times) & (times > 0)).all(axis=1)
    shape_cols = [c for c in _VIDUR_SHAPE if c != "use_gated_mlp"]
    bad_rows |= ~((num[shape_cols] > 0) & (num[shape_cols] % 1 == 0)).all(axis=1)
    if bad_rows.any():
        i = int(np.flatnonzero(bad_rows.to_numpy())[0])
        raise ProfileError(f"{path}, line {i + 2}: missing, non-numeric or non-positive value "
                           "(truncated or malformed row).")
    for c in shape_cols:
        df[c] = num[c].astype(np.int64)
    if model is None:
        model = f"{path.parent.parent.name}/{path.parent.name}"
    if hardware is None:
        hardware = path.parent.parent.parent.name
    shapes = _vidur_shapes(df)
    parts = [pd.DataFrame({
        "hardware": hardware, "model": model, "op": op,
        "num_tokens": df["num_tokens"].to_numpy(), "tp": df["num_tensor_parallel_workers"].to_numpy(),
        "in_features": np.asarray(shapes[op][0], dtype=np.int64),
        "out_features": np.asarray(shapes[op][1], dtype=np.int64),
        "time_s": num[f"time_stats.{op}.median"].to_numpy() * 1e-3,
        "time_std_s": num[f"time_stats.{op}.std"].to_numpy() * 1e-3,
        "dtype": "fp16",
    }) for op in ops]
    return pd.concat(parts, ignore_index=True)[list(VIDUR_COLUMNS)]


def read_vidur(root: str | os.PathLike, *, hardware: str | Iterable[str] | None = None,
               ops: Iterable[str] = GEMM_OPS) -> "pd.DataFrame":
    """Every ``<root>/<hardware>/<org>/<model>/mlp.csv`` in long format (see :func:`read_vidur_file`).

    ``root`` is Vidur's profiling folder (shipped as ``sdsl/data/vidur``) or one GPU's folder in it
    (``sdsl/data/vidur/h100``); ``hardware`` restricts to some sub-folders (``"h100"``, ``"a100"``).
    """
    import pandas as pd

    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"Vidur data folder {root} not found.")
    wanted = None if hardware is None else {hardware} if isinstance(hardware, str) else set(hardware)
    files = sorted(p for p in root.glob("*/*/*/mlp.csv") if wanted is None or p.parents[2].name in wanted)
    if not files and wanted is None:  # ``root`` is one GPU's folder: <root>/<org>/<model>/mlp.csv
        files = sorted(root.glob("*/*/mlp.csv"))
    if not files:
        raise ConfigError(f"No */<org>/<model>/mlp.csv under {root}" + (f" for {sorted(wanted)}." if wanted else "."))
    return pd.concat([read_vidur_file(f, ops=ops) for f in files], ignore_index=True)


#: Vidur's elementwise columns -> (kernel kind of :func:`sdsl.roofline.latency.elementwise_time`).
VIDUR_ELEMENTWISE = {"input_layernorm": "norm", "post_attention_layernorm": "norm", "attn_rope": "rope",
                     "mlp_act": "act", "add": "add"}


def _vidur_elementwise_shapes(df: "pd.DataFrame") -> dict[str, tuple[Any, Any, Any]]:
    """Per-worker ``(row elements, elements moved per token, row-limited)`` of each elementwise kernel
    (one kernel; :func:`read_vidur_elementwise` counts the kernels a timer spans)."""
    tp = df["num_tensor_parallel_workers"]
    head_dim = df["n_embd"] // df["n_head"]
    gated = df["use_gated_mlp"].astype(str).str.lower().isin(("true", "1")).to_numpy()
    qk = (df["n_head"] // tp + -(-df["n_kv_head"] // tp)) * head_dim
    ff = df["n_expanded_embd"] // tp
    d = df["n_embd"]
    norm = (d, 2 * d, True)
    return {"input_layernorm": norm, "post_attention_layernorm": norm, "attn_rope": (qk, 2 * qk, True),
            "mlp_act": (ff, (2 + gated) * ff, gated), "add": (d, 3 * d, False)}


def read_vidur_elementwise(root: str | os.PathLike, *, hardware: str | Iterable[str] | None = None) -> "pd.DataFrame":
    """Vidur's elementwise kernel times (``input_layernorm``, ``post_attention_layernorm``,
    ``attn_rope``, ``mlp_act``, ``add``) from every ``mlp.csv`` under ``root``, one row per kernel:
    ``hardware, model, op, kind, num_tokens, tp, row_elements, moved_elements, row_limited, time_s,
    dtype, kernels``. A model without a column (phi-2 has no post-attention norm) contributes no such rows.

    What Vidur's profiler times (``vidur/profiling/mlp/mlp_impl.py``) sets two columns: a block without a
    post-attention norm (phi-2's parallel attention and MLP) times ``attn + mlp + residual`` under the
    ``add`` timer, two eager PyTorch adds (``kernels`` = 2; else 1); a non-gated MLP's activation is
    ``torch.nn.GELU``, a flat native PyTorch kernel like the add, so its ``kind`` is ``add`` (the gated
    one is Sarathi's fused ``SiluAndMul``, kind ``act``)."""
    import numpy as np
    import pandas as pd

    root = Path(root)
    wanted = None if hardware is None else {hardware} if isinstance(hardware, str) else set(hardware)
    files = sorted(p for p in root.glob("*/*/*/mlp.csv") if wanted is None or p.parents[2].name in wanted)
    if not files:
        raise ConfigError(f"No */<org>/<model>/mlp.csv under {root}.")
    parts = []
    for f in files:
        df = pd.read_csv(f)
        shapes = _vidur_elementwise_shapes(df)
        parallel_block = "time_stats.post_attention_layernorm.median" not in df.columns
        for op, kind in VIDUR_ELEMENTWISE.items():
            col = f"time_stats.{op}.median"
            if col not in df.columns:
                continue
            row, moved, limited = shapes[op]
            t = pd.to_numeric(df[col], errors="coerce").to_numpy() * 1e-3
            kinds = np.where(np.asarray(limited) | (op != "mlp_act"), kind, "add")
            parts.append(pd.DataFrame({
                "hardware": f.parents[2].name, "model": f"{f.parent.parent.name}/{f.parent.name}", "op": op,
                "kind": np.broadcast_to(kinds, len(df)), "kernels": 2.0 if op == "add" and parallel_block else 1.0,
                "num_tokens": df["num_tokens"].to_numpy(), "tp": df["num_tensor_parallel_workers"].to_numpy(),
                "row_elements": np.asarray(row, dtype=float), "moved_elements": np.asarray(moved, dtype=float),
                "row_limited": np.broadcast_to(np.asarray(limited), len(df)), "time_s": t, "dtype": "fp16"}))
    out = pd.concat(parts, ignore_index=True)
    bad = ~(np.isfinite(out["time_s"]) & (out["time_s"] > 0))
    if bad.any():
        raise ProfileError(f"{root}: an elementwise time is missing or non-positive (model {out.loc[bad, 'model'].iloc[0]}).")
    return out
