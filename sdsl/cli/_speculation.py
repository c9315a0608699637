"""Options shared by `sdsl predict` and `sdsl optimize` for proposers and token trees (acceptance options
are the shared ones in :mod:`sdsl.cli._common`)."""

from __future__ import annotations

import click

__all__ = ["proposer_option", "tree_option", "pass_overhead_option", "host_step_options", "resolve_host_step_s"]

proposer_option = click.option(
    "--proposer", "proposers", multiple=True,
    help="draft:<model> | eagle | eagle3 | medusa | mtp | ngram (optimize: repeat to compare; 'all' = every head kind and n-gram lookup, MTP only where the target ships MTP modules).")
tree_option = click.option("--tree", default=None, help="Token tree STEPS,TOPK,TOKENS (SGLang's num-steps, eagle-topk, "
                                                        "num-draft-tokens), e.g. 8,8,64.")
pass_overhead_option = click.option(
    "--pass-overhead-us", type=float, default=0.0, show_default=True,
    help="Engine host time per forward pass (us), added to verify, each drafting pass and the plain step; "
         "0 = the operator-level roofline (an upper bound for engines; VALIDATION.md fits 325-580 us).")


def host_step_options(f):
    """--engine-host PROFILE | --host-step-us US: host time charged once per speculative step (not to the
    plain step), for engines that run speculation without overlap scheduling (sdsl.core.engine_host)."""
    f = click.option("--host-step-us", type=float, default=None,
                     help="Exposed engine host time per speculative step (us), e.g. your engine's measured "
                          "overlap on/off difference; overrides --engine-host.")(f)
    return click.option("--engine-host", default="none", show_default=True,
                        help="Sourced host time per speculative step of an engine build without spec overlap: "
                             "none | sglang-2025-10 (1107 us, SGLang PR #11398) | vllm-v1-2025-09 (970 us, vLLM "
                             "PR #25872); sdsl/data/published/engine_host.csv.")(f)


def resolve_host_step_s(engine_host: str, host_step_us) -> float:
    """Seconds per speculative step from the two options; a negative or non-finite value is one line."""
    import math

    from sdsl.core.engine_host import host_step_s
    from sdsl.errors import InvalidInputError

    if host_step_us is None:
        return host_step_s(engine_host)
    if not math.isfinite(host_step_us) or host_step_us < 0:
        raise InvalidInputError("--host-step-us must be a finite non-negative number of microseconds.")
    return 1e-6 * host_step_us
