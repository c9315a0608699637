"""``sdsl calibrate``: fit the latency model to profiles and write a calibration file."""

from __future__ import annotations

import json
import math

import click

from ..errors import InvalidInputError


def _smoothness(value: str):
    v = value.strip().lower()
    if v in ("auto", "fit"):
        return v
    if v in ("inf", "hard", "max"):
        return math.inf
    try:
        p = float(v)
    except ValueError:
        raise InvalidInputError(f"--smoothness takes auto, fit, inf or a number >= 1, got {value!r}.") from None
    if not p >= 1:
        raise InvalidInputError(f"--smoothness must be >= 1, got {value!r}.")
    return p


@click.command("calibrate")
@click.argument("profiles", nargs=-1, required=True)
@click.option("--hardware", default=None, help="Catalog name or file whose datasheet peaks the fit refers to "
              "(default: the one the profiles' sidecars name).")
@click.option("-o", "--output", default=None, help="Write the calibration JSON here (atomically).")
@click.option("--smoothness", default="auto", show_default=True,
              help="auto (keep a smooth max only if AIC asks for it), fit, inf (hard max) or a fixed p.")
@click.option("--fit-layers", is_flag=True, help="Fit whole decoder-layer steps jointly with the operators "
              "(where per-kernel overheads outside the GEMMs dominate, e.g. eager PyTorch on a CPU).")
@click.option("--allreduce", "allreduce_file", default=None, type=click.Path(dir_okay=False),
              help="Also fit allreduce_latency/eta_interconnect to a Vidur all-reduce CSV (2-GPU rows).")
@click.option("--points/--no-points", "points", default=None,
              help="Store per-point residuals in the JSON (default: when at most 5000 points).")
@click.option("--plot", "plot_path", default=None, help="Also save a predicted-vs-measured figure (PNG/PDF).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON instead of the report.")
def calibrate(profiles, hardware, output, smoothness, fit_layers, allreduce_file, points, plot_path, as_json):
    """Fit eta_compute, eta_memory, t_kernel (and the soft-max smoothness) to PROFILES.

    PROFILES are sdsl profiles (NAME, NAME.csv or NAME.json) or Vidur mlp.csv files / folders.
    Example: sdsl calibrate profiles/cpu-llama-68m -o profiles/cpu.calib.json
    """
    from ..calibration import calibrate_profiles

    result = calibrate_profiles(profiles, hardware=hardware, smoothness=_smoothness(smoothness), fit_layers=fit_layers)
    if allreduce_file:
        from dataclasses import replace

        from ..latency_validation import fit_allreduce

        params, stats = fit_allreduce(allreduce_file, hardware=result.hardware, base=result.params)
        result = replace(result, params=params.replace(
            source=result.params.source + f"; all-reduce fitted to {allreduce_file} (MAPE {100 * stats['mape']:.1f}%)"))
    if output:
        result.to_json(output, include_points=points)
    if plot_path:
        import matplotlib

        matplotlib.use("Agg")
        ax = result.plot()
        ax.figure.savefig(plot_path, dpi=150, bbox_inches="tight")
    if as_json:
        click.echo(json.dumps(result.to_dict(include_points=False), indent=2))
    else:
        click.echo(result.report())
        if output:
            click.echo(f"wrote {output}")
