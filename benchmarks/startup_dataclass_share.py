"""What creating sdsl's dataclasses costs a cold ``sdsl optimize``: the command run with every dataclass created
as usual (``orig``), without ``__eq__``/``__hash__`` (``noeq``), also without ``frozen`` (``nofrozen``), and also
without ``__repr__`` (``none``). Count each under cachegrind on one BLAS thread (OpenBLAS's spinning worker threads
otherwise move the count):

    OPENBLAS_NUM_THREADS=1 PYTHONHASHSEED=0 valgrind --tool=cachegrind --cache-sim=no \\
        --cachegrind-out-file=/dev/null python benchmarks/startup_dataclass_share.py orig

A measurement aid only: sdsl itself never patches ``dataclasses``.
"""

import sys
import dataclasses

MODES = ("orig", "noeq", "nofrozen", "none")


def _patched(mode: str):
    original = dataclasses.dataclass
    off = {"orig": {}, "noeq": {"eq": False}, "nofrozen": {"eq": False, "frozen": False},
           "none": {"eq": False, "frozen": False, "repr": False}}[mode]

    def dataclass(cls=None, /, **kwargs):
        kwargs.update(off)
        return original(cls, **kwargs) if cls is not None else (lambda c: original(c, **kwargs))

    return dataclass


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "orig"
    if mode not in MODES:
        raise SystemExit(f"mode must be one of {', '.join(MODES)}")
    dataclasses.dataclass = _patched(mode)
    sys.argv = ["sdsl", "optimize", "--target", "llama-3.1-70b", "--hardware", "h100-sxm", "--tp", "4"]
    from sdsl.cli import main

    main()
