"""NVIDIA's measured operator database (``aiconfigurator-core`` 0.12.0, Apache-2.0): a reader.

The package ships the operator timings its collectors measured on real GPUs, per engine and engine
version, as parquet tables under ``aiconfigurator_core/systems/data/<gpu>/<op>/<engine>/<version>/``
(latency in milliseconds; the MoE all-to-all's in microseconds). This module reads them into one long format per table, every row carrying its
provenance (:data:`PROVENANCE`: GPU, engine, engine version, kernel source, op, dtype) and its time in
seconds, from one of three sources (:func:`read_opdb`'s ``source``):

- ``"subset"`` (the default): the filtered copy shipped in ``sdsl/data/opdb/*.csv.gz`` (decode-relevant
  rows; written by ``tools/make_opdb_subset.py`` from the wheel; readable by pandas alone);
- ``"package"``: an installed ``aiconfigurator_core`` (``pip install sdsl[calibrate]`` brings pyarrow);
- ``"wheel"``: the wheel fetched into ``.cache/aiconfigurator/`` by ``make opdb`` (read as a zip, never
  imported); or a path to a wheel or to a ``systems/data`` folder.

Nothing here downloads anything: the wheel is fetched by ``make``, never at run time. The fits on these
tables live beside the reader: :mod:`.kernels` (GEMM per weight format, decode attention and MLA, all-reduce),
:mod:`.moe` (the fused MoE layer's closed form), :mod:`.engines` (the engines' measured custom all-reduce) and
:mod:`.defaults` (the shipped per-GPU latency parameters).
"""

from __future__ import annotations

import os
import re
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from sdsl._paths import REPO_ROOT, data_path
from sdsl.errors import ConfigError, ProfileError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["OPDB_TABLES", "PROVENANCE", "SHAPE_COLUMNS", "OPDB_VERSION", "OpdbTable", "read_opdb",
           "read_opdb_raw", "opdb_files", "version_key", "latest_versions", "subset_path", "wheel_path"]

#: The package release the shipped subset was cut from.
OPDB_VERSION = "0.12.0"
#: Provenance columns every row of every table carries.
PROVENANCE = ("gpu", "engine", "engine_version", "kernel_source", "op", "dtype")


@dataclass(frozen=True)
class OpdbTable:
    """One table of the database: its folder (``<gpu>/<folder>/<engine>/<version>/<file>.parquet``), the
    column that names its dtype, and the shape columns kept (after renaming, see :data:`SHAPE_COLUMNS`)."""

    folder: str
    file: str
    dtype_column: str
    shape: tuple[str, ...]
    latency_unit_s: float = 1e-3  # the tables' latency is in ms, except the all-to-all's (us)


#: The tables sdsl reads (``read_opdb(name)``); shape columns as they appear in the long format.
OPDB_TABLES: dict[str, OpdbTable] = {
    "gemm": OpdbTable("gemm", "gemm_perf", "gemm_dtype", ("m", "n", "k")),
    "generation_attention": OpdbTable(
        "attention", "generation_attention_perf", "attn_dtype",
        ("batch_size", "context", "num_heads", "num_key_value_heads", "head_dim", "kv_cache_dtype", "window_size")),
    "generation_mla": OpdbTable("mla", "generation_mla_perf", "mla_dtype",
                                ("batch_size", "context", "num_heads", "tp_size", "kv_cache_dtype")),
    # the whole MLA attention module of a decode step (projections, norms, RoPE, attention), DeepSeek-V3's shape
    "mla_module": OpdbTable("mla", "mla_generation_module_perf", "mla_dtype",
                            ("batch_size", "context", "num_heads", "kv_cache_dtype", "gemm_type")),
    "moe": OpdbTable("moe", "moe_perf", "moe_dtype",
                     ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
                      "moe_ep_size", "distribution")),
    "custom_allreduce": OpdbTable("comm", "custom_allreduce_perf", "allreduce_dtype",
                                  ("num_gpus", "message_size", "backend")),
    "nccl": OpdbTable("comm", "nccl_perf", "nccl_dtype", ("num_gpus", "message_size")),
    # the all-to-all's latency is in microseconds (it equals its transmit_us + notify_us columns)
    "moe_a2a": OpdbTable("comm", "moe_a2a_perf", "comm_dtype", ("ep_size", "hidden_size", "topk", "num_experts",
                                                              "num_tokens", "phase"), latency_unit_s=1e-6),
}
#: Shape columns per table (the long format is PROVENANCE + these + ``time_s``).
SHAPE_COLUMNS = {name: t.shape for name, t in OPDB_TABLES.items()}

_DROP = ("framework", "version", "device", "op_name", "latency", "isl", "step", "beam_width")
_VERSION_PART = re.compile(r"(\d+)|([A-Za-z]+)")


def version_key(version: str) -> tuple:
    """Sort key of an engine version string (``0.5.6.post2`` < ``0.5.10`` < ``0.5.14``;
    ``1.3.0rc10`` < ``1.3.0rc20``): numeric parts compare as numbers; a pre-release tag (rc, dev) sorts
    below the release, a post tag above."""
    key = []
    for num, word in _VERSION_PART.findall(str(version)):
        if num:
            key.append((1, int(num), ""))
        else:
            key.append((0 if word.lower() in ("rc", "dev", "a", "b") else 2, 0, word.lower()))
    return tuple(key) + ((0.5, 0, ""),)  # the end sorts above a pre-release tag, below a post tag


def latest_versions(df: "pd.DataFrame") -> "pd.DataFrame":
    """Only the rows of the newest engine version per ``(gpu, engine)`` (:func:`version_key`)."""
    if df.empty:
        return df
    pairs = df[["gpu", "engine", "engine_version"]].drop_duplicates()
    pairs = pairs.assign(_k=pairs["engine_version"].map(version_key))
    newest = pairs.sort_values("_k").groupby(["gpu", "engine"], sort=False).tail(1)
    keep = set(map(tuple, newest[["gpu", "engine", "engine_version"]].to_numpy()))
    mask = [t in keep for t in map(tuple, df[["gpu", "engine", "engine_version"]].to_numpy())]
    return df[mask].reset_index(drop=True)


def subset_path(table: str) -> Path:
    """The shipped subset file of ``table`` (``sdsl/data/opdb/<table>.csv.gz``)."""
    return data_path("opdb", f"{table}.csv.gz")


def wheel_path() -> Path | None:
    """The wheel ``make opdb`` fetches into ``.cache/aiconfigurator/`` (None when it is not there)."""
    found = sorted((REPO_ROOT / ".cache" / "aiconfigurator").glob("aiconfigurator_core-*.whl"))
    return found[-1] if found else None


def _package_root() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("aiconfigurator_core")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("aiconfigurator-core is not installed (pip install 'sdsl[calibrate]' "
                          "aiconfigurator-core==0.12.0), so source='package' has nothing to read.")
    return Path(list(spec.submodule_search_locations)[0]) / "systems" / "data"


class _Tree:
    """The ``systems/data`` folder of the database, on disk or inside a wheel (a zip)."""

    def __init__(self, root: Path):
        self.root = root
        self.zip = zipfile.ZipFile(root) if root.is_file() else None
        if self.zip is None and not root.is_dir():
            raise ConfigError(f"Operator database {root} not found.")

    def files(self, folder: str, file: str) -> list[tuple[str, str, str, str]]:
        """``(gpu, engine, version, member)`` of every ``<gpu>/<folder>/<engine>/<version>/<file>.parquet``."""
        pattern = re.compile(rf"(?:^|/)systems/data/([^/]+)/{folder}/([^/]+)/([^/]+)/{file}\.parquet$")
        if self.zip is not None:
            names = self.zip.namelist()
        else:
            names = ["systems/data/" + p.relative_to(self.root).as_posix()
                     for p in self.root.glob(f"*/{folder}/*/*/{file}.parquet")]
        out = []
        for n in names:
            m = pattern.search(n)
            if m:
                out.append((m.group(1), m.group(2), m.group(3), n))
        return sorted(out)

    def read(self, member: str) -> "pd.DataFrame":
        import pandas as pd

        try:
            if self.zip is not None:
                import io

                return pd.read_parquet(io.BytesIO(self.zip.read(member)))
            return pd.read_parquet(self.root / member.split("systems/data/", 1)[1])
        except ImportError:
            raise ConfigError("Reading the operator database's parquet tables needs pyarrow "
                              "(pip install 'sdsl[calibrate]'); the shipped subset needs only pandas.") from None


def _tree(source: str | os.PathLike) -> _Tree:
    if source == "package":
        return _Tree(_package_root())
    if source == "wheel":
        whl = wheel_path()
        if whl is None:
            raise ConfigError("No aiconfigurator-core wheel in .cache/aiconfigurator/ (run `make opdb`).")
        return _Tree(whl)
    return _Tree(Path(source))


def opdb_files(table: str, source: str | os.PathLike = "wheel") -> list[tuple[str, str, str]]:
    """``(gpu, engine, version)`` of every file of ``table`` in a full source (package, wheel or path)."""
    t = _table(table)
    return [f[:3] for f in _tree(source).files(t.folder, t.file)]


def _table(table: str) -> OpdbTable:
    if table not in OPDB_TABLES:
        raise ConfigError(f"Unknown operator table {table!r}; known: {', '.join(OPDB_TABLES)}.")
    return OPDB_TABLES[table]


def _normalise(raw: "pd.DataFrame", table: str, gpu: str, engine: str, version: str) -> "pd.DataFrame":
    """One parquet table in the long format: provenance first, then the shape columns, then ``time_s``."""
    import numpy as np

    t = OPDB_TABLES[table]
    df = raw.copy()
    if "latency" not in df.columns:
        raise ProfileError(f"{gpu}/{t.folder}/{engine}/{version}/{t.file}: no latency column.")
    if "isl" in df.columns and "step" in df.columns:  # decode attention: KV length = isl + step
        df["context"] = df["isl"].astype(np.int64) + df["step"].astype(np.int64)
    out = df.drop(columns=[c for c in _DROP if c in df.columns] + [t.dtype_column], errors="ignore")
    out.insert(0, "gpu", gpu)
    out.insert(1, "engine", engine)
    out.insert(2, "engine_version", version)
    if "kernel_source" not in out.columns:
        out.insert(3, "kernel_source", "")
    out.insert(4, "op", raw["op_name"].astype(str).to_numpy() if "op_name" in raw.columns else table)
    out.insert(5, "dtype", raw[t.dtype_column].astype(str).to_numpy() if t.dtype_column in raw.columns else "")
    out["time_s"] = raw["latency"].astype(float).to_numpy() * t.latency_unit_s
    front = list(PROVENANCE) + [c for c in t.shape if c in out.columns]
    rest = [c for c in out.columns if c not in front and c != "time_s"]
    return out[front + rest + ["time_s"]]


def read_opdb_raw(table: str, source: str | os.PathLike = "wheel", *, gpus: Iterable[str] | None = None) -> "pd.DataFrame":
    """Every file of ``table`` in a full source (``"package"``, ``"wheel"`` or a path) in the long format."""
    import pandas as pd

    t = _table(table)
    tree = _tree(source)
    wanted = None if gpus is None else set(gpus)
    parts = [_normalise(tree.read(member), table, gpu, engine, version)
             for gpu, engine, version, member in tree.files(t.folder, t.file) if wanted is None or gpu in wanted]
    if not parts:
        raise ConfigError(f"No {t.folder}/*/*/{t.file}.parquet in {tree.root}.")
    return pd.concat(parts, ignore_index=True)


@lru_cache(maxsize=None)
def _read_subset(table: str) -> "pd.DataFrame":
    import pandas as pd

    path = subset_path(table)
    if not path.is_file():
        raise ConfigError(f"The shipped operator subset has no {table} table ({path}).")
    df = pd.read_csv(path, dtype={"engine_version": str, "kernel_source": str, "dtype": str})
    df["kernel_source"] = df["kernel_source"].fillna("")
    return df


def read_opdb(table: str, *, gpu: str | Iterable[str] | None = None, engine: str | Iterable[str] | None = None,
              version: str | None = None, latest: bool = False, dtype: str | Iterable[str] | None = None,
              source: str | os.PathLike = "subset") -> "pd.DataFrame":
    """Table ``table`` (:data:`OPDB_TABLES`) in the long format: :data:`PROVENANCE`, the table's shape
    columns (:data:`SHAPE_COLUMNS`), any others, and ``time_s`` (seconds).

    ``gpu`` (database names: ``h100_sxm``, ``h200_sxm``, ``b200_sxm`` ...), ``engine`` (``vllm``,
    ``sglang``, ``trtllm``, ``nccl``), ``version`` and ``dtype`` filter rows; ``latest`` keeps only the newest
    version per GPU and engine. ``source``: ``"subset"`` (shipped, pandas only), ``"package"``, ``"wheel"``
    or a path (module docstring).
    """
    import pandas as pd

    _table(table)
    if source == "subset":
        df = _read_subset(table).copy()
    else:
        df = read_opdb_raw(table, source, gpus=[gpu] if isinstance(gpu, str) else gpu)

    def _pick(df, col, value):
        if value is None:
            return df
        values = {value} if isinstance(value, str) else set(value)
        return df[df[col].isin(values)]

    df = _pick(df, "gpu", gpu)
    df = _pick(df, "engine", engine)
    df = _pick(df, "engine_version", version)
    df = _pick(df, "dtype", dtype)
    if latest:
        df = latest_versions(df)
    return df.reset_index(drop=True)
