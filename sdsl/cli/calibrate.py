"""``sdsl calibrate``: fit the latency model to profiles and write a calibration file (``sdsl calibrate PROFILES...``,
the same as ``sdsl calibrate latency PROFILES...``), or an engine profile to measured runs
(``sdsl calibrate engine RUNS...``, :mod:`sdsl.cli.calibrate_engine`)."""

from __future__ import annotations

import math

import click

from sdsl.cli._common import echo_json
from sdsl.errors import InvalidInputError


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


class _CalibrateGroup(click.Group):
    """``sdsl calibrate PROFILES...`` runs ``latency``; ``sdsl calibrate engine RUNS...`` the engine fit."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["latency", *args]
        return super().parse_args(ctx, args)


@click.group("calibrate", cls=_CalibrateGroup)
def calibrate() -> None:
    """Fit sdsl's models to measurements: the latency model to operator profiles (PROFILES..., or `latency`), or an
    engine execution profile to measured runs of your engine (`engine RUNS...`)."""


@calibrate.command("latency")
@click.argument("profiles", nargs=-1, required=True)
@click.option("--hardware", default=None, help="Catalog name or file whose datasheet peaks the fit refers to "
              "(default: the one the profiles' sidecars name).")
@click.option("-o", "--output", default=None, help="Write the calibration JSON here (atomically).")
@click.option("--smoothness", default="auto", show_default=True,
              help="auto (keep a smooth max only if AIC asks for it), fit, inf (hard max) or a fixed p.")
@click.option("--fit-layers", is_flag=True, help="Fit whole decoder-layer steps jointly with the operators "
              "(where per-kernel overheads outside the GEMMs dominate, e.g. eager PyTorch on a CPU).")
@click.option("--steps", "steps", multiple=True, type=click.Path(dir_okay=False),
              help="Model-steps CSV of whole forward passes (sdsl.fit.model_steps; repeatable), fitted jointly, "
              "with the per-forward overhead t_step.")
@click.option("--holdout", is_flag=True, help="With --steps: also print leave-one-model-out MAPE of the forwards "
              "(refit without each model's forwards, predict them).")
@click.option("--allreduce", "allreduce_files", multiple=True, type=click.Path(dir_okay=False),
              help="Also fit the all-reduce (NCCL's Simple and low-latency protocols and a measurement floor) to "
              "Vidur all-reduce CSVs (repeatable; their single-node NVLink rows; give the DGX file for an SXM GPU).")
@click.option("--points/--no-points", "points", default=None,
              help="Store per-point residuals in the JSON (default: when at most 5000 points).")
@click.option("--plot", "plot_path", default=None, help="Also save a predicted-vs-measured figure (PNG/PDF).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON instead of the report.")
@click.option("--kernel-terms/--no-kernel-terms", "kernel_terms", default=True, show_default=True,
              help="On a GPU, also fit the GEMM kernel terms (smallest row tile, last wave's tail, size overhead; "
              "the form of the shipped defaults, VALIDATION.md); --no-kernel-terms gives the earlier form without them.")
def latency(profiles, hardware, output, smoothness, fit_layers, steps, holdout, allreduce_files, points, plot_path,
            as_json, kernel_terms):
    """Fit eta_compute, eta_memory, t_kernel (and the soft-max smoothness) to PROFILES.

    PROFILES are sdsl profiles (NAME, NAME.csv or NAME.json) or Vidur mlp.csv files / folders.
    Example: sdsl calibrate profiles/cpu-llama-68m -o profiles/cpu.calib.json
    """
    from sdsl.fit.calibration import calibrate_profiles

    result = calibrate_profiles(profiles, hardware=hardware, smoothness=_smoothness(smoothness), fit_layers=fit_layers,
                                steps=steps, kernel_terms=kernel_terms)
    held = _holdout(profiles, steps, result, fit_layers, _smoothness(smoothness), hardware) if holdout else None
    if allreduce_files:
        result = _with_allreduce(result, allreduce_files, hardware)
    elif _is_gpu(result.hardware):
        from dataclasses import replace

        result = replace(result, params=result.params.replace(
            source=result.params.source + "; all-reduce not fitted (the uncalibrated defaults, assumed)"))
    if output:
        result.to_json(output, include_points=points)
    if plot_path:
        import matplotlib

        matplotlib.use("Agg")
        from sdsl.plots._common import save_figure

        ax = result.plot()
        save_figure(ax.figure, plot_path, dpi=150, bbox_inches="tight")
    if as_json:
        d = result.to_dict(include_points=False)
        if held is not None:
            d["step_holdout"] = {"per_model": held.to_dict(orient="records"),
                                 "median_heldout_mape": float(held["heldout_mape"].median()),
                                 "mean_heldout_mape": float(held["heldout_mape"].mean())}
        echo_json(d)
    else:
        click.echo(result.report())
        if held is not None:
            click.echo("[[Whole forwards, leave one model out]]  held-out / in-sample MAPE")
            for r in held.itertuples():
                click.echo(f"    {r.model:<16} {100 * r.heldout_mape:6.2f} % / {100 * r.in_sample_mape:6.2f} %   (n={r.n})")
            click.echo(f"    median held-out MAPE {100 * held['heldout_mape'].median():.2f} %, "
                       f"mean {100 * held['heldout_mape'].mean():.2f} %")
        if output:
            click.echo(f"wrote {output}")


def _is_gpu(hardware) -> bool:
    from sdsl.catalog.hardware import get_hardware

    return get_hardware(hardware).kind == "gpu"


def _holdout(profiles, steps, result, fit_layers, smoothness, hardware=None):
    """Leave-one-model-out table of the forward rows (same data and options as the fit)."""
    import pandas as pd

    from sdsl.catalog.models import ModelSpec
    from sdsl.catalog.hardware import get_hardware
    from sdsl.validation.forward_holdout import forwards_leave_one_model_out
    from sdsl.fit.model_steps import read_model_steps
    from sdsl.fit.profiles import read_profile

    if not steps:
        raise InvalidInputError("--holdout needs --steps (whole-forward rows to hold out).")
    frames, layers = [], []
    for p in profiles:
        prof = read_profile(p)
        frames.append(prof.ops.assign(dtype=prof.meta["dtype"]))
        if fit_layers and len(prof.layers):
            layers.append((prof.layers, ModelSpec.from_dict(prof.meta["model"])))
    pairs = [pair for s in steps for pair in read_model_steps(s)[0]]
    return forwards_leave_one_model_out(pd.concat(frames, ignore_index=True), get_hardware(hardware or result.hardware), pairs,
                               layers=layers, dtype=result.dtype, smoothness=smoothness)


def _with_allreduce(result, files, hardware=None):
    """The calibration with its all-reduce terms fitted to the single-node NVLink rows of ``files``
    (message sizes in bytes, Vidur's network format), against ``hardware`` or the fit's own."""
    from dataclasses import replace
    from pathlib import Path

    from sdsl.fit.allreduce import fit_allreduce, nvlink_rows, read_allreduce

    rows = nvlink_rows([read_allreduce(f) for f in files])
    params, stats = fit_allreduce(rows, hardware or result.hardware, result.params)
    names = ", ".join(Path(f).name for f in files)
    return replace(result, params=params.replace(
        source=result.params.source + f"; all-reduce fitted to {names} (MAPE {100 * stats['mape']:.1f}%)"))


from sdsl.cli.calibrate_engine import engine as _engine  # noqa: E402

calibrate.add_command(_engine)
