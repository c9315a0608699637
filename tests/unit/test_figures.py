"""The figure registry and `sdsl figures` (quick settings; matplotlib Agg, nothing under $HOME)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from sdsl.cli import cli
from sdsl.errors import InvalidInputError
from sdsl.validation.figures import FIGURES, get_figure, make_figures

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _mpl_home(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    monkeypatch.setenv("MPLBACKEND", "Agg")


def test_registry_entries_are_well_formed():
    names = [e.name for e in FIGURES]
    assert len(names) == len(set(names))
    for e in FIGURES:
        assert e.name.endswith(".png") and e.description and e.source
        assert callable(e.load()), e.func


def test_import_does_not_pull_matplotlib():
    code = "import sdsl.validation.figures, sys; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_get_figure_unknown_name():
    assert get_figure("leviathan_table1").name == "leviathan_table1.png"
    with pytest.raises(InvalidInputError):
        get_figure("no_such_figure")


def test_make_all_figures_quick(tmp_path):
    paths = make_figures(tmp_path, quick=True)
    assert [p.name for p in paths] == [e.name for e in FIGURES]
    for p in paths:
        data = p.read_bytes()
        assert data.startswith(PNG) and 5_000 < len(data) < 400_000, p
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporaries


def test_cli_list_and_only(tmp_path):
    runner = CliRunner()
    res = runner.invoke(cli, ["figures", "--list"])
    assert res.exit_code == 0 and "sdsl_draft_law.png" in res.output
    res = runner.invoke(cli, ["figures", "-o", str(tmp_path), "--only", "leviathan_table1", "--quick"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "leviathan_table1.png").read_bytes().startswith(PNG)
    res = runner.invoke(cli, ["figures", "-o", str(tmp_path), "--only", "nope"])
    assert res.exit_code == 2 and "Unknown figure" in res.output


def test_paper_figures_readme_covers_every_figure():
    from pathlib import Path

    readme = Path(__file__).resolve().parents[2] / "paper_figures" / "README.md"
    if not readme.exists():
        pytest.skip("paper_figures/README.md not written yet")
    text = readme.read_text()
    missing = [e.name for e in FIGURES if e.name not in text]
    assert not missing, f"paper_figures/README.md lacks entries for {missing}"
