"""Figure recipe for the published-measurement validation (sdsl validate published)."""

from __future__ import annotations

from sdsl.plots.published import published_figure

__all__ = ["fig_published_validation"]


def fig_published_validation(quick: bool = False):
    """Predicted vs measured for every priced published row, and the k-sweeps (``quick`` is the same)."""
    from sdsl.validation.published_validation import validate_published

    return published_figure(validate_published())
