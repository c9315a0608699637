"""sdsl — predict the throughput of speculative decoding and pick the throughput-optimal draft
model and speculation length (SDSL, Leviathan et al., TurboSpec; see docs/model.md).

The numpy core is imported here; torch (``sdsl.torch``, ``sdsl.torch.harness``) and matplotlib
(``sdsl.plots``) are imported only when those modules are used.
"""

from sdsl.core.acceptance import (alpha_from_accept_histogram, alpha_from_mean_accepted, alpha_from_spec_bench,
                         alpha_from_tau, alpha_from_vllm, positional_acceptance, tau, tau_positional)
from sdsl.core.architecture import ModelSpec, dtype_bytes, get_model, list_models
from sdsl.core.deployment import Deployment
from sdsl.errors import ConfigError, InvalidInputError, ProfileError, SDSLError, UnknownNameError
from sdsl.core.hardware import Hardware, get_hardware, list_hardware, load_hardware_file
from sdsl.core.latency import LatencyParams, ModelShapes, StepTime, default_params, memory_per_gpu, step_time, step_time_s
from sdsl.core.optimize import (SDSL_TARGETS, DraftLaw, best_integer_gamma, best_speedup, fit_draft_law, gamma_star,
                       optimal_draft_size)
from sdsl.core.scaling import CHINCHILLA, SDSL_PLANE, AcceptancePlane, LossLaw, acceptance_from_sizes, perplexity
from sdsl.core.search import SearchGrid, candidate_drafts, evaluate_grid, search
from sdsl.core.throughput import SDPrediction, plain_tokens_per_s, predict, speedup, tokens_per_flop, work_factor

__version__ = "0.1.0"

__all__ = [
    "tau", "tau_positional", "alpha_from_tau", "alpha_from_mean_accepted", "alpha_from_accept_histogram",
    "positional_acceptance", "alpha_from_vllm", "alpha_from_spec_bench",
    "ModelSpec", "dtype_bytes", "get_model", "list_models",
    "SDSLError", "InvalidInputError", "UnknownNameError", "ConfigError", "ProfileError",
    "Hardware", "get_hardware", "list_hardware", "load_hardware_file", "Deployment",
    "LatencyParams", "ModelShapes", "StepTime", "default_params", "memory_per_gpu", "step_time", "step_time_s",
    "gamma_star", "best_speedup", "best_integer_gamma", "optimal_draft_size", "fit_draft_law", "DraftLaw",
    "SDSL_TARGETS",
    "LossLaw", "CHINCHILLA", "AcceptancePlane", "SDSL_PLANE", "perplexity", "acceptance_from_sizes",
    "SearchGrid", "candidate_drafts", "evaluate_grid", "search",
    "SDPrediction", "predict", "plain_tokens_per_s", "speedup", "work_factor", "tokens_per_flop",
    "__version__",
]
