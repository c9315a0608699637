"""Physical terms fitted on NVIDIA's measured operator database (:mod:`sdsl.fit.opdb`), per GPU.

Each fit but attention's uses sdsl's own pricing formula, so what is fitted here is what prices a step:

- **dense GEMM** (:func:`fit_gemm`): :func:`sdsl.roofline.step_ops.op_time`, the roofline of Williams, Waterman &
  Patterson (CACM 2009) with 128-row tiles, the wave tail and the size overhead (docs/model.md §3.3). bf16
  fits the whole form; a low-precision format (fp8, nvfp4) fits only its three terms beside the bf16 ones
  (:func:`sdsl.roofline.kernels.format_terms`): the fraction of the bf16 weight-read rate its kernels reach,
  the fraction of its tensor-core peak, and a fixed extra time per GEMM (the activation's quantisation);
- **decode attention** (:func:`fit_attention`; a step prices GQA/MQA attention on the same form where its engine runs
  the tables' kernels, :mod:`sdsl.roofline.attention`, and MLA on the roofline, :func:`predict_attention_step`):
  t0 + t_seq·b·h_kv + smax_p(FLOPs/(η_c·peak), KV bytes/(η_a·bw) + KV bytes/(b·h_kv·B_blk)) — a fixed kernel cost, a
  cost per (sequence, KV head), the unit of work FlashDecoding's grid gives thread blocks (per sequence alone fits
  worse: H200 p95 38% against 24%), and the KV read (FlashDecoding, Dao et al. 2023) at a fitted fraction of the
  bandwidth and at most B_blk per block; GQA/MQA by KV heads, MLA by its 576-wide latent (arXiv 2405.04434 §2.1),
  its heads' queries and outputs, which outweigh a short latent cache, streamed apart at the GEMMs' η_m;
- **all-reduce** (:func:`fit_allreduce`): the engine's custom one-shot kernel, a + (t−1)·M/(η·B) (every GPU
  reads the other t−1 GPUs' messages over NVLink), and NCCL's ring, a + 2(t−1)/t·M/(η·B) (Patarasuk & Yuan,
  JPDC 2009), each fitted on its own rows (graph replay and eager launch apart).

Times in seconds; every fit minimises the squared error of log t (relative errors weigh alike) with a
soft-L1 loss (scale 5%), so that a few rows the tables themselves contradict (the same GEMM 3x slower at
m = 1 than at m = 8) do not pull the fit. Rows kept (:data:`GEMM_MIN_FEATURES`, :data:`KV_BYTES_MAX`) are
stated where they are chosen.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from sdsl.roofline.kernels import gemm_flops_bytes, gemm_waves, min_row_tile
from sdsl.roofline.latency_params import LatencyParams
from sdsl.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["OPDB_GPUS", "GEMM_FORMATS", "GEMM_MIN_FEATURES", "KV_BYTES_MAX", "ALLREDUCE_MAX_BYTES", "GEMM_TERMS",
           "FORMAT_TERMS", "gemm_rows", "attention_rows", "mla_rows", "allreduce_rows", "fit_gemm", "predict_gemm",
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
_F_SCALE = 0.05


def hardware_of(gpu: str):
    """sdsl's catalog entry of a database GPU name (``h200_sxm`` -> H200)."""
    from sdsl.catalog.hardware import get_hardware

    if gpu not in OPDB_GPUS:
        raise ConfigError(f"No catalog GPU for the database's {gpu!r}; known: {', '.join(OPDB_GPUS)}.")
    return get_hardware(OPDB_GPUS[gpu])


def _least_squares(residual, names, start=None):
    from scipy.optimize import least_squares

    lo = np.array([_GEMM_BOUNDS[n][0] for n in names])
    hi = np.array([_GEMM_BOUNDS[n][1] for n in names])
    sc = np.array([_GEMM_BOUNDS[n][2] for n in names])
    x0 = np.clip(np.array([(start or _START)[n] for n in names]), lo, hi) / sc
    r = least_squares(lambda x: residual(dict(zip(names, x * sc))), x0, bounds=(lo / sc, hi / sc),
                      loss="soft_l1", f_scale=_F_SCALE, x_scale="jac")
    return dict(zip(names, r.x * sc))


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
    from sdsl.roofline.weight_formats import get_weight_format

    m, n, k = (rows[c].to_numpy(dtype=float) for c in ("m", "n", "k"))
    flops, _ = gemm_flops_bytes(m, k, n, 2, params.m_tile, params.m_tile_min)
    weights = get_weight_format(weight_format).bytes_per_weight * n * k
    acts = 2.0 * m * (n + k)
    waves = gemm_waves(m, n, params.m_tile, getattr(hardware, "sm_count", None))
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


def fit_gemm(rows: "pd.DataFrame", hardware, weight_format: str = "bf16", base: LatencyParams | None = None) -> LatencyParams:
    """Fit the GEMM form on ``rows`` of one GPU and format. bf16 (``base`` None): the whole form
    (:data:`GEMM_TERMS`). A low-precision format with its native tensor cores (fp8, nvfp4): only its three
    terms (:data:`FORMAT_TERMS`) on top of ``base``, the bf16 fit, so a format's efficiency is measured
    against the same GPU's bf16 kernels."""
    from sdsl.roofline.weight_formats import get_weight_format

    y = np.log(rows["time_s"].to_numpy(dtype=float))
    if base is None:
        start = LatencyParams(m_tile=128, m_tile_min=min_row_tile(hardware))
        return start.replace(**_least_squares(
            lambda x: np.log(predict_gemm(rows, hardware, weight_format, start.replace(**x))) - y, GEMM_TERMS))
    native = get_weight_format(weight_format).native
    if native not in ("fp8", "fp4"):
        raise ConfigError(f"Only fp8 and fp4 formats have their own GEMM terms; {weight_format!r} runs at bf16's.")
    terms = lambda x: base.replace(**{f"{native}_{k}": v for k, v in x.items()})  # noqa: E731
    return terms(_least_squares(lambda x: np.log(predict_gemm(rows, hardware, weight_format, terms(x))) - y,
                                FORMAT_TERMS))


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


# ----------------------------------------------------------------------------------------------- all-reduce
def allreduce_rows(gpu: str | None = None, engine: str = "vllm", version: str | None = None, *,
                   source="subset") -> "pd.DataFrame":
    """All-reduce rows: ``engine``'s custom kernel (``kernel_source`` graph / eager; ``version`` None = the newest),
    or, with ``engine="nccl"``, NCCL's all_reduce (half precision) of the newest NCCL version; ``mode`` says
    graph, eager or nccl."""
    from sdsl.fit.opdb import read_opdb

    if engine == "nccl":
        # the NCCL collector's own rows (B300's table also holds NCCL timed inside TensorRT-LLM's image)
        df = read_opdb("nccl", gpu=gpu, engine="nccl", version=version, latest=version is None, source=source)
        df = df[(df["op"] == "all_reduce") & (df["dtype"] == "half")]
        return df.assign(mode="nccl").reset_index(drop=True)
    df = read_opdb("custom_allreduce", gpu=gpu, engine=engine, version=version, latest=version is None, source=source)
    mode = np.where(df["kernel_source"].str.contains("eager", case=False), "eager", "graph")
    return df.assign(mode=mode).reset_index(drop=True)


@dataclass(frozen=True)
class AllreduceFit:
    """One all-reduce path on one GPU; B the catalog's per-direction NVLink bandwidth. ``custom``: the engine's
    kernel, the faster of one-shot a + (t−1)·M/(η·B) and two-shot 2a + 2(t−1)/t·M/(η·B) (the form
    :func:`sdsl.engine.allreduce.custom_allreduce_time` prices); ``ring``: NCCL, a + 2(t−1)/t·M/(η·B)."""

    latency: float
    eta: float
    kind: str  # "custom" or "ring"

    def to_dict(self) -> dict:
        return {"latency": self.latency, "eta": self.eta, "kind": self.kind}


def predict_allreduce(rows: "pd.DataFrame", hardware, fit: AllreduceFit) -> np.ndarray:
    m, t = rows["message_size"].to_numpy(dtype=float), rows["num_gpus"].to_numpy(dtype=float)
    bw = fit.eta * hardware.interconnect_bandwidth
    ring = 2.0 * (t - 1.0) / t * m / bw
    if fit.kind == "ring":
        return fit.latency + ring
    return np.minimum(fit.latency + (t - 1.0) * m / bw, 2.0 * fit.latency + ring)


#: Messages the all-reduce fits cover: a decode step's hidden states, up to 512 tokens x 16384 x 2 bytes (16 MiB).
ALLREDUCE_MAX_BYTES = 16 * 2 ** 20


#: NCCL's terms in LatencyParams (:func:`sdsl.roofline.kernels.allreduce_time`): the ring's latency, its per-step
#: latency and its bandwidth fraction. The low-latency protocol stays off: the tables' small-message times grow
#: with the GPU count (H200: 6.0, 9.5, 16.0 us at 2, 4, 8 GPUs), which a per-step latency prices and sdsl's LL
#: form (no per-step term) cannot.
NCCL_TERMS = ("allreduce_latency", "allreduce_step_latency", "eta_interconnect")
_NCCL_BOUNDS = {"allreduce_latency": (0.0, 1e-4, 1e-6), "allreduce_step_latency": (0.0, 2e-5, 1e-7),
                "eta_interconnect": (1e-3, 1.0, 0.1), "allreduce_ll_latency": (0.0, 1e-4, 1e-6),
                "allreduce_ll_efficiency": (1e-3, 1.0, 0.1)}


def predict_nccl(rows: "pd.DataFrame", hardware, params: LatencyParams) -> np.ndarray:
    """NCCL all-reduce seconds of each row with the all-reduce terms of ``params`` (the step pricing's form)."""
    from sdsl.roofline.kernels import allreduce_time_with

    return allreduce_time_with(rows["message_size"].to_numpy(dtype=float), rows["num_gpus"].to_numpy(dtype=float),
                               hardware.interconnect_bandwidth, params)


def fit_nccl(rows: "pd.DataFrame", hardware, base: LatencyParams | None = None) -> LatencyParams:
    """Fit LatencyParams' NCCL all-reduce terms (:data:`NCCL_TERMS`, no floor: the tables time graph-free NCCL
    calls back to back) on NCCL all_reduce rows up to :data:`ALLREDUCE_MAX_BYTES`."""
    rows = rows[rows["message_size"] <= ALLREDUCE_MAX_BYTES]
    base = (base or LatencyParams()).replace(allreduce_floor=0.0, allreduce_ll_efficiency=0.0, allreduce_ll_latency=0.0)
    y = np.log(rows["time_s"].to_numpy(dtype=float))
    saved = dict(_GEMM_BOUNDS)
    _GEMM_BOUNDS.update(_NCCL_BOUNDS)
    start = {"allreduce_latency": 1e-5, "allreduce_step_latency": 5e-7, "eta_interconnect": 0.7,
             "allreduce_ll_latency": 8e-6, "allreduce_ll_efficiency": 0.3}
    try:
        x = _least_squares(lambda x: np.log(predict_nccl(rows, hardware, base.replace(**x))) - y, NCCL_TERMS, start)
    finally:
        _GEMM_BOUNDS.clear()
        _GEMM_BOUNDS.update(saved)
    return base.replace(**x)


def fit_allreduce(rows: "pd.DataFrame", hardware, kind: str) -> AllreduceFit:
    """Fit :class:`AllreduceFit` (``kind`` "custom" for an engine's own kernel, "ring" for NCCL) on rows of one
    GPU and mode with messages up to :data:`ALLREDUCE_MAX_BYTES`."""
    rows = rows[rows["message_size"] <= ALLREDUCE_MAX_BYTES]
    y = np.log(rows["time_s"].to_numpy(dtype=float))
    names = ("t_kernel", "eta_memory")  # reuse bounds: latency in [0, 100 us], eta in (0, 1]
    x = _least_squares(lambda x: np.log(predict_allreduce(rows, hardware, AllreduceFit(x["t_kernel"], x["eta_memory"], kind))) - y,
                       names, {"t_kernel": 5e-6, "eta_memory": 0.5})
    return AllreduceFit(x["t_kernel"], x["eta_memory"], kind)
