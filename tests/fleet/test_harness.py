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


@pytest.mark.parametrize("kind", ["symbol-errors", "ack-timeouts", "nvlink-replay", "xid-79", "bad-switch",
                                  "pfc-storm", None])
def test_cli_analyze_names_the_injected_fault(tmp_path, monkeypatch, kind):
    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    scenario = next(s for s in harness.scenarios(128, 1, 1) if s.kind == kind)
    folder = tmp_path / "scenario"
    harness.build(scenario, folder, seed=3)
    result = CliRunner().invoke(cli, ["analyze", str(folder), "--inventory", str(folder / "inventory.json"),
                                      "--json"])
    assert result.exit_code == 0, result.output
    findings = json.loads(result.stdout)["findings"]
    assert harness.named(findings) == scenario.truth
    # Every fleet carries RoCE ports with background pause; only the storming port may be called a PFC storm.
    storms = {f"{f['host']}/{f['component']}" for f in findings if f["kind"] == "pfc-storm"}
    assert storms == (scenario.truth if kind == "pfc-storm" else set())


def test_pfc_storm_fleet_pauses_one_port_and_spreads_under_its_leaf(tmp_path):
    """The generated counters themselves: the storming port sends pause frames most of the interval; its busy leaf
    neighbours receive a few percent; no other port reaches 7% (the rule's threshold is 10%)."""
    from fabricase.analysis import ethernet
    from fabricase.capturedir import load_capture

    scenario = next(s for s in harness.scenarios(64, 1, 0) if s.kind == "pfc-storm")
    harness.build(scenario, tmp_path / "scenario", seed=5)
    [target] = scenario.truth
    storm_host, storm_port = target.split("/", 1)
    leaf = scenario.hosts.index(storm_host) // harness.HOSTS_PER_LEAF
    shares: dict[tuple[str, str, str], float] = {}
    for hc in load_capture(tmp_path / "scenario", verify=False).hosts:
        samples = ethernet.samples(hc)
        assert sorted({s.component for s in samples}) == [f"netdev:{p}" for p in harness.ETH_PORTS]
        for s in samples:
            if s.metric in ("pfc.rx_pause_us.p3", "pfc.tx_pause_us.p3") and s.delta is not None:
                shares[(hc.host, s.component, s.metric[4:6])] = s.delta / (harness.INTERVAL_S * 1e6)
    assert shares.pop((storm_host, storm_port, "tx")) >= 0.35
    neighbours = [v for (host, port, d), v in shares.items() if port == storm_port and d == "rx"
                  and scenario.hosts.index(host) // harness.HOSTS_PER_LEAF == leaf and host != storm_host]
    assert sum(v >= 0.01 for v in neighbours) >= harness.HOSTS_PER_LEAF // 3
    assert max(shares.values()) < 0.07 and sorted(shares.values())[len(shares) // 2] < 0.001
