"""Profile format: writer/reader round trip, resume after truncation, bad files, Vidur reader."""

from __future__ import annotations

import json
from pathlib import Path

from sdsl._paths import data_path

import pytest

from sdsl.errors import ProfileError
from sdsl.fit.profiles import (GEMM_OPS, PROFILE_COLUMNS, ProfileWriter, new_metadata, profile_paths,
                           read_profile, read_vidur, read_vidur_file)

VIDUR = data_path("vidur")


def _meta(**kw):
    base = dict(device={"name": "test-device", "hardware": "cpu"}, dtype="fp32",
                model={"name": "tiny"}, harness_version="test")
    base.update(kw)
    return new_metadata(**base)


def _row(i: int) -> dict:
    return {"kind": "op", "op": GEMM_OPS[i % 4], "tp": 1, "num_tokens": 1 + i, "in_features": 64,
            "out_features": 128, "batch": 1 + i, "q": 1, "context": 0, "repeats": 3,
            "time_s": 1e-5 * (1 + i), "time_min_s": 9e-6 * (1 + i), "time_std_s": 1e-7}


def _write(path, rows, **kw):
    with ProfileWriter(path, _meta(), **kw) as w:
        return [w.append(r) for r in rows]


def test_round_trip(tmp_path):
    _write(tmp_path / "p", [_row(i) for i in range(6)])
    prof = read_profile(tmp_path / "p.csv")
    assert list(prof.data.columns) == list(PROFILE_COLUMNS)
    assert len(prof.data) == 6 and len(prof.ops) == 6 and len(prof.layers) == 0
    assert prof.meta["device"]["name"] == "test-device"
    assert prof.data["time_s"].iloc[3] == pytest.approx(4e-5)
    assert read_profile(tmp_path / "p.json").data.equals(prof.data)


def test_truncated_mid_row_then_resumed_has_every_row_once(tmp_path):
    rows = [_row(i) for i in range(10)]
    _write(tmp_path / "p", rows[:6])
    csv_path, _ = profile_paths(tmp_path / "p")
    text = csv_path.read_text()
    csv_path.write_text(text[: len(text) - 20])  # interrupted while writing row 6 (index 5)
    with pytest.raises(ProfileError, match=r"p\.csv, line 7"):
        read_profile(csv_path)
    written = _write(tmp_path / "p", rows)  # resume: skips 0..4, redoes 5..9
    assert written == [False] * 5 + [True] * 5
    prof = read_profile(csv_path)
    assert sorted(prof.data["num_tokens"]) == list(range(1, 11))


def test_resume_refuses_other_device(tmp_path):
    _write(tmp_path / "p", [_row(0)])
    with pytest.raises(ProfileError, match="different device"):
        ProfileWriter(tmp_path / "p", _meta(device={"name": "other"}))
    with pytest.raises(ProfileError, match="exists"):
        ProfileWriter(tmp_path / "p", _meta(), resume=False)


@pytest.mark.parametrize("mutate, match", [
    (lambda t: t.replace("kind,op", "kind,operator", 1), "line 1: header"),
    (lambda t: t + "op,mlp_up_proj,1,5\n", "line 4: 4 fields"),
    (lambda t: t.replace("1e-05", "abc", 1), "line 2: column 'time_s' is not a number"),
    (lambda t: t.replace("1e-05", "-1.0", 1), "line 2: time_s must be positive"),
    (lambda t: t.replace("op,attn_pre_proj,1,1", "op,attn_pre_proj,1,", 1), "line 2: missing value"),
    (lambda t: t + t.splitlines()[1] + "\n", "line 4: duplicate of line 2"),
])
def test_bad_profile_rows_name_file_and_line(tmp_path, mutate, match):
    _write(tmp_path / "p", [_row(0), _row(1)])
    csv_path = tmp_path / "p.csv"
    csv_path.write_text(mutate(csv_path.read_text()))
    with pytest.raises(ProfileError, match=match):
        read_profile(csv_path)


def test_bad_sidecar(tmp_path):
    _write(tmp_path / "p", [_row(0)])
    (tmp_path / "p.json").write_text("{not json")
    with pytest.raises(ProfileError, match="malformed JSON"):
        read_profile(tmp_path / "p")
    (tmp_path / "p.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ProfileError, match="not an sdsl-profile"):
        read_profile(tmp_path / "p")
    (tmp_path / "p.json").unlink()
    with pytest.raises(ProfileError, match="missing"):
        read_profile(tmp_path / "p")


def test_vidur_reader_real_files():
    df = read_vidur(VIDUR, hardware="h100")
    assert set(df["op"]) == set(GEMM_OPS)
    assert {"meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-70b-hf", "microsoft/phi-2"} == set(df["model"])
    assert df["num_tokens"].min() == 1 and df["num_tokens"].max() == 4096
    assert set(df["tp"]) == {1, 2, 4, 8}
    assert (df["time_s"] > 0).all() and (df["time_s"] < 1).all()  # ms -> s
    row = df[(df.model == "meta-llama/Llama-2-70b-hf") & (df.op == "attn_pre_proj") & (df.tp == 8)].iloc[0]
    assert (row.in_features, row.out_features) == (8192, (64 + 2 * 8) * 128 // 8)  # GQA fused QKV shard
    up = df[(df.model == "microsoft/phi-2") & (df.op == "mlp_up_proj")].iloc[0]
    assert (up.in_features, up.out_features) == (2560, 10240)  # not gated


def test_vidur_shapes_match_modelspec():
    from sdsl.catalog.models import get_model

    df = read_vidur_file(VIDUR / "h100" / "meta-llama" / "Llama-2-70b-hf" / "mlp.csv")
    spec = get_model("llama-2-70b")
    for tp in (1, 2, 4, 8):
        layers = spec.linear_layers(tp)
        for op in GEMM_OPS:
            r = df[(df.op == op) & (df.tp == tp)].iloc[0]
            assert (r.in_features, r.out_features) == layers[op]


def test_vidur_truncated_file_raises(tmp_path):
    src = (VIDUR / "h100" / "microsoft" / "phi-2" / "mlp.csv").read_text().splitlines()
    bad = tmp_path / "h100" / "org" / "m" / "mlp.csv"
    bad.parent.mkdir(parents=True)
    bad.write_text("\n".join(src[:10] + [src[10][:40]]) + "\n")
    with pytest.raises(ProfileError, match=r"mlp\.csv, line 11"):
        read_vidur_file(bad)
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ProfileError, match="missing column"):
        read_vidur_file(bad)
