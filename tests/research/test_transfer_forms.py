"""VALIDATION.md, "What three GPUs can and cannot identify": every transfer form, leave one GPU out over Vidur's
H100-SXM, A100-80GB and A40 (research.transfer_forms), pinned at 1e-3: with each GPU fitted in the
shipped form (``shipped_table``), and in the form shipped before, on which the rule was chosen (``table``)."""

import pytest

from sdsl._paths import data_path
from research.transfer_forms import TRANSFER_FORMS, compare_transfer_forms
from sdsl.fit.profiles import read_vidur

# (form, held-out GPU): (overall MAPE, decode MAPE, signed bias, signed bias in decode, transferred eta_memory); the
# kernel-distance forms scale each datasheet feature by its spread over the whole accelerator catalog, so a catalog
# entry moves them
FORMS = {
    ("architecture", "a100"): (0.081081, 0.055086, -0.068324, -0.028433, 0.8061),
    ("architecture", "a40"): (0.11201, 0.054593, 0.085242, -0.0028419, 0.8331),
    ("architecture", "h100"): (0.10037, 0.12558, 0.039097, 0.1233, 0.8328),
    ("kernel", "a100"): (0.070468, 0.11185, -0.046018, -0.097337, 0.9887),
    ("kernel", "a40"): (0.10894, 0.058215, 0.079726, -0.021026, 0.85209),
    ("kernel", "h100"): (0.10037, 0.12558, 0.039097, 0.1233, 0.8328),
    ("memory", "a100"): (0.067007, 0.10566, -0.033742, -0.081361, 0.9948),
    ("memory", "a40"): (0.10894, 0.058215, 0.079726, -0.021026, 0.85209),
    ("memory", "h100"): (0.10072, 0.1261, 0.040095, 0.12389, 0.8331),
    ("bandwidth", "a100"): (0.070176, 0.10897, -0.045283, -0.09353, 0.98271),
    ("bandwidth", "a40"): (146.84, 382.27, 146.84, 382.27, 0.001882),
    ("bandwidth", "h100"): (0.098862, 0.11576, 0.035451, 0.11239, 0.84447),
    ("borrow-h100", "a100"): (0.067007, 0.10566, -0.033742, -0.081361, 0.9948),
    ("borrow-h100", "a40"): (0.093517, 0.13218, 0.046106, -0.12012, 0.9948),
}


@pytest.fixture(scope="module")
def table():
    """Each GPU fitted in the form shipped before (no GEMM tiles or kernel terms): the evidence the rule rests on."""
    t = compare_transfer_forms(read_vidur(data_path("vidur")), gpu_form="untiled")
    return {(r["form"], r["gpu"]): r for r in t.to_dict("records")}


@pytest.fixture(scope="module")
def shipped_table():
    from sdsl.fit.profiles import read_vidur_elementwise

    t = compare_transfer_forms(read_vidur(data_path("vidur")), elementwise=read_vidur_elementwise(data_path("vidur")))
    return {(r["form"], r["gpu"]): r for r in t.to_dict("records")}


def test_every_form_as_published(table):
    assert set(table) == set(FORMS) | {("size-as-time", g) for g in ("a100", "a40", "h100")}  # no borrow-h100 for H100
    for key, want in FORMS.items():
        r = table[key]
        got = (r["transfer_overall_mape"], r["transfer_decode_mape"], r["transfer_bias"], r["transfer_decode_bias"],
               r["eta_memory"])
        assert got == pytest.approx(want, rel=1e-3, abs=1e-5), key


def test_the_shipped_rule_is_the_architecture_form(shipped_table):
    import json

    from click.testing import CliRunner

    from sdsl.cli import cli

    r = CliRunner().invoke(cli, ["validate", "latency", "--transfer", "--json"])
    shipped = json.loads(r.output)
    for gpu, row in shipped.items():
        assert row["rule"] == TRANSFER_FORMS[0] == "architecture"
        assert row["transfer_decode_mape"] == pytest.approx(shipped_table[("architecture", gpu)]["transfer_decode_mape"], rel=1e-9)


def test_architecture_beats_memory_class_on_the_ampere_cards(table):
    """The feature effect three GPUs support. A100: priced from the A40 (same architecture, GDDR6) it beats
    being priced from the H100 (HBM like it, another architecture). A40: priced from the A100 (same
    architecture) it beats the H100 (no GDDR card is calibrated, so memory class cannot be tested there)."""
    assert table[("architecture", "a100")]["transfer_decode_mape"] < 0.6 * table[("memory", "a100")]["transfer_decode_mape"]
    assert table[("architecture", "a40")]["transfer_decode_mape"] < 0.5 * table[("borrow-h100", "a40")]["transfer_decode_mape"]
    # ... and nothing Ampere teaches about Hopper: H100 is priced the same by every neighbour rule
    h = [table[(f, "h100")]["transfer_decode_mape"] for f in ("architecture", "kernel", "memory")]
    assert max(h) - min(h) < 0.005 and min(h) > 0.08


def test_a_bandwidth_trend_is_not_supported(table):
    """Two points fix a line through log bandwidth; extrapolated to the held-out GPU it fails."""
    assert table[("bandwidth", "a40")]["transfer_overall_mape"] > 1.0
    assert table[("bandwidth", "a100")]["transfer_decode_mape"] > table[("architecture", "a100")]["transfer_decode_mape"]


def test_a_wrong_transfer_is_measurably_worse(table):
    """Borrowing the H100 fit for the A40 (the rule before the architecture rule) against the shipped transfer: more than
    twice the decode error, decode rows priced 12% too fast on average (H100's eta_memory 0.995 on a GDDR6 card).
    Over all rows it is the better of the two (9.4% vs 11.2%): the A40's compute efficiency is nearer the
    H100's than the A100's, which the architecture rule does not see (VALIDATION.md)."""
    wrong, right = table[("borrow-h100", "a40")], table[("architecture", "a40")]
    assert wrong["transfer_decode_mape"] > 2 * right["transfer_decode_mape"]
    assert wrong["transfer_decode_mape"] > 0.08 >= right["transfer_decode_mape"]
    assert wrong["transfer_decode_bias"] < -0.1 < right["transfer_decode_bias"]
    assert wrong["transfer_overall_mape"] < right["transfer_overall_mape"]


def test_pairwise_matrix_as_published():
    """VALIDATION.md's 3 x 3 table: each GPU priced with each GPU's own fit (overall, decode MAPE)."""
    from research.transfer_forms import pairwise_transfer

    t = pairwise_transfer(read_vidur(data_path("vidur")), gpu_form="untiled")
    got = {(r["gpu"], r["fit"]): (r["transfer_overall_mape"], r["transfer_decode_mape"]) for r in t.to_dict("records")}
    want = {("a100", "a100"): (0.06085, 0.05910), ("a100", "a40"): (0.08108, 0.05509), ("a100", "h100"): (0.06701, 0.10566),
            ("a40", "a100"): (0.11201, 0.05459), ("a40", "a40"): (0.07318, 0.04499), ("a40", "h100"): (0.09352, 0.13218),
            ("h100", "a100"): (0.10072, 0.12610), ("h100", "a40"): (0.10020, 0.09090), ("h100", "h100"): (0.09078, 0.07966)}
    assert set(got) == set(want)
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-3), k


def test_fitted_parameters_behind_the_transfer():
    """VALIDATION.md: eta_compute / eta_memory / t_kernel / smoothness of each GPU's own fit."""
    from sdsl.fit.transfer import fit_each_gpu

    _, _, fits = fit_each_gpu(read_vidur(data_path("vidur")), form="untiled")
    want = {"a100": (0.741, 0.833, 5.25e-6, 1.347), "a40": (0.780, 0.806, 4.09e-6, 1.557),
            "h100": (0.784, 0.995, 5.41e-6, 1.182)}
    for gpu, w in want.items():
        p = fits[gpu].params
        assert (p.eta_compute, p.eta_memory, p.t_kernel, p.smoothness) == pytest.approx(w, rel=3e-3), gpu


def test_the_rule_was_chosen_before_the_70b_rows():
    """VALIDATION.md's caveat: with the A40's phi-2 and Llama-2-7B rows only, the A100 priced from the A40
    was 7.7% off in decode (11.4% under the kernel average); the Llama-2-70B rows moved it to 5.5%."""
    data = read_vidur(data_path("vidur"))
    data = data[~((data["hardware"] == "a40") & (data["model"] == "meta-llama/Llama-2-70b-hf"))]
    t = compare_transfer_forms(data, forms=("architecture", "kernel"), gpu_form="untiled")
    a100 = {r["form"]: r["transfer_decode_mape"] for r in t[t["gpu"] == "a100"].to_dict("records")}
    assert a100["architecture"] == pytest.approx(0.07680, rel=1e-3)
    assert a100["kernel"] == pytest.approx(0.11473, rel=1e-3)


# the same with each GPU fitted in the shipped form (elementwise kernels, GEMM tiles and kernel terms):
# (overall MAPE, decode MAPE, transferred eta_memory)
SHIPPED_FORMS = {
    ("architecture", "a100"): (0.072086, 0.15502, 0.8591),
    ("architecture", "a40"): (0.091760, 0.053318, 0.7960),
    ("architecture", "h100"): (0.087246, 0.16547, 0.79672),
    ("kernel", "a100"): (0.066193, 0.086841, 1),
    ("borrow-h100", "a100"): (0.065753, 0.058734, 1.0),
    ("borrow-h100", "a40"): (0.10772, 0.11318, 1.00000),
    ("size-as-time", "a100"): (0.074912, 0.083167, 0.8591),
    ("size-as-time", "a40"): (0.092366, 0.058657, 0.7960),
    ("size-as-time", "h100"): (0.088638, 0.14318, 0.7960),
}


def test_every_form_with_the_shipped_fits(shipped_table):
    """VALIDATION.md: with the shipped form the architecture rule transfers better over all rows and worse in decode
    on the A100 (the A40's size overhead does not carry) and the H100; the other rules do better on the A100's
    decode rows; carrying the size overhead's saturation scale as a time (size-as-time, not adopted) helps both."""
    for key, want in SHIPPED_FORMS.items():
        r = shipped_table[key]
        got = (r["transfer_overall_mape"], r["transfer_decode_mape"], r["eta_memory"])
        assert got == pytest.approx(want, rel=1e-3, abs=1e-5), key
    arch = {g: shipped_table[("architecture", g)] for g in ("a100", "a40", "h100")}
    assert all(r["transfer_overall_mape"] <= 0.12 for r in arch.values())
    assert [r["transfer_decode_mape"] <= 0.08 for r in arch.values()] == [False, True, False]
    for other in ("kernel", "borrow-h100", "size-as-time"):
        assert shipped_table[(other, "a100")]["transfer_decode_mape"] < 0.6 * arch["a100"]["transfer_decode_mape"], other
