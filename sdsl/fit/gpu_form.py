"""The form sdsl ships on every calibrated GPU, fitted in one call (VALIDATION.md, "What `default_params` gives").

The same fit ``sdsl calibrate`` makes on a Vidur folder, for rows already read: the elementwise kernels first
(:func:`sdsl.fit.elementwise.fit_elementwise`; their fixed cost is every kernel's launch floor), then the GEMMs
(:func:`sdsl.fit.calibration.fit_latency`) with 128-row tiles and the kernel terms. The leave-one-GPU-out
validation (:mod:`sdsl.fit.transfer`) and the all-model fit of ``sdsl validate latency`` use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from sdsl.roofline.latency import DEFAULT_PARAMS
from sdsl.fit.calibration import GPU_M_TILE, CalibrationResult, fit_latency

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["fit_gpu_form"]


def fit_gpu_form(data: "pd.DataFrame", hardware, elementwise: "pd.DataFrame | None" = None, *,
                 dtype: str | None = "fp16", smoothness: str | float = "auto", sources: Iterable[str] = (),
                 keep_points: bool = False) -> CalibrationResult:
    """The form sdsl ships on every calibrated GPU (``sdsl calibrate`` on a Vidur folder; VALIDATION.md): the
    elementwise kernels fitted first to ``elementwise`` (Vidur rows, :func:`sdsl.fit.vidur.read_vidur_elementwise`;
    their fixed cost is every kernel's launch floor), then the GEMMs of ``data`` with 128-row tiles and the
    kernel terms (smallest row tile, last wave's tail, size overhead; they need the hardware's SM count).
    Without elementwise rows the launch floor ``t_kernel`` is fitted to the GEMMs."""
    base = None
    if elementwise is not None and len(elementwise):
        from sdsl.fit.elementwise import fit_elementwise

        base = fit_elementwise(elementwise, hardware, DEFAULT_PARAMS)[0]
    return fit_latency(data, hardware, dtype=dtype, smoothness=smoothness, keep_points=keep_points, sources=sources,
                       m_tile=GPU_M_TILE, kernel_terms=bool(getattr(hardware, "sm_count", None)), base=base)
