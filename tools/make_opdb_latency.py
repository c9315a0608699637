"""Write the latency parameters sdsl ships for the GPUs NVIDIA's operator tables measure (sdsl.fit.opdb.defaults).

    python tools/make_opdb_latency.py

Reads only the shipped subset (sdsl/data/opdb), so it runs on any CPU; writes
sdsl/data/latency/{h200,b200,l40s,b300,gb200,gb300,rtx-pro-6000}.json, sdsl/data/latency/opdb/h100-sxm.json (the H100-SXM's fp8 GEMM terms over its Vidur calibration, and its bf16 GEMM terms for the vLLM builds from 2026 on) and the measured
custom all-reduce (allreduce_latency_s, allreduce_eta) of the vLLM, SGLang and TensorRT-LLM profiles in
sdsl/data/engines/profiles.json (sdsl.fit.opdb.engines; refit the host terms after: tools/fit_engine_profiles.py).
A shipped calibration the refit prices the same (every table row within 1e-4: sdsl.fit.opdb.defaults.settle) is
rewritten as shipped, so a rerun on any CPU changes no file unless the fit itself changed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sdsl._io import atomic_write_text, load_json  # noqa: E402
from sdsl.roofline.gpu_transfer import transfer_params  # noqa: E402
from sdsl.catalog.hardware import get_hardware  # noqa: E402
from sdsl.roofline.latency_params import _packaged_params, _transfer_basis  # noqa: E402
from sdsl.fit.opdb.defaults import build_format_overlay, build_measured_params, settle  # noqa: E402
from sdsl.fit.opdb.engines import PROFILE_ENGINES, measured_custom_allreduce  # noqa: E402
from sdsl.fit.opdb.kernels import hardware_of  # noqa: E402

LATENCY = ROOT / "sdsl" / "data" / "latency"
MEASURED = ("h200_sxm", "b200_sxm", "l40s", "b300_sxm", "gb200", "gb300", "rtx_pro_6000_server")
OVERLAYS = ("h100_sxm",)


def _shipped(path: Path) -> dict | None:
    return load_json(path) if path.is_file() else None


def main() -> int:
    basis = {k: (get_hardware(k), _packaged_params(k)) for k in _transfer_basis()}
    for gpu in MEASURED:
        hw = hardware_of(gpu)
        path = LATENCY / f"{hw.name.lower()}.json"
        data = settle(gpu, build_measured_params(gpu, transfer_params(hw, basis)), _shipped(path))
        atomic_write_text(path, json.dumps(data, indent=2) + "\n")
        print(f"wrote {path.relative_to(ROOT)}")
    (LATENCY / "opdb").mkdir(exist_ok=True)
    for gpu in OVERLAYS:
        data = build_format_overlay(gpu)
        path = LATENCY / "opdb" / f"{data['hardware']}.json"
        data = settle(gpu, data, _shipped(path))
        atomic_write_text(path, json.dumps(data, indent=2) + "\n")
        print(f"wrote {path.relative_to(ROOT)}")
    path = ROOT / "sdsl" / "data" / "engines" / "profiles.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    measured = {e: measured_custom_allreduce(e) for e in sorted(set(PROFILE_ENGINES.values()))}
    for entry in data["profiles"]:
        engine = PROFILE_ENGINES.get(entry.get("engine"))
        if engine is None or entry.get("allreduce") != "custom":
            continue
        m = measured[engine]
        entry["allreduce_latency_s"] = {"value": round(m["latency_s"], 9), "fit": "measured", "source": m["source"],
                                        "note": "the custom kernel's fixed latency per call, measured (was fitted on "
                                                "published rows before the operator tables)"}
        entry["allreduce_eta"] = {"value": round(m["eta"], 6), "fit": "measured", "source": m["source"],
                                  "note": "the custom kernel's fraction of the per-direction NVLink bandwidth"}
    atomic_write_text(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {path.relative_to(ROOT)}: " + ", ".join(f"{e} {m['version']} a = {1e6 * m['latency_s']:.2f} us, "
                                                        f"eta = {m['eta']:.3f}" for e, m in measured.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
