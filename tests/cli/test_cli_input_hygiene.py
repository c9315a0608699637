"""Bad CLI input is one clear sentence and exit code 2: never a traceback, nor a value silently clipped,
dropped, doubled or defaulted."""

import json

import pytest
from click.testing import CliRunner

from sdsl.cli import cli

HEADER = "arrived_at,num_prefill_tokens,num_decode_tokens\n"


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def fails(*args, match: str):
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and r.output.count("\n") == 1, r.output
    assert match in r.output, r.output
    return r.output


def sim(trace):
    return ("simulate", "--qps", "1", "--trace", trace, "--requests", "2", "--policy", "none")


def test_empty_trace_holds_no_requests(tmp_path):
    empty = tmp_path / "EMPTY.csv"
    empty.write_text(HEADER)
    fails(*sim(empty), match="EMPTY.csv holds no requests")


@pytest.mark.parametrize("row, column", [("0,100,-5", "num_decode_tokens"), ("0,100,0", "num_decode_tokens"),
                                         ("0,-1,5", "num_prefill_tokens"), ("0,100.7,5", "num_prefill_tokens")])
def test_trace_token_counts_are_checked_not_repaired(tmp_path, row, column):
    trace = tmp_path / "t.csv"
    trace.write_text(HEADER + "1,100,50\n" + row + "\n")
    out = fails(*sim(trace), match=f"t.csv, line 3: {column} must be")
    assert "whole number of tokens" in out


def test_trace_prompt_beyond_the_context_is_cut_with_a_note(tmp_path):
    trace = tmp_path / "huge.csv"
    trace.write_text(HEADER + "0,100,10\n0,100000000,50\n")
    r = run(*sim(trace))
    assert r.exit_code == 0, r.output
    assert "note: 1 of the 2 replayed requests exceeds llama-2-7b's 4096-token context" in r.output
    r = run(*sim(trace), "--json")
    assert json.loads(r.output)["clipped_requests"] == 1


@pytest.mark.parametrize("args, match", [
    (("optimize", "--batch", "1,,8"), "--batch has an empty entry in '1,,8'"),
    (("optimize", "--batch", "8-1"), "--batch range '8-1' is reversed"),
    (("optimize", "--acceptance", "0.8,,0.5", "--proposer", "eagle3"), "--acceptance has an empty entry"),
    (("simulate", "--qps", "1,,2"), "--qps has an empty entry"),
    (("simulate", "--qps", "1", "--policy", "none,,k=3"), "has an empty entry"),
    (("optimize", "--drafts", ""), "--drafts is empty"),
    (("optimize", "--drafts", "llama-68m,,llama-160m"), "--drafts has an empty entry"),
    (("optimize", "--json", "--csv"), "Give one of --json, --csv."),
    (("optimize", "--csv", "--trees"), "cannot carry --trees"),
    (("optimize", "--csv", "--export", "vllm"), "cannot carry --export"),
    (("optimize", "--tokens", "inf"), "--tokens must be a finite"),
    (("predict", "--target", "llama-2-7b", "--proposer", "eagle3", "--tree", "8,8,64", "--gamma", "3"),
     "Give --gamma or --tree, not both"),
    (("predict", "--target", "llama-2-7b", "--proposer", "eagle3", "--gamma", "3", "--draft-tp", "3"),
     "--draft-tp applies to a separate draft model only"),
    (("predict", "--target", "llama-2-7b", "--proposer", "eagle3", "--gamma", "3", "--accepted-length", "inf"),
     "--accepted-length must be a finite mean accepted length"),
    (("optimize", "--target", "llama-2-7b", "--proposer", "eagle3", "--acceptance-for", "eagle3=inf@3"),
     "--acceptance-for eagle3 must be a finite mean accepted length"),
    (("optimize", "--target", "llama-2-7b", "--proposer", "eagle3", "--acceptance-for", "eagle3=0.8,0.9"),
     "Marginal (per-position) acceptance must be non-increasing"),
])
def test_bad_option_values_are_one_sentence(args, match):
    fails(*args, match=match)


def test_policy_k0_is_none_and_the_message_says_so():
    out = fails("simulate", "--qps", "1", "--policy", "k=16", match="k=N (N in 1..15; k=0 is none)")
    assert "Unknown policy 'k=16'" in out


def test_duplicate_proposers_are_ranked_once():
    r = run("optimize", "--target", "llama-2-7b", "--proposer", "eagle3", "--proposer", "eagle3", "--drafts",
            "llama-160m", "--proposer", "draft:llama-160m", "--json")
    assert r.exit_code == 0, r.output
    names = [c["proposer"] for c in json.loads(r.output)["configs"] if c["batch"] == 1]
    assert sorted(names) == ["draft:llama-160m", "eagle3"]


def test_a_short_acceptance_vector_caps_k_with_one_note():
    for given in (("--acceptance", "0.8,0.6"), ("--acceptance-for", "eagle3=0.8,0.6")):
        r = run("optimize", "--target", "llama-2-7b", "--proposer", "eagle3", *given)
        assert r.exit_code == 0, r.output
        assert r.output.count("note: k searched up to 2 only") == 1, r.output
        r = run("optimize", "--target", "llama-2-7b", "--proposer", "eagle3", *given, "--json")
        assert max(c["gamma"] for c in json.loads(r.output)["configs"]) == 2


@pytest.mark.parametrize("command, text", [("optimize", "no default: required with --accepted-length"),
                                           ("acceptance", "(default: --k)"), ("predict", "(default: --gamma)")])
def test_accepted_at_help_names_the_commands_own_default(command, text):
    out = " ".join(run(command, "--help").output.split())
    assert text in out and ("default: --gamma" not in out or command == "predict")


def test_predict_alpha_help_prices_one_proposer():
    out = " ".join(run("predict", "--help").output.split())
    assert "every proposer ranked" not in out and "the proposer priced" in out


def test_an_engine_file_without_terms_is_an_error(tmp_path):
    empty = tmp_path / "EMPTY.json"
    empty.write_text("{}")
    fails("predict", "--target", "llama-2-7b", "--proposer", "eagle3", "--gamma", "3", "--engine", empty,
          match="EMPTY.json holds no engine profile terms")


def test_ngram_replay_of_empty_texts_is_an_error(tmp_path):
    pairs = tmp_path / "p.jsonl"
    pairs.write_text('{"prompt": "", "response": ""}\n{"prompt": "ab", "response": "a"}\n')
    fails("acceptance", "--ngram", pairs, match="has no response tokens to replay")


def test_acceptance_without_input_names_every_source():
    out = fails("acceptance", match="--from-log FILE")
    assert "--ngram FILE" in out and "--proposer NAME with --target MODEL" in out


def test_profile_q_help_matches_what_the_grid_takes():
    out = " ".join(run("profile", "--help").output.split())
    assert "(1..8)" not in out and "each >= 1" in out


def test_calibrate_latency_missing_file_is_not_called_a_vidur_file(tmp_path):
    out = fails("calibrate", "latency", tmp_path / "nonexist.csv", match="nonexist.csv not found")
    assert "Vidur file" not in out


def test_vllm_log_with_an_inconsistent_mean_reads_clearly(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text("INFO 05-01 12:00:00 metrics.py:455] SpecDecoding metrics: Mean acceptance length: 3.90, Accepted "
                   "throughput: 100.00 tokens/s, Drafted throughput: 200.00 tokens/s, Accepted: 1000 tokens, Drafted: "
                   "2000 tokens, Per-position acceptance rate: 0.800, 0.600, 0.400, 0.250, Avg Draft acceptance rate: "
                   "51.2%\n")
    fails("acceptance", "--from-log", log,
          match="matches neither 1 + the sum of the per-position rates (3.050) nor that sum (2.050)")


def test_infinity_prints_as_null_in_json():
    r = run("predict", "--target", "llama-2-7b", "--draft", "llama-68m", "--gamma", "3", "--hardware", "cpu", "--json")
    assert r.exit_code == 0, r.output
    assert '"inf"' not in r.output and json.loads(r.output)["latency_params"]["smoothness"] is None


def _llama_config(path, layers=30):
    """A Llama config; 32 layers is Llama-3.1-8B's shape (the catalog's), 30 no catalog model's."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
                                "num_attention_heads": 32, "num_hidden_layers": layers, "num_key_value_heads": 8,
                                "vocab_size": 128256, "max_position_embeddings": 131072, "model_type": "llama"}))
    return path


@pytest.mark.parametrize("relative, layers, name", [("qa/cfg.json", 30, "cfg"), ("qa/MyModel-8B/config.json", 30, "mymodel-8b"),
                                                    ("qa/cfg.json", 32, "llama-3.1-8b"),
                                                    ("qa/MyModel-8B/config.json", 32, "llama-3.1-8b")])
def test_a_config_file_names_the_model_the_same_everywhere(tmp_path, relative, layers, name):
    """A config no catalog model shares is named after its file; one with a catalog model's architecture and shape
    takes that model's name, whatever the file is called."""
    cfg = _llama_config(tmp_path / relative, layers)
    for given in (cfg, cfg.parent) if cfg.name == "config.json" else (cfg,):
        r = run("predict", "--target", given, "--draft", "llama-68m", "--gamma", "3", "--json")
        assert r.exit_code == 0, r.output
        assert json.loads(r.output)["target"] == name
        r = run("optimize", "--target", given, "--proposer", "eagle3", "--json")
        assert r.exit_code == 0, r.output
        assert json.loads(r.output)["target"] == name


@pytest.mark.parametrize("args, match", [
    (("law", "--tokens", "inf"), "--tokens must be a finite positive number"),
    (("law", "--targets", ""), "--targets is empty"),
    (("law", "--targets", "llama-2-7b,,llama-2-13b"), "--targets has an empty entry"),
    (("calibrate", "engine", "RUNS.csv", "--terms", "host_step_s,,"), "--terms has an empty entry"),
    (("optimize", "--target", "llama-2-7b", "--proposer", "eagle3", "--draft-tp", "2"),
     "--draft-tp applies to a separate draft model only"),
])
def test_more_option_values_are_one_sentence(args, match):
    fails(*args, match=match)


def test_a_policy_named_twice_is_simulated_once():
    r = run("simulate", "--qps", "2", "--requests", "20", "--policy", "none,k=0,k=3,none", "--json")
    assert r.exit_code == 0, r.output
    assert [x["policy"] for x in json.loads(r.output)["results"]] == ["none", "k=3"]
