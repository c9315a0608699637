"""The shipped 80% bands (sdsl/data/bands.json) are what `sdsl validate bands` computes from the shipped rows."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_shipped_bands_are_what_the_command_computes():
    """sdsl/data/bands.json is `sdsl validate bands --write` on the shipped rows (about 10 s: it reruns the three
    validations)."""
    from sdsl.validation.band_checks import validate_bands

    assert validate_bands()["up_to_date"]
