"""`sdsl acceptance --from-log` on real-format engine log lines, and the shared acceptance options."""

import json

import pytest
from click.testing import CliRunner

from sdsl.cli import cli
from sdsl.fit.engine_logs import parse_acceptance_log
from sdsl.errors import ConfigError

# vLLM v1 SpecDecodingLogging.log format (vllm/v1/spec_decode/metrics.py); numbers are ours, self-consistent:
# drafts = Drafted / k, mean = 1 + Accepted / drafts = 1 + sum(rates).
VLLM = (
    "(APIServer pid=1) INFO 05-30 07:21:10 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: 2.46, "
    "Accepted throughput: 35.01 tokens/s, Drafted throughput: 72.12 tokens/s, Accepted: 146 tokens, Drafted: 300 tokens, "
    "Per-position acceptance rate: 0.770, 0.450, 0.240, Avg Draft acceptance rate: 48.7%\n"
    "(APIServer pid=1) INFO 05-30 07:21:20 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 41.3 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.1%, "
    "Prefix cache hit rate: 0.0%\n"
    "(APIServer pid=1) INFO 05-30 07:21:30 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: 2.60, "
    "Accepted throughput: 64.00 tokens/s, Drafted throughput: 120.00 tokens/s, Accepted: 320 tokens, Drafted: 600 tokens, "
    "Per-position acceptance rate: 0.800, 0.500, 0.300, Avg Draft acceptance rate: 53.3%\n"
)
# vLLM v1 between PR #16665 and PR #17908: the same line with the mean length WITHOUT the bonus token.
VLLM_OLD = VLLM.replace("Mean acceptance length: 2.46", "Mean acceptance length: 1.46").replace(
    "Mean acceptance length: 2.60", "Mean acceptance length: 1.60")
# SGLang scheduler decode-log format (scheduler_metrics_mixin.log_decode_stats), old and new variants.
SGLANG = (
    "[2025-03-10 12:00:00] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', "
    "speculative_algorithm='EAGLE3', speculative_num_steps=5, speculative_eagle_topk=1, speculative_num_draft_tokens=6)\n"
    "[2025-03-10 12:00:05 TP0] Decode batch. #running-req: 1, #token: 1056, token usage: 0.00, accept len: 3.10, "
    "cuda graph: True, gen throughput (token/s): 210.55, #queue-req: 0\n"
    "[2025-03-10 12:00:09 TP0] Decode batch, #running-req: 1, #token: 1311, token usage: 0.00, accept len: 3.30, "
    "accept rate: 0.46, cuda graph: True, gen throughput (token/s): 221.07, #queue-req: 0\n"
)
LLAMACPP = ("0.06.896.015 I slot print_timing: id  1 | task 0 | draft acceptance = 0.53333 (  160 accepted /   300 "
            "generated), mean acceptance length =  2.60, acceptance rate per position = (0.800, 0.500, 0.300)\n")


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_vllm_pools_intervals_weighted_by_drafts():
    r = parse_acceptance_log(VLLM)
    assert (r.engine, r.lines, r.k, r.convention) == ("vllm", 2, 3, "bonus-included")
    # 100 and 200 drafts: (100·m1 + 200·m2) / 300
    assert r.acceptance.marginal.tolist() == pytest.approx([0.79, 1.45 / 3, 0.28])
    assert r.mean_accepted_length == pytest.approx(1 + 0.79 + 1.45 / 3 + 0.28)


def test_vllm_off_by_one_convention_is_detected():
    new, old = parse_acceptance_log(VLLM), parse_acceptance_log(VLLM_OLD)
    assert old.convention == "bonus-excluded"
    # the same acceptance either way: tau comes from the per-position rates, not the printed mean
    assert old.acceptance.tau() == pytest.approx(new.acceptance.tau())
    bad = VLLM.replace("Mean acceptance length: 2.46", "Mean acceptance length: 3.46")
    with pytest.raises(ConfigError, match=r"neither 1 \+ the sum of the per-position rates \(2\.460\) nor that sum"):
        parse_acceptance_log(bad)


def test_sglang_accept_len_includes_bonus():
    r = parse_acceptance_log(SGLANG)
    assert (r.engine, r.k, r.lines) == ("sglang", 5, 2)  # k from the logged server_args
    assert r.mean_accepted_length == pytest.approx(3.2)
    assert r.acceptance.tau(5) == pytest.approx(3.2, rel=1e-9)  # not 4.2 (bonus added twice) nor 2.2
    assert parse_acceptance_log(SGLANG, k=3).acceptance.tau(3) == pytest.approx(3.2, rel=1e-9)
    no_args = SGLANG.split("\n", 1)[1]
    with pytest.raises(Exception, match="give --k"):
        parse_acceptance_log(no_args)


def test_sglang_accept_len_one_means_nothing_accepted():
    line = SGLANG.replace("accept len: 3.10", "accept len: 1.00").replace("accept len: 3.30", "accept len: 1.00")
    r = parse_acceptance_log(line)
    assert r.acceptance.tau(5) == pytest.approx(1.0) and r.acceptance.marginal_at(5).max() < 1e-9


def test_llamacpp_uses_vllm_definitions():
    r = parse_acceptance_log(LLAMACPP)
    assert r.engine == "llamacpp" and r.acceptance.marginal.tolist() == pytest.approx([0.8, 0.5, 0.3])


def test_from_log_json_feeds_predict(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text(VLLM)
    out = tmp_path / "acc.json"
    r = run("acceptance", "--from-log", str(log), "--out", str(out), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["engine"] == "vllm" and len(d["marginal"]) == 3 and d["tau"] == pytest.approx(2.5533, abs=1e-4)
    p = run("predict", "--target", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--gamma", "3",
            "--acceptance-file", str(out), "--json")
    assert p.exit_code == 0, p.output
    assert json.loads(p.output)["tau"] == pytest.approx(d["tau"], rel=1e-9)
    assert run("predict", "--target", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--gamma", "4",
               "--acceptance-file", str(out)).exit_code == 2  # the vector covers k <= 3 only


def test_predict_accepted_length_and_acceptance_agree():
    base = ["predict", "--target", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--gamma", "4", "--json"]
    a = json.loads(run(*base, "--accepted-length", "3.1").output)
    b = json.loads(run(*base, "--acceptance", "0.8,0.6,0.4,0.3").output)
    c = json.loads(run(*base, "--acceptance", "0.8,0.75,0.6667,0.75", "--acceptance-kind", "conditional").output)
    assert a["tau"] == pytest.approx(3.1) and b["tau"] == pytest.approx(3.1)
    assert c["tau"] == pytest.approx(1 + 0.8 + 0.6 + 0.8 * 0.75 * 0.6667 + 0.8 * 0.75 * 0.6667 * 0.75, rel=1e-9)
    assert a["tokens_per_s"] == pytest.approx(b["tokens_per_s"], rel=1e-9)
    assert a["acceptance"]["source"] == "accepted-length" and len(a["acceptance"]["marginal"]) == 4


def test_optimize_takes_acceptance_and_caps_gamma():
    r = run("optimize", "--target", "llama-3.1-8b", "--drafts", "llama-3.2-1b", "--acceptance", "0.8,0.6,0.4",
            "--gamma-max", "8", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["alpha_source"] == "marginal" and all(c["gamma"] <= 3 for c in out["configs"])
    r = run("optimize", "--target", "llama-3.1-8b", "--drafts", "llama-3.2-1b", "--accepted-length", "3.1",
            "--accepted-at", "4", "--json")
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("args", [
    ["predict", "--alpha", "0.6", "--accepted-length", "3"],
    ["predict", "--acceptance", "0.8,1.2"],
    ["predict", "--acceptance", "0.5,0.7"],  # a marginal vector cannot increase
    ["predict", "--accepted-length", "5.5"],  # above k + 1 at --gamma 4
    ["predict", "--accepted-length", "0.5"],
    ["predict", "--acceptance", "0.8,x"],
    ["predict", "--accepted-at", "3"],
    ["optimize", "--accepted-length", "3.1"],  # optimize needs the k it was measured at
    ["acceptance"],
    ["acceptance", "--from-log", "missing.log"],
    ["acceptance", "--from-log", "x.log", "--alpha", "0.5"],
])
def test_bad_acceptance_is_one_line_exit_2(args):
    if args[0] == "predict":
        args = args + ["--target", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--gamma", "4"]
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert r.output.startswith("Error: ") and r.output.count("\n") == 1


def test_acceptance_command_converts_an_accepted_length():
    r = run("acceptance", "--accepted-length", "3.1", "--accepted-at", "4", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["k"] == 4 and d["tau"] == pytest.approx(3.1) and d["tail_ratio"] is not None
