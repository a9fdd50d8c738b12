"""The open flow as typed stages (fabricase.flow): one sequence for open, open --dry-run and attach --capture,
each stage's record feeding the next, the escalation covering the suspects' hosts only."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import fleetgen  # noqa: E402

from fabricase import flow  # noqa: E402
from fabricase.capturedir import load_capture  # noqa: E402
from fabricase.config import resolve_paths  # noqa: E402
from fabricase.models import HostSummary  # noqa: E402


@pytest.fixture
def paths(tmp_path, monkeypatch):
    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    p = resolve_paths()
    p.config.mkdir(parents=True, exist_ok=True)
    return p


def _scenario(tmp_path: Path, kind: str | None):
    scenario = next(s for s in fleetgen.scenarios(64, 1, 1) if s.kind == kind)
    folder = tmp_path / "capture"
    fleetgen.build(scenario, folder, seed=3)
    return scenario, folder


def _with_inventory(paths, folder: Path) -> None:
    (paths.config / "inventory.json").write_text((folder / "inventory.json").read_text())


def test_stages_hand_typed_records_on(tmp_path, paths):
    scenario, folder = _scenario(tmp_path, "symbol-errors")
    _with_inventory(paths, folder)
    capture = load_capture(folder)
    from fabricase.providers import get_provider

    located = flow.locate(capture, get_provider("static", paths), "static")
    assert all(isinstance(h, HostSummary) for h in located.hosts) and len(located.hosts) == 64
    assert (folder / "placements.json").is_file()  # stored before analysis: the bundle carries them
    analysis = flow.diagnose(capture, located)
    [suspect] = analysis.diagnosis.suspects
    plan = flow.plan(capture, analysis, located, provider_name="static", symptom="busbw fell", severity=None,
                     paths=paths)
    [truth] = scenario.truth
    assert plan.hosts == [truth.split("/")[0]]  # only the suspect's host, not the 64 captured
    # One port of one host is impaired, not down: filed (and recorded) at most major, whatever its q.
    assert str(suspect.severity) == "critical" and str(plan.severity) == "major"
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.severity = None  # type: ignore[misc]


def test_open_dry_run_and_open_share_one_sequence(tmp_path, paths):
    scenario, folder = _scenario(tmp_path, "link-flap")
    _with_inventory(paths, folder)
    dry = flow.open_escalation(load_capture(folder), paths, provider_name="static", symptom="slow", severity=None,
                               dry_run=True)
    assert dry.escalation is None and dry.diagnosis is not None and len(dry.diagnosis.suspects) == 1
    assert list(dry.timings) == ["locate", "analyze", "render", "record", "bundle"]
    # The dry run's ticket is what filing would send: fitted to the desk.
    assert dry.ticket_path.read_text().startswith(dry.draft.title)
    real = flow.open_escalation(load_capture(folder), paths, provider_name="static", symptom="slow", severity=None)
    assert real.escalation is not None and real.escalation.id == "FC-1"
    assert real.escalation.severity == real.draft.severity  # the tracker records what the desk was told
    assert set(real.timings) >= {"locate", "analyze", "render", "record", "bundle", "file"}
    assert real.escalation.hosts == dry.diagnosis.hosts_with_suspects
    # Same capture, same diagnosis: the suspect ids are stable across runs.
    assert [s.id for s in real.diagnosis.suspects] == [s.id for s in dry.diagnosis.suspects]


def test_clean_fleet_escalation_covers_the_whole_job(tmp_path, paths):
    _, folder = _scenario(tmp_path, None)
    result = flow.open_escalation(load_capture(folder), paths, provider_name="static", symptom="slow", severity=None)
    assert result.diagnosis.suspects == []
    assert len(result.escalation.hosts) == 64  # nothing localized: the symptom is the whole job's
    assert str(result.escalation.severity) == "minor"


def test_attach_capture_runs_the_same_stages_without_a_new_record(tmp_path, paths):
    _, folder = _scenario(tmp_path, "ack-timeouts")
    _with_inventory(paths, folder)
    opened = flow.open_escalation(load_capture(folder), paths, provider_name="static", symptom="slow",
                                  severity=None)
    bundle, analysis = flow.attach_capture(load_capture(folder), paths, opened.escalation)
    assert bundle.path.name.startswith(opened.escalation.id + "-") and bundle.path.is_file()
    assert [s.id for s in analysis.diagnosis.suspects] == [s.id for s in opened.diagnosis.suspects]
    from fabricase.tracker.store import Tracker

    with Tracker.open(paths) as tracker:
        assert [e.id for e in tracker.list(state="all")] == ["FC-1"]
