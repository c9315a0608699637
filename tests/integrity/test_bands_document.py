"""VALIDATION.md "Uncertainty bands" states the bands and coverage the shipped sdsl/data/bands.json holds (the file
itself is recomputed by tests/evidence/test_bands_evidence.py)."""

from __future__ import annotations

from sdsl.speculation.bands import load_bands


def test_validation_md_states_the_shipped_bands_and_coverage():
    """VALIDATION.md "Uncertainty bands": each class's band and coverage as sdsl/data/bands.json holds them."""
    import math

    from sdsl._paths import REPO_ROOT

    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    pct = lambda x: f"{100 * (math.exp(x) - 1):+.1f}%".replace("-", "−")  # noqa: E731
    bands = load_bands()
    for kind in ("latency", "acceptance"):
        for name, entry in bands[kind].items():
            if not entry["own"]:
                continue
            c = bands["coverage"][kind][name]
            fragment = (f"| {entry['n']} / {entry['n_sources']} | {pct(entry['low'])} … {pct(entry['high'])} | "
                        f"{100 * c['coverage']:.0f}% ({c['inside']}/{c['checked']}) | {100 * c['row_held_out']:.0f}% |")
            assert fragment in text, f"VALIDATION.md no longer states {name}: {fragment}"
    combined = bands["coverage"]["combined"]
    assert f"{sum(r['inside'] for r in combined['rows'])} of {combined['n']} inside" in text
    prof = bands["coverage"]["profile_without_rows"]
    assert (f"plain decode {prof['decode']['inside']} of {prof['decode']['n']} inside "
            f"({100 * prof['decode']['coverage']:.0f}%), speculative {prof['speculative']['inside']} of "
            f"{prof['speculative']['n']} ({100 * prof['speculative']['coverage']:.0f}%)") in text
