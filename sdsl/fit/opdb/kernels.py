"""Physical terms fitted on NVIDIA's measured operator database (:mod:`sdsl.fit.opdb`), per GPU.

Each fit but attention's uses sdsl's own pricing formula, so what is fitted here is what prices a step:

- **dense GEMM** (:func:`fit_gemm`): :func:`sdsl.roofline.step_ops.op_time`, the roofline of Williams, Waterman &
  Patterson (CACM 2009) with row tiles (64 or 128 rows, :data:`ROW_TILES`), the wave tail and the size overhead
  (docs/model.md §3.3). bf16 fits the whole form; a low-precision format (fp8, nvfp4) fits only its three terms beside the bf16 ones
  (:func:`sdsl.roofline.kernels.format_terms`): the fraction of the bf16 weight-read rate its kernels reach,
  the fraction of its tensor-core peak, and a fixed extra time per GEMM (the activation's quantisation);
- **decode attention** (:func:`fit_attention`; a step prices GQA/MQA attention on the same form where its engine runs
  the tables' kernels, :mod:`sdsl.roofline.attention`, and MLA on the roofline, :func:`predict_attention_step`):
  t0 + t_seq·b·h_kv + smax_p(FLOPs/(η_c·peak), KV bytes/(η_a·bw) + KV bytes/(b·h_kv·B_blk)) — a fixed kernel cost, a
  cost per (sequence, KV head), the unit of work FlashDecoding's grid gives thread blocks (per sequence alone fits
  worse: H200 p95 38% against 24%), and the KV read (FlashDecoding, Dao et al. 2023) at a fitted fraction of the
  bandwidth and at most B_blk per block; GQA/MQA by KV heads, MLA by its 576-wide latent (arXiv 2405.04434 §2.1),
  its heads' queries and outputs, which outweigh a short latent cache, streamed apart at the GEMMs' η_m;
- **all-reduce** (:func:`fit_allreduce`, :func:`fit_nccl`; in :mod:`sdsl.fit.opdb.collectives`, re-exported here):
  the engine's custom one-shot kernel and NCCL's ring, each fitted on its own rows.

Times in seconds; every fit minimises the squared error of log t (relative errors weigh alike) with a
soft-L1 loss (scale 5%), so that a few rows the tables themselves contradict (the same GEMM 3x slower at
m = 1 than at m = 8) do not pull the fit. Rows kept (:data:`GEMM_MIN_FEATURES`, :data:`KV_BYTES_MAX`) are
stated where they are chosen.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from sdsl.errors import ConfigError
from sdsl.fit.opdb.collectives import (ALLREDUCE_MAX_BYTES, NCCL_TERMS, AllreduceFit, allreduce_rows, fit_allreduce,
                                       fit_nccl, predict_allreduce, predict_nccl)
from sdsl.roofline.kernels import gemm_flops_bytes, gemm_waves, min_row_tile
from sdsl.roofline.latency_params import LatencyParams

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["OPDB_GPUS", "GEMM_FORMATS", "GEMM_MIN_FEATURES", "KV_BYTES_MAX", "ALLREDUCE_MAX_BYTES", "GEMM_TERMS",
           "FORMAT_TERMS", "ROW_TILES", "FORMAT_ROW_TILES", "gemm_rows", "fit_gemm_tiles", "best_tile", "attention_rows", "mla_rows", "allreduce_rows", "fit_gemm", "predict_gemm",
           "fit_attention", "predict_attention", "predict_attention_step", "fit_allreduce", "predict_allreduce",
           "AttentionFit", "AllreduceFit", "hardware_of", "fit_nccl", "predict_nccl", "NCCL_TERMS"]

#: The database's GPU names -> sdsl's hardware catalog.
OPDB_GPUS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200", "a100_sxm": "a100-80gb", "l40s": "l40s",
             "b300_sxm": "b300", "gb200": "gb200", "gb300": "gb300", "rtx_pro_6000_server": "rtx-pro-6000"}
#: The tables' GEMM dtypes -> sdsl weight formats (table "fp8" is per-tensor scaled fp8, what dense FP8
#: checkpoints run; "fp8_block" the 128x128 block-scaled DeepSeek form, fitted as its own format).
GEMM_FORMATS = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "nvfp4"}
#: GEMMs kept: n and k at least 1024, the narrowest a catalog model's projection gets at TP <= 8 (Qwen3-0.6B's
#: 1024-wide hidden state; Llama-70B's 8192/8 = 1024 per GPU); smaller grid points are kernels of 1-4 us whose
#: times the tables themselves do not order by size.
GEMM_MIN_FEATURES = 1024
#: Decode-attention rows kept: KV cache of one layer on one GPU up to 1 GiB (an 80-layer model holding 80 GB of
#: cache); beyond it the tables' times stop growing with the bytes (b = 128 and 256 at 8k context take the same
#: time on H200), which no deployment reaches.
KV_BYTES_MAX = 2.0 ** 30
#: Row tiles the bf16 fit chooses between, a discrete term kept where the rows' loss is lower: the 64 rows of one
#: warpgroup MMA (PTX ``wgmma`` m64; Hopper and Blackwell) and the 128-row threadblock tile of CUTLASS/cuBLAS. The
#: tables time each GEMM one row past 64, 128, 192, 256, 512 and 1024 too: on H100 and H200 the bf16 kernels
#: (torch.nn.functional.linear under vLLM 0.24) step a median +3.1% / +3.8% there, which 64-row tiles price
#: (+6.0% / +8.9%) and 128-row tiles overstate (+10.1% / +11.8%); :mod:`sdsl.fit.opdb.row_tiles`.
ROW_TILES = (64, 128)
#: Row tiles a low-precision format's own kernels choose between: those and the 256 rows of a two-CTA cluster of
#: 128-row tiles. vLLM's CUTLASS fp8 GEMMs on H100 and H200 step +30% / +34% one row past a tile edge (256-row tiles
#: price +20% / +22%, 128-row +14% / +16%).
FORMAT_ROW_TILES = (64, 128, 256)
#: The GEMM form's terms fitted on bf16 (LatencyParams fields), and each low-precision format's three.
GEMM_TERMS = ("eta_compute", "eta_memory", "t_kernel", "smoothness", "t_kernel_size", "kernel_size_bytes", "tail_waves")
FORMAT_TERMS = ("compute", "memory", "t_extra")
_GEMM_BOUNDS = {"eta_compute": (1e-3, 1.0, 0.1), "eta_memory": (1e-3, 1.0, 0.1), "t_kernel": (0.0, 1e-4, 1e-6),
                "smoothness": (1.0, 64.0, 1.0), "t_kernel_size": (0.0, 1e-4, 1e-6),
                "kernel_size_bytes": (1e5, 1e10, 1e6), "tail_waves": (0.0, 10.0, 0.1),
                "compute": (1e-3, 1.0, 0.1), "memory": (1e-3, 1.0, 0.1), "t_extra": (0.0, 1e-4, 1e-6)}
_START = {"eta_compute": 0.7, "eta_memory": 0.8, "t_kernel": 2e-6, "smoothness": 2.0, "t_kernel_size": 3e-6,
          "kernel_size_bytes": 5e6, "tail_waves": 0.1, "compute": 0.8, "memory": 0.8, "t_extra": 1e-6}
_GEMM_BOUNDS.update({"t0": (0.0, 1e-4, 1e-6), "t_seq": (0.0, 1e-5, 1e-8), "eta_kv": (1e-3, 1.0, 0.1),
                     "block_bandwidth": (1e9, 1e14, 1e11), "l2_speedup": (1.0, 20.0, 1.0)})  # fit_attention's
_ATTENTION_START = {"t0": 1e-5, "t_seq": 3e-8, "eta_kv": 0.7, "block_bandwidth": 1e12, "l2_speedup": 2.0}


def hardware_of(gpu: str):
    """sdsl's catalog entry of a database GPU name (``h200_sxm`` -> H200)."""
    from sdsl.catalog.hardware import get_hardware

    if gpu not in OPDB_GPUS:
        raise ConfigError(f"No catalog GPU for the database's {gpu!r}; known: {', '.join(OPDB_GPUS)}.")
    return get_hardware(OPDB_GPUS[gpu])


def _least_squares(residual, names, start=None, *, with_cost: bool = False):
    from sdsl.fit.opdb.lsq import robust_fit

    return robust_fit(residual, names, _GEMM_BOUNDS, start or _START, with_cost=with_cost)


# ----------------------------------------------------------------------------------------------------- GEMM
def gemm_rows(gpu: str | None = None, engine: str = "vllm", dtype: str | None = None, *,
              source="subset") -> "pd.DataFrame":
    """GEMM rows of ``engine``'s newest version (n, k >= :data:`GEMM_MIN_FEATURES`), one per (gpu, dtype, m, n,
    k): where an engine measured two kernels for one format (vLLM's DeepGEMM and FlashInfer fp8_block), the
    faster one, the kernel its dispatcher would pick at best."""
    from sdsl.fit.opdb import read_opdb

    df = read_opdb("gemm", gpu=gpu, engine=engine, dtype=dtype, latest=True, source=source)
    df = df[(df["n"] >= GEMM_MIN_FEATURES) & (df["k"] >= GEMM_MIN_FEATURES)]
    df = df.sort_values("time_s", kind="mergesort").drop_duplicates(["gpu", "dtype", "m", "n", "k"])
    return df.sort_values(["gpu", "dtype", "m", "n", "k"]).reset_index(drop=True)


def _gemm_arrays(rows, hardware, weight_format: str, params: LatencyParams):
    from sdsl.roofline.kernels import format_tile
    from sdsl.roofline.weight_formats import get_weight_format

    m, n, k = (rows[c].to_numpy(dtype=float) for c in ("m", "n", "k"))
    tile = format_tile(params, get_weight_format(weight_format).native)
    flops, _ = gemm_flops_bytes(m, k, n, 2, tile, params.m_tile_min)
    weights = get_weight_format(weight_format).bytes_per_weight * n * k
    acts = 2.0 * m * (n + k)
    waves = gemm_waves(m, n, tile, getattr(hardware, "sm_count", None))
    return flops, weights, acts, waves


def predict_gemm(rows: "pd.DataFrame", hardware, weight_format: str, params: LatencyParams) -> np.ndarray:
    """Seconds of each GEMM row (m, n, k) in ``weight_format`` with ``params``: exactly the step pricing's
    :func:`sdsl.roofline.step_ops.op_time` with the format's terms (:func:`sdsl.roofline.kernels.format_terms`)."""
    from sdsl.roofline.kernels import format_terms
    from sdsl.roofline.step_ops import op_time
    from sdsl.roofline.weight_formats import gemm_peak, get_weight_format

    compute, memory, extra = format_terms(params, get_weight_format(weight_format).native)
    flops, weights, acts, waves = _gemm_arrays(rows, hardware, weight_format, params)
    peak = gemm_peak(hardware, weight_format, "bf16") * compute
    return op_time(flops, weights / memory + acts, peak, hardware.mem_bandwidth, params, waves=waves) + extra


def fit_gemm(rows: "pd.DataFrame", hardware, weight_format: str = "bf16", base: LatencyParams | None = None,
             tiles: tuple | None = None) -> LatencyParams:
    """Fit the GEMM form on ``rows`` of one GPU and format. bf16 (``base`` None): the whole form
    (:data:`GEMM_TERMS`) with each row tile of :data:`ROW_TILES` (or ``tiles``), keeping the lower loss (the smaller
    tile on a tie). A low-precision format with its native tensor cores (fp8, nvfp4): only its three terms
    (:data:`FORMAT_TERMS`) and its own row tile (:data:`FORMAT_ROW_TILES`, or ``tiles``) on top of ``base``, the bf16
    fit, so a format's efficiency is measured against the same GPU's bf16 kernels."""
    fits = fit_gemm_tiles(rows, hardware, weight_format, base, tiles)
    return fits[best_tile(fits)][1]


def best_tile(fits: dict) -> int:
    """The row tile :func:`fit_gemm` keeps from :func:`fit_gemm_tiles`' fits: the lowest loss, the smaller on a tie."""
    return min(fits, key=lambda t: (fits[t][0], t))


def fit_gemm_tiles(rows: "pd.DataFrame", hardware, weight_format: str = "bf16", base: LatencyParams | None = None,
                   tiles: tuple | None = None) -> dict:
    """{row tile: (the fit's final loss, its LatencyParams)} for every candidate tile :func:`fit_gemm` chooses among."""
    from sdsl.roofline.weight_formats import get_weight_format

    y = np.log(rows["time_s"].to_numpy(dtype=float))
    if base is None:  # the row tile is a discrete term: the one the rows' loss prefers
        names, candidates = GEMM_TERMS, tiles or ROW_TILES
        at = lambda x, tile: LatencyParams(m_tile=tile, m_tile_min=min_row_tile(hardware)).replace(**x)  # noqa: E731
    else:
        native = get_weight_format(weight_format).native
        if native not in ("fp8", "fp4"):
            raise ConfigError(f"Only fp8 and fp4 formats have their own GEMM terms; {weight_format!r} runs at bf16's.")
        names, candidates = FORMAT_TERMS, tiles or FORMAT_ROW_TILES  # the format's own kernels' tile
        at = lambda x, tile: base.replace(**{f"{native}_{k}": v for k, v in x.items()},  # noqa: E731
                                          **{f"{native}_m_tile": tile})
    out = {}
    for tile in candidates:
        x, cost = _least_squares(lambda x, tile=tile: np.log(predict_gemm(rows, hardware, weight_format, at(x, tile))) - y,
                                 names, with_cost=True)
        out[tile] = (cost, at(x, tile))
    return out


# ------------------------------------------------------------------------------------------------ attention
def attention_rows(gpu: str | None = None, engine: str = "vllm", kv_dtype: str | None = None, *,
                   source="subset") -> "pd.DataFrame":
    """Decode attention rows (GQA/MQA/MHA) of ``engine``'s newest version: no sliding window, one layer's KV
    cache up to :data:`KV_BYTES_MAX`; the fastest kernel per point (vLLM measures FA3 and FA4 on some GPUs).
    Adds ``kv_bytes`` (the KV read), ``shape`` (heads/KV heads/head dim, the unit held out) and ``l2_resident`` (timed
    from L2, as a step never reads it: :mod:`sdsl.fit.opdb.collection`)."""
    from sdsl.fit.opdb import read_opdb
    from sdsl.fit.opdb.collection import l2_resident

    df = read_opdb("generation_attention", gpu=gpu, engine=engine, latest=True, source=source)
    df = df[df["window_size"] == 0]
    if kv_dtype is not None:
        df = df[df["kv_cache_dtype"] == kv_dtype]
    per_elem = np.where(df["kv_cache_dtype"] == "fp8", 1.0, 2.0)
    df = df.assign(kv_bytes=df["batch_size"] * df["context"] * 2.0 * df["num_key_value_heads"] * df["head_dim"] * per_elem)
    df = df[df["kv_bytes"] <= KV_BYTES_MAX]
    keys = ["gpu", "kv_cache_dtype", "batch_size", "context", "num_heads", "num_key_value_heads", "head_dim"]
    df = df.sort_values("time_s", kind="mergesort").drop_duplicates(keys).sort_values(keys)
    shape = (df["num_heads"].astype(str) + "/" + df["num_key_value_heads"].astype(str) + "/" + df["head_dim"].astype(str))
    resident = l2_resident(df["gpu"].to_numpy(), df["kv_bytes"].to_numpy(), hardware_of)
    return df.assign(shape=shape.to_numpy(), l2_resident=resident).reset_index(drop=True)


#: MLA's decode (absorbed form, DeepSeek-V2 §2.1): the latent and the decoupled RoPE key, 512 + 64 per token,
#: one KV "head" shared by all query heads; queries attend with a 576-wide key and a 512-wide value.
MLA_KV_WIDTH = 576
MLA_V_WIDTH = 512


def mla_rows(gpu: str | None = None, engine: str = "sglang", kv_dtype: str | None = None, *,
             source="subset") -> "pd.DataFrame":
    """Decode MLA rows of ``engine``'s newest version (``num_heads`` = query heads on this GPU), one layer's KV
    cache up to :data:`KV_BYTES_MAX`; ``shape`` = the heads, the unit held out."""
    from sdsl.fit.opdb import read_opdb

    df = read_opdb("generation_mla", gpu=gpu, engine=engine, latest=True, source=source)
    if kv_dtype is not None:
        df = df[df["kv_cache_dtype"] == kv_dtype]
    per_elem = np.where(df["kv_cache_dtype"] == "fp8", 1.0, 2.0)
    df = df.assign(kv_bytes=df["batch_size"] * df["context"] * float(MLA_KV_WIDTH) * per_elem)
    df = df[df["kv_bytes"] <= KV_BYTES_MAX]
    keys = ["gpu", "kv_cache_dtype", "batch_size", "context", "num_heads"]
    df = df.sort_values("time_s", kind="mergesort").drop_duplicates(keys).sort_values(keys)
    return df.assign(shape=df["num_heads"].astype(str).to_numpy()).reset_index(drop=True)


@dataclass(frozen=True)
class AttentionFit:
    """Decode attention on one GPU: t0 + t_seq·b·h_kv + smax_p(FLOPs/(η_c·peak), KV bytes/(η_a·bw) + KV bytes/(b·h_kv·
    B_blk)) (:mod:`sdsl.roofline.attention`); η_c is the GEMM fit's, the rest fitted here; ``l2_speedup`` s, the
    tables' L2-resident rows' read taking 1/s as long, prices those rows only (:meth:`terms`, a step's, has none);
    ``eta_stream`` > 0 (MLA's: the GEMM fit's η_m) streams query and output apart from the KV read, 0 within it."""

    t0: float
    t_seq: float
    eta_kv: float
    smoothness: float
    block_bandwidth: float
    eta_compute: float
    l2_speedup: float = 1.0
    eta_stream: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    def terms(self) -> dict:
        """The fit as :class:`LatencyParams`' attention fields (:data:`~sdsl.roofline.latency_params.ATTENTION_FIELDS`)."""
        from sdsl.roofline.latency_params import ATTENTION_FIELDS

        return {k: float(v) for k, v in zip(ATTENTION_FIELDS, (self.t0, self.t_seq, self.eta_kv, self.smoothness,
                                                                self.block_bandwidth))}

    @classmethod
    def of(cls, terms, eta_compute: float | None = None) -> "AttentionFit":
        """The fit a step prices with: ``terms`` a :class:`LatencyParams` or a mapping of its attention fields
        (``eta_compute`` then given: a mapping carries none)."""
        from sdsl.roofline.latency_params import ATTENTION_FIELDS

        get = ((lambda k: terms.get(k, 0.0) if k == "attn_block_bandwidth" else terms[k]) if isinstance(terms, dict)
               else lambda k: getattr(terms, k))  # a section written before B_blk carries none: no per-block limit
        return cls(*(get(k) for k in ATTENTION_FIELDS), terms.eta_compute if eta_compute is None else eta_compute)


def _attention_arrays(rows):
    b, L = rows["batch_size"].to_numpy(dtype=float), rows["context"].to_numpy(dtype=float)
    if "num_key_value_heads" in rows.columns:
        blocks = b * rows["num_key_value_heads"].to_numpy(dtype=float)
        h = rows["num_heads"].to_numpy(dtype=float)
        hd = rows["head_dim"].to_numpy(dtype=float)
        flops = 4.0 * b * h * hd * L  # QK^T and PV, 2 FLOPs per multiply-add each
        qo = b * 2.0 * h * hd * 2.0
    else:  # MLA: 576-wide scores, 512-wide values
        h = rows["num_heads"].to_numpy(dtype=float)
        flops = 2.0 * b * h * L * (MLA_KV_WIDTH + MLA_V_WIDTH)
        qo = b * h * (MLA_KV_WIDTH + MLA_V_WIDTH) * 2.0
        blocks = b  # one latent "KV head"
    return blocks, flops, rows["kv_bytes"].to_numpy(dtype=float), qo


def predict_attention(rows: "pd.DataFrame", hardware, fit: AttentionFit) -> np.ndarray:
    """The measured form (:func:`sdsl.roofline.attention.attention_time`, what a step charges) at ``fit``'s terms on
    the tables' rows."""
    from sdsl.roofline.attention import attention_time

    blocks, flops, kv, qo = _attention_arrays(rows)
    nbytes, stream = (kv, qo) if fit.eta_stream else (kv + qo, 0.0)
    if "l2_resident" in rows.columns:
        nbytes = nbytes / np.where(rows["l2_resident"].to_numpy(dtype=bool), fit.l2_speedup, 1.0)
    return attention_time(flops, nbytes, blocks, t0=fit.t0, t_block=fit.t_seq, eta_kv=fit.eta_kv,
                          smoothness=fit.smoothness, eta_compute=fit.eta_compute, peak=hardware.peak_flops,
                          bandwidth=hardware.mem_bandwidth, block_bandwidth=fit.block_bandwidth,
                          stream_bytes=stream, eta_stream=fit.eta_stream)[2]


def predict_attention_step(rows: "pd.DataFrame", hardware, params: LatencyParams) -> np.ndarray:
    """What a priced step charges the tables' decode-attention rows (GQA/MQA or MLA, a bf16 KV cache): its attention op
    (:func:`sdsl.roofline.step_ops.attention_op`) at ``params``, on the measured form where ``params`` carry it (GQA;
    :mod:`sdsl.roofline.attention`), else the roofline of the FLOPs and KV bytes plus the one launch the step counts."""
    from types import SimpleNamespace

    from sdsl.roofline.attention import measured_share
    from sdsl.roofline.shapes import attention_widths
    from sdsl.roofline.step_ops import attention_op, roofline_sums

    h = rows["num_heads"].to_numpy(dtype=float)
    gqa = "num_key_value_heads" in rows.columns
    if gqa:
        kv_heads = rows["num_key_value_heads"].to_numpy(dtype=float)
        widths = attention_widths(h, head_dim=rows["head_dim"].to_numpy(dtype=float), kv_heads=kv_heads)
    else:  # MLA's absorbed decode over the 512-wide latent and the 64-wide RoPE key
        kv_heads = np.ones_like(h)
        widths = attention_widths(h, latent=MLA_V_WIDTH, rope=MLA_KV_WIDTH - MLA_V_WIDTH)
    shapes = SimpleNamespace(**dict(zip(("kv_elements", "attn_width", "qo_elements"), widths)),  # what attention_op reads
                             kv_heads=kv_heads, mla=0.0 if gqa else 1.0)
    op = attention_op(shapes, rows["batch_size"].to_numpy(dtype=float), 1.0, rows["context"].to_numpy(dtype=float), 2)
    _, _, roof_c, roof_m, *_ = roofline_sums([op], params, hardware.peak_flops, hardware.mem_bandwidth)
    launch = params.t_kernel * (1.0 - measured_share(params, 0.0 if gqa else 1.0))
    return roof_c + roof_m + launch


#: The attention form's smooth-maximum power, fixed: the KV read outlasts the FLOPs on nearly every row, so the tables
#: leave p unset (H200 held-out medians within 0.2 points for p 2-16; a fitted p stopped where BLAS rounding did).
ATTENTION_SMOOTHNESS = 2.0


def fit_attention(rows: "pd.DataFrame", hardware, eta_compute: float = 0.7, eta_stream: float = 0.0) -> AttentionFit:
    """Fit :class:`AttentionFit` on decode-attention (or MLA) rows of one GPU and KV dtype (p, η_c and η_s fixed)."""
    y = np.log(rows["time_s"].to_numpy(dtype=float))
    terms = ("t0", "t_seq", "eta_kv", "block_bandwidth", "l2_speedup")  # s only where some rows are L2-resident
    names = terms if "l2_resident" in rows.columns and rows["l2_resident"].any() else terms[:-1]
    fixed = {"smoothness": ATTENTION_SMOOTHNESS, "eta_compute": eta_compute, "eta_stream": eta_stream}
    x = _least_squares(lambda x: np.log(predict_attention(rows, hardware, AttentionFit(**x, **fixed))) - y, names,
                       _ATTENTION_START)
    return AttentionFit(**x, **fixed)
