"""Every analytic-core number that README.md, VALIDATION.md ("Analytic core") and paper_figures/README.md
(SDSL, Leviathan and TurboSpec-style roofline sections) state, recomputed; and BENCHMARKS.md's family table
and timing tables checked against the checkpoints and the saved benchmark runs.

Each test names the document line it guards, checks that the document still says it (`_says`), and pins
the reproduced value at ~1e-3 relative (the values are deterministic). The law, γ* and Lambert-W tests
live in test_analytic_optimum.py, Leviathan's Table 1 in test_throughput.py, parameter counts in
test_architecture.py. Inputs that are oracles rather than sdsl outputs are named where they enter: the
acceptance plane's constants and Chinchilla's loss law (published fits), the H100 latency parameters
(fitted to Vidur's measurements, sdsl/data/latency/h100-sxm.json), Leviathan's T5 inputs (α, c, γ quoted
from the paper).
"""

from __future__ import annotations

import numpy as np
import pytest

from sdsl._paths import REPO_ROOT
from sdsl.catalog.models import get_model, list_models
from sdsl.roofline.deployment import Deployment
from sdsl.catalog.hardware import get_hardware, list_hardware
from sdsl.speculation.optimum import SDSL_PAPER_LAW, SDSL_TARGETS, best_speedup, gamma_star, optimal_draft_size
from sdsl.acceptance.plane import SDSL_PLANE, acceptance_from_sizes, perplexity
from sdsl.speculation.throughput import speedup

REL = 1e-3  # deterministic values are pinned at this relative tolerance


def _says(doc: str, *fragments: str) -> None:
    """The document still states each fragment (so a test and its line cannot drift apart silently)."""
    text = " ".join((REPO_ROOT / doc).read_text().split())  # line breaks and runs of spaces do not count
    for f in fragments:
        assert " ".join(f.split()) in text, f"{doc} no longer says {f!r}: update the document and this test together"


# ---- README.md ---------------------------------------------------------------------------------

def test_readme_gamma_star_example():
    # README.md "In Python": print(sdsl.gamma_star(alpha=0.8, c=0.05))  # 7.857
    _says("README.md", "sdsl.gamma_star(alpha=0.8, c=0.05)) # 7.857")
    assert float(gamma_star(0.8, 0.05)) == pytest.approx(7.856654, rel=1e-6)


def test_readme_python_block_runs():
    # README.md "In Python": the whole block runs as printed, and its γ* line prints the commented 7.857
    import contextlib
    import io
    import re

    text = (REPO_ROOT / "README.md").read_text()
    block = re.search(r"## In Python\s+```python\n(.*?)```", text, re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    assert re.search(r"^7\.8566", out.getvalue(), re.M)
    assert "N* = mu*M + M0,  mu = 2.721e-03" in out.getvalue()  # law.report()


def test_readme_catalog_sizes_and_70b_memory():
    # README.md "The two commands": "the catalogs (25 accelerators plus a CPU stand-in; 63 models ...)" and
    # "Llama-3.1-70B in bf16 needs 141 GB, one H100 has 80 GB"
    _says("README.md", "(25 accelerators plus a CPU stand-in;",
          "; 63 models, dense and mixture-of-experts; every number with its source)",
          "Llama-3.1-70B in bf16 needs 141 GB, one H100 has 80 GB")
    names = [h.name for h in list_hardware()]
    assert len(names) == 26 and "CPU" in names and len(list_models()) == 63
    assert get_model("llama-3.1-70b").weight_bytes("bf16") / 1e9 == pytest.approx(141.107, rel=REL)
    assert get_hardware("h100-sxm").mem_capacity / 2**30 == pytest.approx(80, rel=REL)


def test_readme_and_validation_law_rows():
    # README.md "How accurate is it": "μ = 2.721e-3 (paper 2.71e-3, +0.4%), M₀ = 8.03e7 (paper 8.71e7, −7.8%)";
    # VALIDATION.md "Analytic core": "μ = 2.721e-3 (+0.4%), M₀ = 8.03e7 (−7.8%), R² = 0.988 ... μ 2.53–2.92e-3,
    # M₀ 6.91–9.14e7" — the values themselves are pinned in test_analytic_optimum.py (test_sdsl_law_*)
    from sdsl.speculation.optimum import fit_draft_law

    _says("README.md", "μ = 2.721e-3 (paper 2.71e-3, +0.4%), M₀ = 8.03e7 (paper 8.71e7, −7.8%)")
    _says("VALIDATION.md", "μ = 2.721e-3 (+0.4%), M₀ = 8.03e7 (−7.8%), R² = 0.988",
          "μ 2.53–2.92e-3, M₀ 6.91–9.14e7", "μ = 2.71e-3 (95% CI 2.67–2.75e-3), M₀ = 8.71e7 (8.50–8.93e7)")
    _says("paper_figures/README.md", "μ = 2.721e-3 (95% CI 2.53–2.92e-3), M₀ = 8.03e7 (6.91–9.14e7), R² = 0.988",
          "paper: μ = 2.71e-3 (2.67–2.75e-3), M₀ = 8.71e7 (8.50–8.93e7)")
    law = fit_draft_law()
    assert f"{law.mu:.3e} {law.m0:.2e} {law.r2:.3f}" == "2.721e-03 8.03e+07 0.988"
    assert f"{law.mu_ci[0]:.2e} {law.mu_ci[1]:.2e} {law.m0_ci[0]:.2e} {law.m0_ci[1]:.2e}" == "2.53e-03 2.92e-03 6.91e+07 9.14e+07"
    assert SDSL_PAPER_LAW == {"mu": 2.71e-3, "mu_ci": [2.67e-3, 2.75e-3], "m0": 8.71e7, "m0_ci": [8.50e7, 8.93e7]}


def test_leviathan_table1_as_documented():
    # VALIDATION.md "Analytic core" and paper_figures/README.md leviathan_table1.png: "1.96/1.53, 2.53/1.58,
    # 2.44/1.23, 3.69/1.63, 2.71/1.11, 6.86/1.60" — the figure's table and the test's table are the paper's
    from sdsl.speculation.throughput import work_factor
    from sdsl.validation.figures.leviathan import LEVIATHAN_TABLE1

    printed = ", ".join(f"{sp:.2f}/{op:.2f}" for _, _, sp, op in LEVIATHAN_TABLE1)
    assert printed == "1.96/1.53, 2.53/1.58, 2.44/1.23, 3.69/1.63, 2.71/1.11, 6.86/1.60"
    _says("VALIDATION.md", printed)
    _says("paper_figures/README.md", printed)
    for a, g, sp, op in LEVIATHAN_TABLE1:
        assert (round(float(speedup(a, g, 0.0)), 2), round(float(work_factor(a, g, 0.0)), 2)) == (sp, op)


# ---- paper_figures/README.md: SDSL ---------------------------------------------------------------

def _paper_pairs_alpha():
    """α from the plane (oracle: the paper's fit) for the paper's same-family pairs, Chinchilla
    perplexities at D = D′ = 1e12 — the pairs fig_sdsl_acceptance_plane places."""
    drafts = {"opt": ["opt-125m", "opt-350m", "opt-1.3b", "opt-2.7b"],
              "qwen2": ["qwen1.5-0.5b", "qwen1.5-1.8b", "qwen1.5-4b", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b"]}
    out = []
    for fam, names in drafts.items():
        d = [get_model(n).total_params for n in names]
        t = [get_model(n).total_params for n in SDSL_TARGETS if get_model(n).family == fam]
        x, y = np.meshgrid(perplexity(d, 1e12), perplexity(t, 1e12))
        out.append(SDSL_PLANE.raw(x, y).ravel())
    return np.concatenate(out)


def test_acceptance_plane_figure_numbers():
    # paper_figures/README.md sdsl_acceptance_plane.png: the plane's constants, the band the paper's
    # pairs sit in, α at 10M and 10B draft parameters (70B target)
    _says("paper_figures/README.md", "α = −0.0067·x + 0.01297·y + 0.642", "(paper, R² = 0.60)",
          "sits in a narrow band α ≈ 0.64–0.68", "(0.50 at 10M parameters, 0.68 at 10B, 70B target)")
    assert (SDSL_PLANE.A, SDSL_PLANE.B, SDSL_PLANE.C, SDSL_PLANE.r2) == (-0.0067, 0.01297, 0.642, 0.60)
    a = _paper_pairs_alpha()
    assert a.size == 54
    assert (a.min(), a.max()) == pytest.approx((0.644573, 0.684859), rel=REL)
    lo, hi = acceptance_from_sizes(np.array([1e7, 1e10]), 7e10)
    assert (lo, hi) == pytest.approx((0.497011, 0.682346), rel=REL)
    # "a larger target *lowers* α slightly": the figure's 13B, 70B, 110B targets at a 1B draft
    at_1b = acceptance_from_sizes(1e9, np.array([1.3e10, 7.0e10, 1.1e11]))
    assert np.all(np.diff(at_1b) < 0) and at_1b[0] - at_1b[-1] < 0.01


def test_speedup_vs_gamma_examples():
    # paper_figures/README.md sdsl_speedup_vs_gamma.png: "α = 0.8, c = 0.05 → γ* = 7.9, S* = 3.09;
    # α = 0.9, c = 0.01 → γ* = 24.1, S* = 7.49"
    _says("paper_figures/README.md", "α = 0.8, c = 0.05 → γ* = 7.9, S* = 3.09; α = 0.9, c = 0.01 → γ* = 24.1, S* = 7.49")
    assert float(gamma_star(0.8, 0.05)) == pytest.approx(7.856654, rel=REL)
    assert float(best_speedup(0.8, 0.05)) == pytest.approx(3.092330, rel=REL)
    assert float(gamma_star(0.9, 0.01)) == pytest.approx(24.098654, rel=REL)
    assert float(best_speedup(0.9, 0.01)) == pytest.approx(7.485597, rel=REL)
    # S* is the speedup at γ* (Leviathan's S, not a separate formula)
    assert float(speedup(0.9, gamma_star(0.9, 0.01), 0.01)) == pytest.approx(7.485597, rel=REL)


def _nstar_fraction(targets, d, d_target):
    m = np.array([get_model(t).total_params for t in targets], dtype=float)
    return optimal_draft_size(m, d, d_target)[0] / m, m


def test_nstar_vs_tokens_numbers():
    # paper_figures/README.md sdsl_nstar_vs_tokens.png: "(OPT-13B: 0.0114 → 0.0075; Llama-3.1-70B:
    # 0.0056 → 0.0037)", D′ hardly matters, and where the curves cross the paper's law
    _says("paper_figures/README.md", "(OPT-13B: 0.0114 → 0.0075; Llama-3.1-70B: 0.0056 → 0.0037)",
          "cross the paper's law (OPT-13B at 5e10, Qwen1.5-110B at 2.5e11, Llama-3.1-70B at 8.7e11)")
    targets = ("opt-13b", "llama-3.1-70b", "qwen1.5-110b")
    f10, m = _nstar_fraction(targets, 1e10, 1e10)
    f13, _ = _nstar_fraction(targets, 1e13, 1e13)
    assert f10[:2] == pytest.approx([0.0113800, 0.0056296], rel=REL)
    assert f13[:2] == pytest.approx([0.0075464, 0.0036799], rel=REL)
    assert 1 - f13[0] / f10[0] == pytest.approx(0.337, abs=0.005)  # "moves N*/M by about 35%"
    alone, _ = _nstar_fraction(targets, 1e10, 1e12)  # only the draft's D moved
    np.testing.assert_allclose(alone, f10, rtol=0.015)  # solid and dashed coincide within 1.5%
    paper = (SDSL_PAPER_LAW["mu"] * m + SDSL_PAPER_LAW["m0"]) / m
    sign = {d: np.sign(_nstar_fraction(targets, d, d)[0] - paper) for d in (5e10, 5.5e10, 2.5e11, 2.6e11, 8.6e11, 8.8e11)}
    assert sign[5e10][0] > 0 > sign[5.5e10][0]  # OPT-13B
    assert sign[2.5e11][2] > 0 > sign[2.6e11][2]  # Qwen1.5-110B
    assert sign[8.6e11][1] > 0 > sign[8.8e11][1]  # Llama-3.1-70B


def _hardware_sweep(target: str, tp: int):
    """The sweep behind hardware_draft_size.png (H100-SXM, shipped latency parameters — fitted to
    Vidur's H100 measurements, an oracle for this figure; α from SDSL's plane)."""
    from sdsl.plan.families import draft_size_sweep, llama_family

    spec = get_model(target)
    drafts = llama_family(spec.vocab_size, np.arange(128, 4097, 128))
    return draft_size_sweep(spec, Deployment("h100-sxm", tp=tp, engine="ideal"), drafts=drafts, batch=(1, 8, 32))


@pytest.mark.parametrize("target, tp, flop, hw", [
    # (FLOP N*, S*), then per batch 1/8/32: (hardware N*, speedup, best γ, throughput lost with the FLOP N*)
    ("llama-3.1-8b", 1, (79_303_168, 2.539063), [(55_003_776, 2.372534, 7, 0.011153), (55_003_776, 2.345459, 6, 0.010116),
                                                 (79_303_168, 1.950962, 3, 0.0)]),
    ("llama-3.1-70b", 4, (303_043_968, 2.787072), [(108_714_880, 2.528559, 8, 0.043159), (108_714_880, 2.452275, 7, 0.039495),
                                                   (144_516_864, 1.974172, 3, 0.015065)]),
])
def test_hardware_draft_size_numbers(target, tp, flop, hw):
    # paper_figures/README.md hardware_draft_size.png: "Llama-3.1-8B, FLOP N* = 79M (S* = 2.54) vs hardware
    # N* = 55M (batch 1: 2.37×, γ = 7; batch 8: 2.35×, γ = 6) and 79M (batch 32: 1.95×, γ = 3); Llama-3.1-70B
    # TP4, FLOP N* = 303M (S* = 2.79) vs 109M (batch 1: 2.53×; batch 8: 2.45×) and 145M (batch 32: 1.97×)",
    # "up to 2.8× smaller", "costs 0–4.3% of throughput" (the extremes: 8B at batch 32, 70B at batch 1)
    _says("paper_figures/README.md", "FLOP N* = 79M (S* = 2.54) vs hardware N* = 55M (batch 1: 2.37×, γ = 7; batch 8: 2.35×, γ = 6) and 79M (batch 32: 1.95×, γ = 3)",
          "FLOP N* = 303M (S* = 2.79) vs 109M (batch 1: 2.53×; batch 8: 2.45×) and 145M (batch 32: 1.97×)",
          "Using the FLOP-optimal draft instead costs 0–4.3% of throughput",
          "the hardware-aware N* is up to 2.8× smaller")
    sweep = _hardware_sweep(target, tp)
    first = sweep[sweep["batch"] == 1]
    i = first["flop_speedup"].idxmax()
    assert first.loc[i, "draft_params"] == flop[0]
    assert first.loc[i, "flop_speedup"] == pytest.approx(flop[1], rel=REL)
    for b, (n, s, g, lost) in zip((1, 8, 32), hw):
        rows = sweep[sweep["batch"] == b]
        j = rows["speedup"].idxmax()
        assert (rows.loc[j, "draft_params"], rows.loc[j, "gamma"]) == (n, g)
        assert rows.loc[j, "speedup"] == pytest.approx(s, rel=REL)
        at_flop_n = rows[rows["draft_params"] == flop[0]]["speedup"].iloc[0]
        assert 1 - at_flop_n / rows.loc[j, "speedup"] == pytest.approx(lost, rel=5e-3)
    assert sweep["draft_params"].min() == pytest.approx(16.63e6, rel=REL)  # "17M to 7.5B parameters"
    assert sweep["draft_params"].max() == pytest.approx(7.505e9, rel=REL)


# ---- paper_figures/README.md: Leviathan -----------------------------------------------------------

def test_leviathan_t5_row():
    # paper_figures/README.md leviathan_table1.png: "T5: sdsl predicts **3.16×**" (inputs α = 0.75, c = 0.02,
    # γ = 7 are the paper's, quoted in sdsl.validation.figures.leviathan.LEVIATHAN_T5)
    from sdsl.validation.figures.leviathan import LEVIATHAN_T5 as t5

    _says("paper_figures/README.md", "T5: sdsl predicts **3.16×**")
    assert (t5["alpha"], t5["c"], t5["gamma"]) == (0.75, 0.02, 7)
    assert float(speedup(t5["alpha"], t5["gamma"], t5["c"])) == pytest.approx(3.157499, rel=REL)


# ---- paper_figures/README.md: TurboSpec-style, roofline only ----------------------------------------

def _turbospec_pair():
    return get_model("llama-2-7b"), get_model("llama-160m"), get_hardware("h100-sxm")


def test_turbospec_step_latency_numbers():
    # paper_figures/README.md turbospec_step_latency.png: "5.8 ms for k = 0 vs 7.9 ms for k = 5 at batch 1,
    # most of the difference being the five draft steps", ridge "≈ 220 tokens", "batch 256: 29 ms for k = 0,
    # 66 ms for k = 5" (H100 parameters fitted to Vidur's measurements)
    from sdsl.roofline.latency import default_params, step_time_s

    _says("paper_figures/README.md", "5.8 ms for k = 0 vs 7.9 ms for k = 5 at batch 1",
          "passes ≈ 220 tokens", "(batch 256: 29 ms for k = 0, 66 ms for k = 5)")
    target, draft, hw = _turbospec_pair()
    dep = Deployment(hw, engine="ideal")  # as the figure draws it: the roofline alone, on Vidur's H100 kernels
    b = np.array([1.0, 256.0])
    t_draft = step_time_s(draft, dep, batch=b, q=1, context=512)
    t0 = step_time_s(target, dep, batch=b, q=1, context=512)
    t5 = 5 * t_draft + step_time_s(target, dep, batch=b, q=6, context=512)
    assert t0 * 1e3 == pytest.approx([5.766005, 29.116673], rel=REL)
    assert t5 * 1e3 == pytest.approx([7.914340, 65.807869], rel=REL)
    assert 5 * t_draft[0] > 0.9 * (t5[0] - t0[0])  # "most of the difference": the draft steps
    p = default_params(hw)  # weight-GEMM ridge: 2 FLOPs vs 2 bytes per parameter and token (bf16)
    ridge = p.eta_compute * hw.peak_flops / (p.eta_memory * hw.mem_bandwidth)
    assert ridge == pytest.approx(217.46, rel=2e-3)


def test_turbospec_speedup_vs_batch_numbers():
    # paper_figures/README.md turbospec_speedup_vs_batch.png: "at α = 0.5 the best speedup is 1.53× (k = 3)
    # at batch 1, 1.31× (k = 1) at batch 64 and 1.21× (k = 1) at batch 256", "k = 5 drops below 1× from batch 86,
    # k = 7 from 33", "k = 4 first dips below 1× at batch 180 and stays there from 205"
    from sdsl.speculation.throughput import predict

    _says("paper_figures/README.md", "1.53× (k = 3) at batch 1, 1.31× (k = 1) at batch 64 and 1.21× (k = 1) at batch 256",
          "(k = 5 drops below 1× from batch 86, k = 7 from 33)",
          "k = 4 first dips below 1× at batch 180 and stays there from 205")
    target, draft, hw = _turbospec_pair()
    b = np.arange(1, 257, dtype=float)
    s = predict(target, draft, Deployment(hw, context=512, engine="ideal"), gamma=np.arange(0, 9)[:, None], alpha=0.5,
                batch=b[None, :]).speedup  # (k, batch)
    best = s.max(axis=0)
    assert best[[0, 63, 255]] == pytest.approx([1.532425, 1.311239, 1.208963], rel=REL)
    assert list(s.argmax(axis=0)[[0, 63, 255]]) == [3, 1, 1]
    assert b[np.argmax(s[5] < 1)] == 86 and np.all(s[5][85:] < 1)
    assert b[np.argmax(s[7] < 1)] == 33 and np.all(s[7][32:] < 1)
    assert b[np.argmax(s[4] < 1)] == 180 and np.all(s[4][204:] < 1) and s[4][203] >= 1  # tile steps: not monotone


def test_turbospec_linear_fit_numbers():
    # paper_figures/README.md turbospec_linear_fit.png: "held-out R² 0.981 on this grid", "18.4 ms vs the
    # roofline's 20.0 ms at one request", "90 ms vs 55 ms at 256 requests × 4096 tokens" (published
    # coefficients: TurboSpec's fit to vLLM logs, an external oracle)
    from sdsl.serving.linear_model import TURBOSPEC_PUBLISHED, fit_linear_step_model
    from sdsl.serving.step_model import roofline_step_fn

    _says("paper_figures/README.md", "held-out R² 0.981 on this grid", "(18.4 ms vs the roofline's 20.0 ms at",
          "(90 ms vs 55 ms at 256 requests × 4096 tokens)")
    step = roofline_step_fn("llama-3.1-70b", Deployment("h100-sxm", tp=4, engine="ideal"))
    b = np.unique(np.round(np.logspace(0, 8, 33, base=2)))
    bb, cc = (g.ravel() for g in np.meshgrid(b, np.array([256.0, 1024.0, 4096.0])))
    fit = fit_linear_step_model(bb, np.ones_like(bb), cc, step(bb, np.ones_like(bb), cc), test_fraction=0.25, seed=0)
    assert fit.r2_test == pytest.approx(0.981435, abs=2e-4)
    pub = TURBOSPEC_PUBLISHED["llama-3.1-70b-tp4-h100"]
    n, one, ctx = np.array([1.0, 256.0]), np.ones(2), np.array([1024.0, 4096.0])
    assert step(n, one, ctx) * 1e3 == pytest.approx([19.980802, 55.423883], rel=REL)
    assert pub.step_fn(n, one, ctx) * 1e3 == pytest.approx([18.437898, 89.925142], rel=REL)


# ---- the CLI prints the same law --------------------------------------------------------------------

def test_sdsl_law_tokens_3e11_cli():
    # VALIDATION.md "Analytic core": "same with D = D′ = 3e11 | — | μ = 2.88e-3, M₀ = 8.45e7 | `sdsl law --tokens 3e11`"
    import json

    from click.testing import CliRunner

    from sdsl.cli import cli

    _says("VALIDATION.md", "μ = 2.88e-3, M₀ = 8.45e7 | `sdsl law --tokens 3e11`")
    _says("paper_figures/README.md", "D = D′ = 3e11 gives μ = 2.88e-3, M₀ = 8.45e7")
    r = CliRunner().invoke(cli, ["law", "--tokens", "3e11", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["mu"] == pytest.approx(2.876967e-3, rel=REL)
    assert out["m0"] == pytest.approx(8.448830e7, rel=REL)
    assert out["draft_tokens"] == out["target_tokens"] == 3e11


# ---- BENCHMARKS.md: the byte-level family's table ---------------------------------------------------

def test_family_table_matches_the_checkpoints():
    # BENCHMARKS.md "Training the byte-level family": every row "| byte-d64 | 102,720 | 2 × 64 | 10.3 | 8.65 |",
    # the total "1364 s = 22.7 min" and "26.6 MB in all". Parameters are recomputed from the tensors; train
    # seconds and held-out perplexity are what `sdsl train-family` recorded in each sidecar (a retrain changes them).
    import json
    import os
    import re

    from sdsl._paths import DATA_DIR

    safetensors = pytest.importorskip("safetensors")
    text = (REPO_ROOT / "BENCHMARKS.md").read_text()
    rows = re.findall(r"^\| (byte-\w+) \| ([\d,]+) \| (\d+) × (\d+) \| ([\d.]+) \| ([\d.]+) \|$", text, re.M)
    assert len(rows) == 7
    folder = DATA_DIR / "checkpoints"
    seconds = size = 0.0
    for name, params, layers, width, secs, ppl in rows:
        side = json.loads((folder / f"{name}.json").read_text())
        with safetensors.safe_open(str(folder / f"{name}.safetensors"), framework="numpy") as fh:
            numel = sum(int(np.prod(fh.get_slice(k).get_shape())) for k in fh.keys())
        assert numel == side["spec"]["total_params"] == int(params.replace(",", ""))
        assert (side["spec"]["n_layer"], side["spec"]["d_model"]) == (int(layers), int(width))
        assert f"{side['train_seconds']:.1f} {side['heldout_ppl']:.2f}" == f"{secs} {ppl}"
        seconds += side["train_seconds"]
        size += os.path.getsize(folder / f"{name}.safetensors")
    _says("BENCHMARKS.md", f"**{seconds:.0f} s = {seconds / 60:.1f} min**", f"fp16 safetensors, {size / 1e6:.1f} MB in all")


@pytest.mark.integrity('benchmarks/results/figures.json', 'benchmarks/results/core.json')
def test_benchmark_tables_come_from_the_saved_runs():
    # BENCHMARKS.md "Figures" and the analytic-core rerun table: each timing is what benchmarks/bench_figures.py
    # and benchmarks/bench_core.py printed (saved in benchmarks/results/); no timing is asserted here, only
    # that the document quotes the saved run.
    """Integrity check (reads back committed measurements; nothing is re-run)."""
    import json

    results = REPO_ROOT / "benchmarks" / "results"
    fig = json.loads((results / "figures.json").read_text())
    rows = fig["figures"]
    from sdsl.validation.figures import FIGURES

    assert sorted(rows) == sorted(f.name for f in FIGURES), "rerun benchmarks/bench_figures.py: the registry changed"
    analytic = [k for k in rows if not k.startswith("serving")]
    sim = ("serving_speedup_vs_batch.png", "serving_k_vs_batch.png", "serving_alpha_shift.png")
    cpu = [rows[k]["cpu_s"] for k in analytic]
    _says("BENCHMARKS.md",
          f"| {min(cpu):.1f}–{max(cpu):.1f} s each, {sum(cpu):.1f} s in all | {sum(rows[k]['wall_s'] for k in analytic):.0f} s |",
          "| " + " / ".join(f"{rows[k]['cpu_s']:.1f}" for k in sim) + f" s | {sum(rows[k]['wall_s'] for k in sim):.0f} s |",
          f"| {rows['serving_latency_vs_qps.png']['cpu_s']:.1f} s | {rows['serving_latency_vs_qps.png']['wall_s']:.0f} s |",
          f"| **all {len(rows)}** | **{fig['total']['cpu_s']:.0f} s** | {fig['total']['wall_s']:.0f} s |")
    others = [r["cpu_s"] for k, r in rows.items() if k != "serving_latency_vs_qps.png"]
    _says("paper_figures/README.md", f"({fig['total']['cpu_s']:.0f} s on the 2-core development machine, "
          f"{rows['serving_latency_vs_qps.png']['cpu_s']:.0f} s of it the serving latency-vs-QPS simulation; "
          f"the others {min(others):.1f}–{max(others):.1f} s each)")
    core = json.loads((results / "core.json").read_text())
    grid, cli = core["million_configs"], core["cli_startup"]
    assert grid["configs"] == 1_015_808 and grid["drafts"] == 32
    _says("BENCHMARKS.md", f"| the 1,015,808-configuration grid | {grid['median_s']:.3f} s / {grid['median_cpu_s']:.3f} s |",
          f"| `sdsl optimize` | {cli['optimize']['median_s']:.2f} s / {cli['optimize']['median_cpu_s']:.2f} s |",
          f"| `sdsl --help` | {cli['help']['median_s']:.2f} s / {cli['help']['median_cpu_s']:.2f} s |")
