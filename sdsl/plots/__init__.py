"""Figure functions, one module per subject. matplotlib is imported inside the functions only,
never at ``import sdsl`` or ``import sdsl.plots``.

``fig_*`` functions take ``quick`` (coarser grids, for tests) and return a Figure built without
pyplot; :mod:`sdsl.experiments.figures` registers and saves them. ``plot_*`` functions draw on a given Axes.
"""

from sdsl.plots.calibration import fig_cpu_calibration, fig_latency_validation, plot_calibration, plot_latency_validation
from sdsl.plots.leviathan import LEVIATHAN_T5, LEVIATHAN_TABLE1, fig_leviathan_speedup_vs_gamma, fig_leviathan_table1
from sdsl.plots.reference import fig_decoder_speedup
from sdsl.plots.scaling import (fig_hardware_draft_size, fig_sdsl_acceptance_plane, fig_sdsl_draft_law,
                      fig_sdsl_nstar_vs_tokens, fig_sdsl_speedup_vs_gamma)
from sdsl.plots.serving import fig_serving_alpha_shift, fig_serving_k_vs_batch, fig_serving_latency_vs_qps, fig_serving_speedup_vs_batch
from sdsl.plots.turbospec import fig_turbospec_linear_fit, fig_turbospec_speedup_vs_batch, fig_turbospec_step_latency

__all__ = [
    "plot_calibration", "plot_latency_validation", "fig_latency_validation", "fig_cpu_calibration",
    "LEVIATHAN_TABLE1", "LEVIATHAN_T5", "fig_leviathan_table1", "fig_leviathan_speedup_vs_gamma",
    "fig_decoder_speedup",
    "fig_sdsl_acceptance_plane", "fig_sdsl_speedup_vs_gamma", "fig_sdsl_draft_law", "fig_sdsl_nstar_vs_tokens",
    "fig_hardware_draft_size",
    "fig_serving_speedup_vs_batch", "fig_serving_k_vs_batch", "fig_serving_latency_vs_qps", "fig_serving_alpha_shift",
    "fig_turbospec_step_latency", "fig_turbospec_speedup_vs_batch", "fig_turbospec_linear_fit",
]
