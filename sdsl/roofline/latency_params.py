"""Latency parameters of the roofline (what calibration fits) and the ones sdsl ships per hardware.

See :mod:`sdsl.roofline.latency` for the step-time model these parameters enter (docs/model.md §3.3).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from functools import lru_cache

from sdsl.errors import ConfigError, InvalidInputError

__all__ = ["LatencyParams", "DEFAULT_PARAMS", "default_params", "ELEMENTWISE_KINDS", "calibration_provenance",
           "TABLE_GEMMS_FROM", "runs_table_gemms", "ATTENTION_FIELDS", "TABLE_ATTENTION_ENGINES", "table_engine",
           "runs_table_attention"]


#: Elementwise kernel kinds (Vidur: input/post_attention_layernorm, attn_rope, mlp_act, add).
ELEMENTWISE_KINDS = ("norm", "rope", "act", "add")
ELEMENTWISE_ETAS = tuple(f"eta_{k}" for k in ELEMENTWISE_KINDS)
ELEMENTWISE_ROWS = ("row_norm", "row_rope", "row_act")
#: The integer fields: GEMM row tiles.
INT_FIELDS = ("m_tile", "m_tile_min", "fp8_m_tile", "fp4_m_tile")
#: The fields of decode attention's measured form (:mod:`sdsl.roofline.attention`).
ATTENTION_FIELDS = ("attn_t0", "attn_t_block", "attn_eta_kv", "attn_smoothness", "attn_block_bandwidth")


@dataclass(frozen=True)
class LatencyParams:
    """What calibration fits (:mod:`sdsl.fit.calibration`): the efficiencies and fixed costs of the roofline
    (docs/model.md §3.3). Field by field, in groups (times in seconds):

    **Rates** — ``eta_compute``, ``eta_memory``: the fractions of the datasheet's peak FLOP/s and memory
    bandwidth that kernels reach. ``smoothness``: p of the smooth maximum between a kernel's compute and memory
    time (inf = the hard max of the plain roofline).

    **Fixed costs** — ``t_kernel``: one kernel launch. ``t_layer``: each decoder layer beyond its kernels
    (framework dispatch, e.g. eager PyTorch on a CPU). ``t_step``: each forward pass.

    **GEMM shape terms** — ``m_tile``: GEMM rows (tokens) per tile of the GPU's GEMM kernels; compute is priced
    on the token count padded to whole tiles (:func:`padded_tokens`; 0 = no padding: CPU, uncalibrated).
    ``m_tile_min``: the smallest row tile (tensor-core instruction rows,
    :func:`~sdsl.roofline.kernels.min_row_tile`; set from the hardware by calibration, 0 = none). ``tail_waves``:
    the tail of a GEMM's last wave of output tiles, in waves (compute × (1 + tail_waves/W), W from
    :func:`~sdsl.roofline.kernels.gemm_waves`). ``t_kernel_size``, ``kernel_size_bytes``: a GEMM's fixed cost beyond
    ``t_kernel``, saturating with the bytes it moves (:func:`~sdsl.roofline.kernels.kernel_size_overhead`). All
    of these 0: the form without them. ``fp8_m_tile``, ``fp4_m_tile``: the row tile of a low-precision format's own
    kernels where it differs from the bf16 GEMMs' (0 = ``m_tile``).

    **Elementwise kernels** (norm, RoPE, activation, residual add) — ``t_elementwise``: the fixed cost of one;
    ``None`` prices them like GEMMs (``t_kernel`` + bytes/(η_m·bandwidth)). When it is set, ``eta_norm``,
    ``eta_rope``, ``eta_act``, ``eta_add`` are their bandwidth fractions and ``row_norm``, ``row_rope``,
    ``row_act`` the time per element of one token's row of the one-CTA-per-token kernels (:func:`elementwise_time`).

    **Tensor-parallel all-reduce** (:func:`allreduce_time`) — NCCL's Simple protocol: ``allreduce_latency``,
    the fixed latency of one all-reduce; ``allreduce_step_latency``, the latency of each of a ring's 2(t−1)
    steps; ``eta_interconnect``, the achieved fraction of the per-direction link bandwidth in the ring formula,
    in (0, 1] (a ring moves 2(t−1)/t of the message over one direction of each GPU's links and cannot beat the
    link; in-switch reduction, NVLS, is not in the shipped form). Its low-latency
    protocol: ``allreduce_ll_latency`` and ``allreduce_ll_efficiency`` (no per-step latency, a fraction in [0, 1] of the
    link bandwidth; 0 = not modelled); NCCL runs whichever is faster. ``allreduce_floor``: the floor of a
    measured all-reduce (the profiler waits for the last rank), joined to the protocol time by a smooth
    maximum of power ``allreduce_floor_smoothness``; 0 = no floor.

    **Low-precision GEMMs** (:func:`~sdsl.roofline.kernels.format_terms`) — ``fp8_compute``, ``fp8_memory``: the
    fraction of its tensor-core peak and of the bf16 GEMMs' weight-read rate an fp8 GEMM reaches, relative to
    ``eta_compute`` and ``eta_memory``; ``fp8_t_extra``: its fixed cost beyond a bf16 GEMM's (quantising the
    activations); ``fp4_*`` the same for NVFP4. 1, 1, 0: the format at its nominal bytes and peak (the form
    without them). Fitted on NVIDIA's measured operator tables (:mod:`sdsl.fit.opdb.kernels`).

    **Decode attention** (:mod:`sdsl.roofline.attention`) — ``attn_t0``, ``attn_t_block``, ``attn_eta_kv``,
    ``attn_smoothness``, ``attn_block_bandwidth``: the measured form t0 + t_block·b·h_kv + smax_p(FLOPs/(η_c·peak),
    bytes/(η_kv·bandwidth) + bytes/(b·h_kv·B_blk)), fitted on the same tables per GPU and engine; ``attn_eta_kv`` 0
    prices attention on the roofline, ``attn_block_bandwidth`` 0 sets no per-block limit.

    **Provenance** — ``source``: where the numbers come from (a fit and its data, a transfer, or defaults).
    """

    # rates
    eta_compute: float = 0.7  # fraction of the datasheet peak FLOP/s kernels reach, (0, 1]
    eta_memory: float = 0.8  # fraction of the datasheet memory bandwidth kernels reach, (0, 1]
    # fixed costs (s), then the roofline's smooth maximum (a rate term; its place keeps the JSON field order)
    t_kernel: float = 4e-6  # s, one kernel launch
    t_layer: float = 0.0  # s, each decoder layer beyond its kernels (framework dispatch)
    t_step: float = 0.0  # s, each forward pass
    smoothness: float = math.inf  # p of the smooth max of compute and memory time (inf = hard max)
    # GEMM shape terms
    m_tile: int = 0  # GEMM rows (tokens) per tile; compute priced on whole tiles (0 = no padding)
    m_tile_min: int = 0  # rows, the smallest row tile (tensor-core instruction rows; 0 = none)
    tail_waves: float = 0.0  # waves, the tail of a GEMM's last wave of output tiles
    t_kernel_size: float = 0.0  # s, a GEMM's size overhead beyond t_kernel at saturation
    kernel_size_bytes: float = 1.0e7  # bytes at which the size overhead saturates
    # elementwise kernels
    t_elementwise: float | None = None  # s, fixed cost of one elementwise kernel (None = priced like a GEMM)
    eta_norm: float = 1.0  # fraction of bandwidth a norm kernel reaches
    eta_rope: float = 1.0  # fraction of bandwidth a RoPE kernel reaches
    eta_act: float = 1.0  # fraction of bandwidth an activation kernel reaches
    eta_add: float = 1.0  # fraction of bandwidth a residual add reaches
    row_norm: float = 0.0  # s per element of one token's row (norm, one CTA per token)
    row_rope: float = 0.0  # s per element of one token's row (RoPE)
    row_act: float = 0.0  # s per element of one token's row (activation)
    # tensor-parallel all-reduce
    allreduce_latency: float = 1.0e-5  # s, fixed latency of one all-reduce (NCCL Simple)
    allreduce_step_latency: float = 0.0  # s, latency of each of a ring's 2(t-1) steps
    eta_interconnect: float = 0.7  # fraction of the per-direction link bandwidth a ring reaches, (0, 1]
    allreduce_ll_latency: float = 0.0  # s, fixed latency of NCCL's low-latency protocol
    allreduce_ll_efficiency: float = 0.0  # fraction of link bandwidth of the LL protocol, [0, 1] (0 = not modelled)
    allreduce_floor: float = 0.0  # s, floor of a measured all-reduce (0 = none)
    allreduce_floor_smoothness: float = 4.0  # p of the smooth max joining the floor to the protocol time
    # low-precision GEMMs of the dense layers relative to bf16 ones (fitted on measured operator tables)
    fp8_compute: float = 1.0  # fraction of its tensor-core peak an fp8 GEMM reaches, relative to eta_compute
    fp8_memory: float = 1.0  # an fp8 GEMM's weight-read rate relative to the bf16 GEMMs' (eta_memory)
    fp8_t_extra: float = 0.0  # s, an fp8 GEMM's fixed cost beyond a bf16 GEMM's (quantising the activations)
    fp4_compute: float = 1.0  # the same three for NVFP4 GEMMs
    fp4_memory: float = 1.0
    fp4_t_extra: float = 0.0  # s
    fp8_m_tile: int = 0  # GEMM rows per tile of the fp8 kernels (0 = the bf16 GEMMs' m_tile)
    fp4_m_tile: int = 0  # the same for NVFP4 GEMMs
    # decode attention on its measured form (sdsl.roofline.attention; attn_eta_kv 0 = the roofline)
    attn_t0: float = 0.0  # s, fixed cost of one decode-attention call
    attn_t_block: float = 0.0  # s per (sequence, KV head) block
    attn_eta_kv: float = 0.0  # fraction of the memory bandwidth the KV read reaches, [0, 1] (0 = the roofline)
    attn_smoothness: float = math.inf  # p of its smooth max of compute and KV-read time
    attn_block_bandwidth: float = 0.0  # bytes/s one (sequence, KV head) block's KV read reaches (0 = no limit)
    # provenance
    # where the numbers come from (a fit and its data, a transfer, or defaults)
    source: str = "uncalibrated defaults (assumed, not measured)"

    def __post_init__(self) -> None:
        if not (0 < self.eta_interconnect <= 1):  # a ring cannot beat its link (docstring)
            raise InvalidInputError("LatencyParams.eta_interconnect must lie in (0, 1] (a fraction of the per-direction "
                                    f"link bandwidth); got {self.eta_interconnect!r}.")
        if not (0 <= self.allreduce_ll_efficiency <= 1):
            raise InvalidInputError("LatencyParams.allreduce_ll_efficiency must lie in [0, 1] (0: no LL protocol); "
                                    f"got {self.allreduce_ll_efficiency!r}.")
        if not (1 <= self.allreduce_floor_smoothness < math.inf):
            raise InvalidInputError("LatencyParams.allreduce_floor_smoothness must be finite and >= 1; "
                                    f"got {self.allreduce_floor_smoothness!r}.")
        for name in ("eta_compute", "eta_memory", "fp8_compute", "fp8_memory", "fp4_compute", "fp4_memory") + ELEMENTWISE_ETAS:
            v = getattr(self, name)
            if not (0 < v <= 1):
                raise InvalidInputError(f"LatencyParams.{name} must lie in (0, 1]; got {v!r}.")
        for name in ("t_kernel", "t_layer", "t_step", "allreduce_latency", "allreduce_step_latency",
                     "allreduce_ll_latency", "allreduce_floor", "t_elementwise", "tail_waves",
                     "t_kernel_size", "fp8_t_extra", "fp4_t_extra", "attn_t0", "attn_t_block") + ELEMENTWISE_ROWS:
            v = getattr(self, name)
            if v is None and name == "t_elementwise":
                continue
            if not (v >= 0 and math.isfinite(v)):
                raise InvalidInputError(f"LatencyParams.{name} must be a finite non-negative time; got {v!r}.")
        if not (self.kernel_size_bytes > 0 and math.isfinite(self.kernel_size_bytes)):
            raise InvalidInputError(f"LatencyParams.kernel_size_bytes must be a positive number of bytes; "
                                    f"got {self.kernel_size_bytes!r}.")
        for name in INT_FIELDS:
            v = getattr(self, name)
            if isinstance(v, float) and math.isfinite(v):  # e.g. averaged across GPUs
                v = int(round(v))
                object.__setattr__(self, name, v)
            if not (isinstance(v, int) and v >= 0):
                raise InvalidInputError(f"LatencyParams.{name} must be a non-negative integer; got {v!r}.")
        for name in ("smoothness", "attn_smoothness"):
            if not (getattr(self, name) >= 1):
                raise InvalidInputError(f"LatencyParams.{name} must be >= 1 (inf = hard max); got {getattr(self, name)!r}.")
        if not (self.attn_block_bandwidth >= 0 and math.isfinite(self.attn_block_bandwidth)):
            raise InvalidInputError("LatencyParams.attn_block_bandwidth must be a finite non-negative bandwidth (0: no "
                                    f"per-block limit); got {self.attn_block_bandwidth!r}.")
        if not (0 <= self.attn_eta_kv <= 1):
            raise InvalidInputError("LatencyParams.attn_eta_kv must lie in [0, 1] (0: attention on the roofline); "
                                    f"got {self.attn_eta_kv!r}.")

    def replace(self, **changes) -> "LatencyParams":
        return replace(self, **changes)

    def to_dict(self) -> dict:
        """The fields as plain values; the hard maximum (smoothness inf) is ``None``, JSON's null, as every
        sdsl JSON writes infinity (:meth:`from_dict` reads null, and the older ``"inf"``, back as inf). The
        measured-attention fields are left out while ``attn_eta_kv`` is 0 (attention on the roofline: a calibration
        fitted on kernels that do not time attention, such as ``sdsl calibrate``'s)."""
        d = asdict(self)
        if not self.attn_eta_kv:
            for name in ATTENTION_FIELDS:
                d.pop(name)
        for name in ("smoothness", "attn_smoothness"):
            if name in d and math.isinf(d[name]):
                d[name] = None
        return d

    @classmethod
    def from_dict(cls, data: dict) -> "LatencyParams":
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"Unknown latency parameter(s): {', '.join(sorted(unknown))}.")
        d = dict(data)
        for name in ("smoothness", "attn_smoothness"):
            if name in d:
                d[name] = math.inf if d[name] is None else float(d[name])
        for name in INT_FIELDS:
            if name in d:
                d[name] = int(d[name])
        try:
            return cls(**d)
        except TypeError as exc:
            raise ConfigError(f"Bad latency parameters: {exc}.") from None


DEFAULT_PARAMS = LatencyParams()


@lru_cache(maxsize=None)
def _packaged_file(name: str) -> dict | None:
    from sdsl._io import load_json
    from sdsl._paths import data_path

    path = data_path("latency", f"{name}.json")
    return load_json(path) if path.is_file() else None


@lru_cache(maxsize=None)
def _packaged_overlay(name: str) -> dict | None:
    """Terms measured on NVIDIA's operator tables laid over a Vidur calibration (``latency/opdb/<name>.json``,
    written by ``tools/make_opdb_latency.py``: the fp8 GEMM terms of H100-SXM)."""
    from sdsl._io import load_json
    from sdsl._paths import data_path

    path = data_path("latency", "opdb", f"{name}.json")
    return load_json(path) if path.is_file() else None


#: The engine builds whose bf16 GEMMs an overlay's ``engine_gemm`` terms measured (aiconfigurator-core's vLLM 0.24.0
#: tables): vLLM profiles dated from 2026 on, the vLLM 0.14 line and later (vLLM 0.14.0 pins PyTorch 2.9.1:
#: PrimeIntellect-ai/prime-rl#1625's lock, "torch to 2.9.1+cu128"). An earlier profile, another engine or ``ideal``
#: keeps the GPU's Vidur (2024) GEMMs, the kernels of its validation rows' era; VALIDATION.md ("The two sources on the
#: H100") measures both on those rows.
TABLE_GEMMS_FROM = {"vllm": "2026-01-01"}


def runs_table_gemms(engine) -> bool:
    """Whether ``engine`` (an :class:`~sdsl.engine.profiles.EngineProfile`, a spec it resolves from, or ``None``: the
    roofline alone) is priced on the operator tables' bf16 GEMMs where a GPU's overlay has them (:data:`TABLE_GEMMS_FROM`)."""
    if engine is None:
        return False
    if not hasattr(engine, "date"):
        from sdsl.engine.profiles import resolve_engine

        engine = resolve_engine(engine)
    start = TABLE_GEMMS_FROM.get(engine.engine)
    return bool(start and engine.date and engine.date >= start)


#: sdsl's engine names whose decode-attention kernels the operator tables time -> the tables' engine name
#: (:mod:`sdsl.roofline.attention`).
TABLE_ATTENTION_ENGINES = {"vllm": "vllm", "sglang": "sglang", "sglang-spec-v2": "sglang", "trtllm": "trtllm"}


def table_engine(engine) -> str | None:
    """The tables' engine whose attention terms price ``engine`` (an engine profile, a spec it resolves from, or
    ``None``: the roofline alone), or None where the roofline prices its attention."""
    if engine is None:
        return None
    if not hasattr(engine, "engine"):
        from sdsl.engine.profiles import resolve_engine

        engine = resolve_engine(engine)
    return TABLE_ATTENTION_ENGINES.get(engine.engine)


def runs_table_attention(engine) -> bool:
    """Whether ``engine`` prices decode attention on the measured form where its GPU's calibration has it."""
    return table_engine(engine) is not None


@lru_cache(maxsize=None)
def _packaged_params(name: str, table_gemms: bool = False, attention_engine: str | None = None,
                     fp8_kv: bool = False) -> LatencyParams | None:
    """The shipped calibration of ``name`` with its overlay's low-precision terms, with the overlay's measured bf16
    GEMM terms (``engine_gemm``) when ``table_gemms``, and with the measured decode-attention terms of the tables'
    engine ``attention_engine`` (its own, else vLLM's; :mod:`sdsl.roofline.attention`): the ``attention`` section's,
    fitted on a bf16 KV cache, or with ``fp8_kv`` the ``attention_fp8_kv`` section's."""
    data = _packaged_file(name)
    if data is None:
        return None
    params = LatencyParams.from_dict(data["params"])
    overlay = _packaged_overlay(name) or {}
    if overlay:
        params = params.replace(**overlay["params"], source=f"{params.source}; {overlay['source']}")
        gemm = overlay.get("engine_gemm")
        if table_gemms and gemm:
            params = params.replace(**gemm["params"], source=f"{params.source}; {gemm['source']}")
    section = "attention_fp8_kv" if fp8_kv else "attention"
    terms = data.get(section) or overlay.get(section) or {}
    chosen = (terms.get(attention_engine) or terms.get("vllm")) if attention_engine else None
    if chosen:
        params = params.replace(**chosen["params"], source=f"{params.source}; {chosen['source']}")
    return params


def calibration_provenance(hardware) -> dict:
    """Where ``hardware``'s default latency parameters come from: ``kind`` "measured" (sdsl ships a calibration
    fitted on measured kernels: Vidur's operator profiles, NVIDIA's aiconfigurator-core operator tables, or
    both), "transferred" (the cross-GPU efficiency model, nothing measured on it) or "uncalibrated"
    (:data:`DEFAULT_PARAMS`); ``sources`` names the measured sources with their engine versions, ``transferred``
    the terms a measured calibration still borrows from other GPUs."""
    from sdsl.catalog.hardware import get_hardware

    if not hasattr(hardware, "kind"):
        hardware = get_hardware(hardware)
    name = hardware.name.lower()
    data = _packaged_file(name)
    if data is None:
        kind = "transferred" if hardware.kind == "gpu" and _transfer_basis() else "uncalibrated"
        return {"kind": kind, "sources": [], "transferred": ["all"] if kind == "transferred" else []}
    sources = []
    meta = data.get("measured_on")
    if meta is None:
        sources.append("Vidur operator profiles (MLSys 2024)")
    for m in (meta, (_packaged_overlay(name) or {}).get("measured_on")):
        if m:
            versions = ", ".join(m.get("engine_version", []))
            sources.append(f"{m['source']} ({m['engine']} {versions})")
    return {"kind": "measured", "sources": sources, "transferred": list(data.get("transferred", []))}


def default_params(hardware, engine=None, *, kv_dtype: str | None = None) -> LatencyParams:
    """Latency parameters shipped for ``hardware``: its own calibration when sdsl ships one
    (sdsl/data/latency/<name>.json: H200, B200, B300, GB200, GB300, L40S and RTX PRO 6000 fitted on NVIDIA's measured
    operator tables by ``tools/make_opdb_latency.py``, :mod:`sdsl.fit.opdb.defaults`, with the H100-SXM's fp8 GEMM terms laid
    over its Vidur calibration from latency/opdb/, and its bf16 GEMM terms too when ``engine`` runs the tables'
    kernels (:func:`runs_table_gemms`: vLLM profiles from 2026 on), and the measured decode-attention terms of
    ``engine``'s kernels where the tables time them (:func:`runs_table_attention`: vLLM,
    SGLang and TensorRT-LLM; with ``kv_dtype`` "fp8" the terms fitted on an fp8 KV cache); the others written by ``sdsl calibrate`` from Vidur's
    H100-SXM, A100-80GB and A40 timings, one form on all three: elementwise kernels, GEMMs with 128-row tiles and the kernel
    terms; the H100 and A100 all-reduce fitted to their DGX (NVSwitch) rows, the A40's unfitted, as Vidur
    has no A40 all-reduce; commands and held-out errors in VALIDATION.md, and ``sdsl validate latency
    --json``, key ``shipped``, measures these files on every row); for another accelerator, the cross-GPU
    efficiency model's prediction from its datasheet (:func:`sdsl.roofline.gpu_transfer.transfer_params`; its
    ``source`` names the calibrated GPUs it leans on); otherwise (CPUs) :data:`DEFAULT_PARAMS`. No CPU
    calibration ships: ``profiles/cpu.calib.json`` describes one 2-core machine; pass it with
    ``--calibration``."""
    from sdsl.catalog.hardware import get_hardware

    if not hasattr(hardware, "kind"):  # a catalog name, alias or file, as everywhere else
        hardware = get_hardware(hardware)
    own = _packaged_params(hardware.name.lower(), runs_table_gemms(engine), table_engine(engine), kv_dtype == "fp8")
    if own is not None:
        return own
    if hardware.kind == "gpu":
        from sdsl.roofline.gpu_transfer import transfer_params

        measured = {k: (get_hardware(k), _packaged_params(k)) for k in _transfer_basis()}
        if measured:
            return transfer_params(hardware, measured)
    return DEFAULT_PARAMS


@lru_cache(maxsize=1)
def _transfer_basis() -> tuple[str, ...]:
    """The calibrations the cross-GPU transfer leans on: the GPUs fitted on Vidur's profiles (with their
    overlays), the ones its leave-one-GPU-out validation covers. A GPU calibrated on the operator tables alone
    (H200, B200, B300, GB200, GB300, L40S, RTX PRO 6000) is not a basis: its elementwise terms are themselves transferred."""
    from sdsl.catalog.hardware import get_hardware

    return tuple(k for k in _packaged_names()
                 if "measured_on" not in _packaged_file(k) and get_hardware(k).kind == "gpu")


@lru_cache(maxsize=1)
def _packaged_names() -> tuple[str, ...]:
    from sdsl._paths import data_path

    folder = data_path("latency")
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json")))
