"""Write the latency parameters sdsl ships for the GPUs NVIDIA's operator tables measure (sdsl.fit.opdb_defaults).

    python tools/make_opdb_latency.py

Reads only the shipped subset (sdsl/data/opdb), so it runs on any CPU; writes sdsl/data/latency/{h200,b200}.json
and sdsl/data/latency/opdb/h100-sxm.json (the H100-SXM's fp8 GEMM terms over its Vidur calibration).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sdsl._io import atomic_write_text  # noqa: E402
from sdsl.roofline.gpu_transfer import transfer_params  # noqa: E402
from sdsl.catalog.hardware import get_hardware  # noqa: E402
from sdsl.roofline.latency_params import _packaged_params, _transfer_basis  # noqa: E402
from sdsl.fit.opdb_defaults import build_format_overlay, build_measured_params  # noqa: E402
from sdsl.fit.opdb_fit import hardware_of  # noqa: E402

LATENCY = ROOT / "sdsl" / "data" / "latency"
MEASURED = ("h200_sxm", "b200_sxm")
OVERLAYS = ("h100_sxm",)


def main() -> int:
    basis = {k: (get_hardware(k), _packaged_params(k)) for k in _transfer_basis()}
    for gpu in MEASURED:
        hw = hardware_of(gpu)
        data = build_measured_params(gpu, transfer_params(hw, basis))
        path = LATENCY / f"{hw.name.lower()}.json"
        atomic_write_text(path, json.dumps(data, indent=2) + "\n")
        print(f"wrote {path.relative_to(ROOT)}")
    (LATENCY / "opdb").mkdir(exist_ok=True)
    for gpu in OVERLAYS:
        data = build_format_overlay(gpu)
        path = LATENCY / "opdb" / f"{data['hardware']}.json"
        atomic_write_text(path, json.dumps(data, indent=2) + "\n")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
