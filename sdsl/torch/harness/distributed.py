"""Tensor-parallel profiling under ``torchrun``: sharded GEMMs and the collectives of a TP-N step.

Launched as ``torchrun --nproc-per-node N -m sdsl profile --tp N ...`` (or across machines with
torchrun's usual ``--nnodes``/``--rdzv-*`` flags): every rank builds its 1/N shard of the model's
four GEMMs (Megatron-style column/row split, ``ModelSpec.linear_layers(N)``) and the collectives a
TP-N forward moves, NCCL on GPUs and gloo on CPUs. Each point is timed on all ranks at once after a
barrier; a step waits for its slowest rank, so the row keeps the maximum over ranks of the medians.

Message sizes (elements of the activation dtype; the CSVs hold bytes, as Vidur's do) for ``tokens`` in the grid's ``num_tokens`` (a
decode step of batch b moves b tokens, a verify step of γ drafts b·(γ+1)):
  all-reduce: tokens · d_model, twice per layer (after attention and after the MLP);
  all-gather: tokens · vocab/N per rank, once per forward (the LM head's sharded logits).

Rank 0 writes the profile (operator rows, ``tp = N``) with :class:`~sdsl.fit.profiles.ProfileWriter`
and the collectives as CSVs in Vidur's network format (``OUT.all_reduce.csv``, ``OUT.all_gather.csv``:
``size`` in bytes, ``num_workers``, ``time_stats.<collective>.{min,max,mean,median,std}`` in ms),
each written atomically; ``sdsl calibrate OUT --allreduce OUT.all_reduce.csv`` fits both.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from sdsl.errors import InvalidInputError
from sdsl.fit.profiles import GEMM_OPS, ProfileWriter, new_metadata, profile_paths
from sdsl.torch.harness import HARNESS_VERSION
from sdsl.torch.harness.layer import TORCH_DTYPES
from sdsl.torch.harness.timing import synchronize, time_callable

__all__ = ["launched_world_size", "collective_sizes", "run_tp_profile", "collective_paths"]

_STATS = ("min", "max", "mean", "median", "std")


def launched_world_size() -> int:
    """WORLD_SIZE set by torchrun (1 when not launched by it)."""
    try:
        return max(int(os.environ.get("WORLD_SIZE", "1")), 1)
    except ValueError:
        return 1


def collective_sizes(spec, tp: int, num_tokens) -> dict[str, list[int]]:
    """Elements per rank of each collective a TP-``tp`` forward of ``num_tokens`` tokens moves (module docstring)."""
    return {"all_reduce": [int(n) * spec.d_model for n in num_tokens],
            "all_gather": [int(n) * (-(-spec.vocab_size // tp)) for n in num_tokens]}


def collective_paths(out) -> dict[str, Path]:
    """Where rank 0 writes the collectives of profile ``out``."""
    base = profile_paths(out)[0].with_suffix("")
    return {c: base.with_name(f"{base.name}.{c}.csv") for c in ("all_reduce", "all_gather")}


def _slowest(stats: tuple, dev) -> tuple:
    """Element-wise maximum over ranks of ``(median, min, std, repeats)``."""
    t = torch.tensor([float(x) for x in stats], dtype=torch.float64, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return tuple(t.tolist())


def _time_gemm(n_in, n_out, tokens, dev, tdtype, grid) -> tuple:
    w = torch.randn(n_out, n_in, device=dev, dtype=tdtype) / n_in ** 0.5
    x = torch.randn(tokens, n_in, device=dev, dtype=tdtype)
    dist.barrier()
    with torch.inference_mode():
        return time_callable(lambda: F.linear(x, w), dev, warmup=grid.warmup, repeats=grid.repeats,
                             min_time_s=grid.min_time_s)


def _time_collective(kind: str, elements: int, world: int, dev, tdtype, grid) -> list[float]:
    """Per-repeat times (s) of one collective on this rank, after a barrier and warm-up."""
    buf = torch.randn(elements, device=dev, dtype=tdtype)
    outs = [torch.empty_like(buf) for _ in range(world)] if kind == "all_gather" else None
    fn = (lambda: dist.all_reduce(buf)) if kind == "all_reduce" else (lambda: dist.all_gather(outs, buf))
    dist.barrier()
    times = []
    for i in range(max(grid.warmup, 1) + grid.repeats):
        dist.barrier()
        start = _now(dev)
        fn()
        t = _now(dev) - start
        if i >= max(grid.warmup, 1):
            times.append(t)
    return times


def _now(dev) -> float:
    import time

    synchronize(dev)
    return time.perf_counter()


def _collective_rows(kind, sizes, world, dev, tdtype, grid, bar) -> list[dict]:
    rows = []
    for n in sizes:
        times = _time_collective(kind, n, world, dev, tdtype, grid)
        st = (min(times), max(times), statistics.fmean(times), statistics.median(times),
              statistics.pstdev(times) if len(times) > 1 else 0.0)
        st = _slowest(st, dev)
        rows.append({**{f"time_stats.{kind}.{k}": 1e3 * v for k, v in zip(_STATS, st)},
                     "rank": 0, "num_workers": world, "size": n * torch.empty((), dtype=tdtype).element_size(),
                     "collective": kind})
        if bar is not None:
            bar.update(1)
    return rows


def _write_collectives(out, rows_by_kind: dict) -> None:
    import pandas as pd

    from sdsl._io import atomic_write_text

    for kind, path in collective_paths(out).items():
        atomic_write_text(path, pd.DataFrame(rows_by_kind[kind]).to_csv())


def _init(device: str, tp: int, threads: int | None):
    if not dist.is_available():
        raise InvalidInputError("This torch build has no torch.distributed; --tp N needs it.")
    if launched_world_size() != tp:
        raise InvalidInputError(f"--tp {tp} needs {tp} processes; launch with torchrun --nproc-per-node {tp} "
                                f"(WORLD_SIZE is {launched_world_size()}).")
    if device == "cuda" and not torch.cuda.is_available():
        raise InvalidInputError("--device cuda asked for, but torch sees no CUDA device.")
    if threads:
        torch.set_num_threads(int(threads))
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device == "cuda" else "gloo")
    if device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        return torch.device("cuda", local)
    return torch.device("cpu")


def run_tp_profile(spec, out, *, device: str = "cpu", dtype: str = "bf16", tp: int = 2, grid=None,
                   hardware: str | None = None, progress: bool = True, threads: int | None = None) -> Path | None:
    """Measure ``spec``'s TP-``tp`` shards and collectives on ``tp`` torchrun ranks; rank 0 writes and
    returns the profile's CSV path (other ranks return None). A TP run is short (operators and
    collectives only, no decoder-layer steps) and always measured afresh; its files replace any
    earlier ones atomically, so an interrupted run leaves the previous profile intact."""
    from sdsl.torch.harness.run import default_grid

    if dtype not in TORCH_DTYPES:
        raise InvalidInputError(f"Harness dtype must be one of {sorted(TORCH_DTYPES)}, got {dtype!r}.")
    dev = _init(device, tp, threads)
    try:
        return _measure(spec, out, dev, dtype, tp, grid or default_grid(device), hardware, progress)
    finally:
        dist.destroy_process_group()


def _measure(spec, out, dev, dtype, tp, grid, hardware, progress):
    from sdsl.torch.harness.run import device_metadata

    rank, tdtype = dist.get_rank(), TORCH_DTYPES[dtype]
    torch.manual_seed(rank)
    shapes = spec.linear_layers(tp)
    sizes = collective_sizes(spec, tp, grid.num_tokens)
    bar = None
    if progress and rank == 0:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(GEMM_OPS) * len(grid.num_tokens) + 2 * len(grid.num_tokens),
                   desc=f"profile {spec.name} TP{tp} on {dev.type}", unit="pt", leave=False)
    op_rows = []
    for op in GEMM_OPS:
        n_in, n_out = shapes[op]
        for n in grid.num_tokens:
            med, tmin, std, reps = _slowest(_time_gemm(n_in, n_out, int(n), dev, tdtype, grid), dev)
            op_rows.append({"kind": "op", "op": op, "tp": tp, "num_tokens": int(n), "in_features": n_in,
                            "out_features": n_out, "batch": int(n), "q": 1, "context": 0, "repeats": int(reps),
                            "time_s": med, "time_min_s": tmin, "time_std_s": std})
            if bar is not None:
                bar.update(1)
    coll = {k: _collective_rows(k, v, tp, dev, tdtype, grid, bar) for k, v in sizes.items()}
    if bar is not None:
        bar.close()
    if rank != 0:
        return None
    paths = collective_paths(out)
    meta = new_metadata(device=device_metadata(dev, dtype, hardware), dtype=dtype, model=spec.to_dict(),
                        harness_version=HARNESS_VERSION, torch_version=torch.__version__,
                        cuda_version=torch.version.cuda if dev.type == "cuda" else None, grid=grid.to_dict(),
                        source=f"sdsl.torch.harness {HARNESS_VERSION}: TP-{tp} shards under torch.distributed "
                               f"({dist.get_backend()}), max over ranks of each point's median")
    meta["tensor_parallel"] = {"world_size": tp, "backend": dist.get_backend(),
                               "collectives": {k: p.name for k, p in paths.items()}}
    _write_collectives(out, coll)
    return _write_profile(out, meta, op_rows)


def _write_profile(out, meta, rows) -> Path:
    """Write the whole profile beside ``out`` under a temporary name, then move both files into place."""
    csv_path, json_path = profile_paths(out)
    tmp = csv_path.with_name(f".{csv_path.stem}.tmp{os.getpid()}")
    with ProfileWriter(tmp, meta, resume=False) as writer:
        for row in rows:
            writer.append(row)
        writer.finish(complete=True)
    tmp_csv, tmp_json = profile_paths(tmp)
    os.replace(tmp_csv, csv_path)
    os.replace(tmp_json, json_path)
    return csv_path
