"""The sourced engine host-time catalog (sdsl/data/published/engine_host.csv): every value recomputed from
the figures its source quotes."""

from __future__ import annotations

import pytest

from sdsl.core.engine_host import ENGINE_PROFILES, engine_hosts, host_step_s
from sdsl.errors import SDSLError, UnknownNameError


def test_sglang_profile_is_pr_11398_overlap_difference():
    h = engine_hosts()["sglang-2025-10"]
    assert "sgl-project/sglang#11398" in h.source and "273.43" in h.quote and "246.80" in h.quote
    assert h.step_before_s == pytest.approx(2.99 / 246.80, rel=1e-6)
    assert h.step_after_s == pytest.approx(3.01 / 273.43, rel=1e-6)
    assert host_step_s("sglang-2025-10") == pytest.approx(1.10677e-3, rel=1e-4)


def test_vllm_profile_is_pr_25872_itl_difference():
    h = engine_hosts()["vllm-v1-2025-09"]
    assert "vllm-project/vllm#25872" in h.source and "28.14" in h.quote and "27.17" in h.quote and h.gpu == "NVIDIA L20"
    assert host_step_s("VLLM-V1-2025-09") == pytest.approx(0.97e-3, rel=1e-6)
    # TPOT x accepted length reproduces the ITL the value is taken from: AL = 28.14 / 9.91 on both sides
    assert 9.57 * (28.14 / 9.91) == pytest.approx(27.17, abs=0.01)


def test_none_and_unknown():
    assert host_step_s("none") == 0.0 and ENGINE_PROFILES[0] == "none" and len(ENGINE_PROFILES) == 3
    with pytest.raises(UnknownNameError, match="Unknown engine profile 'sglang-2024'"):
        host_step_s("sglang-2024")
    assert issubclass(UnknownNameError, SDSLError)


def test_every_profile_cites_and_bounds():
    for h in engine_hosts().values():
        assert h.source.startswith("github-pr:") and h.quote and h.model and h.batch.startswith("1")
        assert 0 < h.host_step_s < h.step_before_s and "lower bound" in h.notes
        assert h.to_dict()["host_step_s"] == h.host_step_s
