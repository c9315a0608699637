"""VALIDATION.md "Uncertainty bands" states the bands and coverage the shipped sdsl/data/bands.json holds (the file
itself is recomputed by tests/evidence/test_bands_evidence.py). An integrity check: it reads committed files only."""

from __future__ import annotations

import re

from sdsl.speculation.bands import load_bands


def test_validation_md_states_the_shipped_bands_and_coverage():
    """VALIDATION.md "Uncertainty bands": the per-class table is what ``tools/bands_table.py`` writes from
    sdsl/data/bands.json, and the combined and profile-without-rows counts are the file's."""
    from sdsl._paths import REPO_ROOT
    from sdsl.validation.band_checks import markdown_table

    raw = (REPO_ROOT / "VALIDATION.md").read_text()
    block = re.search(r"<!-- bands-table -->\n(.*?)\n<!-- bands-table:end -->", raw, re.S)
    assert block and block.group(1) == markdown_table(load_bands()), \
        "VALIDATION.md's band table is stale: run `python tools/bands_table.py`"
    text = " ".join(raw.split())
    bands = load_bands()
    combined = bands["coverage"]["combined"]
    assert f"{sum(r['inside'] for r in combined['rows'])} of {combined['n']} inside" in text
    prof = bands["coverage"]["profile_without_rows"]
    assert (f"plain decode {prof['decode']['inside']} of {prof['decode']['n']} inside "
            f"({100 * prof['decode']['coverage']:.0f}%), speculative {prof['speculative']['inside']} of "
            f"{prof['speculative']['n']} ({100 * prof['speculative']['coverage']:.0f}%)") in text


def test_every_class_of_the_shipped_bands_names_where_its_band_came_from():
    """A class without a band of its own names the class whose rows it borrowed, and was built on at least as
    many rows and sources as its own."""
    bands = load_bands()
    for kind in ("latency", "acceptance"):
        for name, e in bands[kind].items():
            assert e["own"] == (e["from_class"] == name), name
            assert e["pool_n"] >= e["n"] and e["pool_sources"] >= e["n_sources"], name
            assert set(bands["coverage_by_form"]) == {"rows", "sources", "sources, weighted", "sources, symmetric"}


def test_validation_md_states_the_widest_band_a_profile_without_rows_gets():
    """The speculative band of a profile without rows, alone and with the same-target and transferred acceptance
    bands, as VALIDATION.md states them, from the shipped file (:mod:`sdsl.speculation.bands`)."""
    import math

    from sdsl._paths import REPO_ROOT
    from sdsl.speculation.bands import combine

    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    pct = lambda x: f"{100 * (math.exp(x) - 1):+.1f}%".replace("-", "−")  # noqa: E731
    lat, acc = load_bands()["latency"], load_bands()["acceptance"]
    group = [e for n, e in lat.items() if n == "speculative" or n.startswith("speculative:")]
    wide = (min(e["low"] for e in group), max(e["high"] for e in group))
    same = combine(wide, (acc["same-target"]["low"], acc["same-target"]["high"]))
    moved = combine(wide, (acc["transferred"]["low"], acc["transferred"]["high"]))
    assert (f"speculative step time {pct(wide[0])} … {pct(wide[1])}, which with a same-target catalog acceptance "
            f"gives {pct(same[0])} … {pct(same[1])} on tokens/s and with a transferred one {pct(moved[0])} … "
            f"{pct(moved[1])}") in text
