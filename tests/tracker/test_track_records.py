"""Providers' track records (issue 15, Build 9): a tracker filled through its API at controlled times gives exact
medians and 90th percentiles of the time to first reply and to resolution, open cases by age, the reopen rate,
repeat offenders within (and not outside) N days of a resolution, per provider and per desk; `providers stats`
prints them at 80 columns and as JSON; `export` gets the same numbers as metrics; and a new escalation of a
repeat offender says so in its ticket, naming the earlier escalations."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from fabricase.cli import cli
from fabricase.config import resolve_paths
from fabricase.metrics import FamiliesCollector, families, registry_of, render
from fabricase.metrics.track_records import track_record_series, tracker_series
from fabricase.models import EscalationState, Evidence, Finding, Severity
from fabricase.providers.base import CaseComment
from fabricase.templates import render_draft
from fabricase.tracker import Tracker
from fabricase.tracker.records import iso
from fabricase.tracker.stats import (
    case_times,
    history_line,
    history_lines,
    load_cases,
    quantile,
    repeat_history,
    track_record,
)

HOUR, DAY = 3600.0, 86400.0
PORT = ("gpu001", "rdma:mlx5_3/1")


class SetClock:
    """The tracker's clock, moved by the test to each moment of the story."""

    def __init__(self, start: datetime) -> None:
        self.start = self.moment = start

    def __call__(self) -> datetime:
        return self.moment

    def at(self, days: float) -> datetime:
        self.moment = self.start + timedelta(days=days)
        return self.moment


def _file(t: Tracker, clock: SetClock, day: float, *, provider: str = "aws", hosts=("gpu001",),
          components=(PORT,), desk: str | None = None, filed: bool = True) -> str:
    clock.at(day)
    esc = t.create(provider=provider, title="t", symptom="s", severity="major", hosts=list(hosts),
                   components=list(components))
    if filed:
        t.add_event(esc.id, "filing", "filing", {"provider": provider, **({"desk": desk} if desk else {})})
        t.mark_filed(esc.id, provider_case_id=f"case-{esc.id}", raw_status="opened", state="filed",
                     ticket_path=None, bundle_id=None, bundle_path=None)
    return esc.id


def _reply(t: Tracker, clock: SetClock, esc_id: str, day: float) -> None:
    """The provider's first reply at `day` (desk time), read back by a sync an hour later."""
    at = clock.start + timedelta(days=day)
    clock.moment = at + timedelta(hours=1)
    t.record_sync(esc_id, raw_status="pending-customer-action", state=EscalationState.WAITING_US,
                  comments=[CaseComment(iso(at), "AWS Support", f"reply to {esc_id}", True)])


def _resolve(t: Tracker, clock: SetClock, esc_id: str, day: float) -> None:
    clock.at(day)
    t.resolve(esc_id, "fixed")


def _reopen(t: Tracker, clock: SetClock, esc_id: str, day: float) -> None:
    clock.at(day)
    t.add_event(esc_id, "reopen", "reopened", {})
    t.set_state(esc_id, EscalationState.WAITING_PROVIDER, "reopened")


def fill(t: Tracker, clock: SetClock) -> dict[str, str]:
    """The story, day 0 to day 60 (now). aws: first replies after 1, 2, 3, 4 and 10 hours; resolutions after 1,
    2 and 7 days (A3 resolved at day 9, reopened, resolved again at day 12); open cases 0.5, 3, 10 and 40 days
    old; one draft never filed. gpu001 mlx5_3/1 escalated again (A2) one day after A1's resolution. gcp:
    switch leaf-3 escalated again 34 days after its resolution. static: one case to the desk its filing named
    (jira), one whose filing named none."""
    ids = {}
    ids["A1"] = _file(t, clock, 0)
    _reply(t, clock, ids["A1"], 1 / 24)
    _resolve(t, clock, ids["A1"], 1)
    ids["A2"] = _file(t, clock, 2)
    _reply(t, clock, ids["A2"], 2 + 2 / 24)
    _resolve(t, clock, ids["A2"], 4)
    ids["A3"] = _file(t, clock, 5, hosts=("gpu002",), components=[("gpu002", "gpu:3")])
    _reply(t, clock, ids["A3"], 5 + 3 / 24)
    _resolve(t, clock, ids["A3"], 9)
    _reopen(t, clock, ids["A3"], 10)
    _resolve(t, clock, ids["A3"], 12)
    ids["S1"] = _file(t, clock, 3, provider="gcp", hosts=("gpu010", "gpu011"), components=[(None, "switch:leaf-3")])
    _resolve(t, clock, ids["S1"], 6)
    ids["T1"] = _file(t, clock, 10, provider="static", hosts=("gpu020",), components=[("gpu020", "netdev:eth2")],
                      desk="jira")
    _reply(t, clock, ids["T1"], 10 + 0.5 / 24)
    _resolve(t, clock, ids["T1"], 11)
    ids["T2"] = _file(t, clock, 12, provider="static", hosts=("gpu021",), components=[("gpu021", "netdev:eth3")])
    ids["A8"] = _file(t, clock, 20, hosts=("gpu003",), components=[("gpu003", "rdma:mlx5_0/1")])
    ids["S2"] = _file(t, clock, 40, provider="gcp", hosts=("gpu010", "gpu011"), components=[(None, "switch:leaf-3")])
    ids["A4"] = _file(t, clock, 50, hosts=("gpu004",), components=[("gpu004", "rdma:mlx5_1/1")])
    _reply(t, clock, ids["A4"], 50 + 4 / 24)
    ids["A6"] = _file(t, clock, 57, hosts=("gpu006",), components=[("gpu006", "rdma:mlx5_2/1")])
    ids["A7"] = _file(t, clock, 58, hosts=("gpu007",), components=[("gpu007", "gpu:0")], filed=False)
    ids["A5"] = _file(t, clock, 59.5, hosts=("gpu005",), components=[("gpu005", "rdma:mlx5_4/1")])
    _reply(t, clock, ids["A5"], 59.5 + 10 / 24)
    clock.at(60)
    return ids


@pytest.fixture
def story(db_url: str) -> Iterator[tuple[Tracker, SetClock, dict[str, str]]]:
    clock = SetClock(datetime(2024, 5, 1, tzinfo=UTC))
    with Tracker(db_url, now=clock) as t:
        ids = fill(t, clock)
        yield t, clock, ids


def _group(groups, provider, desk=None):
    return next(g for g in groups if g.provider == provider and g.desk == desk)


def test_quantile_is_linear_between_ranks():
    assert quantile([1, 2, 3, 10], 0.5) == 2.5
    assert quantile([1, 2, 3, 10], 0.9) == pytest.approx(7.9)
    assert quantile([5], 0.9) == 5 and quantile([], 0.5) is None


def test_reply_and_resolve_times_are_exact(story):
    t, clock, _ = story
    record = track_record(load_cases(t), now=clock(), repeat_days=30)
    aws = _group(record.providers, "aws")
    assert (aws.escalations, aws.cases) == (8, 7)  # A7 was never filed: no case, in no time below
    assert aws.first_reply.count == 5
    assert aws.first_reply.median_s == pytest.approx(3 * HOUR)
    assert aws.first_reply.p90_s == pytest.approx(7.6 * HOUR)  # 4h + 0.6 x (10h - 4h)
    assert aws.resolve.count == 3
    assert aws.resolve.median_s == pytest.approx(2 * DAY)
    assert aws.resolve.p90_s == pytest.approx(6 * DAY)  # A3 counts to its last resolution: 7 days
    assert aws.awaiting_reply == 2  # A6, A8


def test_open_cases_by_age_and_reopen_rate(story):
    t, clock, _ = story
    aws = _group(track_record(load_cases(t), now=clock()).providers, "aws")
    assert aws.open_by_age == {"<1d": 1, "1-7d": 1, "7-30d": 1, ">30d": 1}
    assert (aws.reopened, aws.resolved) == (1, 3)
    assert aws.reopen_ratio == pytest.approx(1 / 3)
    gcp = _group(track_record(load_cases(t), now=clock()).providers, "gcp")
    assert gcp.reopen_ratio == 0 and gcp.first_reply.median_s is None


def test_since_filters_by_creation_time(story):
    t, clock, _ = story
    record = track_record(load_cases(t), now=clock(), since=timedelta(days=30))
    aws = _group(record.providers, "aws")
    assert (aws.escalations, aws.cases) == (4, 3)  # A4, A5, A6 and the draft A7
    assert aws.open_by_age == {"<1d": 1, "1-7d": 1, "7-30d": 1, ">30d": 0}
    assert aws.resolve.count == 0 and aws.reopen_ratio is None
    assert record.repeat_offenders == []  # A1-A2 and S1-S2 ended before the window


def test_desks_from_the_filing_else_the_configuration(story):
    t, clock, ids = story
    record = track_record(load_cases(t, desks={"static": "zendesk"}), now=clock())
    jira, zendesk = _group(record.desks, "static", "jira"), _group(record.desks, "static", "zendesk")
    assert (jira.cases, jira.desk_sources) == (1, ("filing",))
    assert jira.first_reply.median_s == pytest.approx(0.5 * HOUR) and jira.resolve.median_s == pytest.approx(DAY)
    assert (zendesk.cases, zendesk.desk_sources) == (1, ("config",))
    assert _group(record.providers, "static").cases == 2
    assert _group(record.desks, "aws", "aws").cases == 7  # a cloud's desk is its own
    assert case_times(t.get(ids["T2"])).desk == "outbox"  # no configuration: the default desk


def test_repeat_offenders_within_and_outside_the_window(story):
    t, clock, ids = story
    cases = load_cases(t)
    found = track_record(cases, now=clock(), repeat_days=30).repeat_offenders
    assert [(r.provider, r.key, r.kind, [e.id for e in r.escalations]) for r in found] == [
        ("aws", "gpu001/rdma:mlx5_3/1", "port", [ids["A1"], ids["A2"]]),
    ]  # the host gpu001 repeats only as that port; leaf-3 came back 34 days after its resolution
    wider = track_record(cases, now=clock(), repeat_days=40).repeat_offenders
    switch = next(r for r in wider if r.kind == "switch")
    assert (switch.provider, switch.key, [e.id for e in switch.escalations]) == (
        "gcp", "switch:leaf-3", [ids["S1"], ids["S2"]])
    assert switch.host_component == ("", "switch:leaf-3")


def test_a_host_repeats_on_another_port(db_url):
    clock = SetClock(datetime(2024, 5, 1, tzinfo=UTC))
    with Tracker(db_url, now=clock) as t:
        first = _file(t, clock, 0)
        _resolve(t, clock, first, 1)
        second = _file(t, clock, 5, components=[("gpu001", "rdma:mlx5_5/1")])
        found = track_record(load_cases(t), now=clock.at(6)).repeat_offenders
    assert [(r.key, r.kind, [e.id for e in r.escalations]) for r in found] == [("gpu001", "host", [first, second])]


def test_metrics_say_the_same_numbers(story, tmp_path: Path):
    t, clock, _ = story
    record = track_record(load_cases(t), now=clock(), repeat_days=30)
    text = render(registry_of(FamiliesCollector(families(track_record_series(record)))))
    assert 'fabricase_provider_first_reply_seconds{desk="aws",provider="aws",quantile="0.5"} 10800.0' in text
    assert 'fabricase_provider_first_reply_seconds{desk="aws",provider="aws",quantile="0.9"} 27360.0' in text
    assert 'fabricase_provider_resolve_seconds{desk="aws",provider="aws",quantile="0.9"} 518400.0' in text
    assert 'fabricase_provider_open_cases{age=">30d",desk="aws",provider="aws"} 1.0' in text
    assert 'fabricase_provider_reopen_ratio{desk="aws",provider="aws"} 0.3333333333333333' in text
    assert 'fabricase_repeat_offender{component="rdma:mlx5_3/1",host="gpu001",provider="aws"} 2.0' in text
    assert 'first_reply_seconds{desk="gcp"' not in text  # no reply from gcp: no series, never 0
    # `export`'s tracker series: the open escalations and the last 90 days' track records together
    exported = render(registry_of(FamiliesCollector(families(tracker_series(t, clock())))))
    assert 'fabricase_escalations_open{provider="aws",state="filed"}' in exported
    assert 'fabricase_provider_cases{desk="aws",provider="aws"} 7.0' in exported


# -- the command ----------------------------------------------------------------------------------------------


@pytest.fixture
def home_story(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The story in FABRICASE_HOME's tracker, ending now (the command reads the real clock)."""
    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("FABRICASE_DB", raising=False)
    now = datetime.now(UTC).replace(microsecond=0)
    clock = SetClock(now - timedelta(days=60))
    with Tracker.open(resolve_paths(), now=clock) as t:
        return fill(t, clock)


def _stats(*args: str, columns: int = 80):
    result = CliRunner().invoke(cli, ["providers", "stats", *args], env={"COLUMNS": str(columns)},
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_cli_prints_the_track_records_in_80_columns(home_story):
    out = _stats().stdout
    assert max(len(line) for line in out.splitlines()) <= 80, out
    lines = out.splitlines()
    aws = next(line for line in lines if line.split() and line.split()[0] == "aws")
    assert aws.split() == ["aws", "7", "3h", "/", "7.6h", "2d", "/", "6d", "1", "1", "1", "1", "1/3", "33%"]
    assert any(line.split()[:2] == ["jira", "desk"] for line in lines if line.split())
    assert "Repeat offenders (escalated again within 30 days of a resolution):" in out
    assert "aws gpu001 rdma:mlx5_3/1: 2 escalations since" in out and f"{home_story['A1']}, {home_story['A2']}" in out


def test_cli_json_and_options(home_story):
    data = json.loads(_stats("--json", "--repeat-days", "40").stdout)
    aws = next(g for g in data["providers"] if g["provider"] == "aws")
    assert aws["first_reply"] == {"count": 5, "median_s": pytest.approx(3 * HOUR), "p90_s": pytest.approx(7.6 * HOUR)}
    assert aws["open_by_age"] == {"<1d": 1, "1-7d": 1, "7-30d": 1, ">30d": 1}
    assert {r["key"] for r in data["repeat_offenders"]} == {"gpu001/rdma:mlx5_3/1", "switch:leaf-3"}
    recent = json.loads(_stats("--json", "--since", "30d").stdout)
    assert next(g for g in recent["providers"] if g["provider"] == "aws")["cases"] == 3
    bad = CliRunner().invoke(cli, ["providers", "stats", "--since", "soon"])
    assert bad.exit_code == 2 and "--since" in bad.output


def test_cli_with_no_escalations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "empty"))
    monkeypatch.delenv("FABRICASE_DB", raising=False)
    assert "No escalations" in _stats().stdout


# -- the ticket -----------------------------------------------------------------------------------------------


def test_a_repeat_offender_ticket_names_the_earlier_escalations(db_url, monkeypatch, tmp_path):
    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    clock = SetClock(datetime(2026, 10, 2, 9, tzinfo=UTC))
    with Tracker(db_url, now=clock) as t:
        first = _file(t, clock, 0)
        _resolve(t, clock, first, 8)
        second = _file(t, clock, 18)
        _resolve(t, clock, second, 23)
        other = _file(t, clock, 1, hosts=("gpu009",), components=[("gpu009", "gpu:1")])
        _resolve(t, clock, other, 2)
        now = clock.at(34)
        new = _file(t, clock, 34, filed=False)
        history = repeat_history(t, provider="aws", hosts=["gpu001", "gpu009"], components=[PORT], now=now, days=30,
                                 exclude=new)
        too_late = repeat_history(t, provider="aws", hosts=["gpu001"], components=[PORT], now=now, days=5,
                                  exclude=new)
        elsewhere = repeat_history(t, provider="gcp", hosts=["gpu001"], components=[PORT], now=now, exclude=new)
    assert too_late == [] and elsewhere == []
    # the host gpu001 and its port repeat; gpu009 has no component in this escalation and so is not counted
    assert [(h.key, [e.id for e in h.earlier]) for h in history] == [
        ("gpu001", [first, second]), ("gpu001/rdma:mlx5_3/1", [first, second])]
    line = history_line(history[1])
    assert line == (f"third escalation for this port since 2026-10-02: {first} (case case-{first}), "
                    f"{second} (case case-{second})")
    finding = Finding(kind="link-flap", severity=Severity.CRITICAL, host="gpu001", component="rdma:mlx5_3/1",
                      summary="mlx5_3 port 1 went down and up 12 times in 30 s",
                      evidence=[Evidence("carrier_changes", 12, "changes", baseline=0)], confidence=0.99)
    draft = render_draft(provider="aws", symptom="busbw fell", severity=Severity.CRITICAL, findings=[finding],
                         hosts=[{"host": "gpu001", "status": "ok", "reason": None, "identity": {}}], placements=[],
                         bundle_id=None, capture_created_at=iso(now), escalation_id=new,
                         history=history_lines(history))
    section = draft.body.split("Suspect 1 of 1")[1].split("\n#")[0]
    joined = " ".join(section.split())
    assert f"History: third escalation for this port since 2026-10-02: {first} (case case-{first})," in joined
    plain = render_draft(provider="aws", symptom="busbw fell", severity=Severity.CRITICAL, findings=[finding],
                         hosts=[{"host": "gpu001", "status": "ok", "reason": None, "identity": {}}], placements=[],
                         bundle_id=None, capture_created_at=iso(now), escalation_id=new)
    assert "History" not in plain.body and "escalation for this" not in plain.body


def test_a_symptom_ticket_puts_its_history_in_a_section(db_url, monkeypatch, tmp_path):
    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    clock = SetClock(datetime(2026, 10, 2, 9, tzinfo=UTC))
    with Tracker(db_url, now=clock) as t:
        first = _file(t, clock, 0, components=())
        _resolve(t, clock, first, 3)
        history = repeat_history(t, provider=None, hosts=["gpu001"], components=[], now=clock.at(10))
    draft = render_draft(provider="static", symptom="busbw fell", severity=Severity.MAJOR, findings=[],
                         hosts=[{"host": "gpu001", "status": "ok", "reason": None, "identity": {}}], placements=[],
                         bundle_id=None, capture_created_at=iso(clock()), escalation_id=None,
                         history=history_lines(history))
    assert "History" in draft.body
    assert f"gpu001: second escalation for this host since 2026-10-02: {first} (case case-{first})" in " ".join(
        draft.body.split())



def test_make_draft_says_the_history_in_the_suspects_section(db_url, tmp_path, monkeypatch):
    """Through escalate.make_draft, as flow._draft calls it: a 16-host capture with one faulty port, escalated
    before and resolved 5 days ago."""
    import sys

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    import fleetgen

    from fabricase.capturedir import load_capture
    from fabricase.escalate import make_draft
    from fabricase.pipeline import diagnose_capture
    from fabricase.placements import inventory_placements, topology_of

    monkeypatch.setenv("FABRICASE_HOME", str(tmp_path / "home"))
    folder = tmp_path / "capture"
    fleetgen.build(next(s for s in fleetgen.scenarios(16, 1, 0) if s.kind == "symbol-errors"), folder, seed=3)
    capture = load_capture(folder)
    placements = inventory_placements(folder / "inventory.json", [h.host for h in capture.hosts])
    analysis = diagnose_capture(capture, topology_of(placements), placements)
    [suspect] = analysis.diagnosis.suspects
    components = [(suspect.host, suspect.components[0])]
    clock = SetClock(datetime(2026, 10, 2, 9, tzinfo=UTC))
    with Tracker(db_url, now=clock) as t:
        earlier = _file(t, clock, 0, hosts=[suspect.host], components=components)
        _resolve(t, clock, earlier, 3)
        history = repeat_history(t, provider="aws", hosts=[suspect.host], components=components, now=clock.at(8))
    draft = make_draft(capture, analysis.findings, provider="aws", symptom="busbw fell", severity=Severity.MAJOR,
                       placements=placements, bundle_id=None, escalation_id="FC-2", diagnosis=analysis.diagnosis,
                       history=history_lines(history))
    section = " ".join(draft.body.split("Suspect 1 of 1")[1].split("\n#")[0].split())
    assert f"History: second escalation for this port since 2026-10-02: {earlier} (case case-{earlier})" in section
