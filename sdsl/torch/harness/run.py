"""Drive a profiling run: grid → measurements → rows appended to a profile (resumable)."""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

import torch
import torch.nn.functional as F

from sdsl.errors import InvalidInputError
from sdsl.fit.profiles import GEMM_OPS, ProfileWriter, new_metadata, profile_paths
from sdsl.torch.harness.layer import TORCH_DTYPES, DecoderLayer
from sdsl.torch.harness.timing import synchronize, time_callable

__all__ = ["Grid", "quick_grid", "default_grid", "run_profile", "device_metadata"]

HARNESS_VERSION = "2"  # bump when what a profile row means changes (2: layer steps time the reference Block; masks and RoPE tables built outside the timed region)


@dataclass(frozen=True)
class Grid:
    """What to measure. ``num_tokens`` × ``tp`` for the per-operator GEMMs; ``batch`` × ``q`` ×
    ``context`` for whole decoder-layer steps. Each point: ``warmup`` untimed runs, then at least
    ``repeats`` timed ones (more until ``min_time_s`` has been measured), median kept."""

    num_tokens: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
    tp: tuple[int, ...] = (1,)
    batch: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    q: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8)
    context: tuple[int, ...] = (128, 512, 1024, 2048, 4096)
    warmup: int = 5
    repeats: int = 20
    min_time_s: float = 0.0
    ops: bool = True
    layers: bool = True

    def __post_init__(self) -> None:
        for name in ("num_tokens", "tp", "batch", "q"):
            vals = getattr(self, name)
            if any(int(v) < 1 for v in vals):
                raise InvalidInputError(f"Grid.{name} values must be >= 1.")
        if any(int(v) < 0 for v in self.context):
            raise InvalidInputError("Grid.context values must be >= 0.")
        if self.repeats < 1 or self.warmup < 0:
            raise InvalidInputError("Grid needs repeats >= 1 and warmup >= 0.")

    def to_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def quick_grid() -> Grid:
    """A seconds-long grid for tests and smoke runs."""
    return Grid(num_tokens=(1, 4, 16, 64), batch=(1, 2), q=(1, 4), context=(16, 64),
                warmup=1, repeats=3, min_time_s=0.0)


def default_grid(device: str) -> Grid:
    """The default grid: full on CUDA; on CPU smaller shapes and fewer repeats."""
    if device == "cuda":
        return Grid()
    return Grid(num_tokens=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), batch=(1, 2, 4, 8), q=(1, 2, 4, 8),
                context=(64, 256, 1024), warmup=3, repeats=7, min_time_s=0.02)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:  # pragma: no cover
        pass
    return platform.processor() or platform.machine()


#: (catalog key, substring of torch.cuda.get_device_name().lower()), most specific first ("h200" before "h20",
#: "a100" before "a10", "l40s" before "l40" before "l4"); ROCm reports AMD names through the same call.
_DEVICE_NAMES = (("h200", "h200"), ("h20", "h20"), ("h100-nvl", "h100 nvl"), ("h100-pcie", "h100 pcie"),
                 ("h100-sxm", "h100"), ("b200", "b200"), ("a100-40gb", "a100-sxm4-40gb"), ("a100-80gb", "a100"),
                 ("a10g", "a10g"), ("a10", "a10"), ("a40", "a40"), ("l40s", "l40s"), ("l40", "l40"), ("l4", "l4"),
                 ("rtx-6000-ada", "rtx 6000 ada"), ("rtx-4090", "4090"), ("rtx-3090", "3090"),
                 ("mi325x", "mi325x"), ("mi300x", "mi300x"), ("mi250x", "mi250x"), ("gaudi3", "gaudi3"))


def _guess_hardware(device: torch.device) -> str:
    if device.type != "cuda":
        return "cpu"
    name = torch.cuda.get_device_name(device).lower()
    for key, pat in _DEVICE_NAMES:
        if pat in name:
            return key
    return ""


def device_metadata(device: torch.device, dtype: str, hardware: str | None = None) -> dict:
    """Device block of the sidecar: name, catalog entry and its datasheet peaks, threads/capability."""
    from sdsl.catalog.hardware import get_hardware

    info: dict = {"type": device.type}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(name=torch.cuda.get_device_name(device), capability=f"{props.major}.{props.minor}",
                    memory_bytes=int(props.total_memory), multiprocessors=int(props.multi_processor_count))
    else:
        info.update(name=_cpu_name(), threads=torch.get_num_threads(), cpu_count=os.cpu_count())
    hw_name = hardware if hardware is not None else _guess_hardware(device)
    if hw_name:
        hw = get_hardware(hw_name)
        is_file = Path(str(hw_name)).suffix.lower() in (".toml", ".json") or "/" in str(hw_name)
        info.update(hardware=str(Path(hw_name).resolve()) if is_file else hw.key, peak_flops=hw.peak_flops_for(dtype), mem_bandwidth=hw.mem_bandwidth,
                    hardware_source=hw.source)
    return info


def _points(spec, grid: Grid) -> Iterator[dict]:
    if grid.ops:
        for tp in grid.tp:
            shapes = spec.linear_layers(int(tp))
            for op in GEMM_OPS:
                n_in, n_out = shapes[op]
                for n in grid.num_tokens:
                    yield {"kind": "op", "op": op, "tp": int(tp), "num_tokens": int(n), "in_features": n_in,
                           "out_features": n_out, "batch": int(n), "q": 1, "context": 0}
    if grid.layers:
        for L in grid.context:
            for b in grid.batch:
                for q in grid.q:
                    yield {"kind": "layer", "op": "decoder_layer", "tp": 1, "num_tokens": int(b * q),
                           "in_features": spec.d_model, "out_features": spec.d_model,
                           "batch": int(b), "q": int(q), "context": int(L)}


class _Bench:
    """Holds tensors between points so that consecutive points reuse allocations."""

    def __init__(self, spec, device, tdtype, grid: Grid):
        self.spec, self.device, self.dtype, self.grid = spec, device, tdtype, grid
        self._w: dict = {}
        self._layer_key = None
        self._layer = None
        self._x = None

    def op(self, p) -> tuple:
        key = (p["in_features"], p["out_features"])
        if key not in self._w:
            self._w = {key: torch.randn(key[1], key[0], device=self.device, dtype=self.dtype) / key[0] ** 0.5}
        w = self._w[key]
        x = torch.randn(p["num_tokens"], key[0], device=self.device, dtype=self.dtype)
        fn = lambda: F.linear(x, w)  # noqa: E731
        with torch.inference_mode():
            return time_callable(fn, self.device, warmup=self.grid.warmup, repeats=self.grid.repeats,
                                 min_time_s=self.grid.min_time_s)

    def layer(self, p) -> tuple:
        b, q, L = p["batch"], p["q"], p["context"]
        need = (max(self.grid.batch), L + max(self.grid.q))
        if self._layer_key != need:
            self._layer = None
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            self._layer = DecoderLayer(self.spec, self.device, self.dtype, batch=need[0], max_len=need[1])
            self._layer_key = need
        x = torch.randn(b, q, self.spec.d_model, device=self.device, dtype=self.dtype)
        layer = self._layer
        return time_callable(lambda: layer(x, L), self.device, warmup=self.grid.warmup,
                             repeats=self.grid.repeats, min_time_s=self.grid.min_time_s)


def run_profile(spec, out: str | os.PathLike, *, device: str = "cpu", dtype: str = "bf16",
                grid: Grid | None = None, hardware: str | None = None, resume: bool = True,
                progress: bool = True, limit: int | None = None, threads: int | None = None) -> Path:
    """Measure ``spec`` on ``device`` over ``grid`` and append rows to the profile at ``out``.

    Rows already in the file are skipped (resume); each new row is flushed as soon as it is
    measured. ``limit`` stops after that many new rows (chunked runs; tests). Returns the CSV path.
    """
    if dtype not in TORCH_DTYPES:
        raise InvalidInputError(f"Harness dtype must be one of {sorted(TORCH_DTYPES)}, got {dtype!r}.")
    if device == "cuda" and not torch.cuda.is_available():
        raise InvalidInputError("--device cuda asked for, but torch sees no CUDA device.")
    if device not in ("cuda", "cpu"):
        raise InvalidInputError(f"Device must be 'cuda' or 'cpu', got {device!r}.")
    if threads:
        torch.set_num_threads(int(threads))
    grid = grid or default_grid(device)
    dev = torch.device(device)
    cuda_version = torch.version.cuda if device == "cuda" else None
    meta = new_metadata(device=device_metadata(dev, dtype, hardware), dtype=dtype, model=spec.to_dict(),
                        harness_version=HARNESS_VERSION, torch_version=torch.__version__,
                        cuda_version=cuda_version, grid=grid.to_dict(),
                        source=f"sdsl.torch.harness {HARNESS_VERSION}: torch F.linear GEMMs and a static-KV-cache "
                               "decoder layer, median of timed repeats")
    meta["complete"] = False
    torch.manual_seed(0)
    bench = _Bench(spec, dev, TORCH_DTYPES[dtype], grid)
    with ProfileWriter(out, meta, resume=resume) as writer:
        todo = [p for p in _points(spec, grid) if not writer.done(p)]
        if limit is not None:
            todo = todo[: max(int(limit), 0)]
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(todo), desc=f"profile {spec.name} on {device}", unit="pt", leave=False)
        try:
            for p in todo:
                med, tmin, std, n = bench.op(p) if p["kind"] == "op" else bench.layer(p)
                writer.append({**p, "repeats": n, "time_s": med, "time_min_s": tmin, "time_std_s": std})
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
            synchronize(dev)
        complete = all(writer.done(p) for p in _points(spec, grid))
        writer.finish(complete=complete)
    return profile_paths(out)[0]
