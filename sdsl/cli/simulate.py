"""`sdsl simulate`: serving simulation of speculation policies under load (TurboSpec, docs/model.md §3.4)."""

from __future__ import annotations

import click

from sdsl.cli._common import deployment_options, echo_json, format_table, json_option, split_entries


def _parse_qps(text: str) -> list[float]:
    from sdsl.errors import InvalidInputError

    entries = split_entries(text, "--qps", "1,2,4")
    try:
        values = [float(v) for v in entries]
    except ValueError:
        raise InvalidInputError(f"--qps must be a comma-separated list of numbers; got {text!r}.") from None
    if not values or any(not (v > 0 and v < float("inf")) for v in values):
        raise InvalidInputError(f"--qps must list positive request rates; got {text!r}.")
    return values


@click.command()
@click.option("--target", default="llama-2-7b", show_default=True, help="Target model (catalog name or config.json).")
@click.option("--draft", default="llama-160m", show_default=True, help="Draft model (catalog name or config.json).")
@deployment_options(context=False)
@click.option("--qps", default="1,2,4,8,16", show_default=True, help="Request rates (requests/s), comma-separated.")
@click.option("--policy", "policies", default="none,k=3,adaptive", show_default=True,
              help="Policies, comma-separated: none, k=N, adaptive, per-request.")
@click.option("--trace", default=None, help="Replay a trace (conv, code or a CSV path) time-scaled to each QPS; requests "
              "longer than the target's context are cut to fit it (a note says how many); "
              "default: Poisson arrivals with fixed lengths.")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Directory holding traces/splitwise_*.csv (default: the traces shipped in sdsl/data).")
@click.option("--requests", "n_requests", default=1000, show_default=True, type=int, help="Requests per run.")
@click.option("--prompt-tokens", default=512, show_default=True, type=int, help="Prompt length without --trace.")
@click.option("--output-tokens", default=256, show_default=True, type=int, help="Output length without --trace.")
@click.option("--alpha", default=0.7, show_default=True, type=float, help="Mean per-token acceptance rate.")
@click.option("--alpha-concentration", default=20.0, show_default=True, type=float,
              help="Beta concentration of per-request acceptance around --alpha (inf: all equal).")
@click.option("--max-batch", default=256, show_default=True, type=int, help="Most running requests per step.")
@click.option("--max-k", default=7, show_default=True, type=int, help="Largest k the adaptive policies consider.")
@click.option("--mem-fraction", default=0.9, show_default=True, type=float, help="Fraction of GPU memory usable.")
@click.option("--estimator", default="ema", show_default=True, type=click.Choice(["ema", "window"]),
              help="Online acceptance estimate: TurboSpec's EMA (0.85/0.15) or a 16-step window.")
@click.option("--alpha-prior", default=0.7, show_default=True, type=float,
              help="Where each request's acceptance estimate starts (TurboSpec: 0.7).")
@click.option("--pricing", default="online", show_default=True, type=click.Choice(["online", "table"]),
              help="How the adaptive controller prices steps: TurboSpec's linear model fitted online to the "
              "step times it observes, or the simulator's exact step table (an oracle).")
@click.option("--spec-overhead", default=0.0, show_default=True, type=float,
              help="Speculation overhead as a fraction of the verification step (TurboSpec measures ~0.05).")
@click.option("--seed", default=0, show_default=True, type=int, help="Random seed (runs are deterministic).")
@json_option
def simulate(target, draft, deployment, qps, policies, trace, data_dir, n_requests, prompt_tokens,
             output_tokens, alpha, alpha_concentration, max_batch, max_k, mem_fraction, estimator, alpha_prior, pricing,
             spec_overhead, seed, as_json):
    """Simulate a continuously batched server under each QPS and speculation policy.

    Requests arrive (Poisson, or a replayed Azure trace time-scaled to the QPS), are admitted while
    batch slots and KV-cache memory (GPU memory minus target and draft weights) allow, and decode
    with per-request acceptance drawn around --alpha. Prints mean/p99 latency, TTFT, TPOT, output
    tokens/s and mean k per QPS and policy. Steps are priced with the engine profile (--engine), host time included.
    """
    from sdsl.catalog.models import get_model
    from sdsl.serving import AcceptanceDist, ServingSystem, SimConfig, parse_policies, simulate as run_sim

    rates = _parse_qps(qps)
    pols = parse_policies(policies)
    _check_options(n_requests=n_requests, prompt_tokens=prompt_tokens, output_tokens=output_tokens, alpha=alpha,
                   alpha_prior=alpha_prior, mem_fraction=mem_fraction, spec_overhead=spec_overhead,
                   max_batch=max_batch, max_k=max_k)
    k_needed = max([max_k] + [p.k for p in pols])
    target_spec = get_model(target)
    workloads, clipped = _workloads(rates, trace, data_dir, n_requests, prompt_tokens, output_tokens,
                                    AcceptanceDist(alpha, alpha_concentration), seed, target_spec)
    longest = max(int((w.prompt_tokens + w.output_tokens).max()) for w in workloads.values())
    longest_prompt = max(int(w.prompt_tokens.max()) for w in workloads.values())
    system = ServingSystem.from_catalog(target_spec, draft, deployment, mem_fraction=mem_fraction, max_batch=max_batch,
                                        max_k=k_needed, max_context=longest + k_needed + 2, max_prompt=longest_prompt,
                                        spec_overhead_frac=spec_overhead)
    config = SimConfig(max_batch=max_batch, max_k=max_k, estimator=estimator, prior=alpha_prior, pricing=pricing)
    results = []
    for r in rates:
        for p in pols:
            s = run_sim(workloads[r], system, p, config, seed=seed, qps=r).summary()
            results.append({key: s[key] for key in ("qps", "policy", "mean_latency_s", "p99_latency_s", "ttft_s",
                                                     "tpot_s", "tokens_per_s", "mean_k")})
    if as_json:
        echo_json({"engine": deployment.engine.name, "engine_profile": deployment.engine.summary(), "results": results,
                   **({"clipped_requests": clipped} if trace else {})})
        return
    src = f"trace {trace}" if trace else f"Poisson, {prompt_tokens}+{output_tokens} tokens"
    click.echo(f"{system.name}; {src}; {n_requests} requests; alpha ~ Beta(mean {alpha:g}, "
               f"concentration {alpha_concentration:g}); seed {seed}; engine {deployment.engine.name}")
    if clipped:
        n_run = len(next(iter(workloads.values())))
        click.echo(f"note: {clipped} of the {n_run} replayed requests {'exceeds' if clipped == 1 else 'exceed'} "
                   f"{target_spec.name}'s {target_spec.max_context}-token context and "
                   f"{'is' if clipped == 1 else 'are'} cut to fit it (prompt first, then output).")
    _echo_tables(rates, results)


def _check_options(*, n_requests, prompt_tokens, output_tokens, alpha, alpha_prior, mem_fraction, spec_overhead,
                   max_batch, max_k) -> None:
    """One InvalidInputError sentence for the first option out of range."""
    from sdsl.errors import InvalidInputError

    if n_requests < 2:
        raise InvalidInputError("--requests must be at least 2.")
    if prompt_tokens < 1 or output_tokens < 1:
        raise InvalidInputError("--prompt-tokens and --output-tokens must be >= 1.")
    if not 0.0 < alpha < 1.0:
        raise InvalidInputError(f"--alpha must lie in (0, 1); got {alpha}.")
    if not 0.0 < alpha_prior < 1.0:
        raise InvalidInputError(f"--alpha-prior must lie in (0, 1); got {alpha_prior}.")
    if not 0.0 < mem_fraction <= 1.0:
        raise InvalidInputError(f"--mem-fraction must lie in (0, 1]; got {mem_fraction}.")
    if not 0.0 <= spec_overhead < 10.0:
        raise InvalidInputError(f"--spec-overhead must lie in [0, 10); got {spec_overhead}.")
    if max_batch < 1 or max_k < 0:
        raise InvalidInputError("--max-batch must be >= 1 and --max-k >= 0.")


def _workloads(rates, trace, data_dir, n_requests, prompt_tokens, output_tokens, dist, seed, target_spec):
    """One workload per QPS — the trace (read once) time-scaled to it, or Poisson arrivals with fixed lengths — and
    how many of the replayed trace requests :meth:`Workload.clip_context` cuts to the target's context."""
    import numpy as np

    from sdsl.errors import InvalidInputError
    from sdsl.serving import load_trace, poisson_workload, trace_workload

    max_ctx = target_spec.max_context
    if not trace:
        if prompt_tokens + output_tokens > max_ctx:
            raise InvalidInputError(f"--prompt-tokens + --output-tokens exceed {target_spec.name}'s "
                                    f"{max_ctx}-token context.")
        return {r: poisson_workload(n_requests, r, prompt_tokens, output_tokens, dist, seed=seed) for r in rates}, 0
    loaded = load_trace(trace, data_dir)
    head = loaded.head(n_requests)
    cut = head.clip_context(max_ctx)
    clipped = int(np.sum((cut.prompt_tokens != head.prompt_tokens) | (cut.output_tokens != head.output_tokens)))
    return {r: trace_workload(loaded, r, n_requests, dist, seed=seed, max_context=max_ctx) for r in rates}, clipped


def _echo_tables(rates, results) -> None:
    cols = [("policy", "policy", ""), ("mean_latency_s", "mean lat (s)", ".3f"), ("p99_latency_s", "p99 lat (s)", ".3f"),
            ("ttft_ms", "TTFT (ms)", ".1f"), ("tpot_ms", "TPOT (ms)", ".2f"), ("tokens_per_s", "tok/s", ".0f"),
            ("mean_k", "mean k", ".2f")]
    for r in rates:
        rows = [{**x, "ttft_ms": x["ttft_s"] * 1e3, "tpot_ms": x["tpot_s"] * 1e3} for x in results if x["qps"] == r]
        click.echo(f"\nQPS {r:g}")
        click.echo(format_table(rows, cols))
