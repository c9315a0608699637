import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdsl.catalog.models import get_model
from sdsl.roofline.deployment import Deployment
from sdsl.errors import InvalidInputError
from sdsl.catalog.hardware import get_hardware
from sdsl.speculation.throughput import predict, speedup, tokens_per_flop, work_factor

# Leviathan et al. (2023) Table 1, c = ĉ = 0: (alpha, gamma, speed, ops)
LEVIATHAN_TABLE1 = [(0.6, 2, 1.96, 1.53), (0.7, 3, 2.53, 1.58), (0.8, 2, 2.44, 1.23),
                    (0.8, 5, 3.69, 1.63), (0.9, 2, 2.71, 1.11), (0.9, 10, 6.86, 1.60)]


@pytest.mark.parametrize("alpha,gamma,speed,ops", LEVIATHAN_TABLE1)
def test_leviathan_table1(alpha, gamma, speed, ops):
    # README.md "How accurate is it" ("all 12 numbers to the printed digits"), VALIDATION.md "Analytic core"
    # Table 1 row, paper_figures/README.md leviathan_table1.png
    assert round(float(speedup(alpha, gamma, 0.0)), 2) == speed
    assert round(float(work_factor(alpha, gamma, 0.0)), 2) == ops


@settings(max_examples=300, deadline=None)
@given(st.floats(0, 1), st.integers(0, 30), st.floats(0, 2))
def test_speedup_at_most_gamma_plus_one(a, g, c):
    assert speedup(a, g, c) <= g + 1 + 1e-12


def test_tokens_per_flop_is_speedup_over_2m():
    assert tokens_per_flop(0.8, 4, 1e8, 1e10) == pytest.approx(speedup(0.8, 4, 1e-2) / 2e10)


def test_hardware_prediction_consistency():
    t, d, hw = get_model("llama-2-7b"), get_model("llama-160m"), get_hardware("h100-sxm")
    p = predict(t, d, Deployment(hw, engine="ideal"), gamma=np.arange(0, 9)[:, None], alpha=0.7,
                batch=np.array([1, 8, 64])[None, :])  # the roofline alone
    assert p.speedup.shape == (9, 3)
    np.testing.assert_allclose(p.speedup[0], 1.0)  # γ = 0 is plain decoding
    np.testing.assert_allclose(p.tokens_per_s, np.array([1, 8, 64]) * p.tau / p.t_step_s)
    # memory-bound at batch 1: verifying 5 tokens costs about as much as 1
    assert p.t_verify_s[4, 0] / p.t_plain_s[0, 0] < 1.05
    # speculation pays at batch 1 for alpha 0.7 and pays less at batch 64
    assert p.speedup[:, 0].max() > 1.5
    assert p.speedup[:, 2].max() < p.speedup[:, 0].max()


def test_prediction_composes_step_times_by_hand():
    # docs/model.md §3.3 (module docstring of sdsl.speculation.throughput): tokens/s = b·τ(α, γ) / (γ·T_draft(b, 1) +
    # T_target(b, γ + 1) + overhead), speedup = that over b / T_target(b, 1); recomputed from step_time_s and
    # Leviathan's τ written out, so a wrong composition (q, bonus token, draft count) fails here
    from sdsl.roofline.latency import step_time_s

    t, d, hw = get_model("llama-3.1-8b"), get_model("llama-3.2-1b"), get_hardware("a100-80gb")
    gamma, alpha, batch, over = np.array([1, 3, 6]), 0.75, 16, 2e-4
    p = predict(t, d, Deployment(hw, engine="ideal"), gamma=gamma, alpha=alpha, batch=batch, overhead_s=over)
    tau = (1 - alpha ** (gamma + 1)) / (1 - alpha)
    t_step = gamma * step_time_s(d, hw, batch=batch, q=1) + np.array(
        [step_time_s(t, hw, batch=batch, q=g + 1) for g in gamma]) + over
    np.testing.assert_allclose(p.tokens_per_s, batch * tau / t_step, rtol=1e-12)
    np.testing.assert_allclose(p.speedup, tau * step_time_s(t, hw, batch=batch, q=1) / t_step, rtol=1e-12)


def test_prediction_rejects_bad_input():
    t, d, hw = get_model("llama-2-7b"), get_model("llama-160m"), get_hardware("h100-sxm")
    with pytest.raises(InvalidInputError):
        predict(t, d, hw, gamma=2.5, alpha=0.7)
    with pytest.raises(InvalidInputError):
        predict(t, d, hw, gamma=2, alpha=0.7, batch=0)
    with pytest.raises(InvalidInputError):
        predict(t, d, hw, gamma=2, alpha=1.5)


def test_prediction_report_and_json():
    import json

    p = predict("llama-2-7b", "llama-160m", "h100-sxm", gamma=[1, 3], alpha=0.7, batch=[[1], [8]])
    assert len(p.report().splitlines()) == 1 + 4
    assert json.loads(p.to_json())["speedup"] == p.to_dict()["speedup"]
