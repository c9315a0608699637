"""Serving: TurboSpec's goodput-adaptive speculation and a discrete-event serving simulator.

docs/model.md §3.4. Modules: :mod:`.step_model` (batch step time), :mod:`.linear_model` (TurboSpec's
linear step-time form), :mod:`.online_model` (that form fitted online, as the controller prices
steps), :mod:`.estimators` (online α), :mod:`.controller` (choice of k), :mod:`.workload` (Poisson /
trace arrivals), :mod:`.policies`, :mod:`.system`, :mod:`.batch` (the running batch and the
acceptance draws), :mod:`.simulator`, :mod:`.metrics`, :mod:`.k_table` (batch-size → k table for
serving engines).
"""

from sdsl.serving.controller import GoodputController, allocate_per_request, choose_k, goodput
from sdsl.serving.k_table import best_k_by_batch, serving_k_table, speedup_vs_batch
from sdsl.serving.estimators import EMAEstimator, WindowEstimator, make_estimator, trials_from_accepts
from sdsl.serving.metrics import SimResult
from sdsl.serving.online_model import OnlineStepModel
from sdsl.serving.policies import Policy, parse_policies, parse_policy
from sdsl.serving.simulator import SimConfig, simulate
from sdsl.serving.step_model import BatchStepModel, MemoryBudget, memory_budget, mixed_batch_time, roofline_step_fn
from sdsl.serving.system import ServingSystem
from sdsl.serving.workload import AcceptanceDist, Workload, load_trace, poisson_workload, scale_to_qps, trace_workload

__all__ = [
    "GoodputController", "allocate_per_request", "choose_k", "goodput",
    "EMAEstimator", "WindowEstimator", "make_estimator", "trials_from_accepts",
    "SimResult", "OnlineStepModel", "Policy", "parse_policies", "parse_policy", "SimConfig", "simulate",
    "BatchStepModel", "MemoryBudget", "memory_budget", "mixed_batch_time", "roofline_step_fn",
    "ServingSystem", "AcceptanceDist", "Workload", "load_trace", "poisson_workload", "scale_to_qps",
    "trace_workload", "best_k_by_batch", "serving_k_table", "speedup_vs_batch",
]
