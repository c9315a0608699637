"""Torch profiling harness (``sdsl profile``): measures what :mod:`sdsl.fit.calibration` fits.

(a) per-operator GEMM times for a ModelSpec's layer shapes across num_tokens — the same four
operators, named as in Vidur's data, so the two are comparable row for row;
(b) whole decoder-layer steps with a KV cache, batch b × q new tokens × context L.

torch is imported only inside this package (and only when a measurement runs): ``import sdsl``
and ``sdsl --help`` never pull it in.
"""

from __future__ import annotations

__all__ = ["HARNESS_VERSION", "Grid", "quick_grid", "default_grid", "run_profile"]

def __getattr__(name):  # lazy: importing sdsl.torch.harness does not import torch
    if name in ("HARNESS_VERSION", "Grid", "quick_grid", "default_grid", "run_profile"):
        from sdsl.torch.harness import run

        return getattr(run, name)
    raise AttributeError(name)
