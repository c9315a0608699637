"""Bad input to the public Python API raises one typed InvalidInputError sentence (sdsl.errors) that says what is
wrong: never a bare numpy ValueError, an AttributeError, a silently rounded value or a NaN."""

from __future__ import annotations

import numpy as np
import pytest

import sdsl
from sdsl.acceptance import alpha_from_tau
from sdsl.acceptance.trees import sglang_tree_tau
from sdsl.plan.export import export_config
from sdsl.plan.ranking import k_table
from sdsl.roofline.latency import step_time_s
from sdsl.serving import serving_k_table
from sdsl.speculation.optimum import best_integer_gamma, best_speedup
from sdsl.speculation.throughput import plain_tokens_per_s, work_factor
from sdsl.errors import InvalidInputError

DEP = sdsl.Deployment("h100-sxm", engine="ideal")
TARGET = "llama-3.1-8b"


def _raises(match, fn, *args, **kwargs):
    with pytest.raises(InvalidInputError, match=match) as err:
        fn(*args, **kwargs)
    text = str(err.value)
    assert "\n" not in text and text.endswith("."), text
    return text


# memory_per_gpu checks batch and context as step_time_s does


@pytest.mark.parametrize("kwargs, word", [({"batch": -4}, "batch"), ({"batch": 0}, "batch"), ({"batch": np.nan}, "batch"),
                                          ({"batch": 2.5}, "batch"), ({"context": -1}, "context"),
                                          ({"context": np.array([1024, np.nan])}, "context")])
def test_memory_per_gpu_checks_batch_and_context_like_step_time(kwargs, word):
    step = _raises(word, step_time_s, TARGET, DEP, **kwargs)
    memory = _raises(word, sdsl.memory_per_gpu, TARGET, DEP, **kwargs)
    assert memory == step


# empty arrays, shapes that do not broadcast, non-numbers


@pytest.mark.parametrize("call", [
    lambda: sdsl.predict("llama-2-7b", "llama-160m", DEP, gamma=3, alpha=.7, batch=[]),
    lambda: plain_tokens_per_s(TARGET, DEP, batch=[]),
    lambda: step_time_s(TARGET, DEP, batch=[]),
    lambda: sdsl.memory_per_gpu(TARGET, DEP, batch=[]),
])
def test_an_empty_batch_is_named(call):
    with pytest.raises(InvalidInputError, match="batch is empty"):
        call()


@pytest.mark.parametrize("kwargs, name", [({"gamma": np.array([], int), "tau": 2}, "gamma"),
                                          ({"gamma": 3, "tau": np.array([])}, "tau"),
                                          ({"gamma": 3, "acceptance": np.array([])}, "acceptance")])
def test_price_step_names_the_empty_argument(kwargs, name):
    _raises(f"{name} is empty", sdsl.price_step, TARGET, "eagle3", DEP, **kwargs)


def test_shapes_that_do_not_broadcast_are_named_with_their_shapes():
    text = _raises("broadcast", sdsl.predict, "llama-2-7b", "llama-160m", DEP, gamma=[1, 2, 3], alpha=[.5, .6])
    assert "gamma" in text and "alpha" in text and "(3,)" in text and "(2,)" in text
    text = _raises("broadcast", sdsl.price_step, TARGET, "eagle3", DEP, gamma=[1, 2, 3], tau=[1.5, 2.0])
    assert "gamma" in text and "tau" in text
    _raises("alpha .* gamma", sdsl.tau, [.5, .6], [1, 2, 3])
    _raises("gamma .* c ", sdsl.speedup, 0.7, [1, 2, 3], [0.1, 0.2])


@pytest.mark.parametrize("call, name", [
    (lambda: sdsl.tau("abc", 3), "alpha"),
    (lambda: sdsl.price_step(TARGET, "eagle3", DEP, gamma=3, tau="abc"), "tau"),
    (lambda: step_time_s(TARGET, DEP, batch="abc"), "batch"),
    (lambda: plain_tokens_per_s(TARGET, DEP, batch="abc"), "batch"),
    (lambda: sdsl.speedup(0.7, 3, "abc"), "c"),
    (lambda: alpha_from_tau("abc", 3), "tau"),
    (lambda: sdsl.rank_proposers(TARGET, "eagle3", DEP, gammas=["a"]), "gammas"),
    (lambda: sdsl.evaluate_grid("llama-2-7b", DEP, drafts=["llama-160m"], gammas=["a"]), "gammas"),
    (lambda: sdsl.predict("llama-2-7b", "llama-160m", DEP, gamma=3, alpha=.7, overhead_s="abc"), "overhead_s"),
])
def test_a_non_number_names_its_argument(call, name):
    with pytest.raises(InvalidInputError, match=f"^{name} must be a number"):
        call()


@pytest.mark.parametrize("fn", [sdsl.tau, lambda a, g: sdsl.speedup(a, g, 0.1), lambda a, g: work_factor(a, g, 0.1)])
@pytest.mark.parametrize("gamma", ["3", True])
def test_the_closed_forms_refuse_a_string_or_boolean_k(fn, gamma):
    with pytest.raises(InvalidInputError, match="^gamma must be"):
        fn(0.8, gamma)


def test_tau_of_none_says_none():
    _raises("got None", sdsl.tau, None, 3)


# untyped errors


def test_k_table_says_the_valid_range():
    ranking = sdsl.rank_proposers(TARGET, ["eagle3", "ngram"], DEP, acceptance=0.7, gammas=range(0, 3), batches=(1, 8))
    _raises("proposer_index .* 0 to 1", k_table, ranking, 5)
    _raises("acceptance_index .* 0 to 0", k_table, ranking, 0, 3)
    assert k_table(ranking, 1) == ranking.k_table(1)


def test_export_config_says_what_a_pick_holds():
    _raises("'proposer'", export_config, "vllm", {})
    _raises("'proposer'", export_config, "vllm", "eagle3")


def test_sglang_tree_tau_takes_an_iid_alpha():
    iid = sdsl.Acceptance.from_iid(0.7)
    assert sglang_tree_tau(0.7, 4, 2, 8) == sglang_tree_tau(iid, 4, 2, 8)
    assert sglang_tree_tau(0.7, 4, 1, 5) == pytest.approx(float(sdsl.tau(0.7, 4)))
    _raises("acceptance", sglang_tree_tau, 1.5, 4, 2, 8)


def test_a_draft_model_without_a_model_is_named():
    _raises("DraftModel needs its draft model", sdsl.DraftModel)
    _raises("DraftModel needs its draft model", sdsl.DraftModel, ["llama-68m"])


def test_candidate_drafts_takes_a_catalog_name():
    assert sdsl.candidate_drafts(TARGET) == sdsl.candidate_drafts(sdsl.get_model(TARGET))


def test_predict_prices_one_draft():
    _raises("one draft per call.*rank_proposers", sdsl.predict, "llama-2-7b", ["llama-68m", "llama-160m"], DEP,
            gamma=3, alpha=.7)


def test_deployment_replace_names_the_unknown_field():
    text = _raises("'foo'", DEP.replace, foo=1)
    assert "tp" in text and "context" in text
    assert DEP.replace(tp=2).tp == 2


def test_one_proposer_name_is_one_proposer():
    one = sdsl.rank_proposers(TARGET, "eagle3", DEP, acceptance=0.7, gammas=range(0, 3))
    assert [p.name for p in one.proposers] == ["eagle3"]
    plan = sdsl.plan_speculation(TARGET, DEP, proposers="eagle3", acceptance=sdsl.Acceptance.from_iid(0.7),
                                 gamma_max=3, max_batch=4)
    assert plan.pick["proposer"] == "eagle3"


# the message speaks of the argument that is wrong


@pytest.mark.parametrize("call", [
    lambda b: sdsl.predict("llama-2-7b", "llama-160m", DEP, gamma=3, alpha=.7, batch=b),
    lambda b: sdsl.price_step(TARGET, "eagle3", DEP, gamma=3, tau=2, batch=b),
])
@pytest.mark.parametrize("batch", [-4, 0, 2.5, True])
def test_a_bad_batch_is_called_batch(call, batch):
    with pytest.raises(InvalidInputError, match="^batch must be a positive whole number of sequences"):
        call(batch)


# odd types


@pytest.mark.parametrize("gamma", ["3", True])
def test_price_step_and_predict_take_a_whole_gamma(gamma):
    with pytest.raises(InvalidInputError, match="^gamma must be"):
        sdsl.price_step(TARGET, "eagle3", DEP, gamma=gamma, tau=1.5)
    with pytest.raises(InvalidInputError, match="^gamma must be"):
        sdsl.predict("llama-2-7b", "llama-160m", DEP, gamma=gamma, alpha=.7)


def test_a_fractional_batch_is_refused_everywhere():
    for call in (lambda: plain_tokens_per_s(TARGET, DEP, batch=2.5),
                 lambda: sdsl.step_time(TARGET, DEP, batch=[1, 2.5]),
                 lambda: sdsl.memory_per_gpu(TARGET, DEP, batch=2.5)):
        with pytest.raises(InvalidInputError, match="whole number of sequences; got 2.5"):
            call()


@pytest.mark.parametrize("engine", ["sglang", "vllm", "trtllm"])
@pytest.mark.parametrize("gamma", [3.5, -1, "3", None])
def test_export_config_takes_a_whole_k(engine, gamma):
    with pytest.raises(InvalidInputError, match="gamma must be"):
        export_config(engine, {"proposer": "eagle3", "gamma": gamma, "tree": None})


def test_export_config_checks_the_table_and_the_tree():
    _raises("k-table row", export_config, "vllm", {"proposer": "eagle3", "gamma": 3},
            [{"batch_min": 1, "batch_max": 4, "k": 2.5}])
    _raises("cannot exist", export_config, "sglang", {"proposer": "eagle3", "gamma": None, "tree": [0, 8, 64]})
    assert "--speculative-num-steps 3 " in export_config("sglang", {"proposer": "eagle3", "gamma": 3.0})


def test_sglang_tree_tau_says_the_valid_token_range():
    acc = sdsl.Acceptance.from_iid(0.7)
    _raises(">= 1; got 0", sglang_tree_tau, acc, 3, 2, 0)
    _raises("1 to 11 tokens", sglang_tree_tau, acc, 3, 2, 12)
    _raises("steps", sglang_tree_tau, acc, 2.5, 2, 4)


# one alpha rule: tau is defined on [0, 1]; the closed-form optimum only inside


@pytest.mark.parametrize("fn", [sdsl.gamma_star, best_speedup, best_integer_gamma])
def test_the_closed_form_optimum_says_why_it_needs_alpha_inside_0_1(fn):
    _raises(f"{fn.__name__} needs 0 < alpha < 1: at alpha = 1 .* unbounded", fn, 1.0, 0.1)
    _raises(f"{fn.__name__} needs 0 < alpha < 1: at alpha = 0 .* never pays", fn, 0.0, 0.1)


@pytest.mark.parametrize("alpha, k", [(1.0, 3), (0.0, 0)])
def test_grid_searches_take_alpha_at_either_end(alpha, k):
    grid = sdsl.evaluate_grid("llama-2-7b", DEP, drafts=["llama-160m"], gammas=range(0, 4), alpha=[alpha])
    np.testing.assert_allclose(grid.prediction.tau[0, :, 0, 0], sdsl.tau(alpha, np.arange(4)))
    assert len(sdsl.search("llama-2-7b", DEP, drafts=["llama-160m"], gammas=range(0, 4), alpha=[alpha])) == 4
    table = serving_k_table("llama-2-7b", "llama-160m", DEP, alpha=alpha, max_batch=4, max_k=3)
    assert table == [{"batch_min": 1, "batch_max": 4, "k": k}]
