"""Latency parameters of the roofline (what calibration fits) and the ones sdsl ships per hardware.

See :mod:`sdsl.roofline.latency` for the step-time model these parameters enter (docs/model.md §3.3).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from functools import lru_cache

from sdsl.errors import ConfigError, InvalidInputError

__all__ = ["LatencyParams", "DEFAULT_PARAMS", "default_params", "ELEMENTWISE_KINDS"]


#: Elementwise kernel kinds (Vidur: input/post_attention_layernorm, attn_rope, mlp_act, add).
ELEMENTWISE_KINDS = ("norm", "rope", "act", "add")
ELEMENTWISE_ETAS = tuple(f"eta_{k}" for k in ELEMENTWISE_KINDS)
ELEMENTWISE_ROWS = ("row_norm", "row_rope", "row_act")


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
    of these 0: the form without them.

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

    **Provenance** — ``source``: where the numbers come from (a fit and its data, a transfer, or defaults).
    """

    # rates
    eta_compute: float = 0.7
    eta_memory: float = 0.8
    # fixed costs (s), then the roofline's smooth maximum (a rate term; its place keeps the JSON field order)
    t_kernel: float = 4e-6
    t_layer: float = 0.0
    t_step: float = 0.0
    smoothness: float = math.inf
    # GEMM shape terms
    m_tile: int = 0
    m_tile_min: int = 0
    tail_waves: float = 0.0
    t_kernel_size: float = 0.0
    kernel_size_bytes: float = 1.0e7
    # elementwise kernels
    t_elementwise: float | None = None
    eta_norm: float = 1.0
    eta_rope: float = 1.0
    eta_act: float = 1.0
    eta_add: float = 1.0
    row_norm: float = 0.0
    row_rope: float = 0.0
    row_act: float = 0.0
    # tensor-parallel all-reduce
    allreduce_latency: float = 1.0e-5
    allreduce_step_latency: float = 0.0
    eta_interconnect: float = 0.7
    allreduce_ll_latency: float = 0.0
    allreduce_ll_efficiency: float = 0.0
    allreduce_floor: float = 0.0
    allreduce_floor_smoothness: float = 4.0
    # provenance
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
        for name in ("eta_compute", "eta_memory") + ELEMENTWISE_ETAS:
            v = getattr(self, name)
            if not (0 < v <= 1):
                raise InvalidInputError(f"LatencyParams.{name} must lie in (0, 1]; got {v!r}.")
        for name in ("t_kernel", "t_layer", "t_step", "allreduce_latency", "allreduce_step_latency",
                     "allreduce_ll_latency", "allreduce_floor", "t_elementwise", "tail_waves",
                     "t_kernel_size") + ELEMENTWISE_ROWS:
            v = getattr(self, name)
            if v is None and name == "t_elementwise":
                continue
            if not (v >= 0 and math.isfinite(v)):
                raise InvalidInputError(f"LatencyParams.{name} must be a finite non-negative time; got {v!r}.")
        if not (self.kernel_size_bytes > 0 and math.isfinite(self.kernel_size_bytes)):
            raise InvalidInputError(f"LatencyParams.kernel_size_bytes must be a positive number of bytes; "
                                    f"got {self.kernel_size_bytes!r}.")
        for name in ("m_tile", "m_tile_min"):
            v = getattr(self, name)
            if isinstance(v, float) and math.isfinite(v):  # e.g. averaged across GPUs
                v = int(round(v))
                object.__setattr__(self, name, v)
            if not (isinstance(v, int) and v >= 0):
                raise InvalidInputError(f"LatencyParams.{name} must be a non-negative integer; got {v!r}.")
        if not (self.smoothness >= 1):
            raise InvalidInputError(f"LatencyParams.smoothness must be >= 1 (inf = hard max); got {self.smoothness!r}.")

    def replace(self, **changes) -> "LatencyParams":
        return replace(self, **changes)

    def to_dict(self) -> dict:
        """The fields as plain values; the hard maximum (smoothness inf) is ``None``, JSON's null, as every
        sdsl JSON writes infinity (:meth:`from_dict` reads null, and the older ``"inf"``, back as inf)."""
        d = asdict(self)
        if math.isinf(d["smoothness"]):
            d["smoothness"] = None
        return d

    @classmethod
    def from_dict(cls, data: dict) -> "LatencyParams":
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"Unknown latency parameter(s): {', '.join(sorted(unknown))}.")
        d = dict(data)
        if "smoothness" in d:
            d["smoothness"] = math.inf if d["smoothness"] is None else float(d["smoothness"])
        for name in ("m_tile", "m_tile_min"):
            if name in d:
                d[name] = int(d[name])
        try:
            return cls(**d)
        except TypeError as exc:
            raise ConfigError(f"Bad latency parameters: {exc}.") from None


DEFAULT_PARAMS = LatencyParams()


@lru_cache(maxsize=None)
def _packaged_params(name: str) -> LatencyParams | None:
    from importlib import resources

    from sdsl._io import load_json

    path = resources.files("sdsl") / "data" / "latency" / f"{name}.json"
    return LatencyParams.from_dict(load_json(path)["params"]) if path.is_file() else None


def default_params(hardware) -> LatencyParams:
    """Latency parameters shipped for ``hardware``: its own calibration when sdsl ships one
    (sdsl/data/latency/<name>.json, written by ``sdsl calibrate`` from Vidur's H100-SXM, A100-80GB and
    A40 timings, one form on all three: elementwise kernels, GEMMs with 128-row tiles and the kernel
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
    own = _packaged_params(hardware.name.lower())
    if own is not None:
        return own
    if hardware.kind == "gpu":
        from sdsl.roofline.gpu_transfer import transfer_params

        measured = {k: (get_hardware(k), _packaged_params(k)) for k in _packaged_names()}
        measured = {k: v for k, v in measured.items() if v[0].kind == "gpu"}
        if measured:
            return transfer_params(hardware, measured)
    return DEFAULT_PARAMS


@lru_cache(maxsize=1)
def _packaged_names() -> tuple[str, ...]:
    from importlib import resources

    folder = resources.files("sdsl") / "data" / "latency"
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json")))
