import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from sdsl.cli import cli


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_optimize_default_table():
    r = run("optimize")
    assert r.exit_code == 0, r.output
    assert "llama-3.2-1b" in r.output and "SDSL FLOP-model optimum" in r.output


def test_optimize_json_schema():
    r = run("optimize", "--target", "llama-2-7b", "--drafts", "llama-68m,llama-160m", "--batch", "1,16",
            "--alpha", "0.7", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert {"configs", "sdsl", "target", "hardware"} <= set(out)
    assert {c["batch"] for c in out["configs"]} == {1, 16}
    for c in out["configs"]:
        assert {"draft", "gamma", "tokens_per_s", "speedup", "bound"} <= set(c)
        assert isinstance(c["gamma"], int) and c["alpha"] == 0.7


def test_optimize_csv_has_every_configuration():
    r = run("optimize", "--target", "llama-2-7b", "--drafts", "llama-68m,llama-160m", "--gamma-max", "4", "--csv")
    assert r.exit_code == 0
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 + 2 * 5
    from sdsl.plan.config_table import ROW_KEYS

    assert lines[0] == ",".join(ROW_KEYS)  # the same columns as the JSON table (docs/json.md)
    assert {line.split(",")[1] for line in lines[1:]} == {"llama-68m", "llama-160m"}


def test_predict_json():
    r = run("predict", "--target", "llama-2-7b", "--draft", "llama-160m", "--gamma", "5", "--alpha", "0.8", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert {"tau", "tokens_per_s", "speedup", "t_draft_s", "t_verify_s"} <= set(out)
    assert out["tau"] == pytest.approx((1 - 0.8**6) / 0.2)


def test_predict_over_several_batches_prints_one_labelled_line_per_batch_and_matches_single_runs():
    base = ("predict", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--gamma", "3", "--hardware", "h100-sxm")
    r = run(*base, "--batch", "1,8,64")
    assert r.exit_code == 0, r.output
    header, *rows = r.output.splitlines()[:4]
    assert header.split()[:3] == ["batch", "k", "tau"]
    assert [int(line.split()[0]) for line in rows] == [1, 8, 64] and {line.split()[1] for line in rows} == {"3"}
    many = json.loads(run(*base, "--batch", "1,8,64", "--json").output)
    for i, b in enumerate((1, 8, 64)):  # the same numbers as one batch at a time
        one = json.loads(run(*base, "--batch", str(b), "--json").output)
        assert many["tokens_per_s"][i] == pytest.approx(one["tokens_per_s"], rel=1e-12)
        assert many["tokens_per_s_low"][i] == pytest.approx(one["tokens_per_s_low"], rel=1e-12)


def test_law_json():
    r = run("law", "--json")
    out = json.loads(r.output)
    assert {"mu", "m0", "targets"} <= set(out) and len(out["targets"]) == 13


def test_catalog_listings():
    hw = json.loads(run("hardware", "--json").output)
    assert any(h["name"].lower() == "h100-sxm" for h in hw)
    models = json.loads(run("models", "--json").output)
    assert any(m["name"] == "llama-3.1-70b" for m in models)
    assert run("models").exit_code == 0 and run("hardware").exit_code == 0


@pytest.mark.parametrize("args", [
    ["optimize", "--alpha", "1.5"],
    ["optimize", "--alpha", "0"],
    ["optimize", "--batch", "0"],
    ["optimize", "--batch", "x"],
    ["optimize", "--target", "no-such-model"],
    ["optimize", "--hardware", "no-such-gpu"],
    ["optimize", "--target", "/no/such/config.json"],
    ["predict", "--target", "llama-2-7b", "--draft", "llama-160m", "--gamma", "-1"],
    ["predict", "--target", "llama-2-7b", "--draft", "llama-160m", "--gamma", "2", "--batch", "0"],
    ["predict", "--target", "llama-2-7b", "--draft", "llama-160m", "--gamma", "2", "--batch", "1,x"],
    ["predict", "--target", "llama-2-7b", "--draft", "llama-160m"],
    ["no-such-command"],
    ["validate", "decoder", "--gammas", "0"],
    ["validate", "decoder", "--smollm2", "/no/such/dir"],
    ["profile", "--model", "llama-68m", "--device", "cpu", "-o", "/no/such/dir/p", "--threads", "0"],
    ["profile", "--model", "llama-68m", "--device", "cpu", "-o", "/no/such/dir/p", "--min-time", "-1"],
    ["validate", "decoder", "--batches", "0"],
    ["simulate", "--qps", "-1"],
    ["figures", "--only", "no-such-figure"],
    ["predict", "--target", "llama-2-7b", "--draft", "llama-160m", "--gamma", "2", "--context", "-5"],
    ["optimize", "--target", "llama-2-70b", "--tp", "3"],
])
def test_bad_input_one_line_exit_2(args):
    r = run(*args)
    assert r.exit_code == 2
    err = r.stderr if hasattr(r, "stderr") else r.output
    lines = [ln for ln in err.strip().splitlines() if ln]
    assert len(lines) == 1 and lines[0].startswith("Error:"), err
    assert "Traceback" not in r.output


def test_malformed_config(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    r = run("optimize", "--target", str(bad))
    assert r.exit_code == 2


def test_help_does_not_import_heavy_modules():
    code = ("import sys; from sdsl.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('HEAVY=' + ','.join(m for m in ('torch', 'matplotlib', 'pandas', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "Commands" in out
    assert out.strip().splitlines()[-1] == "HEAVY="


def test_import_sdsl_is_light():
    code = "import sys, sdsl; print([m for m in ('torch', 'matplotlib', 'pandas') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_python_m_sdsl():
    r = subprocess.run([sys.executable, "-m", "sdsl", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "optimize" in r.stdout


def test_optimize_serving_k_table():
    r = run("optimize", "--target", "llama-2-7b", "--drafts", "llama-160m", "--alpha", "0.7",
            "--max-batch", "64", "--json")
    assert r.exit_code == 0, r.output
    table = json.loads(r.output)["serving"]["k_table"]
    assert table[0]["batch_min"] == 1 and table[-1]["batch_max"] == 64
    for a, b in zip(table, table[1:]):
        assert b["batch_min"] == a["batch_max"] + 1
    assert all(0 <= row["k"] <= 7 for row in table)


def test_console_entry_point_exits_without_teardown_but_as_sys_exit_would():
    """``sdsl`` (``sdsl.cli.main``) ends with ``os._exit`` after the atexit handlers and a flush of the standard
    streams: the exit status, the whole output through a pipe and every atexit handler are as a normal exit's."""
    code = ("import atexit, sys; atexit.register(lambda: print('atexit ran')); sys.argv = ['sdsl'] + sys.argv[1:]; "
            "from sdsl.cli import main; main()")
    ok = subprocess.run([sys.executable, "-c", code, "models"], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.rstrip().endswith("atexit ran")
    assert len(ok.stdout.splitlines()) > 20 and ok.stdout.splitlines()[0].startswith("name")
    bad = subprocess.run([sys.executable, "-c", code, "optimize", "--target", "no-such-model"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and bad.stderr.startswith("Error: ")
    assert bad.stdout == "atexit ran\n"


def test_console_entry_point_waits_for_other_threads():
    """With another thread still running, the entry point leaves the exit to the interpreter, which waits for it."""
    code = ("import sys, threading, time; "
            "t = threading.Thread(target=lambda: (time.sleep(0.3), print('thread done', flush=True))); t.start(); "
            "sys.argv = ['sdsl', '--version']; from sdsl.cli import main; main()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and "thread done" in r.stdout and "version" in r.stdout
