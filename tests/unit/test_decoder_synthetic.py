"""Synthetic acceptance at real shapes: forced per-position acceptance, the prepared GPU script (profile +
priced sweep, tiny shapes on the CPU), and the committed sweep recomputed from its rows."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sdsl.core.architecture import ModelSpec  # noqa: E402

TINY = ModelSpec(name="tiny-syn", family="llama", n_layer=2, d_model=64, n_head=4, n_kv_head=2, d_ff=160,
                 vocab_size=512, max_context=2048)
TINY_DRAFT = ModelSpec(name="tiny-syn-draft", family="llama", n_layer=1, d_model=32, n_head=2, n_kv_head=1, d_ff=64,
                       vocab_size=300, max_context=2048)


def test_random_models_take_catalog_shapes_and_the_draft_takes_the_target_vocab():
    from sdsl.torch.model import count_params
    from sdsl.torch.synthetic import draft_spec_for, head_spec_for, random_model, synthetic_proposer

    target = random_model(TINY, seed=0, max_context=64)
    assert count_params(target) == TINY.total_params
    draft = draft_spec_for(TINY_DRAFT, TINY)
    assert draft.vocab_size == 512 and draft.n_layer == 1
    assert head_spec_for(TINY).n_layer == 1 and head_spec_for(TINY).d_model == 64
    proposer = synthetic_proposer("draft", target, draft)
    assert count_params(proposer.model) == draft.total_params
    torch.testing.assert_close(random_model(TINY, seed=0, max_context=64).output.weight, target.output.weight)


@pytest.mark.parametrize("kind", ["draft", "head"])
def test_forced_acceptance_runs_the_real_work_at_the_chosen_rates(kind):
    from sdsl.torch.decoder import generate
    from sdsl.torch.synthetic import draft_spec_for, random_model, synthetic_proposer

    target = random_model(TINY, seed=0, max_context=256)
    proposer = synthetic_proposer(kind, target, draft_spec_for(TINY_DRAFT, TINY))
    prompts = torch.randint(0, 512, (8, 8), generator=torch.Generator().manual_seed(0))
    r = generate(target, prompts, 40, proposer, tree="chain3", acceptance=[0.8, 0.5, 0.2], seed=1)
    c = r.accept_counts
    reach = c[::-1].cumsum()[::-1]
    np.testing.assert_allclose(reach[1:] / reach[:-1], [0.8, 0.5, 0.2], atol=0.1)
    assert r.draft_s > 0 and all(len(t) == 40 for t in r.tokens)


def test_gpu_script_runs_at_tiny_shapes_on_cpu(tmp_path, repo_root):
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_decoder", repo_root / "benchmarks" / "gpu_decoder.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    summary = module.main(["--out", str(tmp_path), "--tiny"])
    assert summary["errors"] == [] and summary["rows"] == 8 and len(summary["profiles"]) == 2
    for name in ("summary.json", "synthetic.json", "synthetic_rows.json", "cpu-tiny-target.csv", "cpu-tiny-draft.csv"):
        assert (tmp_path / name).exists(), name
    out = json.loads((tmp_path / "synthetic.json").read_text())
    assert {r["proposer"] for r in out["rows"]} == {"draft", "head"}
    for r in out["rows"]:  # every row priced by sdsl's model
        assert r["pred_speedup"] > 0 and r["speedup"] > 0 and r["overhead_s"] > 0
        assert r["speedup_error"] == pytest.approx(r["pred_speedup"] / r["speedup"] - 1)
    assert out["median_speedup_error"] == pytest.approx(np.median([abs(r["speedup_error"]) for r in out["rows"]]))


@pytest.fixture(scope="module")
def committed_sweep(repo_root):
    path = repo_root / "benchmarks" / "results" / "validate_decoder_synthetic.json"
    return json.loads(path.read_text())["synthetic"]


def test_committed_sweep_recomputes_from_its_rows(committed_sweep):
    """Re-pricing the committed measurements reproduces every prediction and the summary (VALIDATION.md)."""
    from sdsl.experiments.decoder_synthetic import reprice, summarise_synthetic

    s = committed_sweep
    again = summarise_synthetic(reprice(_measured(s), s["settings"]))
    for a, b in zip(again["rows"], s["rows"]):
        assert a["pred_speedup"] == pytest.approx(b["pred_speedup"], rel=1e-3)
    for key in ("median_speedup_error", "median_signed_error", "mean_abs_error", "worst_error"):
        assert again[key] == pytest.approx(s[key], rel=1e-3, abs=1e-5), key
    assert s["n_rows"] == 72 and {r["batch"] for r in s["rows"]} == {1, 4}
    assert s["settings"]["models"]["target"] == "qwen2.5-0.5b"
    assert s["settings"]["terms"] == ["gemm_rows", "reread", "finish", "extend_last"]
    # the numbers VALIDATION.md states (goals |err| <= 10%, signed within ±3%)
    assert s["median_speedup_error"] == pytest.approx(0.099353, rel=1e-3)
    assert s["median_signed_error"] == pytest.approx(-0.0043550, rel=1e-3)
    assert s["mean_abs_error"] == pytest.approx(0.109058, rel=1e-3)
    assert s["worst_error"] == pytest.approx(0.364175, rel=1e-3)
    assert s["worst_row"] == {"proposer": "draft", "gamma": 2, "batch": 1, "alpha_forced": 0.7}
    by = {k: (v["median_abs"], v["median_signed"]) for k, v in again["median_error_by_proposer_batch"].items()}
    expected = {"draft/b1": (0.149717, 0.149717), "draft/b4": (0.083080, 0.036688),
                "head/b1": (0.099353, -0.099353), "head/b4": (0.063323, -0.033010)}
    for key, (med, signed) in expected.items():
        assert by[key] == pytest.approx((med, signed), rel=1e-3), key
    assert again["median_error_by_proposer"] == pytest.approx({"draft": 0.111833, "head": 0.077001}, rel=1e-3)


def _measured(s):
    return [{k: v for k, v in r.items() if k not in ("pred_speedup", "speedup_error")} for r in s["rows"]]


def test_each_term_is_needed_and_the_uncorrected_model_fails(committed_sweep):
    """Dropping any of the three terms (CPU GEMM row factor, draft re-read, batch tail) makes the sweep worse;
    the per-forward roofline alone is the optimistic model the previous sweep reported."""
    from sdsl.experiments.decoder_synthetic import TERMS, reprice, summarise_synthetic

    s = committed_sweep

    def summary(terms, rows=None):
        return summarise_synthetic(reprice(rows or _measured(s), s["settings"], terms=terms))

    full = summary(TERMS)
    without = {t: summary(tuple(x for x in TERMS if x != t)) for t in TERMS}
    none = summary(())
    # the numbers VALIDATION.md states for the ablations
    assert none["median_speedup_error"] == pytest.approx(0.162559, rel=1e-3)
    assert none["median_signed_error"] == pytest.approx(0.162559, rel=1e-3)
    assert none["median_error_by_proposer_batch"]["draft/b1"]["median_abs"] == pytest.approx(0.670988, rel=1e-3)
    assert without["gemm_rows"]["median_speedup_error"] == pytest.approx(0.21097, rel=1e-3)
    assert [without["reread"][k] for k in ("median_speedup_error", "mean_abs_error", "worst_error")] == pytest.approx(
        [0.10036, 0.12685, 0.49261], rel=1e-3)
    assert [without["finish"][k] for k in ("median_speedup_error", "median_signed_error")] == pytest.approx(
        [0.13049, 0.10878], rel=1e-3)
    assert without["extend_last"]["median_error_by_proposer_batch"]["head/b1"]["median_signed"] == pytest.approx(
        -0.17534, rel=1e-3)
    assert without["gemm_rows"]["mean_abs_error"] > 3 * full["mean_abs_error"]
    assert without["gemm_rows"]["median_speedup_error"] > 2 * full["median_speedup_error"]
    assert without["finish"]["median_speedup_error"] > 1.3 * full["median_speedup_error"]
    assert without["finish"]["median_signed_error"] > 0.1  # the batch tail unpriced is optimistic
    # the re-read matters where the chain is fully accepted: draft rows at alpha 0.9
    high = [r for r in _measured(s) if r["proposer"] == "draft" and r["alpha_forced"] == 0.9]
    with_reread, no_reread = summary(TERMS, high), summary(("gemm_rows", "finish"), high)
    assert no_reread["mean_abs_error"] > 1.3 * with_reread["mean_abs_error"]


def test_the_previous_sweep_keeps_its_numbers_without_the_terms(repo_root):
    """Rows without ``terms`` in their settings (the sweep measured under load) price as before."""
    from sdsl.experiments.decoder_synthetic import reprice

    settings = {"target": "qwen2.5-0.5b", "draft": "smollm2-135m", "prompt_len": 32, "max_new": 12, "dtype": "fp32",
                "hardware": "cpu"}
    row = {"proposer": "draft", "gamma": 1, "batch": 1, "alpha": 0.7142857142857143, "speedup": 0.6277712825028057,
           "overhead_s": 0.002448801823529474, "overhead_plain_s": 0.0006557282812499898}
    assert reprice([row], settings)[0]["pred_speedup"] == pytest.approx(1.10731, rel=1e-3)


def test_a_cost_model_without_the_proposer_fails_the_sweep(committed_sweep):
    """Pricing the proposer as free (prompt-lookup style) is far off: the sweep can tell cost models apart
    (and the head's own cost model, with EAGLE's draft-extend pass, beats pricing it as a plain one-layer model)."""
    from sdsl.core.deployment import Deployment
    from sdsl.core.throughput import predict
    from sdsl.experiments.decoder_synthetic import cpu_params

    s = committed_sweep
    target = __import__("sdsl.core.architecture", fromlist=["get_model"]).get_model(s["settings"]["target"])
    ctx = s["settings"]["prompt_len"] + s["settings"]["max_new"] // 2
    deployment = Deployment("cpu", dtype="fp32", context=ctx, params=cpu_params())
    errors = []
    for r in s["rows"]:
        pr = predict(target, None, deployment, gamma=r["gamma"], alpha=min(r["alpha"], 1 - 1e-9), batch=r["batch"],
                     overhead_s=r["overhead_s"])
        errors.append(float(pr.tau / pr.t_step_s * (pr.t_plain_s + r["overhead_plain_s"])) / r["speedup"] - 1)
    assert np.median(np.abs(errors)) > 3 * max(s["median_speedup_error"], 0.05)
    head = [r for r in s["rows"] if r["proposer"] == "head"]
    as_layer = []
    for r in head:  # the head priced as a one-layer model (no draft-extend pass, no selection kernels)
        from sdsl.torch.synthetic import head_spec_for

        pr = predict(target, head_spec_for(target), deployment, gamma=r["gamma"], alpha=min(r["alpha"], 1 - 1e-9),
                     batch=r["batch"], overhead_s=r["overhead_s"])
        as_layer.append(float(pr.tau / pr.t_step_s * (pr.t_plain_s + r["overhead_plain_s"])) / r["speedup"] - 1)
    own = np.median(np.abs([r["speedup_error"] for r in head]))
    assert own == pytest.approx(0.077001, rel=1e-3) and np.median(np.abs(as_layer)) > 1.4 * own


def test_the_repeat_sweep_recomputes_and_shows_the_run_to_run_spread(committed_sweep, repo_root):
    """A second locked measurement of the same 72 configurations (VALIDATION.md, 'repeat'): its summary recomputes
    from its rows, and the numbers quoted for it and for both runs pooled hold."""
    from sdsl.experiments.decoder_synthetic import reprice, summarise_synthetic

    path = repo_root / "benchmarks" / "results" / "validate_decoder_synthetic_repeat.json"
    rep = json.loads(path.read_text())["synthetic"]
    again = summarise_synthetic(reprice(_measured(rep), rep["settings"]))
    for key in ("median_speedup_error", "median_signed_error", "mean_abs_error", "worst_error"):
        assert again[key] == pytest.approx(rep[key], rel=1e-3), key
    assert [rep[k] for k in ("median_speedup_error", "median_signed_error", "mean_abs_error", "worst_error")] == \
        pytest.approx([0.081558, -0.060909, 0.086849, -0.285227], rel=1e-3)
    both = [r["speedup_error"] for r in committed_sweep["rows"] + rep["rows"]]
    assert [np.median(np.abs(both)), np.median(both), np.mean(np.abs(both))] == pytest.approx(
        [0.086135, -0.034328, 0.097954], rel=1e-3)
    by = again["median_error_by_proposer_batch"]
    assert [by["draft/b1"]["median_abs"], by["draft/b1"]["median_signed"], by["head/b1"]["median_signed"],
            by["head/b4"]["median_signed"]] == pytest.approx([0.063527, -0.029109, -0.087270, -0.097688], rel=1e-3)
    keys = [(r["proposer"], r["gamma"], r["batch"], r["alpha_forced"]) for r in rep["rows"]]
    assert keys == [(r["proposer"], r["gamma"], r["batch"], r["alpha_forced"]) for r in committed_sweep["rows"]]
    spread = [a["speedup"] / b["speedup"] - 1 for a, b in zip(committed_sweep["rows"], rep["rows"])]
    assert np.median(np.abs(spread)) == pytest.approx(0.052552, rel=1e-3)
