"""sdsl — predict the throughput of speculative decoding and pick the throughput-optimal proposer (draft
model, head or lookup), speculation length and token tree (SDSL, Leviathan et al., TurboSpec; see
docs/model.md).

Everything a user calls is importable from ``sdsl`` itself (:data:`__all__`). The numpy core is imported
here; the calibration fits (``fit_latency``, ``read_vidur``), the serving simulator (``simulate``,
``ServingSystem``, ...) and the drawing functions (``plot_calibration``) are imported on first use, and torch
(``sdsl.torch``) and matplotlib only when those are used.
"""

from importlib import import_module

from sdsl._paths import data_path
from sdsl.acceptance import (Acceptance, alpha_from_accept_histogram, alpha_from_mean_accepted,
                                  alpha_from_spec_bench, alpha_from_tau, alpha_from_vllm, chain_tau,
                                  positional_acceptance, tau, tau_from_conditional)
from sdsl.speculation.resolve import resolve_acceptance
from sdsl.speculation.optimum import (SDSL_TARGETS, DraftLaw, best_integer_gamma, best_speedup, fit_draft_law,
                                        gamma_star, optimal_draft_size)
from sdsl.catalog.models import ModelSpec, dtype_bytes, get_model, list_models
from sdsl.roofline.deployment import Deployment
from sdsl.plan.export import export_config
from sdsl.catalog.hardware import Hardware, get_hardware, list_hardware, load_hardware_file
from sdsl.roofline.latency import (LatencyParams, ModelShapes, StepTime, default_params, gemm_flops_bytes, memory_per_gpu,
                               op_time, step_time, step_time_s)
from sdsl.plan.plan import SpeculationPlan, plan_speculation
from sdsl.speculation.priced_step import PricedStep
from sdsl.speculation.proposers import (PROPOSER_KINDS, DraftModel, Eagle3Head, EagleHead, MedusaHeads, MTPLayers,
                                 NGramLookup, Proposer, make_proposer)
from sdsl.plan.ranking import ProposerRanking, TreeRanking, k_table, rank_proposers, rank_trees
from sdsl.acceptance.plane import (CHINCHILLA, SDSL_PLANE, AcceptancePlane, AlphaClippedWarning, LossLaw,
                               acceptance_from_sizes, perplexity)
from sdsl.plan.search import SearchGrid, candidate_drafts, evaluate_grid, search
from sdsl.speculation.step import TreeShape, parse_tree, price_step
from sdsl.speculation.throughput import SDPrediction, plain_tokens_per_s, predict, speedup, tokens_per_flop, work_factor
from sdsl.plan.tree_search import BestTree, SGLangGrid, best_tree, sglang_grid
from sdsl.acceptance.trees import TokenTree, draft_scores, rank_acceptance, sglang_tree_tau, tree_matrices
from sdsl.errors import ConfigError, InvalidInputError, ProfileError, SDSLError, UnknownNameError

__version__ = "0.1.0"

# Names of the layers above the core, imported on first use (``sdsl.simulate`` imports the serving simulator).
_LAZY = {
    "fit_latency": "sdsl.fit.calibration", "GPU_M_TILE": "sdsl.fit.calibration", "load_latency_params": "sdsl.fit.calibration",
    "read_vidur": "sdsl.fit.profiles", "read_profile": "sdsl.fit.profiles",
    "plot_calibration": "sdsl.plots",
    **{name: "sdsl.serving" for name in ("AcceptanceDist", "BatchStepModel", "GoodputController", "ServingSystem",
                                         "SimConfig", "SimResult", "Workload", "poisson_workload", "trace_workload",
                                         "simulate", "serving_k_table", "speedup_vs_batch", "best_k_by_batch")},
}

__all__ = [
    # acceptance
    "Acceptance", "resolve_acceptance", "tau", "chain_tau", "tau_from_conditional", "alpha_from_tau",
    "alpha_from_mean_accepted", "alpha_from_accept_histogram", "positional_acceptance", "alpha_from_vllm",
    "alpha_from_spec_bench",
    # models, hardware, deployment, step times
    "ModelSpec", "dtype_bytes", "get_model", "list_models", "Hardware", "get_hardware", "list_hardware",
    "load_hardware_file", "Deployment", "LatencyParams", "ModelShapes", "StepTime", "default_params",
    "memory_per_gpu", "step_time", "step_time_s", "gemm_flops_bytes", "op_time", "data_path",
    # proposers, trees, the priced step
    "Proposer", "DraftModel", "EagleHead", "Eagle3Head", "MedusaHeads", "MTPLayers", "NGramLookup",
    "PROPOSER_KINDS", "make_proposer", "TreeShape", "parse_tree", "TokenTree", "rank_acceptance", "draft_scores",
    "tree_matrices", "sglang_tree_tau", "best_tree", "BestTree", "sglang_grid", "SGLangGrid", "price_step", "PricedStep",
    "SDPrediction", "predict", "plain_tokens_per_s", "speedup", "work_factor", "tokens_per_flop",
    # ranking and choosing
    "rank_proposers", "ProposerRanking", "rank_trees", "TreeRanking", "k_table", "plan_speculation",
    "SpeculationPlan", "export_config", "SearchGrid", "candidate_drafts", "evaluate_grid", "search",
    # SDSL's law and the analytic optimum
    "gamma_star", "best_speedup", "best_integer_gamma", "optimal_draft_size", "fit_draft_law", "DraftLaw",
    "SDSL_TARGETS", "LossLaw", "CHINCHILLA", "AcceptancePlane", "SDSL_PLANE", "AlphaClippedWarning",
    "perplexity", "acceptance_from_sizes",
    # errors
    "SDSLError", "InvalidInputError", "UnknownNameError", "ConfigError", "ProfileError",
    # imported on first use
    *_LAZY,
    "__version__",
]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sdsl' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
