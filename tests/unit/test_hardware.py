"""Hardware catalog: datasheet numbers, lookup, user files, errors."""

import json

import pytest

from sdsl.errors import ConfigError, InvalidInputError, SDSLError, UnknownNameError
from sdsl.catalog.hardware import Hardware, get_hardware, list_hardware, load_hardware_file

REQUIRED = ["h100-sxm", "h100-pcie", "h200", "a100-40gb", "a100-80gb", "l40s", "a10g", "rtx-4090", "mi300x", "cpu"]


def test_catalog_has_every_required_entry_with_a_source():
    keys = [hw.key for hw in list_hardware()]
    assert keys == sorted(set(keys), key=keys.index)  # no duplicates
    for name in REQUIRED:
        assert name in keys
    for hw in list_hardware():
        assert isinstance(hw, Hardware)
        assert hw.source.strip(), hw.name
        assert hw.kind in ("gpu", "cpu")
        if hw.kind == "gpu":
            assert "http" in hw.source, hw.name


@pytest.mark.parametrize(
    "name, bf16, fp8, bw, mem",
    [
        ("h100-sxm", 989.4e12, 1978.9e12, 3.35e12, 80 * 2**30),
        ("h200", 989.4e12, 1978.9e12, 4.8e12, 141 * 2**30),
        ("a100-40gb", 312e12, None, 1.555e12, 40 * 2**30),
        ("a100-80gb", 312e12, None, 2.039e12, 80 * 2**30),
        ("mi300x", 1307.4e12, 2614.9e12, 5.3e12, 192 * 2**30),
    ],
)
def test_datasheet_numbers_in_si_units(name, bf16, fp8, bw, mem):
    hw = get_hardware(name)
    assert hw.peak_flops == pytest.approx(bf16)
    assert hw.peak_flops_fp8 == (None if fp8 is None else pytest.approx(fp8))
    assert hw.mem_bandwidth == pytest.approx(bw)
    assert hw.mem_capacity == pytest.approx(mem)


def test_dense_not_sparse():
    # every dense fp8 peak is at most twice the dense bf16 peak; sparse figures would double both
    for hw in list_hardware():
        assert hw.peak_flops <= 2.5e15, hw.name  # GB300 dense bf16 is 2.5 PFLOP/s (B200 2.25); sparse would be 4.5-5
        if hw.peak_flops_sparse is not None:
            assert hw.peak_flops < hw.peak_flops_sparse, hw.name
        if hw.peak_flops_fp8 is not None:
            assert hw.peak_flops_fp8 <= 2.0 * hw.peak_flops * 1.02, hw.name


def test_peak_flops_for_dtype():
    h100, a100 = get_hardware("h100-sxm"), get_hardware("a100-80gb")
    assert h100.peak_flops_for("bf16") == h100.peak_flops == h100.peak_flops_for("fp16")
    assert h100.peak_flops_for("fp8") == h100.peak_flops_fp8
    assert a100.peak_flops_for("fp8") == a100.peak_flops  # no fp8 tensor cores: falls back
    assert h100.peak_flops_for("fp32") == h100.peak_flops / 2
    with pytest.raises(InvalidInputError):
        h100.peak_flops_for("int3")


@pytest.mark.parametrize("alias, key", [("H100", "h100-sxm"), ("h100_sxm", "h100-sxm"), ("A100", "a100-80gb"),
                                        ("4090", "rtx-4090"), ("MI300X", "mi300x"), ("  L40S ", "l40s")])
def test_lookup_is_case_insensitive_with_aliases(alias, key):
    assert get_hardware(alias).key == key


def test_unknown_name_lists_closest():
    with pytest.raises(UnknownNameError) as exc:
        get_hardware("h100-sxn")
    assert "h100-sxm" in str(exc.value)
    assert isinstance(exc.value, SDSLError)


def test_frozen():
    hw = get_hardware("h100-sxm")
    with pytest.raises(Exception):
        hw.peak_flops = 1.0  # type: ignore[misc]


def test_user_toml_single_entry(tmp_path):
    p = tmp_path / "mygpu.toml"
    p.write_text('name = "My-GPU"\nbf16_tflops = 100\nfp8_tflops = 200\nmem_bandwidth_gbs = 1000\nmem_gb = 32\n'
                 'source = "my lab"\n')
    hw = get_hardware(p)
    assert hw.name == "My-GPU"
    assert hw.peak_flops == 100e12 and hw.peak_flops_fp8 == 200e12
    assert hw.mem_bandwidth == 1e12 and hw.mem_capacity == 32 * 2**30  # GB of memory are GiB; GB/s decimal
    assert hw.interconnect_bandwidth is None and hw.kind == "gpu"
    assert get_hardware(str(p)) == hw


def test_user_json_several_entries(tmp_path):
    p = tmp_path / "gpus.json"
    p.write_text(json.dumps({"a": {"bf16_tflops": 1, "mem_bandwidth_gbs": 2, "mem_gb": 3},
                             "b": {"bf16_tflops": 4, "mem_bandwidth_gbs": 5, "mem_gb": 6, "kind": "cpu"}}))
    a, b = load_hardware_file(p)
    assert (a.name, b.name, b.kind) == ("a", "b", "cpu")
    with pytest.raises(ConfigError, match="exactly one"):
        get_hardware(p)


def test_roundtrip_through_human_units(tmp_path):
    hw = get_hardware("h100-sxm")
    p = tmp_path / "h.json"
    p.write_text(json.dumps(hw.to_human()))
    assert get_hardware(p) == hw
    assert json.loads(json.dumps(hw.to_dict()))["peak_flops"] == hw.peak_flops


@pytest.mark.parametrize(
    "text, match",
    [
        ("bf16_tflops = 1\nmem_gb = 2\n", "lacks required"),
        ("bf16_tflops = -1\nmem_bandwidth_gbs = 1\nmem_gb = 2\n", "positive"),
        ("bf16_tflops = 1\nmem_bandwidth_gbs = 1\nmem_gb = 2\nbogus = 3\n", "unknown key"),
        ("bf16_tflops = 1\nmem_bandwidth_gbs = 1\nmem_gb = 2\nkind = 'tpu'\n", "kind"),
        ("bf16_tflops = \n", "Malformed"),
    ],
)
def test_malformed_files_raise_config_error(tmp_path, text, match):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_hardware_file(p)


def test_missing_file_raises_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        get_hardware(tmp_path / "nope.toml")
    with pytest.raises(ConfigError):
        get_hardware("nope/gpu.json")


def test_invalid_dataclass_values():
    with pytest.raises(InvalidInputError):
        Hardware("x", 0.0, None, 1.0, 1.0, None, "gpu", "s")
    with pytest.raises(InvalidInputError):
        Hardware("x", 1.0, -1.0, 1.0, 1.0, None, "gpu", "s")
