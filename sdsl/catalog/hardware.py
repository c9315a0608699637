"""Hardware catalog: datasheet peaks of the accelerators sdsl prices forward passes on.

The catalog lives in ``sdsl/data/hardware.toml`` in human units (TFLOP/s, GB/s, GiB) with a
source per entry; :class:`Hardware` holds the same numbers in SI units (FLOP/s, bytes/s, bytes).
All FLOP/s figures are *dense* tensor-core peaks (the "with sparsity" datasheet figure halved).
These are the starting point of the roofline in docs/model.md §3.3; calibration fits efficiencies on top.

Users add their own accelerator with a TOML or JSON file holding the same keys as the catalog
(one entry at the top level, or several tables keyed by short name); see :func:`load_hardware_file`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from sdsl._io import load_mapping, load_shipped_toml
from sdsl.errors import ConfigError, InvalidInputError, UnknownNameError

__all__ = ["ARCHITECTURES", "Hardware", "get_hardware", "list_hardware", "load_hardware_file"]

_TERA = 1e12
_GIGA = 1e9
#: Device memory is binary: a datasheet's "80 GB" of HBM or GDDR is 80 GiB (DRAM dies come in powers of two;
#: ``nvidia-smi`` reports 81920 MiB on an A100 80GB and 81559 MiB on an H100 80GB, i.e. 80 and 79.6 GiB,
#: modal-labs/modal-client PR #2797). Bandwidths and FLOP/s are decimal (1 GB/s = 1e9 bytes/s).
_GIB = 2.0**30
_KINDS = ("gpu", "cpu")
# keys of an entry in a hardware file (human units) -> accepted
_REQUIRED = ("bf16_tflops", "mem_bandwidth_gbs", "mem_gb")
_OPTIONAL = ("name", "aliases", "kind", "fp8_tflops", "interconnect_gbs", "source", "bf16_sparse_tflops",
             "fp8_sparse_tflops", "interconnect", "architecture", "memory_type", "sm_count", "l2_mb", "fp4_tflops",
             "fp4_sparse_tflops")
_POSITIVE = ("bf16_tflops", "mem_bandwidth_gbs", "mem_gb", "fp8_tflops", "interconnect_gbs", "bf16_sparse_tflops",
             "fp8_sparse_tflops", "sm_count", "l2_mb", "fp4_tflops", "fp4_sparse_tflops")
_TEXT = ("name", "kind", "source", "interconnect", "architecture", "memory_type")
#: architecture generations in release order (what the cross-GPU efficiency model reads as "generation")
ARCHITECTURES = ("volta", "ampere", "ada", "hopper", "blackwell", "cdna2", "cdna3", "gaudi3", "zen4")


@dataclass(frozen=True)
class Hardware:
    """One accelerator (or CPU socket), in SI units.

    Attributes:
        name: display name, e.g. ``"H100-SXM"``.
        peak_flops: dense bf16/fp16 tensor peak, FLOP/s.
        peak_flops_fp8: dense fp8 tensor peak, FLOP/s, or ``None`` when there are no fp8 tensor cores.
        mem_bandwidth: peak device-memory bandwidth, bytes/s.
        mem_capacity: device memory, bytes: the catalog's ``mem_gb`` read as GiB (2^30 bytes, :data:`_GIB`).
        interconnect_bandwidth: GPU-to-GPU bandwidth per GPU and PER DIRECTION, bytes/s (NVLink4 on
            H100-SXM: 450e9; PCIe cards: their PCIe x16 link), or ``None``.
        kind: ``"gpu"`` (any accelerator with its own memory) or ``"cpu"``.
        source: where the numbers come from (datasheet URL).
        aliases: other lower-case names that find this entry.
        architecture: generation (``"hopper"``, ``"ampere"``, ...; see :data:`ARCHITECTURES`) or ``None``.
        memory_type: ``"HBM3"``, ``"GDDR6"``, ... or ``None``.
        sm_count: SMs (NVIDIA) or compute units (AMD), or ``None`` where unpublished.
        l2_cache: shared last-level on-chip cache, bytes, or ``None``.
        peak_flops_sparse, peak_flops_fp8_sparse: the datasheets' 2:4-sparse figures (FLOP/s) where
            printed; never used for pricing, kept so that dense = sparse / 2 can be checked.
        interconnect: the GPU-to-GPU link in words.
        peak_flops_fp4, peak_flops_fp4_sparse: dense (and 2:4-sparse) fp4 tensor peak, FLOP/s, on GPUs with
            fp4 tensor cores (Blackwell), else ``None``; what NVFP4 weights with fp4 activations run at
            (:func:`sdsl.roofline.weight_formats.gemm_peak`).
    """

    name: str
    peak_flops: float
    peak_flops_fp8: float | None
    mem_bandwidth: float
    mem_capacity: float
    interconnect_bandwidth: float | None
    kind: str
    source: str
    aliases: tuple[str, ...] = field(default=())
    architecture: str | None = None
    memory_type: str | None = None
    sm_count: int | None = None
    l2_cache: float | None = None
    peak_flops_sparse: float | None = None
    peak_flops_fp8_sparse: float | None = None
    interconnect: str | None = None
    peak_flops_fp4: float | None = None
    peak_flops_fp4_sparse: float | None = None

    def __post_init__(self) -> None:
        for attr in ("peak_flops", "mem_bandwidth", "mem_capacity"):
            value = getattr(self, attr)
            if not _positive(value):
                raise InvalidInputError(f"Hardware {self.name!r}: {attr} must be a positive number, got {value!r}.")
        for attr in ("peak_flops_fp8", "interconnect_bandwidth", "sm_count", "l2_cache", "peak_flops_sparse",
                     "peak_flops_fp8_sparse", "peak_flops_fp4", "peak_flops_fp4_sparse"):
            value = getattr(self, attr)
            if value is not None and not _positive(value):
                raise InvalidInputError(f"Hardware {self.name!r}: {attr} must be positive or absent, got {value!r}.")
        if self.kind not in _KINDS:
            raise InvalidInputError(f"Hardware {self.name!r}: kind must be one of {_KINDS}, got {self.kind!r}.")
        if self.architecture is not None and self.architecture not in ARCHITECTURES:
            raise InvalidInputError(f"Hardware {self.name!r}: architecture must be one of {', '.join(ARCHITECTURES)}, "
                                    f"got {self.architecture!r}.")
        object.__setattr__(self, "aliases", tuple(str(a).lower() for a in self.aliases))

    @property
    def key(self) -> str:
        """Lower-case catalog name (``"h100-sxm"``)."""
        return self.name.lower()

    def peak_flops_for(self, dtype: str = "bf16") -> float:
        """Dense peak FLOP/s for ``dtype``.

        fp8 uses the fp8 tensor peak where the chip has one and falls back to the bf16 peak
        (weights are up-cast) where it has none; fp32 is priced at the bf16 tensor peak / 2
        (TF32 tensor cores run at half the bf16 rate on Ampere/Hopper).
        """
        dtype = str(dtype).lower()
        if dtype in ("bf16", "fp16", "float16", "bfloat16"):
            return self.peak_flops
        if dtype in ("fp8", "float8"):
            return self.peak_flops_fp8 if self.peak_flops_fp8 is not None else self.peak_flops
        if dtype in ("fp32", "float32"):
            return self.peak_flops / 2.0
        raise InvalidInputError(f"Unknown dtype {dtype!r}; expected one of fp32, bf16, fp16, fp8.")

    def to_dict(self) -> dict[str, Any]:
        """SI-unit fields as a JSON-ready dict."""
        d = asdict(self)
        d["aliases"] = list(self.aliases)
        return d

    def to_human(self) -> dict[str, Any]:
        """The entry in the catalog file's human units (TFLOP/s, GB/s, GB)."""
        d: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "bf16_tflops": self.peak_flops / _TERA,
            "mem_bandwidth_gbs": self.mem_bandwidth / _GIGA,
            "mem_gb": self.mem_capacity / _GIB,
            "source": self.source,
        }
        if self.peak_flops_fp8 is not None:
            d["fp8_tflops"] = self.peak_flops_fp8 / _TERA
        if self.interconnect_bandwidth is not None:
            d["interconnect_gbs"] = self.interconnect_bandwidth / _GIGA
        for key, value, unit in (("bf16_sparse_tflops", self.peak_flops_sparse, _TERA),
                                 ("fp8_sparse_tflops", self.peak_flops_fp8_sparse, _TERA),
                                 ("fp4_tflops", self.peak_flops_fp4, _TERA),
                                 ("fp4_sparse_tflops", self.peak_flops_fp4_sparse, _TERA),
                                 ("l2_mb", self.l2_cache, 1e6), ("sm_count", self.sm_count, 1)):
            if value is not None:
                d[key] = value / unit if unit != 1 else value
        for key in ("architecture", "memory_type", "interconnect"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        if self.aliases:
            d["aliases"] = list(self.aliases)
        return d


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _from_entry(key: str, entry: Mapping[str, Any], origin: str) -> Hardware:
    """Build a :class:`Hardware` from one human-unit table; bad entries raise ConfigError."""
    if not isinstance(entry, Mapping):
        raise ConfigError(f"Hardware entry {key!r} in {origin} must be a table of keys.")
    missing = [k for k in _REQUIRED if k not in entry]
    if missing:
        raise ConfigError(f"Hardware entry {key!r} in {origin} lacks required key(s) {', '.join(missing)}.")
    unknown = sorted(set(entry) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise ConfigError(
            f"Hardware entry {key!r} in {origin} has unknown key(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(_REQUIRED + _OPTIONAL)}."
        )
    for k in _POSITIVE:
        if k in entry and not _positive(entry[k]):
            raise ConfigError(f"Hardware entry {key!r} in {origin}: {k} must be a positive number, got {entry[k]!r}.")
    for k in _TEXT:
        if k in entry and not isinstance(entry[k], str):
            raise ConfigError(f"Hardware entry {key!r} in {origin}: {k} must be a string, got {entry[k]!r}.")
    aliases = entry.get("aliases", [])
    if isinstance(aliases, str) or not all(isinstance(a, str) for a in aliases):
        raise ConfigError(f"Hardware entry {key!r} in {origin}: aliases must be a list of strings.")

    def scaled(k, unit):
        return None if entry.get(k) is None else float(entry[k]) * unit

    try:
        return Hardware(
            name=str(entry.get("name", key)),
            peak_flops=float(entry["bf16_tflops"]) * _TERA,
            peak_flops_fp8=scaled("fp8_tflops", _TERA),
            mem_bandwidth=float(entry["mem_bandwidth_gbs"]) * _GIGA,
            mem_capacity=float(entry["mem_gb"]) * _GIB,
            interconnect_bandwidth=scaled("interconnect_gbs", _GIGA),
            kind=str(entry.get("kind", "gpu")).lower(),
            source=str(entry.get("source", origin)),
            aliases=tuple(aliases),
            architecture=None if entry.get("architecture") is None else entry["architecture"].lower(),
            memory_type=entry.get("memory_type"),
            sm_count=None if entry.get("sm_count") is None else int(entry["sm_count"]),
            l2_cache=scaled("l2_mb", 1e6),
            peak_flops_sparse=scaled("bf16_sparse_tflops", _TERA),
            peak_flops_fp8_sparse=scaled("fp8_sparse_tflops", _TERA),
            interconnect=entry.get("interconnect"),
            peak_flops_fp4=scaled("fp4_tflops", _TERA),
            peak_flops_fp4_sparse=scaled("fp4_sparse_tflops", _TERA),
        )
    except InvalidInputError as exc:
        raise ConfigError(f"{exc} (in {origin})") from None


def _parse_mapping(data: Mapping[str, Any], origin: str) -> list[Hardware]:
    if any(k in data for k in _REQUIRED):  # a single entry at the top level
        key = str(data.get("name", Path(origin).stem))
        return [_from_entry(key, data, origin)]
    if not data:
        raise ConfigError(f"{origin} holds no hardware entries.")
    return [_from_entry(key, entry, origin) for key, entry in data.items()]


def load_hardware_file(path: str | Path) -> list[Hardware]:
    """Read user hardware from a TOML or JSON file (same keys as ``sdsl/data/hardware.toml``).

    The file holds either one entry at the top level (``name = "my-gpu"``, ``bf16_tflops = ...``)
    or several tables keyed by short name. Required keys: ``bf16_tflops``, ``mem_bandwidth_gbs``,
    ``mem_gb``; optional: ``name``, ``aliases``, ``kind``, ``fp8_tflops``, ``interconnect_gbs`` (per
    direction), ``interconnect``, ``architecture``, ``memory_type``, ``sm_count``, ``l2_mb``,
    ``bf16_sparse_tflops``, ``fp8_sparse_tflops``, ``fp4_tflops``, ``fp4_sparse_tflops``, ``source`` (the catalog file's header explains
    each). A missing or malformed file, or one lacking a required key, raises :class:`~sdsl.errors.ConfigError`.
    """
    path = Path(path)
    return _parse_mapping(load_mapping(path), str(path))


@lru_cache(maxsize=1)
def _catalog() -> tuple[Hardware, ...]:
    from sdsl._paths import data_path

    data = load_shipped_toml(data_path("hardware.toml"))
    out = []
    for key, entry in data.items():
        hw = _from_entry(key, entry, "sdsl/data/hardware.toml")
        if hw.key != key:
            raise ConfigError(f"Catalog key {key!r} does not match its name {hw.name!r}.")
        out.append(hw)
    return tuple(out)


@lru_cache(maxsize=1)
def _index() -> dict[str, Hardware]:
    idx: dict[str, Hardware] = {}
    for hw in _catalog():
        for k in (hw.key, *hw.aliases):
            idx[k] = hw
    return idx


def list_hardware() -> list[Hardware]:
    """Every catalog entry, in catalog order."""
    return list(_catalog())


def _looks_like_path(text: str) -> bool:
    return any(sep in text for sep in ("/", "\\")) or text.lower().endswith((".toml", ".json"))


def get_hardware(name_or_path: str | Path | Hardware) -> Hardware:
    """A catalog entry by name or alias (case-insensitive), or the entry in a user file.

    A path (anything with a path separator or ending in ``.toml``/``.json``) is read with
    :func:`load_hardware_file` and must hold exactly one entry. An unknown name raises
    :class:`~sdsl.errors.UnknownNameError` that lists the closest catalog names.
    """
    if isinstance(name_or_path, Hardware):
        return name_or_path
    text = str(name_or_path).strip()
    if isinstance(name_or_path, Path) or _looks_like_path(text) or (Path(text).is_file() and text not in _index()):
        entries = load_hardware_file(text)
        if len(entries) != 1:
            raise ConfigError(f"{text} holds {len(entries)} hardware entries; pass a file with exactly one.")
        return entries[0]
    key = text.lower().replace("_", "-").replace(" ", "-")
    idx = _index()
    if key in idx:
        return idx[key]
    names = [hw.key for hw in _catalog()]
    import difflib

    close = difflib.get_close_matches(key, list(idx), n=3, cutoff=0.4)
    close = list(dict.fromkeys(idx[c].key for c in close))
    hint = f"closest: {', '.join(close)}" if close else f"known: {', '.join(names)}"
    raise UnknownNameError(f"Unknown hardware {text!r} ({hint}); pass a catalog name or a .toml/.json file.")
