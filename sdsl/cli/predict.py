"""`sdsl predict`: step-time breakdown, τ, tokens/s and speedup of one configuration."""

from __future__ import annotations

import click

from sdsl.cli._common import acceptance_options, calibration_option, echo_json, json_option, resolve_latency_params


@click.command()
@click.option("--target", required=True, help="Target model (catalog name or config.json).")
@click.option("--draft", required=True, help="Draft model (catalog name or config.json).")
@click.option("--gamma", required=True, type=int, help="Draft tokens proposed per step.")
@click.option("--hardware", default="h100-sxm", show_default=True, help="Hardware (catalog name or TOML/JSON file).")
@acceptance_options
@click.option("--batch", default=1, show_default=True, type=int, help="Sequences decoded together.")
@click.option("--context", default=1024, show_default=True, type=int, help="Tokens in each sequence's KV cache.")
@click.option("--tp", default=1, show_default=True, type=int, help="Tensor-parallel degree of the target.")
@click.option("--draft-tp", default=1, show_default=True, type=int, help="Tensor-parallel degree of the draft.")
@click.option("--dtype", default="bf16", show_default=True, type=click.Choice(["bf16", "fp16", "fp8", "fp32"]))
@calibration_option
@json_option
def predict(target, draft, gamma, hardware, acceptance, batch, context, tp, draft_tp, dtype, calibration, as_json):
    """Predict one speculative-decoding configuration: draft and verify step times, tau, tokens/s
    and speedup over plain decoding of the target."""
    from sdsl.core.architecture import get_model
    from sdsl.core.deployment import Deployment
    from sdsl.errors import InvalidInputError
    from sdsl.core.hardware import get_hardware
    from sdsl.core.scaling import acceptance_from_sizes
    from sdsl.core.throughput import predict as predict_sd

    if gamma < 0:
        raise InvalidInputError("--gamma must be >= 0.")
    if batch <= 0:
        raise InvalidInputError("--batch must be a positive integer.")
    if context < 0:
        raise InvalidInputError("--context must be >= 0.")
    t, d, hw = get_model(target), get_model(draft), get_hardware(hardware)
    acc = acceptance.resolve(k=gamma)
    if acc is None:
        alpha = float(acceptance_from_sizes(d.total_params, t.total_params))
        source = "sdsl-plane"
    else:  # the i.i.d. α with this acceptance's τ at γ prices it exactly (Leviathan Eq. (1) inverted)
        alpha, source = float(acc.iid_alpha(gamma)), ("given" if acc.is_iid else acc.source)
    params = resolve_latency_params(calibration, hw)
    deployment = Deployment(hw, tp=tp, draft_tp=draft_tp, dtype=dtype, context=context, params=params)
    p = predict_sd(t, d, deployment, gamma=gamma, alpha=alpha, batch=batch)
    out = {"target": t.name, "draft": d.name, "hardware": hw.name, "gamma": gamma, "alpha": alpha,
           "alpha_source": source, "batch": batch, "context": context, "tp": tp, "dtype": dtype, **p.to_dict(),
           "latency_params": params.to_dict(), **({"acceptance": acc.to_dict(gamma)} if acc is not None else {})}
    if as_json:
        echo_json(out)
        return
    ms = lambda s: f"{1e3 * s:8.3f} ms"  # noqa: E731
    click.echo(f"{t.name} + draft {d.name}, gamma {gamma}, alpha {alpha:.3f} ({source}), batch {batch}, "
               f"context {context}, tp {tp}, {dtype} on {hw.name}")
    click.echo(f"  draft step (q=1)      {ms(out['t_draft_s'])}   x {gamma}")
    click.echo(f"  verify step (q={gamma + 1:<2})   {ms(out['t_verify_s'])}   ({out['bound']}-bound)")
    click.echo(f"  overhead              {ms(out['t_overhead_s'])}")
    click.echo(f"  SD step               {ms(out['t_step_s'])}")
    click.echo(f"  plain step (q=1)      {ms(out['t_plain_s'])}")
    click.echo(f"  tau (tokens/step)     {out['tau']:8.3f}")
    click.echo(f"  tokens/s              {out['tokens_per_s']:8.1f}   (plain {out['plain_tokens_per_s']:.1f})")
    click.echo(f"  speedup               {out['speedup']:8.3f}x  (cost ratio c = {out['cost_ratio']:.4f})")
