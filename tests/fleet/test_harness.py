"""The evaluation harness, small: its scenarios are real capture directories, and `fabricase analyze DIR
--inventory DIR/inventory.json --json` names exactly the injected fault (and nothing on a clean fleet)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import harness  # noqa: E402

from fabricase.cli import cli  # noqa: E402


@pytest.mark.parametrize("kind", ["symbol-errors", "ack-timeouts", "nvlink-replay", "xid-79", "bad-switch", None])
def test_cli_analyze_names_the_injected_fault(tmp_path, monkeypatch, kind):
    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    scenario = next(s for s in harness.scenarios(128, 1, 1) if s.kind == kind)
    folder = tmp_path / "scenario"
    harness.build(scenario, folder, seed=3)
    result = CliRunner().invoke(cli, ["analyze", str(folder), "--inventory", str(folder / "inventory.json"),
                                      "--json"])
    assert result.exit_code == 0, result.output
    assert harness.named(json.loads(result.stdout)["findings"]) == scenario.truth
