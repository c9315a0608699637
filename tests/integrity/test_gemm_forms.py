"""The GEMM forms VALIDATION.md lists as tried (profiles/gemm_forms.py, leave-one-model-out on Vidur's H100/A100/A40
GEMMs): the committed result of `python profiles/gemm_forms.py --json profiles/gemm_forms.json` (about five minutes, so
not rerun here) is unchanged, every row of the document's table is that file's, and the claims the text makes of it
hold: (pooled, pooled decode, worst held-out model decode, median signed error at 64 < num_tokens <= 256) per GPU; the
kernel terms fitted to the relative error (soft-L1); and the in-sample interaction floor on the H100."""

from __future__ import annotations

import json

import pytest

from sdsl._paths import REPO_ROOT, data_path

GPUS = ("h100", "a100", "a40")
RESULT = "profiles/gemm_forms.json"


@pytest.fixture(scope="module")
def result():
    return json.loads((REPO_ROOT / RESULT).read_text())


def _rows(result):
    return [(name, tuple(tuple(v[g]) for g in GPUS)) for name, v in result["forms"].items()] + \
        [("robust", tuple(tuple(result["robust_kernel_terms"][g]) for g in GPUS))]


@pytest.mark.integrity("profiles/gemm_forms.json")
def test_no_form_meets_the_h100_goal(result):
    """The H100 goal (pooled <= 8%, decode <= 6%) is met by no form tried, held out."""
    assert len(result["forms"]) == 29
    assert not any(v["h100"][0] <= 0.08 and v["h100"][1] <= 0.06 for v in result["forms"].values())


@pytest.mark.integrity("profiles/gemm_forms.json")
def test_what_the_text_says_of_the_table(result):
    """"Several meet the decode goal (5.89–5.96%); none brings pooled below 8.67%, and those lowering pooled most raise
    decode above 6%." """
    h = {name: v["h100"] for name, v in result["forms"].items()}
    met = sorted(v[1] for v in h.values() if v[1] <= 0.06)
    assert len(met) >= 3 and round(100 * met[0], 2) == 5.89 and round(100 * met[-1], 2) == 5.96
    best = min(v[0] for v in h.values())
    assert round(100 * best, 2) == 8.67
    assert all(v[1] > 0.06 for v in h.values() if v[0] < 0.0868)
    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    assert "Several meet the decode goal (5.89–5.96%); none brings pooled below 8.67%" in text


def test_h100_kernel_choice_steps():
    """VALIDATION.md: Llama-2-7B's TP-1 up-projection on the H100 takes 130 µs at 256 tokens and 108 µs at
    272, 242.5 µs at 656 and 256 µs at 1024; Llama-2-70B's 492 µs at 320 tokens and 712 µs at 336."""
    from sdsl.fit.profiles import read_vidur

    data = read_vidur(data_path("vidur"), hardware="h100")
    d = data[(data["hardware"] == "h100") & (data["tp"] == 1) & (data["op"] == "mlp_up_proj")]
    for model, want in (("Llama-2-7b-hf", {256: 130, 272: 108, 656: 242.5, 1024: 256}),
                        ("Llama-2-70b-hf", {320: 492, 336: 712})):
        g = d[d["model"].str.endswith(model)].set_index("num_tokens")["time_s"]
        assert {t: g[t] * 1e6 for t in want} == pytest.approx(want, rel=1e-3), model


def _table_rows():
    """The H100 | A100 | A40 cells of VALIDATION.md's forms table, as 12 numbers (percent) per row."""
    import re

    text = (REPO_ROOT / "VALIDATION.md").read_text().replace("−", "-")
    cell = r"(-?[\d.]+) / (-?[\d.]+) / (-?[\d.]+) / ([+-][\d.]+)%"
    return [tuple(float(v) for v in m) for m in re.findall(r"\| " + r" \| ".join([cell] * 3) + r" \|", text)]


@pytest.mark.integrity("profiles/gemm_forms.json")
def test_validation_states_these_numbers(result):
    """Every row of VALIDATION.md's forms table (H100 | A100 | A40 cells) is a committed form's, to its rounding;
    and the document states the floor."""
    rows = _table_rows()
    for name, want in _rows(result):
        w = [100 * v for t in want for v in t]
        assert any(all(abs(a - b) <= 0.0051 for a, b in zip(r, w)) for r in rows), name
    assert len(rows) == len(result["forms"]) + 1
    floor = ("reach {:.2f}%; taking out the median log-residual of every num_tokens (261 free factors) leaves {:.2f}%, "
             "of every shape (model, operator, TP: 36 factors) {:.2f}%, of both {:.2f}%")
    text = " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
    assert floor.format(*(100 * v for v in result["h100_interaction_floor"])) in text
