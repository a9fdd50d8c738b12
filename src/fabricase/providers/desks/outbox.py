"""The outbox: each filing writes DATA/outbox/<filing key>/ (FC-1.<tracker id>) with ticket.md, summary.md,
case.json and a copy of the bundle, for an engineer to send by hand (mail, a portal, a desk without an API). The
default desk."""

from __future__ import annotations

import json
from datetime import UTC
from pathlib import Path

from fabricase.atomicfile import copy_atomic as _copy_atomic
from fabricase.atomicfile import replace_bytes
from fabricase.bundler.limits import DeskLimits
from fabricase.errors import ProviderError
from fabricase.models import EscalationState, TicketDraft
from fabricase.providers.base import CheckResult, Feature, FilingResult
from fabricase.providers.desks.base import Desk

__all__ = [
    "CASE_PREFIX",
    "OUTBOX_STATUS",
    "RESOLVED_MARKER",
    "OutboxDesk",
    "write_atomic",
]

CASE_PREFIX = "outbox-"
OUTBOX_STATUS = "written-to-outbox"
RESOLVED_MARKER = "resolved"
COMMENTS = "comments.md"


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write via a temporary file, so that an interrupted filing never leaves half a ticket."""
    replace_bytes(path, data.encode("utf-8") if isinstance(data, str) else data)


def copy_atomic(source: Path, target: Path) -> None:
    _copy_atomic(source, target)


class OutboxDesk(Desk):
    name = "outbox"
    unsupported = {Feature.SYNC: "outbox cases are updated by hand"}
    # A folder: nothing to fit. An engineer sends it on by hand, to a desk of their choosing; its severity is
    # fabricase's own scale, its ticket the generic one.
    limits = DeskLimits("outbox", body_max_chars=None, attachment_max_bytes=None)

    @property
    def where(self) -> str:
        return "static"

    def _stamp(self) -> str:
        return self.ctx.now().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _folder_of(self, case_id: str) -> Path:
        if not case_id.startswith(CASE_PREFIX):
            raise ProviderError(f"not an outbox case id (expected {CASE_PREFIX}<escalation>)", where=case_id)
        folder = self.case_folder(case_id.removeprefix(CASE_PREFIX))
        if not (folder / "case.json").is_file():
            raise ProviderError("no such outbox case", where=str(folder))
        return folder

    def _result(self, escalation_id: str) -> FilingResult:
        return FilingResult(case_id=f"{CASE_PREFIX}{escalation_id}", raw_status=OUTBOX_STATUS,
                            state=EscalationState.FILED, location=str(self.case_folder(escalation_id)))

    def find(self, escalation_id: str) -> FilingResult | None:
        return self._result(escalation_id) if (self.case_folder(escalation_id) / "case.json").is_file() else None

    def file(self, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> FilingResult:
        """Write the case. Filing again finds the same case: case.json, written last, marks a completed
        filing, and an interrupted one is completed."""
        folder = self.case_folder(escalation_id)
        case_file = folder / "case.json"
        try:
            if not case_file.is_file():
                if bundle_path is not None and not Path(bundle_path).is_file():
                    raise ProviderError("bundle file not found", where=str(bundle_path))
                folder.mkdir(parents=True, exist_ok=True)
                body = f"{draft.title}\n\n{draft.body}"
                write_atomic(folder / "ticket.md", body if body.endswith("\n") else body + "\n")
                write_atomic(folder / "summary.md", draft.summary or "")
                if bundle_path is not None:
                    copy_atomic(Path(bundle_path), folder / Path(bundle_path).name)
                case = {
                    "case_id": f"{CASE_PREFIX}{escalation_id}",
                    "escalation_id": escalation_id,
                    "title": draft.title,
                    "severity": str(draft.severity),
                    "hosts": list(draft.hosts),
                    "components": list(draft.components),
                    "bundle_id": draft.bundle_id,
                    "bundle_file": Path(bundle_path).name if bundle_path is not None else None,
                    "filed_at": self._stamp(),
                }
                write_atomic(case_file, json.dumps(case, indent=2, sort_keys=True) + "\n")
        except OSError as exc:
            raise ProviderError(f"cannot write to the outbox: {exc.strerror or exc}", where=str(folder)) from exc
        return self._result(escalation_id)

    def _append_note(self, folder: Path, heading: str, text: str) -> None:
        path = folder / COMMENTS
        before = path.read_text(encoding="utf-8") if path.is_file() else ""
        write_atomic(path, f"{before}## {self._stamp()} {heading}\n\n{text.rstrip()}\n\n")

    def _write(self, folder: Path, action) -> None:
        try:
            action()
        except OSError as exc:
            raise ProviderError(f"cannot write to the outbox: {exc.strerror or exc}", where=str(folder)) from exc

    def attach(self, case_id: str, files: list[Path], note: str) -> None:
        folder = self._folder_of(case_id)
        for f in map(Path, files):
            if not f.is_file():
                raise ProviderError("attachment not found", where=str(f))

        def act() -> None:
            for f in map(Path, files):
                copy_atomic(f, folder / f.name)
            self._append_note(folder, "attached " + ", ".join(Path(f).name for f in files), note)

        self._write(folder, act)

    def comment(self, case_id: str, text: str) -> None:
        folder = self._folder_of(case_id)
        self._write(folder, lambda: self._append_note(folder, "comment", text))

    def resolve(self, case_id: str, note: str | None) -> None:
        """Leave a `resolved` marker holding the note in the case's outbox folder."""
        folder = self._folder_of(case_id)
        self._write(folder, lambda: write_atomic(folder / RESOLVED_MARKER, f"{note}\n" if note else ""))

    def reopen(self, case_id: str, note: str) -> None:
        folder = self._folder_of(case_id)

        def act() -> None:
            (folder / RESOLVED_MARKER).unlink(missing_ok=True)
            self._append_note(folder, "reopened", note)

        self._write(folder, act)

    def check(self) -> list[CheckResult]:
        outbox = self.ctx.paths.outbox
        probe = outbox / ".fabricase-check"
        try:
            outbox.mkdir(parents=True, exist_ok=True)
            probe.write_text("")
            probe.unlink()
        except OSError as exc:
            return [CheckResult("outbox", False, f"{outbox}: {exc.strerror or exc}")]
        return [CheckResult("outbox", True, f"{outbox} is writable; cases are sent on by hand")]
