"""The synthetic sweep's extra terms (sdsl.validation.decoder.synthetic_terms) and EAGLE's last-token extend logits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdsl.catalog.models import get_model
from sdsl.roofline.deployment import Deployment
from sdsl.roofline.latency import ModelShapes, prefill_time_s
from sdsl.speculation.proposers import EagleHead, _gemm_time, make_proposer
from sdsl.errors import InvalidInputError
from sdsl.validation.decoder.synthetic_terms import forward_extra_s, gemm_row_table, reread_probability, row_factor


@pytest.mark.integrity('profiles/cpu-gemm-rows.json')
def test_the_committed_gemm_profile_shows_the_row_effect_on_held_out_shapes():
    """Integrity check (reads back committed measurements; nothing is re-run).
    The measured evidence behind the GEMM term: every held-out weight costs about twice its one-row time at
    two rows and 2.5 times at three (median over shapes), and none of them is a sweep model's shape."""
    import json

    from sdsl._paths import REPO_ROOT

    data = json.loads((REPO_ROOT / "profiles" / "cpu-gemm-rows.json").read_text())
    one = {(r["n_in"], r["n_out"]): r["measured_s"] for r in data["held_out_gemms"] if r["rows"] == 1}
    ratio = {m: [r["measured_s"] / one[(r["n_in"], r["n_out"])] for r in data["held_out_gemms"] if r["rows"] == m]
             for m in (2, 3)}
    assert 1.8 < np.median(ratio[2]) < 2.2 and min(ratio[2]) > 1.3
    assert 2.3 < np.median(ratio[3]) < 3.2 and min(ratio[3]) > 1.3
    sweep = {get_model("qwen2.5-0.5b").d_model, get_model("smollm2-135m").d_model}
    assert not any(r["n_in"] in sweep or r["n_out"] in sweep for r in data["held_out_gemms"])


def test_row_factor_returns_the_measured_ratios_at_measured_points():
    sizes, rows, kappa = gemm_row_table()
    assert kappa.shape == (len(sizes), len(rows)) and np.all(kappa > 0)
    for i, size in enumerate(sizes):
        for j, m in enumerate(rows):
            assert float(row_factor(m, np.exp(size))) == pytest.approx(kappa[i, j], rel=1e-9)
    # beyond the measured sizes and rows it stays at the edge value
    assert float(row_factor(rows[-1] + 50, np.exp(sizes[-1]) * 4)) == pytest.approx(kappa[-1, -1])


@settings(max_examples=30, deadline=None)
@given(m=st.floats(1, 28), nbytes=st.floats(1e5, 2e9))
def test_row_factor_lies_within_the_measured_range(m, nbytes):
    _, _, kappa = gemm_row_table()
    k = float(row_factor(m, nbytes))
    assert kappa.min() - 1e-12 <= k <= kappa.max() + 1e-12


def test_forward_extra_is_zero_when_gemms_cost_what_sdsl_prices():
    shapes = ModelShapes.of(get_model("qwen2.5-0.5b"))
    dep = Deployment("cpu", dtype="fp32", context=38)
    flat = (np.log([1e6, 1e9]), np.array([1.0, 28.0]), np.ones((2, 2)))
    assert float(forward_extra_s(shapes, dep, 3, flat)) == 0.0
    doubled = (flat[0], flat[1], 2 * np.ones((2, 2)))  # κ = 2 adds exactly one more GEMM price
    lm = float(_gemm_time(3.0, shapes.lm_in, shapes.lm_out, dep))
    layer = sum(float(_gemm_time(3.0, shapes.gemm_in[o], shapes.gemm_out[o], dep)) for o in shapes.gemm_in)
    assert float(forward_extra_s(shapes, dep, 3, doubled)) == pytest.approx(shapes.n_layer * layer + lm, rel=1e-12)
    lm_one = float(_gemm_time(1.0, shapes.lm_in, shapes.lm_out, dep))
    assert float(forward_extra_s(shapes, dep, 3, doubled, lm_tokens=1)) == pytest.approx(
        shapes.n_layer * layer + lm_one, rel=1e-12)


def test_reread_probability():
    assert float(reread_probability(0.9, 1, 1)) == pytest.approx(0.9)
    assert float(reread_probability(0.5, 2, 4)) == pytest.approx(1 - 0.75 ** 4)
    assert float(reread_probability(0.0, 3, 4)) == 0.0


def test_eagle_extend_logits_at_the_last_token_is_a_chunked_prefill():
    target = get_model("llama-3.1-8b")
    dep = Deployment("h100-sxm")
    last, full = EagleHead(extend_logits="last"), EagleHead()
    b, tau = 4, 2.5
    fc = _gemm_time(b * tau, 2 * target.d_model, target.d_model, dep)
    expected = fc + prefill_time_s(last.shapes(target, 1), dep, batch=b, prompt=tau, context=1024)
    assert float(last.extend_time(target, dep, batch=b, tau=tau, context=1024)) == pytest.approx(float(expected), rel=1e-12)
    kw = dict(batch=b, steps=3, topk=1, tau=tau, verify_tokens=4, context=1024)
    assert float(last.worker_time(target, dep, **kw)) < float(full.worker_time(target, dep, **kw))
    assert make_proposer("eagle", extend_logits="last").extend_logits == "last"
    with pytest.raises(InvalidInputError):
        EagleHead(extend_logits="some")


@pytest.mark.integrity('benchmarks/results/synthetic_terms.json',
                       'benchmarks/results/synthetic_terms_run1.json')
def test_the_evidence_numbers_in_validation_md():
    """Integrity check (reads back committed measurements; nothing is re-run).
    Every timing VALIDATION.md quotes for the terms, recomputed from the committed benchmark files."""
    import json

    from sdsl._paths import REPO_ROOT

    res = REPO_ROOT / "benchmarks" / "results"
    now, first = (json.loads((res / f).read_text()) for f in ("synthetic_terms.json", "synthetic_terms_run1.json"))
    one = {(r["n_in"], r["n_out"]): r["measured_s"] for r in now["held_out_gemms"] if r["rows"] == 1}
    medians = [np.median([r["measured_s"] / one[(r["n_in"], r["n_out"])] for r in now["held_out_gemms"] if r["rows"] == m])
               for m in (2, 3, 4)]
    assert medians == pytest.approx([2.0656, 3.0297, 2.0658], rel=1e-3)

    def forward(data, model, q, key="measured_s"):
        return next(r[key] for r in data[model] if r["batch"] == 1 and r["q"] == q)

    assert [forward(now, "target", q) for q in (1, 2, 3, 4)] == pytest.approx([0.187, 0.352, 0.434, 0.280], abs=6e-4)
    assert [forward(first, "target", q) for q in (1, 2, 3, 4)] == pytest.approx([0.149, 0.308, 0.446, 0.290], abs=6e-4)
    assert [forward(now, "target", q, "priced_s") for q in (1, 2, 3, 4)] == pytest.approx(
        [0.119, 0.131, 0.143, 0.154], abs=6e-4)
    assert [forward(d, "draft", q) for d in (now, first) for q in (1, 2)] == pytest.approx(
        [0.085, 0.161, 0.074, 0.140], abs=6e-4)
    assert [forward(now, "draft", q, "priced_s") for q in (1, 2)] == pytest.approx([0.052, 0.057], abs=6e-4)
    head = {r["tokens"]: r for r in now["lm_head"] if r["d_model"] == 896}
    assert [head[1]["lm_head_s"], head[2]["lm_head_s"]] == pytest.approx([0.042, 0.097], abs=6e-4)
    assert [head[1]["lm_head_priced_s"], head[2]["lm_head_priced_s"]] == pytest.approx([0.031, 0.034], abs=6e-4)
    select = [r["greedy_select_s"] for r in now["lm_head"] if r["tokens"] <= 8]
    assert 1e3 * min(select) == pytest.approx(0.38, abs=0.02) and 1e3 * max(select) == pytest.approx(3.29, abs=0.02)


@pytest.mark.integrity('benchmarks/results/synthetic_terms.json')
def test_the_cache_resident_gemm_in_benchmarks_md():
    """Integrity check (reads back committed measurements; nothing is re-run)."""
    import json

    from sdsl._paths import REPO_ROOT

    rows = json.loads((REPO_ROOT / "benchmarks" / "results" / "synthetic_terms.json").read_text())["cache_gemm"]
    t = {r["rows"]: r["measured_s"] for r in rows}
    assert [t[2] / t[1], t[3] / t[1]] == pytest.approx([1.823, 2.702], rel=1e-3)
