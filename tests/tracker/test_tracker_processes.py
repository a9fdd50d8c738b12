"""Eight processes opening, attaching, commenting and syncing at once on one database (SQLite file and
PostgreSQL): every write lands exactly once, and no "database is locked" reaches anyone."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from pathlib import Path

from fabricase import filing
from fabricase.tracker import Tracker
from tracker import workers
from tracker.deskprovider import Desk, DeskProvider, draft_for, paths_at

PROCESSES = 8
OPENS = 3
DESK_COMMENTS = ["we see CRC errors on the leaf port", "please run ib_write_bw between gpu001 and gpu002",
                 "replaced the cable", "can you confirm the errors stopped?"]  # fmt: skip


def test_eight_processes_at_once_lose_nothing_and_repeat_nothing(any_db_url, tmp_path: Path):
    home = tmp_path / "home"
    provider = DeskProvider(paths_at(home))
    desk = Desk(home / "desk")
    with Tracker(any_db_url) as tracker:
        shared = tracker.create(provider="desk", title="leaf-3 CRC errors", symptom="s", severity="major",
                                hosts=["gpu001"], components=[(None, "switch:leaf-3")]).id
        case_id = filing.file_escalation(tracker, provider, shared, draft_for(), None).provider_case_id
    desk.set_status(case_id, "pending-customer-action")
    for text in DESK_COMMENTS:
        desk.add_comment(case_id, text)

    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(PROCESSES)
    children = [ctx.Process(target=workers.busy_writer, args=(any_db_url, str(home), n, shared, OPENS, start))
                for n in range(PROCESSES)]  # fmt: skip
    for child in children:
        child.start()
    for child in children:
        child.join()
    assert [c.exitcode for c in children] == [0] * PROCESSES  # a "database is locked" would have failed one

    with Tracker(any_db_url) as tracker:
        everything = tracker.list(state="all")
        shared_esc = tracker.get(shared)
        opened = [tracker.get(e.id) for e in everything if e.id != shared]
    total = 1 + PROCESSES * OPENS
    assert sorted(e.id for e in everything) == sorted(f"FC-{n}" for n in range(1, total + 1))
    # One case per escalation at the desk, each recorded on its own escalation.
    assert len(desk.cases()) == total
    assert all(len(desk.cases_for(e.id)) == 1 and desk.cases_for(e.id)[0]["case_id"] == e.provider_case_id
               for e in everything)  # fmt: skip

    kinds = Counter(e.kind for e in shared_esc.events)
    assert kinds["attach"] == PROCESSES
    comments = [e for e in shared_esc.events if e.kind == "comment"]
    from_desk = [e.detail for e in comments if e.data["from_provider"]]
    ours = [e.detail for e in comments if not e.data["from_provider"]]
    assert from_desk == DESK_COMMENTS  # synced by 16 syncs at once, recorded once each, in the desk's order
    assert sorted(ours) == sorted(f"writer {n}: still seeing symbol errors" for n in range(PROCESSES))
    assert len(desk.attachments(case_id)) == PROCESSES
    # Every comment at the desk (ours included) is matched to exactly one event.
    assert sum(1 for e in comments if e.data.get("desk_at") or e.data.get("author") == "us") == len(comments)
    assert len(desk.comments(case_id)) == len(comments)
    # One state change, whoever synced first: filed -> waiting-us, and the provider's last reply kept.
    states = [e for e in shared_esc.events if e.kind == "state"]
    assert [(e.data["from"], e.data["to"]) for e in states] == [("filed", "waiting-us")]
    assert shared_esc.state == "waiting-us"

    # The escalations the writers opened: created, filing, filed and nothing more (their desk status never
    # changed, so the many syncs recorded nothing on them).
    assert all([e.kind for e in esc.events] == ["created", "filing", "filed"] for esc in opened)
    assert all(esc.state == "filed" for esc in opened)


def test_syncs_at_once_record_the_last_reply_once(any_db_url, tmp_path: Path):
    home = tmp_path / "home"
    provider = DeskProvider(paths_at(home))
    with Tracker(any_db_url) as tracker:
        esc_id = tracker.create(provider="desk", title="t", symptom="s", severity="minor", hosts=["gpu009"],
                                components=[]).id
        case_id = filing.file_escalation(tracker, provider, esc_id, draft_for(), None).provider_case_id
    Desk(home / "desk").add_comment(case_id, "looking into it", at="2024-05-02T08:30:00.123456789Z")
    Desk(home / "desk").set_status(case_id, "work-in-progress")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(PROCESSES)
    children = [ctx.Process(target=workers.busy_writer, args=(any_db_url, str(home), 100 + n, esc_id, 0, start))
                for n in range(PROCESSES)]  # fmt: skip
    for child in children:
        child.start()
    for child in children:
        child.join()
    assert [c.exitcode for c in children] == [0] * PROCESSES
    with Tracker(any_db_url) as tracker:
        view = tracker.tracked(esc_id)
    assert view.last_reply_at == "2024-05-02T08:30:00Z"
    desk_comments = [e for e in view.escalation.events if e.kind == "comment" and e.data["from_provider"]]
    assert [(e.at, e.detail) for e in desk_comments] == [("2024-05-02T08:30:00Z", "looking into it")]
    assert [e.detail for e in view.escalation.events if e.kind == "state"] == [
        "filed -> waiting-provider: the desk says 'work-in-progress'"
    ]
