"""Acceptance: how many drafted tokens the target keeps, in every form sdsl prices. Summary of
docs/model.md §2 (notation) and §3.5; one value type, :class:`Acceptance`, behind every form:

- :mod:`.tau` — τ, the expected tokens per step: Leviathan et al.'s closed form for an i.i.d. α, its
  per-position generalisation, and the inverse α(τ);
- :mod:`.vector` — :class:`Acceptance`, conditional rates per draft position with an optional tail;
- :mod:`.decay` — the decay form fitted when only a mean accepted length is known;
- :mod:`.converters` — what engines and benchmarks print (vLLM, SGLang, Spec-Bench, gpt-fast) → α or rates;
- :mod:`.catalog` and :mod:`.rules` — the published acceptance catalog and the default acceptance per proposer,
  target and workload it gives;
- :mod:`.plane` — SDSL's acceptance plane (α from the draft's and target's sizes and training tokens);
- :mod:`.trees` — token trees and their τ; :mod:`.ngram` — n-gram lookup replayed on token streams.

Which acceptance prices a proposer when none is given is :func:`sdsl.speculation.resolve.resolve_acceptance`.
"""

from sdsl.acceptance.converters import (accepted_length_with_bonus, alpha_from_accept_histogram,
                                             alpha_from_mean_accepted, alpha_from_spec_bench, alpha_from_vllm,
                                             check_marginal, conditional_from_marginal, marginal_from_conditional,
                                             positional_acceptance)
from sdsl.acceptance.decay import (DEFAULT_DECAY, GROUP_DECAY, decay_conditional, decay_group, decay_tau,
                                        fit_decay_ratio, group_decay, solve_decay)
from sdsl.acceptance.tau import (alpha_from_tau, chain_tau, check_alpha, check_gamma, tau, tau_from_conditional,
                                      tau_unchecked)
from sdsl.acceptance.vector import Acceptance

__all__ = [
    "Acceptance", "tau", "tau_unchecked", "tau_from_conditional", "chain_tau", "alpha_from_tau", "check_alpha",
    "check_gamma", "alpha_from_mean_accepted", "alpha_from_accept_histogram", "positional_acceptance",
    "alpha_from_vllm", "alpha_from_spec_bench", "marginal_from_conditional", "conditional_from_marginal",
    "check_marginal", "accepted_length_with_bonus", "DEFAULT_DECAY", "decay_conditional", "decay_tau",
    "solve_decay", "fit_decay_ratio", "GROUP_DECAY", "decay_group", "group_decay",
]
