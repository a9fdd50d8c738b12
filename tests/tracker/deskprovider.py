"""A provider whose desk is a folder that several processes share: the tracker tests' support desk.

Each case is DESK/<case id>/ with case.json (subject holding the marker), status (the desk's raw status)
and comments/ (one JSON file per comment, named so that they sort oldest first). Tests drive the desk's
side with Desk; `DeskProvider.hook(step)` runs at the named steps so that a test can crash a filing there.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from fabricase.config import Paths
from fabricase.errors import ProviderError
from fabricase.models import EscalationState, Placement, Severity, TicketDraft
from fabricase.providers.base import CaseComment, CaseStatus, Feature, FilingResult, Provider, case_marker

# The desk's raw statuses and their normalized states (what a real provider documents in docs/providers/).
STATES = {
    "opened": EscalationState.FILED,
    "work-in-progress": EscalationState.WAITING_PROVIDER,
    "pending-customer-action": EscalationState.WAITING_US,
    "reopened": EscalationState.WAITING_PROVIDER,
    "resolved": EscalationState.RESOLVED,
    "closed": EscalationState.CLOSED,
}


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


@dataclass
class Desk:
    """The desk's own side, as its support engineers see it."""

    root: Path

    def cases(self) -> list[dict[str, Any]]:
        if not self.root.is_dir():
            return []
        found = [json.loads((d / "case.json").read_text()) for d in self.root.iterdir() if (d / "case.json").is_file()]
        return sorted(found, key=lambda c: c["case_id"])

    def cases_for(self, escalation_id: str) -> list[dict[str, Any]]:
        """The cases of a filing key ("FC-1.ab12cd34": its marker exactly), or of any tracker's FC-1 (a bare id)."""
        if "." in escalation_id:
            return [c for c in self.cases() if case_marker(escalation_id) in c["subject"]]
        return [c for c in self.cases()
                if case_marker(escalation_id) in c["subject"] or f"[fabricase {escalation_id}." in c["subject"]]

    def status(self, case_id: str) -> str:
        return (self.root / case_id / "status").read_text()

    def set_status(self, case_id: str, raw: str) -> None:
        _write(self.root / case_id / "status", raw)

    def add_comment(self, case_id: str, body: str, *, author: str = "desk engineer", from_provider: bool = True,
                    at: str | None = None) -> None:
        at = at or datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        folder = self.root / case_id / "comments"
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns():020d}-{uuid.uuid4().hex}.json"
        _write(folder / name, json.dumps({"at": at, "author": author, "body": body, "from_provider": from_provider}))

    def comments(self, case_id: str) -> list[dict[str, Any]]:
        folder = self.root / case_id / "comments"
        files = sorted(folder.glob("*.json")) if folder.is_dir() else []
        return [json.loads(f.read_text()) for f in files]

    def attachments(self, case_id: str) -> list[str]:
        folder = self.root / case_id / "attachments"
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


class DeskProvider(Provider):
    """Every feature but the faulty-host channel, against the shared desk folder under the data directory."""

    name = "desk"
    unsupported = {Feature.FAULTY_HOST_REPORT: "the test desk has no faulty-host channel"}
    hook: ClassVar[Callable[[str], None] | None] = None  # a test sets it to crash at a step

    def __init__(self, paths: Paths) -> None:
        super().__init__(paths)
        self.desk = Desk(paths.data / "desk")

    def _step(self, step: str) -> None:
        if DeskProvider.hook is not None:
            DeskProvider.hook(step)

    def _folder(self, case_id: str) -> Path:
        folder = self.desk.root / case_id
        if not (folder / "case.json").is_file():
            raise ProviderError("no such case", where=case_id)
        return folder

    def locate(self, hosts: list[dict[str, Any]]) -> list[Placement]:
        return [Placement(host=h["host"], provider=self.name) for h in hosts]

    def file_case(self, *, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> FilingResult:
        """A new case every call, as a real desk does: filing twice makes two cases."""
        case_id = f"case-{uuid.uuid4().hex[:12]}"
        folder = self.desk.root / case_id
        folder.mkdir(parents=True)
        _write(folder / "status", "opened")
        if bundle_path is not None:
            (folder / "attachments").mkdir()
            shutil.copyfile(bundle_path, folder / "attachments" / Path(bundle_path).name)
        subject = f"{case_marker(escalation_id)} {draft.title}"
        _write(folder / "case.json", json.dumps({"case_id": case_id, "subject": subject}))
        self._step("desk-created")
        return FilingResult(case_id, "opened", STATES["opened"], f"desk://{case_id}")

    def find_case(self, escalation_id: str) -> FilingResult | None:
        found = self.desk.cases_for(escalation_id)
        if not found:
            return None
        case_id = found[0]["case_id"]
        raw = self.desk.status(case_id)
        return FilingResult(case_id, raw, STATES[raw], f"desk://{case_id}")

    def attach(self, case_id: str, files: list[Path], note: str) -> None:
        folder = self._folder(case_id) / "attachments"
        folder.mkdir(exist_ok=True)
        for f in files:
            shutil.copyfile(f, folder / f"{uuid.uuid4().hex[:8]}-{Path(f).name}")
        if note:
            self.desk.add_comment(case_id, note, author="customer", from_provider=False)

    def comment(self, case_id: str, text: str) -> None:
        self._folder(case_id)
        self.desk.add_comment(case_id, text, author="customer", from_provider=False)

    def case_status(self, case_id: str) -> CaseStatus:
        self._folder(case_id)
        raw = self.desk.status(case_id)
        comments = tuple(CaseComment(c["at"], c["author"], c["body"], c["from_provider"])
                         for c in self.desk.comments(case_id))  # fmt: skip
        return CaseStatus(case_id, raw, STATES[raw], comments)

    def resolve_case(self, case_id: str, note: str | None) -> None:
        self._folder(case_id)
        self.desk.set_status(case_id, "resolved")

    def reopen_case(self, case_id: str, note: str) -> None:
        self._folder(case_id)
        self.desk.set_status(case_id, "reopened")


def draft_for(provider: str = "desk", title: str = "gpu001 mlx5_3 symbol errors") -> TicketDraft:
    return TicketDraft(provider=provider, title=title, body="mlx5_3 port 1: symbol errors rising",
                       severity=Severity.MAJOR, hosts=["gpu001"], components=["gpu001/rdma:mlx5_3/1"])


def paths_at(home: Path | str) -> Paths:
    return Paths(data=Path(home), config=Path(home))
