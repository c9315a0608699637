"""Each README example's Python twin (``sdsl.optimize`` / ``sdsl.predict`` with the same arguments) returns the numbers
the command prints: the same result object behind both."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

import sdsl
from sdsl.cli import cli

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
COMMANDS = re.findall(r"<!-- example: sdsl (.*?)(?: \| [^>]*)? -->", README)

# the README's commands, each with its Python twin (a new example needs a twin here)
TWINS = {
    "optimize --target llama-3.1-70b --hardware h100-sxm --tp 4 --batch 1":
        lambda: sdsl.optimize("llama-3.1-70b", "h100-sxm", tp=4, batch=1),
    "optimize --target llama-3.1-8b --proposer all --hardware h100-sxm --engine vllm --batch 1":
        lambda: sdsl.optimize("llama-3.1-8b", "h100-sxm", proposers="all", engine="vllm", batch=1),
    "optimize --target qwen3-30b-a3b --proposer eagle3 --hardware h100-sxm --engine sglang --batch 1,64":
        lambda: sdsl.optimize("qwen3-30b-a3b", "h100-sxm", proposers=["eagle3"], engine="sglang", batch=[1, 64]),
    "optimize --target llama-3.1-8b --proposer eagle3 --hardware h100-sxm --export vllm":
        lambda: sdsl.optimize("llama-3.1-8b", "h100-sxm", proposers=["eagle3"], export="vllm"),
}


def test_every_readme_example_has_a_python_twin():
    assert sorted(COMMANDS) == sorted(TWINS)


@pytest.mark.parametrize("command", sorted(TWINS))
def test_readme_example_and_its_python_twin_agree(command):
    r = CliRunner().invoke(cli, shlex.split(command) + ["--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(TWINS[command]().to_json()) == json.loads(r.output)


def test_readme_python_predict_is_the_cli_predict():
    p = sdsl.predict("llama-3.1-8b", "eagle3", "h100-sxm", gamma=4)
    r = CliRunner().invoke(cli, ["predict", "--target", "llama-3.1-8b", "--proposer", "eagle3", "--gamma", "4"])
    assert r.exit_code == 0 and p.report() == r.output.rstrip("\n")
