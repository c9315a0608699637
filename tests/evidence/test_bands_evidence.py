"""The shipped 80% bands (sdsl/data/bands.json) are what `sdsl validate bands` computes from the shipped rows."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_shipped_bands_are_what_the_command_computes():
    """sdsl/data/bands.json is `sdsl validate bands --write` on the shipped rows (about 10 s: it reruns the three
    validations)."""
    from sdsl.validation.band_checks import validate_bands

    assert validate_bands()["up_to_date"]


@pytest.mark.slow
def test_the_measured_across_k_shortfall_is_specforge_against_the_other_sources_band():
    """VALIDATION.md "Uncertainty bands": SpecForge holds 175 of the 277 residuals of a measured acceptance carried
    across k, and the band the other ten sources give it is -4.0 ... +12.9% (so the class covers 60%)."""
    import math

    from sdsl.validation.bands import LEVEL, class_bands, coverage, residuals

    rows = [r for r in residuals() if r.kind == "acceptance"]
    mine = [r for r in rows if "measured" in r.classes]
    assert len(mine) == 277 and sum(r.source == "sgl-project/SpecForge" for r in mine) == 175
    band = class_bands(rows, "acceptance", LEVEL, exclude_source="sgl-project/SpecForge")["measured"]
    assert (math.exp(band["low"]) - 1, math.exp(band["high"]) - 1) == (pytest.approx(-0.040, abs=1e-3),
                                                                       pytest.approx(0.129, abs=1e-3))
    assert coverage(rows, "acceptance")["measured"]["coverage"] == pytest.approx(0.60, abs=5e-3)


@pytest.mark.slow
def test_each_source_once_every_class_of_nine_sources_meets_the_goal_and_the_moe_speculative_ones_do_not():
    """VALIDATION.md "Uncertainty bands": with each source counted once, every class with at least 9 sources checked
    lies within 70-90% (`all` 87% of 29 sources, against 69.8% over its rows: the SpecBundle dashboard's 42 rows and
    AngelSlim's 13 lie beyond every other source's errors); the MoE speculative classes, of four sources, stay
    under the goal over their rows (51% and 74% with each source once)."""
    import math

    import numpy as np

    from sdsl.validation.bands import MIN_SOURCES, coverage, residuals

    rows = residuals()
    cov = {kind: coverage(rows, kind) for kind in ("latency", "acceptance")}
    judged = {(k, c): v for k, d in cov.items() for c, v in d.items() if v["sources_checked"] >= MIN_SOURCES}
    assert {c for _, c in judged} == {"all", "decode", "moe_decode", "catalog", "transferred", "measured"}
    assert all(v["met_by_source"] for v in judged.values())
    assert cov["latency"]["all"]["by_source"] == pytest.approx(0.867, abs=5e-3)
    assert cov["latency"]["all"]["coverage"] == pytest.approx(0.698, abs=5e-3)
    by_source = {c: round(100 * v["by_source"]) for (_, c), v in judged.items()}
    assert by_source == {"all": 87, "decode": 77, "moe_decode": 74, "catalog": 80, "transferred": 78, "measured": 74}
    assert round(100 * cov["acceptance"]["measured"]["coverage"]) == 60
    outliers = {"sgl-project/SpecForge:data.json": (42, 0.480), "Tencent/AngelSlim#163": (13, -0.433)}
    for source, (n, median) in outliers.items():
        mine = [r.r for r in rows if r.source == source and "all" in r.classes]
        assert len(mine) == n and math.exp(float(np.median(mine))) - 1 == pytest.approx(median, abs=5e-3)
    spec = cov["latency"]["moe_speculative"], cov["latency"]["moe_speedup"]
    assert [round(c["by_source"], 2) for c in spec] == [0.51, 0.74] and all(c["met_by_source"] is None for c in spec)
    from sdsl._paths import REPO_ROOT

    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    for fragment in ("every step time 87% of 29 sources (69.8% over its 199 rows", "measured a median 48% faster than "
                     "priced, and AngelSlim #163's 13, 43% slower", "plain decode 77%, MoE plain decode 74%, catalogued "
                     "acceptance 80% (transferred 78%), a measured acceptance carried across k 74% (60% over its rows)",
                     "four sources: 51% and 74% with each source once"):
        assert fragment in text, fragment
    # the claims index restates them: the MoE classes over their rows, and the judged classes' range with each source once
    rows_pct = {c: round(100 * cov["latency"][c]["coverage"]) for c in ("moe_decode", "moe_speculative", "moe_speedup")}
    claim = (f"MoE plain decode {rows_pct['moe_decode']}%, MoE speculative {rows_pct['moe_speculative']}% and "
             f"{rows_pct['moe_speedup']}%")
    assert claim in text, claim
    assert f"every class of ≥ 9 sources {min(by_source.values())}–{max(by_source.values())}%" in text


@pytest.mark.slow
def test_the_symmetric_form_meets_other_classes_and_misses_others():
    """VALIDATION.md "Uncertainty bands", the fourth form (absolute residuals, not shipped): over the rows it meets
    every step time, the MoE speed-up, SGLang's speculative rows and a measured acceptance across k that the signed
    form misses, and goes over on the catalogued acceptance; with each source once MoE plain decode falls under."""
    from sdsl._paths import REPO_ROOT
    from sdsl.validation.bands import coverage, residuals

    rows = residuals()
    signed = {k: coverage(rows, k) for k in ("latency", "acceptance")}
    sym = {k: coverage(rows, k, symmetric=True) for k in ("latency", "acceptance")}
    pct = lambda cov, k, c: round(100 * cov[k][c]["coverage"])  # noqa: E731
    pairs = {c: (pct(signed, k, c), pct(sym, k, c)) for k, c in (
        ("latency", "all"), ("latency", "moe_speedup"), ("latency", "speculative:sglang"), ("acceptance", "measured"),
        ("latency", "moe_speculative"), ("acceptance", "catalog"), ("acceptance", "transferred"),
        ("latency", "speculative"))}
    assert pairs == {"all": (70, 74), "moe_speedup": (55, 73), "speculative:sglang": (45, 73), "measured": (60, 87),
                     "moe_speculative": (27, 39), "catalog": (75, 96), "transferred": (74, 96), "speculative": (87, 93)}
    by_source = [round(100 * cov["latency"]["moe_decode"]["by_source"]) for cov in (signed, sym)]
    assert by_source == [74, 67]
    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    for fragment in ("every step time (69.8% → 74.4%), the MoE speed-up (55% → 73%), SGLang's speculative rows (45% → 73%) "
                     "and a measured acceptance carried across k (60% → 87%), and lifts the MoE speculative rows "
                     "(27% → 39%)", "(75% → 96%, transferred 74% → 96%), the dense speculative class too (87% → 93%)",
                     "MoE plain decode, whose older sources are all priced too fast, falls under (74% → 67%)"):
        assert fragment in text, fragment
