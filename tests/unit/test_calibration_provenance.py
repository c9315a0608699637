"""Each GPU's latency parameters say whether they are fitted on measured kernels (which source, which engine version)
or transferred (``calibration_provenance``, ``sdsl hardware``)."""

from __future__ import annotations

import json

from click.testing import CliRunner


def test_hardware_marks_measured_and_transferred():
    from sdsl.cli import cli
    from sdsl.roofline.latency_params import calibration_provenance

    for gpu in ("h200", "b200"):
        cal = calibration_provenance(gpu)
        assert cal["kind"] == "measured" and any("aiconfigurator-core 0.12.0 (vllm 0.24.0)" in s for s in cal["sources"])
    assert any("Vidur" in s for s in calibration_provenance("h100-sxm")["sources"])
    assert calibration_provenance("mi300x")["kind"] == "transferred"
    rows = json.loads(CliRunner().invoke(cli, ["hardware", "--json"]).output)
    kinds = {r["name"]: r["latency_calibration"]["kind"] for r in rows}
    assert kinds["H200"] == kinds["B200"] == "measured" and kinds["MI300X"] == "transferred"
