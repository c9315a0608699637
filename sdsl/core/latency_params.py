"""Latency parameters of the roofline (what calibration fits) and the ones sdsl ships per hardware.

See :mod:`sdsl.core.latency` for the step-time model these parameters enter (docs/model.md §3.3).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from functools import lru_cache

from sdsl.errors import ConfigError, InvalidInputError

__all__ = ["LatencyParams", "DEFAULT_PARAMS", "default_params"]


@dataclass(frozen=True)
class LatencyParams:
    """What calibration fits (sdsl.fit.calibration): efficiencies and fixed overheads of the roofline.

    eta_compute, eta_memory: fractions of datasheet peak FLOP/s and bandwidth reached by kernels.
    t_kernel: fixed cost of one kernel launch (s). t_layer: fixed cost per decoder layer beyond its
    kernels (s; framework dispatch, e.g. eager PyTorch on CPU). t_step: fixed cost per forward pass (s).
    smoothness: p of the smooth maximum between compute and memory time (inf = hard max).
    allreduce_latency, eta_interconnect: latency (s) and bandwidth efficiency of one all-reduce.
    """

    eta_compute: float = 0.7
    eta_memory: float = 0.8
    t_kernel: float = 4e-6
    t_layer: float = 0.0
    t_step: float = 0.0
    smoothness: float = math.inf
    allreduce_latency: float = 1.0e-5
    eta_interconnect: float = 0.7
    source: str = "uncalibrated defaults (assumed, not measured)"

    def __post_init__(self) -> None:
        for name in ("eta_compute", "eta_memory", "eta_interconnect"):
            v = getattr(self, name)
            if not (0 < v <= 1):
                raise InvalidInputError(f"LatencyParams.{name} must lie in (0, 1]; got {v!r}.")
        for name in ("t_kernel", "t_layer", "t_step", "allreduce_latency"):
            v = getattr(self, name)
            if not (v >= 0 and math.isfinite(v)):
                raise InvalidInputError(f"LatencyParams.{name} must be a finite non-negative time; got {v!r}.")
        if not (self.smoothness >= 1):
            raise InvalidInputError(f"LatencyParams.smoothness must be >= 1 (inf = hard max); got {self.smoothness!r}.")

    def replace(self, **changes) -> "LatencyParams":
        return replace(self, **changes)

    def to_dict(self) -> dict:
        d = asdict(self)
        if math.isinf(d["smoothness"]):
            d["smoothness"] = "inf"
        return d

    @classmethod
    def from_dict(cls, data: dict) -> "LatencyParams":
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"Unknown latency parameter(s): {', '.join(sorted(unknown))}.")
        d = dict(data)
        if "smoothness" in d:
            d["smoothness"] = float(d["smoothness"])
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
    (sdsl/data/latency/<name>.json, fitted by ``sdsl calibrate`` to real measurements — H100-SXM and
    A100-80GB from Vidur's operator timings); for another accelerator, the cross-GPU efficiency
    model's prediction from its datasheet (:func:`sdsl.core.efficiency.transfer_params`; its ``source``
    names the calibrated GPUs it leans on); otherwise :data:`DEFAULT_PARAMS`."""
    from sdsl.core.hardware import get_hardware

    if not hasattr(hardware, "kind"):  # a catalog name, alias or file, as everywhere else
        hardware = get_hardware(hardware)
    own = _packaged_params(hardware.name.lower())
    if own is not None:
        return own
    if hardware.kind == "gpu":
        from sdsl.core.efficiency import transfer_params

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
