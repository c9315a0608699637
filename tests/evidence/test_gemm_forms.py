"""The GEMM forms VALIDATION.md lists as tried (profiles/gemm_forms.py, leave-one-model-out on Vidur's
H100/A100/A40 GEMMs), recomputed and pinned at 1e-3: (pooled, pooled decode, worst held-out model decode,
median signed error at 64 < num_tokens <= 256) per GPU; the kernel terms fitted to the relative error
(soft-L1); and the in-sample interaction floor on the H100."""

from __future__ import annotations

import importlib.util

import pytest

from sdsl._paths import REPO_ROOT, data_path

GPUS = ("h100", "a100", "a40")
FORMS = {
    "tiles": ((0.09396, 0.10951, 0.17061, 0.07603), (0.06035, 0.05339, 0.07900, 0.01131), (0.08215, 0.08149, 0.13257, 0.04856)),
    "min_tile": ((0.09338, 0.10621, 0.17246, 0.07296), (0.06035, 0.05346, 0.07912, 0.01119), (0.08215, 0.08165, 0.13262, 0.04852)),
    "size": ((0.09196, 0.07198, 0.09781, 0.04726), (0.06047, 0.05332, 0.08269, 0.00319), (0.07676, 0.07008, 0.08470, 0.00396)),
    "tail": ((0.08774, 0.08584, 0.13767, 0.06526), (0.05940, 0.04822, 0.06657, 0.01080), (0.08152, 0.07232, 0.11181, 0.04867)),
    "kernel_terms": ((0.08829, 0.06078, 0.07934, 0.04319), (0.05964, 0.04746, 0.06937, 0.00598), (0.07712, 0.06648, 0.07696, 0.00306)),
    "wave_hard": ((0.12894, 0.14186, 0.20088, 0.16601), (0.13524, 0.16994, 0.19425, 0.24312), (0.11561, 0.07470, 0.07961, 0.06811)),
    "wave_overhead": ((0.09396, 0.10951, 0.17061, 0.07603), (0.05912, 0.05173, 0.07775, 0.00434), (0.07890, 0.07824, 0.12340, 0.03679)),
    "p_weights": ((0.09428, 0.09346, 0.14102, 0.07308), (0.05914, 0.04596, 0.06205, -0.00202), (0.07932, 0.05294, 0.05674, 0.03629)),
    "p_k": ((0.09350, 0.11220, 0.17647, 0.07547), (0.06010, 0.05084, 0.07357, 0.00983), (0.07959, 0.07920, 0.11866, 0.03356)),
    "size_k": ((0.08883, 0.07519, 0.11371, 0.05995), (0.05938, 0.04907, 0.06534, 0.00696), (0.08137, 0.07223, 0.11181, 0.04903)),
    "split_k": ((0.08829, 0.06078, 0.07933, 0.04319), (0.05971, 0.04891, 0.07023, 0.00604), (0.07712, 0.06648, 0.07696, 0.00308)),
    "overlap_linear": ((0.08847, 0.07275, 0.08589, 0.02447), (0.06050, 0.05887, 0.08536, -0.01053), (0.07761, 0.05903, 0.07129, 0.01151)),
    "p_waves": ((0.08780, 0.06378, 0.08588, 0.03893), (0.06004, 0.04881, 0.06893, 0.00095), (0.07871, 0.06833, 0.07796, -0.00303)),
    "k_epilogue": ((0.08914, 0.05860, 0.07934, 0.04823), (0.05769, 0.04684, 0.06288, -0.00005), (0.07560, 0.06556, 0.08323, 0.02999)),
    "p_k_kt": ((0.09057, 0.06385, 0.09040, 0.04436), (0.05849, 0.04834, 0.06435, 0.00389), (0.07549, 0.05508, 0.06585, 0.00597)),
    "pipe_fill": ((0.08769, 0.10830, 0.12208, 0.01064), (0.06025, 0.08159, 0.09161, -0.04386), (0.07523, 0.06710, 0.07863, -0.00357)),
    "wave_lat_kt": ((0.08916, 0.05881, 0.07934, 0.04892), (0.05684, 0.04683, 0.06255, 0.00065), (0.07451, 0.05511, 0.07105, 0.01810)),
    "kepi_wlat": ((0.08916, 0.05882, 0.07934, 0.04892), (0.05705, 0.04629, 0.06255, -0.00077), (0.07488, 0.06248, 0.08407, 0.02409)),
    "mtile64": ((0.09266, 0.07790, 0.08620, 0.04584), (0.05964, 0.04746, 0.06937, 0.00598), (0.07712, 0.06648, 0.07696, 0.00306)),
    "ntile256": ((0.08906, 0.05934, 0.07932, 0.04800), (0.05964, 0.04745, 0.06936, 0.00599), (0.07771, 0.07865, 0.10435, 0.01002)),
    "pad64": ((0.09205, 0.06805, 0.07993, 0.05094), (0.05964, 0.04746, 0.06937, 0.00598), (0.07712, 0.06648, 0.07696, 0.00306)),
    "pad64_256": ((0.08759, 0.06296, 0.08129, 0.03194), (0.05964, 0.04746, 0.06937, 0.00598), (0.07712, 0.06648, 0.07696, 0.00306)),
    "pad256": ((0.08675, 0.06198, 0.08268, 0.02774), (0.05964, 0.04746, 0.06937, 0.00598), (0.07712, 0.06648, 0.07696, 0.00306)),
    "pad64_256_256": ((0.08669, 0.06466, 0.08750, 0.01895), (0.05964, 0.04746, 0.06937, 0.00598), (0.07712, 0.06648, 0.07696, 0.00306)),
    "reread": ((0.08779, 0.06221, 0.08268, 0.02714), (0.05968, 0.04759, 0.06602, 0.00472), (0.07869, 0.08190, 0.11275, 0.00348)),
    "reread_act": ((0.08791, 0.05936, 0.07646, 0.04268), (0.05927, 0.05793, 0.07007, 0.02094), (0.07919, 0.05691, 0.06107, 0.04127)),
    "pad256_reread": ((0.08714, 0.06191, 0.08539, 0.01313), (0.05968, 0.04759, 0.06602, 0.00472), (0.07869, 0.08190, 0.11275, 0.00348)),
    "power": ((0.08815, 0.06081, 0.07950, 0.04365), (0.06006, 0.05465, 0.07450, 0.00834), (0.07772, 0.07869, 0.10443, 0.01004)),
    "power_kepi": ((0.08901, 0.05863, 0.07950, 0.04891), (0.05655, 0.04706, 0.06396, 0.00444), (0.07585, 0.06479, 0.08324, 0.02999)),
}
ROBUST_KERNEL_TERMS = ((0.08450, 0.07404, 0.09909, 0.01200), (0.05928, 0.04523, 0.06344, -0.00481), (0.07758, 0.05680, 0.06921, -0.01256))
#: H100 in-sample MAPE of the kernel terms; then with the median log-residual removed per num_tokens,
#: per shape, and per both.
H100_FLOOR = (0.08196, 0.07636, 0.07473, 0.07032)


@pytest.fixture(scope="module")
def forms():
    spec = importlib.util.spec_from_file_location("gemm_forms", REPO_ROOT / "profiles" / "gemm_forms.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from sdsl.fit.profiles import read_vidur

    return mod, read_vidur(data_path("vidur"))


def _check(got, want, name):
    for gpu, w in zip(GPUS, want):
        assert got[gpu] == pytest.approx(w, rel=1e-3, abs=2e-5), (name, gpu, got[gpu])


@pytest.mark.parametrize("name", sorted(FORMS))
def test_form_heldout_numbers(forms, name):
    mod, data = forms
    _check(mod.leave_one_model_out(name, data), FORMS[name], name)


def test_no_form_meets_the_h100_goal(forms):
    """Issue 11's H100 goal (pooled <= 8%, decode <= 6%) is met by no form tried, held out."""
    assert not any(h[0] <= 0.08 and h[1] <= 0.06 for h, _, _ in FORMS.values())


def test_robust_fit_of_the_kernel_terms(forms):
    mod, data = forms
    _check(mod.leave_one_model_out("kernel_terms", data, robust=True), ROBUST_KERNEL_TERMS, "robust")


def test_h100_interaction_floor(forms):
    mod, data = forms
    assert mod.interaction_floor(data) == pytest.approx(H100_FLOOR, rel=1e-3)


def test_h100_kernel_choice_steps(forms):
    """VALIDATION.md: Llama-2-7B's TP-1 up-projection on the H100 takes 130 µs at 256 tokens and 108 µs at
    272, 242.5 µs at 656 and 256 µs at 1024; Llama-2-70B's 492 µs at 320 tokens and 712 µs at 336."""
    _, data = forms
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


def test_validation_states_these_numbers():
    """Every row of VALIDATION.md's forms table (H100 | A100 | A40 cells) is a pinned form's, to its rounding;
    and the document states the floor."""
    rows = _table_rows()
    for name, want in list(FORMS.items()) + [("robust", ROBUST_KERNEL_TERMS)]:
        w = [100 * v for t in want for v in t]
        assert any(all(abs(a - b) <= 0.0051 for a, b in zip(r, w)) for r in rows), name
    assert len(rows) == len(FORMS) + 1
    floor = ("reach {:.2f}%; taking out the median log-residual of every num_tokens (261 free factors) leaves {:.2f}%, "
             "of every shape (model, operator, TP: 36 factors) {:.2f}%, of both {:.2f}%")
    assert floor.format(*(100 * v for v in H100_FLOOR)) in " ".join((REPO_ROOT / "VALIDATION.md").read_text().split())
