"""Leave-one-GPU-out validation of the cross-GPU efficiency model (:mod:`sdsl.roofline.gpu_transfer`).

For every GPU with measurements (Vidur's ``<gpu>/<org>/<model>/mlp.csv`` folders), fit the shipped
form (:func:`sdsl.fit.gpu_form.fit_gpu_form`: elementwise kernels, GEMMs with row tiles and the
kernel terms) to each OTHER GPU's data, predict this GPU's parameters from its datasheet with
:func:`sdsl.roofline.gpu_transfer.transfer_params`, and price all of its operator timings (and, given its
elementwise rows, its elementwise kernels) with them. The held-out GPU contributes no row to any fit
that prices it; the feature scales come from the catalog, not from measurements. Reported per GPU:
MAPE over all its points (``transfer_overall_mape``) and at num_tokens <= 64 (``transfer_decode_mape``),
signed bias, the worst held-out model, the elementwise kernels' errors (``transfer_elementwise_*``),
and the in-sample MAPE of its own fit for comparison.

:func:`resolve_gpu_folders` maps data-folder names to hardware (catalog names, aliases, or a
``--hardware folder=name|file`` mapping) and names every unknown folder at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import numpy as np

from sdsl._evidence import leave_one_group_out
from sdsl._result import Result
from sdsl.errors import UnknownNameError
from sdsl.fit.calibration import DECODE_MAX_TOKENS, predict_op_times

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["VIDUR_FOLDERS", "resolve_gpu_folders", "TransferValidation", "fit_each_gpu", "transfer_metrics",
           "elementwise_transfer_metrics", "leave_one_gpu_out", "GPU_FORMS"]

#: Vidur's folder names -> catalog entries (Vidur's H100 numbers reach 2.9 TB/s: SXM, not PCIe).
VIDUR_FOLDERS = {"h100": "h100-sxm", "a100": "a100-80gb", "a40": "a40"}


def resolve_gpu_folders(folders: Iterable[str], mapping: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``{folder: Hardware}`` for data folders named after GPUs.

    A folder resolves through ``mapping`` (folder -> catalog name, file or Hardware) first, then
    Vidur's names (:data:`VIDUR_FOLDERS`), then the catalog's names and aliases. Every folder that
    none of them knows is named in one :class:`~sdsl.errors.UnknownNameError`.
    """
    from sdsl.catalog.hardware import get_hardware

    mapping = {str(k).lower(): v for k, v in (mapping or {}).items()}
    out, unknown = {}, []
    for folder in folders:
        key = str(folder).lower()
        try:
            out[folder] = get_hardware(mapping.get(key, VIDUR_FOLDERS.get(key, key)))
        except UnknownNameError:
            if key in mapping:
                raise
            unknown.append(str(folder))
    if unknown:
        raise UnknownNameError(
            f"GPU folder(s) {', '.join(unknown)} name no catalog hardware; rename them or map them with "
            f"--hardware FOLDER=NAME_OR_FILE (see `sdsl hardware`).")
    return out


@dataclass(frozen=True)
class TransferValidation(Result):
    """Leave-one-GPU-out result: ``per_gpu`` {folder: metrics dict}, the held-out ``points`` table."""

    per_gpu: dict[str, dict[str, Any]]
    points: "pd.DataFrame | None" = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {k: dict(v) for k, v in self.per_gpu.items()}

    def report(self) -> str:
        lines = ["Leave-one-GPU-out: each GPU priced from the others' calibrations via its datasheet"]
        for gpu, r in self.per_gpu.items():
            lines.append(
                f"{gpu.upper()} ({r['hardware']}): transfer MAPE overall {100 * r['transfer_overall_mape']:.1f}%, "
                f"decode {100 * r['transfer_decode_mape']:.1f}%, bias {100 * r['transfer_bias']:+.1f}%, worst model "
                f"{r['worst_model']} {100 * r['worst_model_mape']:.1f}%  (own fit in-sample: "
                f"{100 * r['own_fit_mape']:.1f}% / {100 * r['own_fit_decode_mape']:.1f}%)")
            if "transfer_elementwise_mape" in r:
                lines.append(f"    elementwise kernels: MAPE {100 * r['transfer_elementwise_mape']:.1f}%, decode "
                             f"{100 * r['transfer_elementwise_decode_mape']:.1f}%, bias {100 * r['transfer_elementwise_bias']:+.1f}%")
            lines.append(f"    from: {', '.join(f'{k} {w:.2f}' for k, w in r['weights'].items())}")
        return "\n".join(lines)

    def plot(self, ax=None, path=None):
        """Transferred predicted vs measured times, one panel per GPU (:func:`sdsl.plots.plot_latency_validation`
        draws its own figure, so ``ax`` is not used); saved to ``path`` if given."""
        from sdsl.plots import plot_latency_validation

        return plot_latency_validation(self.points, path=path, label="priced from the other GPUs")


def transfer_metrics(g: "pd.DataFrame", pred: np.ndarray) -> dict[str, Any]:
    """Errors of predicted times ``pred`` against the rows ``g``: MAPE overall and at num_tokens <= 64,
    signed bias, worst point, per-model MAPE and the worst model."""
    meas = g["time_s"].to_numpy(dtype=float)
    rel = pred / meas - 1.0
    ape = np.abs(rel)
    dec = g["num_tokens"].to_numpy() <= DECODE_MAX_TOKENS
    per_model = {m: float(np.mean(ape[(g["model"] == m).to_numpy()])) for m in sorted(g["model"].unique())}
    worst = max(per_model, key=per_model.get)
    return {"transfer_overall_mape": float(np.mean(ape)), "transfer_decode_mape": float(np.mean(ape[dec])),
            "transfer_bias": float(np.mean(rel)), "transfer_decode_bias": float(np.mean(rel[dec])),
            "transfer_max_ape": float(np.max(ape)), "per_model": per_model, "worst_model": worst,
            "worst_model_mape": per_model[worst], "n": int(len(g))}


def _gpu_rows(rows: "pd.DataFrame | None", gpu: str) -> "pd.DataFrame | None":
    return None if rows is None else rows[rows["hardware"] == gpu].reset_index(drop=True)


def elementwise_transfer_metrics(rows: "pd.DataFrame | None", hardware, params) -> dict[str, float]:
    """Errors of ``params`` on elementwise rows (none without rows or elementwise terms): MAPE per kernel,
    at num_tokens <= 64, and the mean signed error."""
    from sdsl.fit.elementwise import predict_elementwise_times

    if rows is None or not len(rows) or params.t_elementwise is None:
        return {}
    rel = predict_elementwise_times(rows, hardware, params) / rows["time_s"].to_numpy(float) - 1.0
    dec = rows["num_tokens"].to_numpy() <= DECODE_MAX_TOKENS
    return {"transfer_elementwise_mape": float(np.mean(np.abs(rel))),
            "transfer_elementwise_decode_mape": float(np.mean(np.abs(rel[dec]))),
            "transfer_elementwise_bias": float(np.mean(rel))}


#: GEMM forms each GPU can be fitted in: the shipped one, and the one shipped before it (no row tiles,
#: no kernel terms, elementwise kernels priced like GEMMs), kept for VALIDATION.md's comparison.
GPU_FORMS = ("shipped", "untiled")


def fit_each_gpu(data: "pd.DataFrame", hardware: Mapping[str, Any] | None = None, smoothness: str | float = "auto",
                 dtype: str = "fp16", elementwise: "pd.DataFrame | None" = None,
                 form: str = "shipped") -> tuple[dict, dict, dict]:
    """``(hardware, rows, fits)`` per GPU folder of ``data``: each GPU fitted to its own rows only, in the
    shipped form (:func:`sdsl.fit.gpu_form.fit_gpu_form`; ``elementwise``: Vidur elementwise rows of
    the same folders, whose fixed cost is the launch floor) or ``form="untiled"`` (:data:`GPU_FORMS`)."""
    from sdsl.errors import InvalidInputError, ProfileError
    from sdsl.fit.calibration import fit_latency
    from sdsl.fit.gpu_form import fit_gpu_form

    if form not in GPU_FORMS:
        raise InvalidInputError(f"form must be one of {GPU_FORMS}, not {form!r}.")
    gpus = sorted(data["hardware"].unique())
    if len(gpus) < 2:
        raise ProfileError(f"Leave-one-GPU-out needs measurements of at least two GPUs, found {gpus}.")
    hw = resolve_gpu_folders(gpus, hardware)
    frames = {g: data[data["hardware"] == g] for g in gpus}
    if form == "untiled":
        fits = {g: fit_latency(frames[g], hw[g], dtype=dtype, smoothness=smoothness, keep_points=False,
                               sources=(f"vidur/{g}",)) for g in gpus}
    else:
        fits = {g: fit_gpu_form(frames[g], hw[g], _gpu_rows(elementwise, g), dtype=dtype, smoothness=smoothness,
                                sources=(f"vidur/{g}",)) for g in gpus}
    return hw, frames, fits


def leave_one_gpu_out(data: "pd.DataFrame", hardware: Mapping[str, Any] | None = None,
                      smoothness: str | float = "auto", dtype: str = "fp16",
                      rule: str = "architecture", elementwise: "pd.DataFrame | None" = None,
                      form: str = "shipped") -> TransferValidation:
    """Leave-one-GPU-out over the ``hardware`` column of ``data`` (Vidur long format); see the module docstring.

    ``hardware``: optional folder -> catalog name / file mapping (:func:`resolve_gpu_folders`);
    ``rule``: which calibrated GPUs a held-out GPU may lean on (:data:`sdsl.roofline.gpu_transfer.TRANSFER_RULES`);
    ``elementwise``: Vidur elementwise rows of the same folders (fitted with each GPU's GEMMs, and the
    held-out GPU's priced); ``form``: the GEMM form each GPU is fitted in (:data:`GPU_FORMS`). Needs at
    least two GPUs.
    """
    import pandas as pd

    from sdsl.roofline.gpu_transfer import transfer_params, transfer_weights

    hw, frames, fits = fit_each_gpu(data, hardware, smoothness, dtype, elementwise, form)

    def held_out(g):  # the GPU priced from the other GPUs' fits only
        others = {o: (hw[o], fits[o].params) for o in frames if o != g}
        params = transfer_params(hw[g], others, rule)
        pred = predict_op_times(frames[g], hw[g], params, dtype=dtype)
        weights = transfer_weights(hw[g], others, rule)
        metrics = {"hardware": hw[g].key, "rule": rule, **transfer_metrics(frames[g], pred),
                   **elementwise_transfer_metrics(_gpu_rows(elementwise, g), hw[g], params),
                   "weights": {hw[o].key: float(w) for o, w in weights.items()},
                   "params": {k: v for k, v in params.to_dict().items() if k != "source"},
                   "own_fit_mape": fits[g].mape, "own_fit_decode_mape": fits[g].decode_mape}
        return metrics, frames[g].assign(measured_s=frames[g]["time_s"].to_numpy(), predicted_s=pred,
                                         ape=np.abs(pred / frames[g]["time_s"].to_numpy() - 1.0))

    folds = leave_one_group_out(frames, held_out)
    return TransferValidation(per_gpu={g: m for g, (m, _) in folds.items()},
                              points=pd.concat([p for _, p in folds.values()], ignore_index=True))
