"""Azure support tickets (Microsoft.Support): the case desk of the Azure provider (azure.AzureProvider).

The ticket's name is chosen from the escalation id (and the bundle), so filing again after a crash finds the
same ticket instead of opening a second one. The bundle is uploaded first, into a file workspace of the same
name (5 MB a file, in chunks of 2.5 MB; a bigger bundle goes as verified parts), and the ticket is created
linked to it. Communications, status, close and reopen follow the ticket afterwards.
"""

from __future__ import annotations

import base64
import re
import tempfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fabricase.errors import FabricaseError, ProviderError
from fabricase.models import EscalationState, Severity, TicketDraft
from fabricase.providers.azure_locate import last_segment
from fabricase.providers.azure_sdk import AzureProfile
from fabricase.providers.azure_ticket import (
    FILE_MAX,
    communication_name,
    ticket_comment,
    ticket_name,
    ticket_state,
    upload_chunks,
    upload_name,
)
from fabricase.providers.base import CaseStatus, FilingResult, PlannedRequest, attachment_ref, case_marker
from fabricase.templates.severity import DeskSeverity, desk_severity

__all__ = ["SUPPORT", "TITLE_MAX", "AzureCases"]

TITLE_MAX = 200
SUPPORT = "Microsoft.Support"
_RESOURCE_ID = re.compile(r"/subscriptions/[^/\s]+/resourceGroups/[^/\s]+/providers/Microsoft\.Compute/"
                          r"virtualMachines/[A-Za-z0-9_.-]+", re.IGNORECASE)
_TICKET_PROBLEM_WORDS = ("gpu", "infiniband", "performance")  # classification picked when none is configured


class AzureCases:
    """Filing and following the Azure provider's support tickets. It builds on the provider's plumbing:
    profile, name, support, _now, _call and _get_or_none."""

    profile: AzureProfile
    name: str
    support: Any
    _now: Callable[[], datetime]
    _call: Callable[..., Any]
    _get_or_none: Callable[[str, Callable[[], Any]], Any]

    # --- filing --------------------------------------------------------------------------------------------

    def _service_and_problem(self) -> tuple[str, str]:
        """The service's and problem classification's ids (looked up by display name unless given as ids)."""
        want = self.profile.service
        if want.startswith("/providers/"):
            service_id = want
        else:
            services = self._call("GET services", lambda: list(self.support.services.list()))
            found = next((s for s in services if (s.display_name or "").lower() == want.lower()
                          or s.name == want), None)
            if found is None:
                raise ProviderError(f"no support service named {want!r}; set service in [providers.azure] to one "
                                    f"of: {', '.join(sorted(s.display_name or s.name for s in services)[:8])}",
                                    where=self.name)
            service_id = found.id
        want_pc = self.profile.problem_classification
        if want_pc and want_pc.startswith("/providers/"):
            return service_id, want_pc
        service_name = last_segment(service_id)
        classes = self._call("GET problemClassifications",
                             lambda: list(self.support.problem_classifications.list(service_name)))
        names = [(c, (c.display_name or "").lower()) for c in classes]
        words = (want_pc.lower(),) if want_pc else _TICKET_PROBLEM_WORDS
        for word in words:
            found = next((c for c, name in names if word in name), None)
            if found is not None:
                return service_id, found.id
        raise ProviderError(f"no problem classification of {self.profile.service!r} matches "
                            f"{' or '.join(repr(w) for w in words)}; set problem_classification in "
                            f"[providers.azure] to one of: {', '.join(sorted(n for _, n in names)[:8])}",
                            where=self.name)

    def _contact(self) -> Any:
        from azure.mgmt.support import models

        missing = self.profile.missing_contact()
        if missing:
            raise ProviderError(f"[providers.azure] contact needs {', '.join(missing)} (the ticket's contact "
                                "details; see docs/providers/azure.md)", where=self.name)
        c = self.profile.contact
        return models.ContactProfile(
            first_name=c["first_name"], last_name=c["last_name"], primary_email_address=c["email"],
            preferred_contact_method=c.get("method", "email"), preferred_time_zone=c["timezone"],
            country=c["country"], preferred_support_language=c.get("language", "en-us"),
            phone_number=c.get("phone") or None,
        )

    def desk_severity(self, severity: Severity | str) -> DeskSeverity:
        return desk_severity("azure", severity, max_level=self.profile.max_severity, plan=self.profile.support_plan,
                             overrides=self.profile.severity)

    def _details(self, name: str, escalation_id: str, draft: TicketDraft, service_id: str,
                 problem_id: str) -> Any:
        from azure.mgmt.support import models

        severity = self.desk_severity(draft.severity)
        marker = case_marker(escalation_id)
        title = f"{marker} {draft.title}"
        resource = _RESOURCE_ID.search(draft.body)
        return models.SupportTicketDetails(
            title=title if len(title) <= TITLE_MAX else title[: TITLE_MAX - 3] + "...",
            description=f"{draft.body.rstrip()}\n\n{marker}\n",
            service_id=service_id, problem_classification_id=problem_id, severity=severity.code,
            advanced_diagnostic_consent=self.profile.diagnostic_consent, contact_details=self._contact(),
            technical_ticket_details=models.TechnicalTicketDetails(resource_id=resource.group(0)) if resource else None,
            file_workspace_name=name,
        )

    def _attachments(self, files: Sequence[Path], out_dir: Path) -> list[tuple[str, Path]]:
        """(name at the desk, file) for each file; a file over 5 MB goes as verified bundle parts."""
        from fabricase.bundler.parts import split_bundle

        out: list[tuple[str, Path]] = []
        for path in map(Path, files):
            try:
                size = path.stat().st_size
            except OSError as exc:
                raise ProviderError(f"cannot read attachment: {exc.strerror or exc}", where=str(path)) from exc
            if size == 0:
                raise ProviderError("empty file: the desk takes 1 byte to 5 MB", where=str(path))
            if size > FILE_MAX:
                try:
                    parts = split_bundle(path, FILE_MAX, out_dir=out_dir)
                except FabricaseError as exc:
                    raise ProviderError(f"attachment too large ({size} bytes, the desk takes {FILE_MAX}) and not "
                                        f"a bundle that can be split: {exc.message}", where=str(path)) from exc
            else:
                parts = [path]
            out += [(upload_name(p.name), p) for p in parts]
        return out

    def _workspace(self, workspace: str) -> None:
        if self._get_or_none(f"GET fileWorkspaces/{workspace}",
                             lambda: self.support.file_workspaces.get(workspace)) is None:
            self._call(f"PUT fileWorkspaces/{workspace}", lambda: self.support.file_workspaces.create(workspace))

    def _upload(self, workspace: str, files: list[tuple[str, Path]]) -> list[str]:
        """Upload into the workspace (created when missing); files already there (a filing interrupted after
        them) are not sent again. The names uploaded now."""
        from azure.mgmt.support import models

        self._workspace(workspace)
        present = {f.name for f in self._call(f"GET fileWorkspaces/{workspace}/files",
                                              lambda: list(self.support.files.list(workspace)))}
        sent = []
        for name, path in files:
            if name in present:
                continue
            data = path.read_bytes()
            chunk, count = upload_chunks(len(data))
            details = models.FileDetails(file_size=len(data), chunk_size=chunk, number_of_chunks=count)
            self._call(f"PUT files/{name}", lambda n=name, d=details: self.support.files.create(workspace, n, d))
            for i in range(count):
                body = models.UploadFile(content=base64.b64encode(data[i * chunk:(i + 1) * chunk]).decode(),
                                         chunk_index=i)
                self._call(f"POST files/{name}/upload",
                           lambda n=name, b=body: self.support.files.upload(workspace, n, b))
            sent.append(name)
        return sent

    def _filing(self, ticket: Any) -> FilingResult:
        raw = ticket.status or "Open"
        state = EscalationState.CLOSED if raw.lower() == "closed" else EscalationState.FILED
        location = ticket.id or f"/providers/{SUPPORT}/supportTickets/{ticket.name}"
        if ticket.support_ticket_id:
            location += f" (support request {ticket.support_ticket_id})"
        return FilingResult(case_id=ticket.name, raw_status=raw, state=state, location=location)

    def _get_ticket(self, name: str) -> Any:
        return self._get_or_none(f"GET supportTickets/{name}", lambda: self.support.support_tickets.get(name))

    def file_case(self, *, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> FilingResult:
        """Find the ticket this escalation already filed, or upload the bundle and file it. Nothing is
        returned (so nothing is recorded as filed) unless Azure has the ticket."""
        name = ticket_name(escalation_id, draft.bundle_id)
        existing = self._get_ticket(name)
        if existing is not None:
            return self._filing(existing)
        service_id, problem_id = self._service_and_problem()
        details = self._details(name, escalation_id, draft, service_id, problem_id)
        with tempfile.TemporaryDirectory(prefix="fabricase-azure-") as tmp:
            files = self._attachments([bundle_path] if bundle_path is not None else [], Path(tmp))
            if files:
                self._upload(name, files)
            else:
                details.file_workspace_name = None
            # a PUT whose answer was lost may have made the ticket: it is looked up by its name before a retry
            ticket = self._call(f"PUT supportTickets/{name}",
                                lambda: self.support.support_tickets.begin_create(
                                    name, details, polling_interval=self.profile.poll_interval_s).result(),
                                reconcile=lambda: self._get_ticket(name))
        return self._filing(ticket)

    def plan_case(self, *, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> list[PlannedRequest]:
        """The requests file_case sends, without sending any (the service and problem classification are
        shown as configured: file_case looks their ids up)."""
        name = ticket_name(escalation_id, draft.bundle_id)
        severity = self.desk_severity(draft.severity)
        plan: list[PlannedRequest] = []
        with tempfile.TemporaryDirectory(prefix="fabricase-azure-") as tmp:
            files = self._attachments([bundle_path] if bundle_path is not None else [], Path(tmp))
            if files:
                plan.append(PlannedRequest(SUPPORT, f"PUT fileWorkspaces/{name}", {"name": name}))
            for upload, path in files:
                chunk, count = upload_chunks(path.stat().st_size)
                plan.append(PlannedRequest(SUPPORT, f"PUT fileWorkspaces/{name}/files/{upload}", {
                    "attachment": {**attachment_ref(path), "name": upload}, "chunk_size": chunk,
                    "number_of_chunks": count}))
                plan += [PlannedRequest(SUPPORT, f"POST fileWorkspaces/{name}/files/{upload}/upload",
                                        {"chunk_index": i}) for i in range(count)]
        marker = case_marker(escalation_id)
        plan.append(PlannedRequest(SUPPORT, f"PUT supportTickets/{name}", {
            "title": f"{marker} {draft.title}"[:TITLE_MAX], "description_chars": len(draft.body),
            "service": self.profile.service, "problem_classification": self.profile.problem_classification,
            "severity": severity.code, "advanced_diagnostic_consent": self.profile.diagnostic_consent,
            "file_workspace_name": name if files else None,
        }))
        return plan

    def find_case(self, escalation_id: str) -> FilingResult | None:
        """The newest recent ticket whose title holds this escalation's marker (ticket names also carry the
        bundle id, which the escalation alone does not give)."""
        marker = case_marker(escalation_id)
        tickets = self._call("GET supportTickets", lambda: list(self.support.support_tickets.list(top=100)))
        mine = [t for t in tickets if marker in (t.title or "")]
        if not mine:
            return None
        return self._filing(max(mine, key=lambda t: t.created_date or datetime.min.replace(tzinfo=UTC)))

    # --- following a case ----------------------------------------------------------------------------------

    def _communicate(self, case_id: str, subject: str, text: str) -> None:
        """Post one communication, sent by the contact's email. Its name is chosen here, once, from the time of
        the post and its text: a retried call (azure_sdk.call repeats the same PUT) is the same communication,
        and the same text posted again later is a new one."""
        from azure.mgmt.support import models

        name = communication_name(case_id, text, self._now())
        body = models.CommunicationDetails(subject=subject, body=text, sender=self.profile.sender())
        self._call(f"PUT supportTickets/{case_id}/communications/{name}",
                   lambda: self.support.communications.begin_create(
                       case_id, name, body, polling_interval=self.profile.poll_interval_s).result())

    def comment(self, case_id: str, text: str) -> None:
        self._communicate(case_id, "fabricase: update", text)

    def attach(self, case_id: str, files: list[Path], note: str) -> None:
        """Upload into the ticket's file workspace, then say so in a communication (renamed files named)."""
        ticket = self._get_ticket(case_id)
        if ticket is None:
            raise ProviderError("no such support ticket", where=case_id)
        workspace = ticket.file_workspace_name or ticket.support_ticket_id or case_id
        with tempfile.TemporaryDirectory(prefix="fabricase-azure-") as tmp:
            uploads = self._attachments(files, Path(tmp))
            self._upload(workspace, uploads)
        listed = "\n".join(f"- {name}" + (f" ({path.name})" if name != path.name else "") for name, path in uploads)
        self._communicate(case_id, "fabricase: files attached", f"{note.rstrip()}\n\nFiles:\n{listed}\n")

    def case_status(self, case_id: str) -> CaseStatus:
        ticket = self._get_ticket(case_id)
        if ticket is None:
            raise ProviderError("no such support ticket", where=case_id)
        found = self._call(f"GET supportTickets/{case_id}/communications",
                           lambda: list(self.support.communications.list(case_id)))
        comments = tuple(sorted((ticket_comment(c) for c in found), key=lambda c: c.at))
        raw = ticket.status or "Open"
        return CaseStatus(case_id=case_id, raw_status=raw, state=ticket_state(raw, comments), comments=comments)

    def _set_status(self, case_id: str, status: str) -> None:
        from azure.mgmt.support import models

        self._call(f"PATCH supportTickets/{case_id}",
                   lambda: self.support.support_tickets.update(case_id, models.UpdateSupportTicket(status=status)))

    def resolve_case(self, case_id: str, note: str | None) -> None:
        """Say why (when a note is given), then close the ticket."""
        if note:
            self._communicate(case_id, "fabricase: resolved", note)
        self._set_status(case_id, "closed")

    def reopen_case(self, case_id: str, note: str) -> None:
        self._set_status(case_id, "open")
        self._communicate(case_id, "fabricase: reopened", note)
