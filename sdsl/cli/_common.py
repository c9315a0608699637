"""Options and helpers shared by the CLI commands (kept light: no pandas/torch at import)."""

from __future__ import annotations

import json
import math

import click

__all__ = ["json_option", "calibration_option", "resolve_latency_params", "echo_json", "format_table", "parse_int_list"]

json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
calibration_option = click.option(
    "--calibration", type=click.Path(dir_okay=False), default=None,
    help="Calibration JSON from `sdsl calibrate` (latency parameters fitted to measurements).",
)


def resolve_latency_params(calibration, hardware):
    """LatencyParams from a calibration file, else the packaged default for the hardware."""
    from sdsl.core.latency import default_params

    if calibration:
        from sdsl.fit.calibration import load_latency_params

        return load_latency_params(calibration)
    return default_params(hardware)


def _clean(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        return _clean(x.item())
    return x


def echo_json(obj) -> None:
    """Print ``obj`` as indented JSON (NaN/inf become null)."""
    click.echo(json.dumps(_clean(obj), indent=2))


def format_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """Fixed-width text table; columns = (key, header, format spec)."""
    cells = [[format(r[k], f) if f else str(r[k]) for k, _, f in columns] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, (_, h, _) in enumerate(columns)]
    line = lambda vals: "  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(vals, widths)))  # noqa: E731
    return "\n".join([line([h for _, h, _ in columns]), line(["-" * w for w in widths])] + [line(c) for c in cells])


def parse_int_list(text: str, name: str) -> list[int]:
    """'1,2,8' -> [1, 2, 8]; '1-8' -> [1, ..., 8]. Bad text raises InvalidInputError naming the option."""
    from sdsl.errors import InvalidInputError

    text = str(text).replace(" ", "")
    try:
        if "-" in text.lstrip("-") and "," not in text:
            lo, hi = (int(v) for v in text.split("-"))
            values = list(range(lo, hi + 1))
        else:
            values = [int(v) for v in text.split(",") if v]
    except ValueError:
        raise InvalidInputError(f"{name} takes comma-separated integers or a range like '1-8'; got {text!r}.") from None
    if not values:
        raise InvalidInputError(f"{name} is empty.")
    return values
