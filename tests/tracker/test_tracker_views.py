"""The tracker's morning view: filters, who is waiting on whom, the provider's last reply, stale marking,
instance ids per host, synced comments, and the version 3 migration."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from fabricase.errors import TrackerError
from fabricase.models import EscalationState
from fabricase.tracker import Tracker, parse_age, schema
from fabricase.tracker.records import desk_time, is_stale, waiting_on


@dataclass(frozen=True)
class Said:
    at: str
    author: str
    body: str
    from_provider: bool = True


def _create(tracker, provider="aws", hosts=("gpu001",), instances=None, title="t"):
    return tracker.create(provider=provider, title=title, symptom="s", severity="minor", hosts=list(hosts),
                          components=[], instances=instances)


def _file(tracker, esc_id, case="case-1"):
    return tracker.mark_filed(esc_id, provider_case_id=case, raw_status="opened", state="filed", ticket_path=None,
                              bundle_id=None, bundle_path=None)


@pytest.mark.parametrize(("text", "seconds"), [("3d", 259200), ("12h", 43200), ("90m", 5400), ("2w", 1209600),
                                               ("45s", 45), (" 1.5D ", 129600)])
def test_ages(text, seconds):
    assert parse_age(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "3", "d", "3x", "-3d", "3 days"])
def test_not_ages(text):
    with pytest.raises(ValueError, match="not an age"):
        parse_age(text)


@pytest.mark.parametrize(("desk", "ours"), [
    ("2024-05-02T08:30:00.123456789Z", "2024-05-02T08:30:00Z"),  # GCP: nanoseconds
    ("2024-05-02T08:30:00.123Z", "2024-05-02T08:30:00Z"),  # AWS: milliseconds
    ("2024-05-02T10:30:00+02:00", "2024-05-02T08:30:00Z"),  # an offset
    ("2024-05-02T08:30:00", "2024-05-02T08:30:00Z"),  # naive: taken as UTC
    ("Thursday", None), (None, None),
])  # fmt: skip
def test_desk_times_in_the_trackers_form(desk, ours):
    assert desk_time(desk) == ours


def test_who_is_waiting_on_whom():
    assert {s.value: waiting_on(s) for s in EscalationState} == {
        "draft": "us", "filed": "provider", "waiting-provider": "provider", "waiting-us": "us",
        "resolved": None, "closed": None,
    }  # fmt: skip


def test_stale_means_waiting_on_the_provider_with_no_reply_for_long():
    now = datetime(2024, 5, 10, tzinfo=UTC)
    three = timedelta(days=3)
    assert is_stale(EscalationState.WAITING_PROVIDER, "2024-05-07T00:00:00Z", now, three)
    assert not is_stale(EscalationState.WAITING_PROVIDER, "2024-05-07T00:00:01Z", now, three)
    assert not is_stale(EscalationState.WAITING_US, "2024-05-01T00:00:00Z", now, three)  # the ball is ours
    assert not is_stale(EscalationState.RESOLVED, "2024-05-01T00:00:00Z", now, three)
    assert not is_stale(EscalationState.FILED, None, now, three)


def test_instances_are_kept_per_host_and_found_by_list(tracker):
    esc = _create(tracker, hosts=["gpu001", "gpu002"], instances={"gpu002": "i-0abc", "gpu003": "i-0def"})
    assert esc.hosts == ["gpu001", "gpu002", "gpu003"]
    assert tracker.tracked(esc.id).instances == {"gpu002": "i-0abc", "gpu003": "i-0def"}
    assert [e.id for e in tracker.list(host="i-0def")] == [esc.id]
    assert [e.id for e in tracker.list(host="gpu001")] == [esc.id]
    assert tracker.list(host="gpu009") == []


def test_overview_groups_by_provider_oldest_first_with_filters(tracker, clock):
    a1 = _create(tracker, "gcp", hosts=["gpu001"])
    b1 = _create(tracker, "aws", hosts=["gpu002"])
    clock.moment += timedelta(days=2)
    a2 = _create(tracker, "gcp", hosts=["gpu003"])
    b2 = _create(tracker, "aws", hosts=["gpu001"])
    tracker.resolve(b2.id)
    assert [t.escalation.id for t in tracker.overview()] == [b1.id, a1.id, a2.id]
    assert [t.escalation.id for t in tracker.overview(state="all", host="gpu001")] == [b2.id, a1.id]
    assert [t.escalation.id for t in tracker.overview(older_than=timedelta(days=1))] == [b1.id, a1.id]
    assert [t.escalation.id for t in tracker.overview(provider="gcp", older_than=timedelta(hours=1))] == [a1.id]
    assert [t.waiting_on for t in tracker.overview()] == ["us", "us", "us"]  # drafts: ours to file


def test_stale_marking_follows_the_last_reply(tracker, clock):
    esc = _create(tracker)
    _file(tracker, esc.id)
    tracker.set_state(esc.id, "waiting-provider")
    clock.moment += timedelta(days=2)
    assert not tracker.tracked(esc.id).stale
    assert tracker.tracked(esc.id, stale_after=timedelta(days=1)).stale
    clock.moment += timedelta(days=2)
    assert tracker.tracked(esc.id).stale
    reply = Said("2024-05-05T00:00:00Z", "desk", "still looking")
    tracker.record_sync(esc.id, raw_status="work-in-progress", state="waiting-provider", comments=[reply])
    view = tracker.tracked(esc.id)
    assert view.last_reply_at == "2024-05-05T00:00:00Z" and not view.stale
    assert view.to_dict()["stale"] is False and view.to_dict()["waiting_on"] == "provider"


def test_record_sync_dedupes_comments_and_keeps_the_latest_reply(tracker):
    esc = _create(tracker)
    _file(tracker, esc.id)
    first = [Said("2024-05-02T08:00:00Z", "eng", "please reseat"), Said("2024-05-02T07:00:00Z", "eng", "hello")]
    change = tracker.record_sync(esc.id, raw_status="pending", state="waiting-us", comments=first)
    assert (change.state_from, change.state_to, change.new_comments) == ("filed", "waiting-us", 2)
    assert change.last_reply_at == "2024-05-02T08:00:00Z"  # the latest, not the last listed
    tracker.add_event(esc.id, "comment", "reseated, errors persist", {"from_provider": False})
    ours = Said("2024-05-02T09:00:00.2Z", "customer", "reseated, errors persist\n", from_provider=False)
    again = tracker.record_sync(esc.id, raw_status="pending", state="waiting-us", comments=[*first, ours])
    assert (again.changed, again.new_comments) == (False, 0)
    comments = [e for e in tracker.get(esc.id).events if e.kind == "comment"]
    assert [(c.at, c.detail) for c in comments] == [
        ("2024-05-02T08:00:00Z", "please reseat"), ("2024-05-02T07:00:00Z", "hello"),
        ("2024-05-01T12:03:00Z", "reseated, errors persist"),
    ]
    # The same text said again at another time is a new comment.
    later = Said("2024-05-03T08:00:00Z", "eng", "please reseat")
    assert tracker.record_sync(esc.id, raw_status="pending", state="waiting-us", comments=[later]).new_comments == 1


def test_record_sync_needs_a_known_escalation(tracker):
    with pytest.raises(TrackerError, match="no such escalation"):
        tracker.record_sync("FC-7", raw_status="x", state="filed", comments=[])


def test_a_version_2_database_gains_the_sync_columns_and_keeps_its_filings(db_url, db_path, monkeypatch):
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:2])
    Tracker(db_url).close()
    monkeypatch.undo()
    with sqlite3.connect(db_path) as conn:  # rows as version 2 code wrote them
        for seq, state in ((1, "filed"), (2, "draft")):
            conn.execute("INSERT INTO escalations (id, seq, provider, state, title, symptom, severity, created_at, "
                         f"updated_at, provider_case_id) VALUES ('FC-{seq}', {seq}, 'aws', '{state}', 't', 's', "
                         f"'minor', '2024-05-01T12:00:00Z', '2024-05-01T12:00:00Z', "
                         f"{'NULL' if state == 'draft' else repr('case-1')})")
        conn.execute("INSERT INTO escalation_hosts VALUES ('FC-1', 'gpu001', 'i-0abc')")
        conn.execute("INSERT INTO events (escalation_id, at, kind, detail) VALUES "
                     "('FC-1', '2024-05-01T12:05:00Z', 'filed', 'filed as case-1')")
    with Tracker(db_url) as tracker:
        one, two = tracker.tracked("FC-1"), tracker.tracked("FC-2")
        assert one.filed_at == "2024-05-01T12:05:00Z" and two.filed_at is None
        assert one.instances == {"gpu001": "i-0abc"} and one.last_reply_at is None
        assert [e.id for e in tracker.list(host="i-0abc")] == ["FC-1"]
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (4,)
