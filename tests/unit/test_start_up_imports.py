"""What a fresh interpreter imports and reads to start sdsl: ``import sdsl`` and every command's module import no
pandas, matplotlib, torch or scipy, and ``sdsl optimize`` / ``sdsl predict`` run without them, without parsing
TOML (the shipped catalogs are read from their compiled copies, sdsl/data/compiled) and without parsing the whole
acceptance catalog (only the rows of the proposers ranked). Start-up times are benchmarks
(benchmarks/bench_startup.py, BENCHMARKS.md), not tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("pandas", "matplotlib", "torch", "scipy")


def _loaded(code: str) -> dict:
    """Run ``code`` in a fresh interpreter, then report which of a few modules it left imported."""
    probe = ("import json as _j, sys as _s\n"
             "_c = _s.modules.get('sdsl.acceptance.catalog')\n"
             "print(_j.dumps({'modules': [m for m in ('pandas', 'matplotlib', 'torch', 'scipy', 'tomllib', 'tempfile')"
             " if m in _s.modules], 'whole_acceptance_catalog': bool(_c and _c.catalog_rows.cache_info().currsize),"
             " 'sdsl': _s.modules['sdsl'].__file__}))")
    out = subprocess.run([sys.executable, "-c", code + "\n" + probe], capture_output=True, text=True, check=True,
                         cwd=ROOT)  # this checkout's sdsl
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert Path(loaded.pop("sdsl")).parent == ROOT / "sdsl"
    return loaded


def _cli(*argv: str) -> str:
    return ("import contextlib, io\nfrom sdsl.cli import main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
            f"    try:\n        main({list(argv)!r})\n    except SystemExit as e:\n        assert not e.code, e.code\n")


def test_import_sdsl_and_every_command_module_is_light():
    from sdsl.cli import COMMANDS

    modules = sorted({module for module, _, _ in COMMANDS.values()})
    out = _loaded("import sdsl, sdsl.cli\n" + "".join(f"import {m}\n" for m in modules))
    assert not set(out["modules"]) & set(HEAVY)


def test_optimize_reads_no_toml_and_only_the_rows_it_ranks():
    out = _loaded(_cli("optimize", "--target", "llama-3.1-70b", "--hardware", "h100-sxm", "--tp", "4"))
    assert out == {"modules": [], "whole_acceptance_catalog": False}
    out = _loaded(_cli("optimize", "--target", "llama-3.1-8b", "--proposer", "all", "--hardware", "h100-sxm", "--json"))
    assert out == {"modules": [], "whole_acceptance_catalog": False}


def test_predict_runs_without_heavy_modules_or_toml():
    out = _loaded(_cli("predict", "--target", "llama-3.1-8b", "--proposer", "eagle", "--gamma", "4",
                       "--accepted-length", "2.4", "--hardware", "h100-sxm", "--json"))
    assert out == {"modules": [], "whole_acceptance_catalog": False}
