"""``sdsl validate kernels``: the held-out errors of the kernel terms fitted on NVIDIA's operator tables, as JSON and text."""

from __future__ import annotations

import json

from click.testing import CliRunner


def test_validate_kernels_cli_json():
    from sdsl.cli import cli

    r = CliRunner().invoke(cli, ["validate", "kernels", "--gpu", "h200", "--op", "allreduce", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert {"source", "goal", "gpus", "engine"} <= set(out) and "aiconfigurator-core 0.12.0" in out["source"]
    entry = out["gpus"]["h200_sxm"]["allreduce"]["vllm:graph"]
    assert {"heldout", "fitted", "engine", "engine_version", "kernel_source", "rows", "folds"} <= set(entry)
    assert {"median_abs", "worst_abs", "median_signed", "p95_abs", "meets_goal"} <= set(entry["heldout"])
    r = CliRunner().invoke(cli, ["validate", "kernels", "--gpu", "h200", "--op", "allreduce"])
    assert r.exit_code == 0 and "median" in r.output and "nccl" in r.output
