"""sdsl — predict the throughput of speculative decoding and pick the throughput-optimal proposer (draft
model, head or lookup), speculation length and token tree (SDSL, Leviathan et al., TurboSpec; see
docs/model.md).

What a user calls is importable from ``sdsl`` itself (:data:`__all__`): the catalogs, the step price, the
proposers, the ranking and SDSL's law, plus the modules a notebook reaches into as namespaces (``sdsl.serving``,
``sdsl.calibration``, ``sdsl.plane`` ...; ARCHITECTURE.md draws the rooms). Every name is
imported on first use, so ``import sdsl`` costs almost nothing and a command loads only what it calls.
"""

from importlib import import_module

__version__ = "0.1.0"

# public name -> the module that defines it (imported on first use)
_NAMES = {
    # models, hardware, the deployment and the step's price
    "ModelSpec": "sdsl.catalog.models", "get_model": "sdsl.catalog.models", "Hardware": "sdsl.catalog.hardware",
    "get_hardware": "sdsl.catalog.hardware", "Deployment": "sdsl.roofline.deployment",
    "LatencyParams": "sdsl.roofline.latency", "default_params": "sdsl.roofline.latency",
    "step_time": "sdsl.roofline.latency", "memory_per_gpu": "sdsl.roofline.latency",
    "price_step": "sdsl.speculation.step", "PricedStep": "sdsl.speculation.priced_step",
    "predict": "sdsl.plan.api", "optimize": "sdsl.plan.api", "speedup": "sdsl.speculation.throughput",
    # acceptance and trees
    "Acceptance": "sdsl.acceptance", "tau": "sdsl.acceptance", "alpha_from_vllm": "sdsl.acceptance",
    "TokenTree": "sdsl.acceptance.trees",
    # proposers, ranking and choosing
    "make_proposer": "sdsl.speculation.proposers", "DraftModel": "sdsl.speculation.proposers",
    "plan_speculation": "sdsl.plan.plan",
    "rank_proposers": "sdsl.plan.ranking", "search": "sdsl.plan.search", "candidate_drafts": "sdsl.plan.search",
    "evaluate_grid": "sdsl.plan.search",
    # SDSL's law and the analytic optimum
    "gamma_star": "sdsl.speculation.optimum", "fit_draft_law": "sdsl.speculation.optimum",
    "AlphaClippedWarning": "sdsl.acceptance.plane",
    # calibration data
    "read_vidur": "sdsl.fit.profiles", "data_path": "sdsl._paths",
    # errors
    "SDSLError": "sdsl.errors", "InvalidInputError": "sdsl.errors",
}
# modules a user reaches into as namespaces (``sdsl.serving.simulate``, ``sdsl.calibration.fit_latency``)
_NAMESPACES = {"latency": "sdsl.roofline.latency", "plane": "sdsl.acceptance.plane",
               "optimum": "sdsl.speculation.optimum", "families": "sdsl.plan.families",
               "calibration": "sdsl.fit.calibration",
               "engine_calibration": "sdsl.fit.engine_calibration", "serving": "sdsl.serving", "plots": "sdsl.plots"}

__all__ = [*_NAMES, *_NAMESPACES]


def __getattr__(name: str):
    if name in _NAMES:
        value = getattr(import_module(_NAMES[name]), name)
    elif name in _NAMESPACES:
        value = import_module(_NAMESPACES[name])
    else:
        raise AttributeError(f"module 'sdsl' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
