"""Prompt-lookup replay (sdsl.acceptance.ngram): vLLM's matching rule, a hand-computed replay, and the
`sdsl acceptance --ngram` command on the JSONL shipped with sdsl."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from sdsl._paths import data_path
from sdsl.acceptance import Acceptance
from sdsl.acceptance.ngram import (accepted_runs, draft_starts, prompt_lookup_acceptance, read_pairs,
                                    replay_sequence)
from sdsl.errors import ConfigError, InvalidInputError

SAMPLE = data_path("acceptance", "prompt_lookup_sample.jsonl")


def _naive_start(t, L, min_n, max_n):
    """vLLM's rule written out: the longest suffix n in [min_n, max_n] of t[:L] with an earlier
    occurrence (ending by L - 2); its earliest occurrence; the token after it. -1 for none."""
    for n in range(max_n, min_n - 1, -1):
        if L < n + 1:
            continue
        suffix = list(t[L - n:L])
        for s in range(0, L - n):
            if list(t[s:s + n]) == suffix:
                return s + n
    return -1


def test_vllm_docstring_example():
    """vLLM's own example (ngram_proposer.py docstring): context [1,2,3,4,2,3], min 2, max 3, k 4 ->
    the last 3 tokens [4,2,3] do not recur, [2,3] does, and the draft is [4,2,3] (three tokens left)."""
    t = np.array([1, 2, 3, 4, 2, 3])
    s = draft_starts(t, 2, 3)[6]
    assert list(t[s:s + min(4, 6 - s)]) == [4, 2, 3]


def test_earliest_occurrence_of_the_longest_match():
    t = np.array([7, 1, 7, 2, 7])
    assert draft_starts(t, 1, 1)[5] == 1  # [7] occurs at 0 and 2: the earliest (0) is used, as vLLM does
    t = np.array([5, 6, 9, 6, 5, 6])
    assert draft_starts(t, 1, 2)[6] == 2  # [5,6] (n = 2) beats the later single [6]


def test_draft_starts_match_the_rule_on_random_text():
    rng = np.random.default_rng(7)
    for _ in range(20):
        t = rng.integers(0, 4, size=int(rng.integers(1, 60)))
        for lo, hi in ((1, 1), (1, 3), (2, 4), (3, 3)):
            got = draft_starts(t, lo, hi)
            want = [_naive_start(t, L, lo, hi) for L in range(t.size + 1)]
            assert got.tolist() == want


def test_hand_computed_replay():
    """prompt [1,2,3,4,1,2], response [3,4,9,1,2,3,5], n-gram 2..2, k = 3. Prefill emits 3. Then:
    L=7 suffix [2,3] -> earliest at 1 -> draft [4,1,2] vs truth [4,9,1]: 1 accepted (+ bonus 9);
    L=9 suffix [4,9] and L=10 suffix [9,1] have no earlier occurrence: no draft;
    L=11 suffix [1,2] -> earliest at 0 -> draft [3,4,1] vs truth [3,5]: 1 accepted; end.
    4 target passes, 2 drafts, accepted per position [2, 0, 0]."""
    prompt, response = np.array([1, 2, 3, 4, 1, 2]), np.array([3, 4, 9, 1, 2, 3, 5])
    seq = np.concatenate([prompt, response])
    starts = draft_starts(seq, 2, 2)
    steps, drafts, counts = replay_sequence(seq, 6, 3, starts, accepted_runs(seq, starts, 3))
    assert (steps, drafts, counts.tolist()) == (4, 2, [2, 0, 0])
    r = prompt_lookup_acceptance([(prompt, response)], k=3, min_n=2, max_n=2, tokenizer="token ids")
    assert r.response_tokens == 6 and r.steps == 4 and r.drafts == 2
    assert r.marginal.tolist() == [0.5, 0.0, 0.0] and r.marginal_over_drafts.tolist() == [1.0, 0.0, 0.0]
    assert r.tau == pytest.approx(1.5) == r.response_tokens / r.steps and r.tau_over_drafts == pytest.approx(2.0)
    # with unigrams too, L=10 finds [1] (earliest at 0): draft [2,3,4] vs truth [2,3,5] accepts 2
    r1 = prompt_lookup_acceptance([(prompt, response)], k=3, min_n=1, max_n=2)
    assert (r1.steps, r1.drafts, list(r1.accepted)) == (3, 2, [2, 1, 0])


def test_accepted_length_grows_with_k_and_vectors_are_marginal():
    pairs, kind = read_pairs(str(SAMPLE))
    assert kind == "bytes" and len(pairs) >= 5
    rs = prompt_lookup_acceptance(pairs, k=[1, 3, 5, 8], min_n=2, max_n=5)
    taus = [r.tau for r in rs]
    assert all(b > a for a, b in zip(taus, taus[1:]))
    for r in rs:
        assert np.all(np.diff(r.marginal) <= 0) and np.all(r.marginal <= r.marginal_over_drafts + 1e-12)
        a = r.acceptance()
        assert isinstance(a, Acceptance) and float(a.tau(r.k)) == pytest.approx(r.tau)
    # one k at a time gives the same counts as the shared sweep
    single = prompt_lookup_acceptance(pairs, k=5, min_n=2, max_n=5)
    assert single.accepted == rs[2].accepted and single.steps == rs[2].steps


def test_bad_sizes_and_bad_files(tmp_path):
    with pytest.raises(InvalidInputError):
        prompt_lookup_acceptance([(np.array([1]), np.array([1]))], k=0)
    with pytest.raises(InvalidInputError):
        prompt_lookup_acceptance([(np.array([1]), np.array([1]))], k=3, min_n=3, max_n=2)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a", "response": "b"}\n{"prompt": "a", \n', encoding="utf-8")
    with pytest.raises(ConfigError, match="line 2 is not valid JSON"):
        read_pairs(str(bad))
    bad.write_text('{"prompt": "a"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="missing 'response'"):
        read_pairs(str(bad))
    bad.write_text('{"prompt": 3, "response": "b"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="must be a string"):
        read_pairs(str(bad))


def test_cli_ngram_writes_an_acceptance_file(tmp_path):
    from sdsl.cli import cli

    out = tmp_path / "ngram.json"
    res = CliRunner().invoke(cli, ["acceptance", "--ngram", str(SAMPLE), "--k", "4", "--ngram-min", "2",
                                    "--ngram-max", "4", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(out.read_text())
    assert d["k"] == 4 and d["ngram_replay"]["prompt_lookup_max"] == 4 and len(d["marginal"]) == 4
    a = Acceptance.from_dict(d)
    assert float(a.tau(4)) == pytest.approx(d["tau"])
    back = CliRunner().invoke(cli, ["acceptance", "--acceptance-file", str(out), "--k", "4", "--json"])
    assert back.exit_code == 0, back.output
    assert json.loads(back.output)["tau"] == pytest.approx(d["tau"])


def test_cli_bad_jsonl_is_one_line_exit_2(tmp_path):
    from sdsl.cli import cli

    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["acceptance", "--ngram", str(bad)])
    assert res.exit_code == 2 and "line 1 is not valid JSON" in res.output
    assert len([line for line in res.output.splitlines() if line.strip()]) == 1


def test_replay_without_response_tokens_is_an_error(tmp_path):
    with pytest.raises(InvalidInputError, match="No response tokens to replay"):
        prompt_lookup_acceptance([([1, 2, 3], [4])], k=3)
    path = tmp_path / "empty.jsonl"
    path.write_text('{"prompt": "", "response": ""}\n')
    with pytest.raises(ConfigError, match="has no response tokens to replay"):
        read_pairs(str(path))
