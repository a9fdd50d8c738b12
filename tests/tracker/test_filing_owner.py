"""Who holds an escalation being filed (filing.holder): a live attempt refuses a second one; a dead one (its pid
is gone, its token released in this process, or silent for LEASE on another host) lets a retry go on."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta

from fabricase import filing
from fabricase.models import Escalation, EscalationEvent, EscalationState, Severity

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _esc(owner: dict, *, at: datetime = NOW, kind: str = "filing", then: str | None = None) -> Escalation:
    events = [EscalationEvent(at=at.strftime("%Y-%m-%dT%H:%M:%SZ"), kind=kind, detail="", data={"owner": owner})]
    if then:
        events.append(EscalationEvent(at=events[0].at, kind=then, detail="", data={}))
    return Escalation(id="FC-1", provider="static", state=EscalationState.DRAFT, title="t", symptom="s",
                      severity=Severity.MAJOR, created_at=events[0].at, updated_at=events[0].at, events=events)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_live_process_on_this_host_holds_it_and_a_dead_one_does_not():
    here = socket.gethostname()
    assert "is being filed right now by pid" in filing.holder(_esc({"host": here, "pid": os.getppid()}), now=NOW)
    assert filing.holder(_esc({"host": here, "pid": _dead_pid()}), now=NOW) is None


def test_in_this_process_only_a_running_attempt_holds_it():
    with filing.attempt() as me:
        assert filing.holder(_esc(me), now=NOW) is not None
        assert filing.holder(_esc(me), exempt=me["token"], now=NOW) is None  # the attempt itself goes on
    assert filing.holder(_esc(me), now=NOW) is None  # crashed or done: released


def test_another_host_holds_it_for_the_lease_only():
    there = {"host": "not-" + socket.gethostname(), "pid": 1}
    assert filing.holder(_esc(there, at=NOW - timedelta(minutes=5)), now=NOW) is not None
    assert filing.holder(_esc(there, at=NOW - filing.LEASE - timedelta(seconds=1)), now=NOW) is None


def test_a_failed_or_finished_filing_holds_nothing():
    here = {"host": socket.gethostname(), "pid": os.getppid()}
    assert filing.holder(_esc(here, then="filing-failed"), now=NOW) is None
    assert filing.holder(_esc({}, kind="created"), now=NOW) is None  # written before owners were recorded
