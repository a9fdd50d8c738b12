"""What the tracker's multi-process tests run in each child process (spawned: nothing shared but the files)."""

from __future__ import annotations

import os
from pathlib import Path

from fabricase import filing
from fabricase.providers.base import Provider
from fabricase.providers.static import StaticProvider
from fabricase.tracker import Tracker
from tracker.deskprovider import DeskProvider, draft_for, paths_at

CRASHED = 77  # the exit status of a child that crashed on purpose


def provider_for(name: str, home: Path | str) -> Provider:
    return {"desk": DeskProvider, "static": StaticProvider}[name](paths_at(home))


class CrashingTracker(Tracker):
    """A tracker that dies (os._exit: no cleanup, no rollback handler, like a kill -9) at `crash_at`."""

    crash_at = ""

    def _crash(self, step: str) -> None:
        if step == self.crash_at:
            os._exit(CRASHED)

    def add_event(self, esc_id, kind, detail, data=None):
        if kind == "filing":
            self._crash("before-intent")
        event = super().add_event(esc_id, kind, detail, data)
        if kind == "filing":
            self._crash("after-intent")
        return event

    def claim(self, esc_id, kind, detail, data, busy):
        if kind == "filing":
            self._crash("before-intent")
        esc = super().claim(esc_id, kind, detail, data, busy)
        if kind == "filing":
            self._crash("after-intent")
        return esc

    def mark_filed(self, esc_id, **fields):
        self._crash("after-provider")
        esc = super().mark_filed(esc_id, **fields)
        self._crash("after-mark-filed")
        return esc


def file_and_crash(url: str, home: str, provider: str, esc_id: str, step: str, bundle: str) -> None:
    """File `esc_id`, dying at `step` (one of the tracker's steps, or "desk-created" inside the desk)."""

    def crash_inside_desk(at: str) -> None:
        if at == step:
            os._exit(CRASHED)

    DeskProvider.hook = crash_inside_desk
    with CrashingTracker(url) as tracker:
        tracker.crash_at = step
        filing.file_escalation(tracker, provider_for(provider, home), esc_id, draft_for(provider), Path(bundle))


def busy_writer(url: str, home: str, writer: int, shared: str, opens: int, start) -> None:
    """One of the concurrent writers: open (create and file) `opens` escalations, attach a file to and
    comment on the shared one, and sync everything, twice."""
    provider = provider_for("desk", home)
    start.wait()
    with Tracker(url) as tracker:
        for n in range(opens):
            esc = tracker.create(provider="desk", title=f"writer {writer} case {n}", symptom="s", severity="minor",
                                 hosts=[f"gpu{writer:03d}"], components=[(f"gpu{writer:03d}", f"netdev:eth{n}")],
                                 instances={f"gpu{writer:03d}": f"i-{writer:04d}"})
            filing.file_escalation(tracker, provider, esc.id, draft_for(title=esc.title), None)
            filing.sync(tracker, lambda _name: provider)
        evidence = Path(home) / f"evidence-{writer}.txt"
        evidence.write_text(f"counters from writer {writer}\n")
        filing.attach(tracker, provider, shared, [evidence], "")
        filing.comment(tracker, provider, shared, f"writer {writer}: still seeing symbol errors")
        for _ in range(2):
            results = filing.sync(tracker, lambda _name: provider)
            errors = [r for r in results if r.outcome == "error"]
            assert not errors, errors
