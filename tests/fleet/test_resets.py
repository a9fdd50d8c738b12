"""Harness scenarios of issue 16, small: counters that restart between the snapshots (a driver reload or
`perfquery -R` on several hosts; a reboot) give no suspect and no major finding, and the hosts' statuses say that
their rates are unknown."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import fleetgen  # noqa: E402
import harness  # noqa: E402

from fabricase.analysis.rates import RESET_NOTE  # noqa: E402
from fabricase.cli import cli  # noqa: E402

HOSTS = 48  # three leaves: enough components for fleet statistics, seconds to build and analyze


def _analyze(folder: Path, home: Path, *extra: str):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FABRICASE_HOME", str(home))
        return CliRunner().invoke(cli, ["analyze", str(folder), "--inventory", str(folder / "inventory.json"),
                                        *extra])


@pytest.mark.parametrize("kind", fleetgen.RESET_KINDS)
def test_restarted_counters_give_no_false_alarm(tmp_path, kind):
    scenario = fleetgen.Scenario(f"{kind}-0", kind, [f"gpu{i:04d}" for i in range(1, HOSTS + 1)])
    fleetgen.build(scenario, tmp_path / "capture", seed=3)
    result = _analyze(tmp_path / "capture", tmp_path / "home", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert scenario.truth == set() and out["suspects"] == []
    score = harness.score(out, out["findings"], scenario.truth)
    assert (score.false_alarms, score.missed) == (0, 0)
    assert [f for f in out["findings"] if f["severity"] in ("critical", "major")] == []
    noted = {h["host"]: h["reason"] for h in out["hosts"] if h["status"] == "partial"}
    assert len(noted) >= fleetgen.RESTARTED_HOSTS and all(r.startswith(RESET_NOTE) for r in noted.values())
    rebooted = {h for h, r in noted.items() if "rebooted" in r}
    assert len(rebooted) == (fleetgen.RESTARTED_HOSTS if kind == "reboot" else 0)
    terminal = _analyze(tmp_path / "capture", tmp_path / "home").output
    assert f"partial: {RESET_NOTE}" in terminal
