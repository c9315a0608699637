"""``sdsl validate latency --transfer`` and ``--hardware FOLDER=NAME``: the leave-one-GPU-out check."""

from __future__ import annotations

import click

from sdsl.errors import InvalidInputError

__all__ = ["parse_hardware_map", "run_transfer"]


def parse_hardware_map(items) -> dict[str, str]:
    """``("a10=a10", "mygpu=gpu.toml")`` -> ``{"a10": "a10", "mygpu": "gpu.toml"}``; a malformed item is one error."""
    out = {}
    for item in items:
        folder, sep, target = str(item).partition("=")
        if not sep or not folder.strip() or not target.strip():
            raise InvalidInputError(f"--hardware takes FOLDER=NAME_OR_FILE, got {item!r}.")
        out[folder.strip()] = target.strip()
    return out


def run_transfer(data_dir: str, mapping: dict[str, str], figure: str | None = None, as_json: bool = False) -> None:
    """Read the GPU folders under ``data_dir``, run :func:`sdsl.fit.transfer.leave_one_gpu_out`, print it."""
    from sdsl.fit.profiles import read_vidur, read_vidur_elementwise
    from sdsl.fit.transfer import leave_one_gpu_out, resolve_gpu_folders

    data = read_vidur(data_dir)
    resolve_gpu_folders(sorted(data["hardware"].unique()), mapping)  # every unknown folder, before fitting
    result = leave_one_gpu_out(data, mapping, elementwise=read_vidur_elementwise(data_dir))
    if figure:
        result.plot(path=figure)
    if as_json:
        click.echo(result.to_json())
    else:
        click.echo(result.report())
    if figure and not as_json:
        click.echo(f"wrote {figure}")
