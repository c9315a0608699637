"""Inputs that used to return a number with exit 0 (or a bare traceback) are refused with one typed sentence:
per-position acceptance rates above 1 in an engine log, NaN draft lengths, predictions of deployments that do not
fit in memory, draft chains longer than the target's context, and an empty list of proposers."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

import sdsl
from sdsl.cli import cli
from sdsl.errors import ConfigError, InvalidInputError
from sdsl.fit.engine_logs import parse_acceptance_log

VLLM_LINE = ("(APIServer pid=1) INFO 05-30 07:21:10 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: 3.20, "
             "Accepted throughput: 35.01 tokens/s, Drafted throughput: 72.12 tokens/s, Accepted: 146 tokens, Drafted: "
             "300 tokens, Per-position acceptance rate: 1.700, 0.500, Avg Draft acceptance rate: 48.7%\n")


def _one_line(text: str) -> str:
    assert "\n" not in text.strip() and "Traceback" not in text, text
    return text


def test_an_acceptance_rate_above_one_is_refused_not_clipped(tmp_path):
    """1 + 1.7 + 0.5 = 3.2 passes the mean-length check; clipping 1.7 to 1 afterwards gave tau 2.50."""
    with pytest.raises(ConfigError, match=r"rate 1\.7 is outside \[0, 1\]"):
        parse_acceptance_log(VLLM_LINE)
    log = tmp_path / "server.log"
    log.write_text(VLLM_LINE)
    res = CliRunner().invoke(cli, ["acceptance", "--from-log", str(log)])
    assert res.exit_code == 2 and "outside [0, 1]" in _one_line(res.output)
    llamacpp = ("slot print_timing: id  1 | task 0 | draft acceptance = 0.5 (  160 accepted /   300 generated), "
                "mean acceptance length =  3.20, acceptance rate per position = (1.700, 0.500)\n")
    with pytest.raises(ConfigError, match="outside"):
        parse_acceptance_log(llamacpp)


@pytest.mark.parametrize("k", [math.nan, [1, math.nan], -1, 1.5])
def test_tau_of_a_bad_k_is_a_typed_error(k):
    acc = sdsl.Acceptance.from_marginal([0.8, 0.5])
    with pytest.raises(InvalidInputError, match="non-negative integer"):
        acc.tau(k)


@pytest.mark.parametrize("kwargs, context", [({"batch": 10 ** 12}, 1024), ({}, 10 ** 12)])
def test_predict_never_prices_what_does_not_fit_silently(kwargs, context):
    """The low-level chain price refuses in one line; sdsl.predict (the CLI's twin, which prints DOES NOT FIT) says so
    in its warnings and memory check."""
    from sdsl.speculation.throughput import predict as chain_predict

    dep = sdsl.Deployment("h100-sxm", context=context)
    args = {"gamma": 3, "alpha": 0.7, **kwargs}
    with pytest.raises(InvalidInputError, match="does not fit") as err:
        chain_predict("llama-3.1-8b", "llama-3.2-1b", dep, **args)
    _one_line(str(err.value))
    res = sdsl.predict("llama-3.1-8b", "llama-3.2-1b", dep, **args)
    assert not res.memory["fits_in_memory"] and any("does not fit" in w for w in res.warnings)


def test_predict_refuses_a_chain_longer_than_the_context():
    with pytest.raises(InvalidInputError, match="context") as err:
        sdsl.predict("llama-3.1-8b", "llama-3.2-1b", sdsl.Deployment("h100-sxm", context=1024), gamma=10 ** 9, alpha=0.7)
    _one_line(str(err.value))
    # a batch sweep of which some batches fit is priced (the CLI and plan report which fit)
    assert sdsl.predict("llama-3.1-8b", "llama-3.2-1b", sdsl.Deployment("h100-sxm"),
                        gamma=3, alpha=0.7, batch=[1, 10 ** 12]).speedup.shape == (2,)


def test_a_chain_longer_than_the_context_is_refused_everywhere():
    with pytest.raises(InvalidInputError, match="131072-token context"):
        sdsl.price_step("llama-3.1-8b", "eagle3", sdsl.Deployment("h100-sxm"), gamma=10 ** 9, tau=2.0)
    res = CliRunner().invoke(cli, ["predict", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--gamma", "200000",
                                   "--accepted-length", "2.5"])
    assert res.exit_code == 2 and "context" in _one_line(res.output)


def test_plan_with_no_proposers_is_refused_not_defaulted():
    with pytest.raises(InvalidInputError, match="proposers is empty"):
        sdsl.plan_speculation("llama-3.1-8b", sdsl.Deployment("h100-sxm"), proposers=[])


def test_a_deployment_that_does_not_fit_is_told_only_what_it_does_not_already_do():
    """The remedies name fp8 weights only for 16-bit weights and an fp8 KV cache only where a 16-bit cache is a real
    share of the memory: DeepSeek-V3 ships fp8 weights, and at 32k tokens its replicated latent cache is what
    overflows the H200; Llama-3.1-70B on one H100 is its bf16 weights."""
    llama = sdsl.predict("llama-3.1-70b", "llama-3.2-1b", sdsl.Deployment("h100-sxm"), gamma=3, alpha=0.7)
    deepseek = sdsl.predict("deepseek-v3", "mtp", sdsl.Deployment("h200", tp=8, context=32768), gamma=1, alpha=0.7,
                            batch=32)
    cached = sdsl.predict("deepseek-v3", "mtp", sdsl.Deployment("h200", tp=8, context=32768, kv_dtype="fp8"), gamma=1,
                          alpha=0.7, batch=64)
    (a,), (b,), (c,) = ([w for w in r.warnings if "does not fit" in w] for r in (llama, deepseek, cached))
    assert a.endswith("use fp8 weights") and "KV cache;" not in a and "fp8 KV" not in a
    assert b.endswith("or use an fp8 KV cache") and "fp8 weights" not in b
    assert c.endswith("raise the tensor parallelism or lower the batch or the context")
