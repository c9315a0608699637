"""Pure drawing: data or result objects in, a matplotlib Figure or Axes out.

This package reads no files and fits nothing; it imports only matplotlib (inside the functions, never
at ``import sdsl.plots``) and sdsl's base modules (errors, atomic I/O). The recipes that compute a
figure's data and call these functions live in :mod:`sdsl.validation.figures`.
"""

from sdsl.plots._common import save_figure
from sdsl.plots.calibration import latency_validation_figure, plot_calibration, plot_latency_validation

__all__ = ["plot_calibration", "plot_latency_validation", "latency_validation_figure", "save_figure"]
