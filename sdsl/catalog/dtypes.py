"""Compute dtypes sdsl prices (bytes per element); weight storage formats are :mod:`sdsl.roofline.weight_formats`."""

from __future__ import annotations

from sdsl.errors import InvalidInputError

__all__ = ["DTYPE_BYTES", "dtype_bytes", "dtype_name"]

DTYPE_BYTES: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
_DTYPE_ALIASES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float8": "fp8"}


def dtype_name(name: str, what: str = "dtype") -> str:
    """The canonical name of dtype ``name`` (``"bfloat16"`` -> ``"bf16"``); an unknown one raises, naming ``what``."""
    key = str(name).lower()
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        raise InvalidInputError(f"Unknown {what} {name!r}; expected one of {', '.join(DTYPE_BYTES)}.")
    return key


def dtype_bytes(name: str) -> int:
    """Bytes per element of dtype ``name`` (``"fp32"``, ``"bf16"``, ``"fp16"``, ``"fp8"``)."""
    return DTYPE_BYTES[dtype_name(name)]
