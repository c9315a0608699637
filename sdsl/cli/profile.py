"""``sdsl profile``: measure a model's operator and decoder-layer times into a profile."""

from __future__ import annotations

import click

from sdsl.cli._common import parse_int_list


def _ints(value: str | None, name: str) -> tuple[int, ...] | None:
    return None if value is None else tuple(parse_int_list(value, f"--{name}"))


@click.command("profile")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default="cuda", show_default=True)
@click.option("--model", "model_name", required=True, help="Catalog name or path to a HF config.json.")
@click.option("--dtype", type=click.Choice(["bf16", "fp16", "fp32"]), default="bf16", show_default=True)
@click.option("-o", "--output", required=True, help="Profile path: writes OUTPUT.csv and OUTPUT.json.")
@click.option("--hardware", default=None, help="Catalog entry of this device (datasheet peaks for calibration); guessed if omitted.")
@click.option("--quick", is_flag=True, help="A seconds-long grid (smoke tests).")
@click.option("--num-tokens", default=None, help="Comma-separated num_tokens for the per-operator GEMMs.")
@click.option("--tp", default=None, help="Comma-separated tensor-parallel degrees (shapes of one worker's shard); "
              "under torchrun one degree N = the number of processes: time the shards and the TP-N collectives.")
@click.option("--batch", default=None, help="Comma-separated batch sizes for decoder-layer steps.")
@click.option("--q", "q", default=None, help="Comma-separated new tokens per sequence (each >= 1) for layer steps "
              "(default: 1-8 on CUDA, 1,2,4,8 on a CPU).")
@click.option("--context", default=None, help="Comma-separated KV-cache lengths for layer steps.")
@click.option("--repeats", type=int, default=None, help="Timed runs per point (median kept).")
@click.option("--warmup", type=int, default=None, help="Untimed runs per point.")
@click.option("--min-time", type=float, default=None, help="Keep repeating until this many seconds were timed.")
@click.option("--ops/--no-ops", default=True, show_default=True, help="Measure the per-operator GEMMs.")
@click.option("--layers/--no-layers", default=True, show_default=True, help="Measure decoder-layer steps.")
@click.option("--fresh", is_flag=True, help="Refuse to resume an existing profile.")
@click.option("--limit", type=int, default=None, help="Stop after this many new rows (resume later).")
@click.option("--threads", type=int, default=None, help="torch CPU threads.")
@click.option("--progress/--no-progress", default=True, show_default=True)
def profile(device, model_name, dtype, output, hardware, quick, num_tokens, tp, batch, q, context,
            repeats, warmup, min_time, ops, layers, fresh, limit, threads, progress):
    """Measure per-operator GEMM times (Vidur's operators) and decoder-layer steps with a KV cache.

    Rows are appended and flushed as they are measured; rerunning the same command resumes an
    interrupted run. Example: sdsl profile --device cuda --model llama-3.1-8b --dtype bf16 -o profiles/h200-llama-3.1-8b
    """
    from dataclasses import replace

    from sdsl.catalog.models import get_model
    from sdsl.errors import InvalidInputError
    from sdsl.torch.harness.run import default_grid, quick_grid, run_profile
    from sdsl.fit.profiles import read_profile

    for name, value in (("--threads", threads), ("--repeats", repeats), ("--limit", limit)):
        if value is not None and value < 1:
            raise InvalidInputError(f"{name} must be >= 1.")
    if warmup is not None and warmup < 0:
        raise InvalidInputError("--warmup must be >= 0.")
    if min_time is not None and not min_time >= 0:
        raise InvalidInputError("--min-time must be a non-negative number of seconds.")
    spec = get_model(model_name)
    degrees = _ints(tp, "tp") or (1,)
    bad = [t for t in degrees if spec.n_head % t]
    if bad:
        raise InvalidInputError(f"--tp {bad[0]}: {spec.name} has {spec.n_head} attention heads, not divisible by {bad[0]}.")
    grid = quick_grid() if quick else default_grid(device)
    changes = {k: v for k, v in {
        "num_tokens": _ints(num_tokens, "num-tokens"), "tp": _ints(tp, "tp"), "batch": _ints(batch, "batch"),
        "q": _ints(q, "q"), "context": _ints(context, "context"), "repeats": repeats, "warmup": warmup,
        "min_time_s": min_time}.items() if v is not None}
    grid = replace(grid, ops=ops, layers=layers, **changes)
    if _world_size() > 1:
        _run_distributed(spec, output, device, dtype, grid, hardware, degrees, progress, threads)
        return
    path = run_profile(spec, output, device=device, dtype=dtype, grid=grid, hardware=hardware,
                       resume=not fresh, progress=progress, limit=limit, threads=threads)
    prof = read_profile(path)
    state = "complete" if prof.meta.get("complete") else "partial (rerun to resume)"
    click.echo(f"{path}: {len(prof.data)} rows ({len(prof.ops)} operator, {len(prof.layers)} layer), {state}.")


def _world_size() -> int:
    import os

    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def _run_distributed(spec, output, device, dtype, grid, hardware, degrees, progress, threads) -> None:
    """Under torchrun: one TP degree = WORLD_SIZE; rank 0 reports what it wrote."""
    from sdsl.errors import InvalidInputError
    from sdsl.torch.harness.distributed import collective_paths, run_tp_profile

    if len(degrees) != 1 or degrees[0] != _world_size():
        raise InvalidInputError(f"Under torchrun give one --tp equal to the number of processes ({_world_size()}), "
                                f"got {','.join(map(str, degrees))}.")
    path = run_tp_profile(spec, output, device=device, dtype=dtype, tp=degrees[0], grid=grid, hardware=hardware,
                          progress=progress, threads=threads)
    if path is not None:
        extra = ", ".join(str(p) for p in collective_paths(output).values())
        click.echo(f"{path}: TP-{degrees[0]} operator rows; collectives in {extra}.")
