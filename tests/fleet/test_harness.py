"""The evaluation harness, small: its scenarios are real capture directories, and `fabricase analyze DIR
--inventory DIR/inventory.json --json` names exactly the injected fault (and nothing on a clean fleet), as raw
findings and as suspects: one suspect per fault, none for background."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import fleetgen  # noqa: E402
import harness  # noqa: E402

from fabricase.cli import cli  # noqa: E402


def _analyze_json(folder: Path, home: Path) -> dict:
    """`fabricase analyze DIR --inventory DIR/inventory.json --json`, parsed."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FABRICASE_HOME", str(home))
        result = CliRunner().invoke(cli, ["analyze", str(folder), "--inventory", str(folder / "inventory.json"),
                                          "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


_ANALYZED: dict[str | None, tuple[fleetgen.Scenario, dict]] = {}


@pytest.fixture
def analyzed(tmp_path_factory):
    """kind -> (scenario, analyze --json output) of a 128-host scenario, built and analyzed once per kind."""
    def get(kind: str | None) -> tuple[fleetgen.Scenario, dict]:
        if kind not in _ANALYZED:
            scenario = next(s for s in fleetgen.scenarios(128, 1, 1) if s.kind == kind)
            root = tmp_path_factory.mktemp(f"scenario-{kind or 'clean'}")
            fleetgen.build(scenario, root / "capture", seed=3)
            _ANALYZED[kind] = scenario, _analyze_json(root / "capture", root / "home")
        return _ANALYZED[kind]
    return get


@pytest.mark.parametrize("kind", [*fleetgen.KINDS, None])
def test_cli_analyze_names_the_injected_fault(analyzed, kind):
    scenario, out = analyzed(kind)
    findings = out["findings"]
    assert harness.named(findings) == scenario.truth
    # Every fleet carries RoCE ports with background pause; only the storming port may be called a PFC storm.
    storms = {f"{f['host']}/{f['component']}" for f in findings if f["kind"] == "pfc-storm"}
    assert storms == (scenario.truth if kind == "pfc-storm" else set())


@pytest.mark.parametrize("kind", [*fleetgen.KINDS, None])
def test_cli_analyze_suspects_are_exactly_the_injected_fault(analyzed, kind):
    """One suspect per fault, naming it; none for background; none at all on a clean fleet."""
    scenario, out = analyzed(kind)
    assert "suspects" in out, "analyze --json carries no suspects"
    suspects = out["suspects"]
    assert len(suspects) == len(scenario.truth), [s["name"] for s in suspects]
    assert all(harness.names_a_fault(s, scenario.truth) for s in suspects)
    result = harness.score(out, out["findings"], scenario.truth)
    assert (result.false_alarms, result.missed, result.duplicates) == (0, 0, 0)


def test_fleet16_gives_one_suspect_per_faulty_host(tmp_path):
    """The acceptance fleet: 16 hosts, 8 of them with one different fault each; exactly 8 suspects, one per
    fault, each on its own host, and the 8 healthy hosts carry none."""
    truth = fleetgen.build_fleet16(tmp_path / "capture", seed=1)
    assert len(truth) == 8 and len({t.split("/")[0] for t in truth}) == 8
    out = _analyze_json(tmp_path / "capture", tmp_path / "home")
    assert len(out["hosts"]) == 16
    assert harness.named(out["findings"]) == truth
    assert "suspects" in out, "analyze --json carries no suspects"
    truths = {harness.same_thing(t): t for t in truth}
    hits = [{truths[n] for n in map(harness.same_thing, harness.suspect_names(s)) if n in truths}
            for s in out["suspects"]]
    assert len(hits) == 8 and all(len(h) == 1 for h in hits)
    assert set().union(*hits) == truth
    assert {s["host"] for s in out["suspects"]} == {t.split("/")[0] for t in truth}


def test_fleet16_library_diagnosis_matches_its_truths(tmp_path):
    """The same through the library (harness.diagnose_folder: diagnose_capture with the inventory)."""
    truth = fleetgen.build_fleet16(tmp_path / "capture", seed=1)
    diagnosis, findings, _ = harness.diagnose_folder(tmp_path / "capture")
    result = harness.score(diagnosis, findings, truth)
    assert (result.true_suspects, result.found, result.false_alarms, result.missed, result.duplicates) == \
        (8, 8, 0, 0, 0)
    assert diagnosis["verdict"].startswith("8 suspects on 8 of 16 hosts; 8 hosts healthy")


def _suspect(host: str | None, *components: str) -> dict:
    return {"host": host, "components": list(components)}


def test_suspect_level_scoring():
    """A suspect names its aliases too; a second suspect on the same fault is a duplicate (still a true
    positive); a suspect naming no fault is a false alarm; a fault no suspect names is missed; a shared suspect
    has no host."""
    truth = {"h1/rdma:mlx5_3/1", "h2/nvlink:1/1", "switch:leaf-000", "h4/pcie:0000:bb:00"}
    diagnosis = {"suspects": [
        _suspect("h1", "rdma:mlx5_3/1", "netdev:ens4np0", "pcie:0000:4d:00.0"),
        _suspect("h1", "rdma:mlx5_3/1"),  # the same port again: a duplicate
        _suspect("h2", "gpu:1", "nvlink:1/1"),
        _suspect(None, "switch:leaf-000"),
        _suspect("h3", "rdma:mlx5_3/1"),  # the right port on the wrong host
    ]}
    assert harness.suspect_names(diagnosis["suspects"][0]) == {
        "h1/rdma:mlx5_3/1", "h1/netdev:ens4np0", "h1/pcie:0000:4d:00.0"}
    assert harness.suspected(diagnosis) >= {"switch:leaf-000", "h2/gpu:1", "h3/rdma:mlx5_3/1"}
    # an Xid line's PCI address has no function; the GPU suspect names function 0
    assert harness.names_a_fault(_suspect("h4", "gpu:3", "pcie:0000:BB:00.0"), truth)
    assert not harness.names_a_fault(_suspect("h4", "pcie:0000:bb:00.1"), truth)
    findings = [{"severity": "major", "host": "h1", "component": "rdma:mlx5_3/1"},
                {"severity": "minor", "host": "h2", "component": "nvlink:1/1"},
                {"severity": "critical", "host": "h5", "component": "gpu:0"}]
    result = harness.score(diagnosis, findings, truth)
    assert (result.true_suspects, result.false_alarms) == (4, 1)
    assert (result.found, result.missed, result.duplicates) == (3, 1, 1)
    assert (result.precision, result.recall) == (0.8, 0.75)
    assert (result.finding_tp, result.finding_fn, result.finding_fa) == (1, 3, 1)
    clean = harness.score({"suspects": []}, [], set())
    assert clean.precision is None and clean.recall is None
    total = result + clean
    assert (total.scenarios, total.duplicates, total.false_alarms) == (2, 1, 1)
