"""Figure recipes for the step-time model's evidence: leave-one-model-out on Vidur, the CPU calibration."""

from __future__ import annotations

from sdsl.plots._common import _figure
from sdsl.plots.calibration import latency_validation_figure, plot_calibration

__all__ = ["fig_latency_validation", "fig_cpu_calibration"]


def fig_latency_validation(quick: bool = False):
    """Predicted vs measured operator times on Vidur's real H100 and A100 data, each model predicted
    by a calibration fitted on the other models (leave-one-model-out; ``quick``: H100 only)."""
    from sdsl._paths import data_path
    from sdsl.validation.latency_validation import leave_one_model_out
    from sdsl.fit.profiles import read_vidur, read_vidur_elementwise

    data = read_vidur(data_path("vidur"), hardware=("h100", "a100"))  # the A40's panel: VALIDATION.md, "Cross-GPU transfer"
    if quick:
        data = data[data["hardware"] == "h100"]
    _, points, _ = leave_one_model_out(data, elementwise=read_vidur_elementwise(data_path("vidur")))
    return latency_validation_figure(points)[0]


def fig_cpu_calibration(quick: bool = False):
    """Predicted vs measured times of this machine's CPU profile (profiles/cpu.calib.json, fitted by
    ``sdsl calibrate profiles/cpu-*.csv --fit-layers --points``)."""
    from sdsl._paths import REPO_ROOT
    from sdsl.fit.calibration import CalibrationResult

    result = CalibrationResult.from_json(REPO_ROOT / "profiles" / "cpu.calib.json")
    fig, ((ax,),) = _figure(figsize=(5.2, 4.6))
    plot_calibration(result, ax=ax)
    return fig
