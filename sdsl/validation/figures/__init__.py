"""The figure registry behind ``sdsl figures`` / ``make figures`` (paper_figures/).

Every entry names a PNG file, a callable ``"module:function"``, a one-line description and where
its data comes from. The callable takes ``quick: bool`` (coarser grids, used by the tests) and
returns a matplotlib Figure (or an Axes / array of Axes, whose figure is saved). matplotlib is
imported only when a figure is made, never at ``import sdsl.validation.figures``. Each recipe
module beside this one computes a figure's data and draws it with :mod:`sdsl.plots`.

To add a figure, append ONE line to ``FIGURES`` below (and describe it in paper_figures/README.md).
"""

from __future__ import annotations

import importlib
import io
import sys
from dataclasses import dataclass
from pathlib import Path

from sdsl._io import atomic_write_bytes
from sdsl.errors import InvalidInputError

__all__ = ["FigureEntry", "FIGURES", "get_figure", "make_figures", "render_png", "DPI"]

DPI = 120


@dataclass(frozen=True)
class FigureEntry:
    """One figure: output file name, ``"module:function"``, what it shows, where its data comes from."""

    name: str
    func: str
    description: str
    source: str

    def load(self):
        module, _, attr = self.func.partition(":")
        return getattr(importlib.import_module(module), attr)


_E = FigureEntry
# Adding a figure is a one-line change: append a FigureEntry(file name, "module:function", description, source).
FIGURES: list[FigureEntry] = [
    _E("sdsl_acceptance_plane.png", "sdsl.validation.figures.scaling:fig_sdsl_acceptance_plane", "SDSL: alpha over the (draft ppl, target ppl) plane, and alpha along the draft size", "SDSL plane constants (arXiv 2603.11053) + Chinchilla loss law"),
    _E("sdsl_speedup_vs_gamma.png", "sdsl.validation.figures.scaling:fig_sdsl_speedup_vs_gamma", "SDSL/Leviathan: speedup vs continuous gamma with the Lambert-W optimum marked", "analytic (Leviathan Thm 3.8, Lambert-W gamma*)"),
    _E("sdsl_draft_law.png", "sdsl.validation.figures.scaling:fig_sdsl_draft_law", "SDSL: optimal draft size N* vs target size M, 13 targets, fitted law vs paper's", "model catalog parameter counts + SDSL law (sdsl.speculation.optimum.fit_draft_law)"),
    _E("sdsl_nstar_vs_tokens.png", "sdsl.validation.figures.scaling:fig_sdsl_nstar_vs_tokens", "SDSL: N*/M vs pre-training tokens D", "SDSL law with Chinchilla loss, D from 1e10 to 3e13"),
    _E("hardware_draft_size.png", "sdsl.validation.figures.scaling:fig_hardware_draft_size", "sdsl extension: hardware-aware N* (H100, batch 1/8/32) next to the FLOP-model N*", "roofline step time (sdsl.roofline.latency, shipped params) + SDSL plane"),
    _E("leviathan_table1.png", "sdsl.validation.figures.leviathan:fig_leviathan_table1", "Leviathan Table 1 (speed and ops factors) reproduced, plus the T5-XXL/T5-small check", "Leviathan et al. 2023 Table 1 and Sec. 4"),
    _E("leviathan_speedup_vs_gamma.png", "sdsl.validation.figures.leviathan:fig_leviathan_speedup_vs_gamma", "Leviathan: speedup vs gamma for alpha 0.5..0.9 and c in {0, 0.05, 0.1}", "analytic (Leviathan Thm 3.8)"),
    _E("turbospec_step_latency.png", "sdsl.validation.figures.turbospec:fig_turbospec_step_latency", "TurboSpec-style: step latency vs batch size for k = 0..5, Llama-2-7B + Llama-160M on H100", "roofline step time (sdsl.roofline.latency, shipped params)"),
    _E("turbospec_speedup_vs_batch.png", "sdsl.validation.figures.turbospec:fig_turbospec_speedup_vs_batch", "TurboSpec-style: speedup vs batch at alpha = 0.5, and the optimal k vs batch", "roofline step time (sdsl.speculation.throughput.predict)"),
    _E("turbospec_linear_fit.png", "sdsl.validation.figures.turbospec:fig_turbospec_linear_fit", "TurboSpec-style: batched latency vs batched tokens, Llama-3.1-70B TP4, with the fitted linear form and the paper's", "roofline step time (shipped H100 params) + TurboSpec published coefficients"),
    _E("latency_validation.png", "sdsl.validation.figures.calibration:fig_latency_validation", "Evidence: predicted vs measured operator times, leave-one-model-out, Vidur H100 and A100", "Vidur per-operator measurements (sdsl/data/vidur) + sdsl.fit.calibration"),
    _E("cpu_calibration.png", "sdsl.validation.figures.calibration:fig_cpu_calibration", "Evidence: predicted vs measured times of this machine's CPU profile", "profiles/cpu-*.csv measured by sdsl profile + profiles/cpu.calib.json"),
    _E("decoder_speedup.png", "sdsl.validation.figures.reference:fig_decoder_speedup", "Evidence: predicted vs measured speedup of the reference speculative decoder (CPU)", "benchmarks/results/validate_decoder.json (sdsl validate decoder)"),
    _E("serving_speedup_vs_batch.png", "sdsl.validation.figures.serving:fig_serving_speedup_vs_batch", "Serving: speedup of k = 1/3/5/7 and goodput-adaptive k vs batch, alpha 0.5/0.7/0.9, 7B and 70B TP4 (analytic + simulated)", "roofline step time (shipped H100 params) + sdsl.serving simulator"),
    _E("serving_k_vs_batch.png", "sdsl.validation.figures.serving:fig_serving_k_vs_batch", "Serving: goodput-optimal k vs batch size, and the mean k the adaptive policy ran in simulation", "roofline step time (shipped H100 params) + sdsl.serving simulator"),
    _E("serving_latency_vs_qps.png", "sdsl.validation.figures.serving:fig_serving_latency_vs_qps", "Serving: mean/p99 request latency and mean k vs QPS per policy, Azure conv trace, Llama-2-7B + Llama-160M", "Splitwise conv trace (sdsl/data/traces) + sdsl.serving simulator"),
    _E("published_validation.png", "sdsl.validation.figures.published:fig_published_validation", "Evidence: predicted vs measured speed of every priced published row with its engine's profile (leave-one-source-out), and vLLM's EAGLE-1/EAGLE-3 k-sweeps", "sdsl/data/published (engine READMEs, PRs, docs, Spec-Bench) + shipped H100/A100 calibration + sdsl/data/engines/profiles.json"),
    _E("moe_speculation_vs_batch.png", "sdsl.validation.figures.moe:fig_moe_speculation_vs_batch", "MoESD's claim: EAGLE-3 speedup vs batch on Qwen3-30B-A3B (MoE) vs Qwen3-4B (dense), roofline and with host time, and what verification costs", "roofline step time (shipped H100 params) + expected distinct experts (sdsl.catalog.moe)"),
    _E("serving_alpha_shift.png", "sdsl.validation.figures.serving:fig_serving_alpha_shift", "Serving: latency when alpha drops 0.8 -> 0.4 mid-run: adaptive recovers, fixed k=5 does not", "Splitwise conv trace + sdsl.serving simulator"),
]


def get_figure(name: str) -> FigureEntry:
    """The registry entry called ``name`` (with or without ``.png``)."""
    key = name if name.endswith(".png") else name + ".png"
    for entry in FIGURES:
        if entry.name == key:
            return entry
    raise InvalidInputError(f"Unknown figure {name!r}; `sdsl figures --list` shows the {len(FIGURES)} figures.")


def _as_figure(obj):
    """A Figure from what a figure function returned (Figure, Axes, or an array/list of Axes)."""
    if hasattr(obj, "savefig"):
        return obj
    if hasattr(obj, "figure") and hasattr(obj.figure, "savefig"):
        return obj.figure
    try:
        first = next(iter(getattr(obj, "flat", obj)))
    except (TypeError, StopIteration):
        first = None
    if first is not None and hasattr(getattr(first, "figure", None), "savefig"):
        return first.figure
    raise TypeError(f"A figure function must return a matplotlib Figure or Axes; got {type(obj).__name__}.")


def render_png(entry: FigureEntry, quick: bool = False, dpi: int = DPI) -> bytes:
    """Run one figure function and return the PNG bytes."""
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")  # headless; never switches a backend a notebook already chose
    fig = _as_figure(entry.load()(quick=quick))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    if "matplotlib.pyplot" in sys.modules:
        import matplotlib.pyplot as plt

        plt.close(fig)
    return buf.getvalue()


def make_figures(out_dir="paper_figures", only=None, quick: bool = False, progress: bool = False) -> list[Path]:
    """Regenerate the registry's figures into ``out_dir`` (each PNG written atomically).

    ``only``: a name or list of names (default: all). ``progress``: show a tqdm bar. Returns the paths.
    """
    if only is None:
        entries = list(FIGURES)
    else:
        entries = [get_figure(n) for n in ([only] if isinstance(only, str) else only)]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    bar = entries
    if progress:
        try:
            from tqdm import tqdm
        except ImportError:  # tqdm is a dev extra; fall back to one line per figure
            tqdm = None
        bar = tqdm(entries, unit="fig", file=sys.stderr) if tqdm else entries
    paths = []
    for entry in bar:
        if progress and hasattr(bar, "set_postfix_str"):
            bar.set_postfix_str(entry.name)
        elif progress:
            print(f"figure {entry.name}", file=sys.stderr)
        path = out / entry.name
        atomic_write_bytes(path, render_png(entry, quick=quick))
        paths.append(path)
    return paths
