"""Zendesk Support through its REST API (../shared/reference/cloud-apis.md section 4).

    [providers.static]
    desk = "zendesk"
    [providers.static.zendesk]
    base_url = "https://acme.zendesk.com"
    group_id = 360001234567      # optional: the group that takes the tickets
    tags = ["gpu-fabric"]        # optional

Credentials: FABRICASE_ZENDESK_EMAIL and FABRICASE_ZENDESK_TOKEN (an API token; Basic `email/token:token`).
Files are uploaded first (one upload token for all of them), then the ticket is created with them and an
`Idempotency-Key` of the escalation id, so a retried create never opens a second ticket; the escalation id is
also the ticket's `external_id`, which a later filing looks up first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fabricase.bundler.limits import MB, DeskLimits, desk_limits
from fabricase.errors import FabricaseError
from fabricase.models import EscalationState, Severity, TicketDraft
from fabricase.providers.base import (
    CaseComment,
    CaseStatus,
    CheckResult,
    FilingResult,
    PlannedRequest,
    attachment_ref,
    case_marker,
)
from fabricase.providers.desks.base import Desk, subject_for
from fabricase.providers.desks.http import DeskApi
from fabricase.templates.severity import Level, Scale

__all__ = ["ZENDESK_STATES", "ZendeskDesk", "zendesk_state"]

ZENDESK_STATES: dict[str, EscalationState] = {
    "new": EscalationState.FILED,
    "open": EscalationState.WAITING_PROVIDER,
    "hold": EscalationState.WAITING_PROVIDER,
    "pending": EscalationState.WAITING_US,  # pending: the agent waits for the requester, that is us
    "solved": EscalationState.RESOLVED,
    "closed": EscalationState.CLOSED,
}


def zendesk_state(status: str) -> EscalationState:
    return ZENDESK_STATES.get(status.strip().lower(), EscalationState.WAITING_PROVIDER)


def _as_created(ticket: dict[str, Any] | None) -> dict[str, Any] | None:
    """A found ticket in the shape POST /api/v2/tickets answers ({"ticket": ...}), None when none was found."""
    return {"ticket": ticket} if ticket is not None else None


class ZendeskDesk(Desk):
    name = "zendesk"
    unsupported = {}
    credentials_env = ("FABRICASE_ZENDESK_EMAIL", "FABRICASE_ZENDESK_TOKEN")
    sdk_modules = ("httpx",)
    template = "ticket_zendesk.md.j2"
    # ../shared/reference/cloud-apis.md, by line
    limits = DeskLimits(
        "zendesk",
        body_max_chars=None,  # comment body: no length in cloud-apis.md
        attachment_max_bytes=50 * MB,  # :732 "50 MB per file"; :791
        max_attachments=500,  # :732-733 "up to 500 files per ticket for authenticated users"; :791
    )
    # cloud-apis.md 4, ticket.priority
    scale = Scale(
        "zendesk",
        "priority",
        tuple(Level(name, name) for name in ("low", "normal", "high", "urgent")),
        {Severity.CRITICAL: "urgent", Severity.MAJOR: "high", Severity.MINOR: "normal", Severity.INFO: "low"},
    )

    def _api(self) -> DeskApi:
        email_, token = self.credentials()
        return DeskApi(self.where, self.setting("base_url", required=True), (f"{email_}/token", token),
                       auth_hint=" and ".join(self.credentials_env),
                       timeout_s=float(self.setting("timeout_s", 30.0, kind=(int, float))), sleep=self.ctx.sleep)

    def _upload(self, api: DeskApi, files: list[Path]) -> str | None:
        token = None
        for f in files:
            params = {"filename": f.name, **({"token": token} if token else {})}
            got = api.call(f"upload {f.name}", "POST", "/api/v2/uploads", params=params, upload=f)
            token = got["upload"]["token"]
        return token

    def _ticket_payload(self, escalation_id: str, draft: TicketDraft, token: str | None) -> dict[str, Any]:
        comment: dict[str, Any] = {"body": self.fitted_body(draft), "public": True}
        if token:
            comment["uploads"] = [token]
        ticket: dict[str, Any] = {"subject": subject_for(escalation_id, draft.title), "comment": comment,
                                  "priority": self.desk_code(draft), "external_id": escalation_id,
                                  "tags": ["fabricase", *self.setting("tags", [], kind=list)]}
        group = self.setting("group_id", kind=(int, str))
        if group is not None:
            ticket["group_id"] = group
        return {"ticket": ticket}

    def _result(self, api: DeskApi, ticket: dict[str, Any]) -> FilingResult:
        status = ticket.get("status", "")
        return FilingResult(case_id=str(ticket["id"]), raw_status=status, state=zendesk_state(status),
                            location=f"{api.base_url}/agent/tickets/{ticket['id']}")

    def _limit(self) -> int | None:
        return desk_limits("zendesk").attachment_max_bytes

    def plan(self, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> list[PlannedRequest]:
        files = [attachment_ref(Path(bundle_path))] if bundle_path is not None else []
        payload = self._ticket_payload(escalation_id, draft, "<upload token>" if files else None)
        return [
            PlannedRequest("zendesk", "GET /api/v2/tickets", {"external_id": escalation_id}),
            *[PlannedRequest("zendesk", "POST /api/v2/uploads", {"file": f}) for f in files],
            PlannedRequest("zendesk", "POST /api/v2/tickets", {"Idempotency-Key": escalation_id, **payload}),
        ]

    def _find(self, api: DeskApi, escalation_id: str) -> dict[str, Any] | None:
        got = api.call("find ticket", "GET", "/api/v2/tickets", params={"external_id": escalation_id})
        marker = case_marker(escalation_id)
        for ticket in got.get("tickets", []):
            if ticket.get("external_id") == escalation_id or marker in str(ticket.get("subject", "")):
                return ticket
        return None

    def find(self, escalation_id: str) -> FilingResult | None:
        api = self._api()
        found = self._find(api, escalation_id)
        return self._result(api, found) if found is not None else None

    def file(self, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> FilingResult:
        api = self._api()
        found = self._find(api, escalation_id)
        if found is not None:
            return self._result(api, found)
        files = [Path(bundle_path)] if bundle_path is not None else []
        with self.deliverable(files, self._limit()) as parts:
            token = self._upload(api, parts)
        # the Idempotency-Key makes a retry return the first ticket; a desk (or proxy) that drops the key is
        # searched by external_id before any retry all the same
        got = api.call("create ticket", "POST", "/api/v2/tickets", json_body=self._ticket_payload(
            escalation_id, draft, token), headers={"Idempotency-Key": escalation_id},
            reconcile=lambda: _as_created(self._find(api, escalation_id)))
        return self._result(api, got["ticket"])

    def _update(self, case_id: str, operation: str, ticket: dict[str, Any]) -> None:
        self._api().call(operation, "PUT", f"/api/v2/tickets/{case_id}", json_body={"ticket": ticket})

    def attach(self, case_id: str, files: list[Path], note: str) -> None:
        api = self._api()
        with self.deliverable(list(map(Path, files)), self._limit()) as parts:
            token = self._upload(api, parts)
        api.call("attach files", "PUT", f"/api/v2/tickets/{case_id}", json_body={
            "ticket": {"comment": {"body": note, "public": True, "uploads": [token] if token else []}}})

    def comment(self, case_id: str, text: str) -> None:
        self._update(case_id, "add comment", {"comment": {"body": text, "public": True}})

    def status(self, case_id: str) -> CaseStatus:
        api = self._api()
        ticket = api.call("read ticket", "GET", f"/api/v2/tickets/{case_id}")["ticket"]
        me = api.call("read own user", "GET", "/api/v2/users/me")["user"].get("id")
        got = api.call("read comments", "GET", f"/api/v2/tickets/{case_id}/comments", params={"sort_order": "asc"})
        comments = sorted((CaseComment(at=c.get("created_at", ""), author=str(c.get("author_id", "")),
                                       body=c.get("body", ""), from_provider=c.get("author_id") != me)
                           for c in got.get("comments", [])), key=lambda c: c.at)
        status = ticket.get("status", "")
        return CaseStatus(case_id=case_id, raw_status=status, state=zendesk_state(status), comments=tuple(comments))

    def resolve(self, case_id: str, note: str | None) -> None:
        ticket: dict[str, Any] = {"status": "solved"}
        if note:
            ticket["comment"] = {"body": note, "public": True}
        self._update(case_id, "solve ticket", ticket)

    def reopen(self, case_id: str, note: str) -> None:
        self._update(case_id, "reopen ticket", {"status": "open", "comment": {"body": note, "public": True}})

    def check(self) -> list[CheckResult]:
        try:
            api = self._api()
            me = api.call("read own user", "GET", "/api/v2/users/me")["user"]
        except FabricaseError as exc:
            return [CheckResult("credentials", False, exc.message)]
        role = me.get("role") or "anonymous"
        who = f"authenticated as {me.get('email') or me.get('name') or me.get('id')} ({role})"
        if me.get("id") is None or role == "end-user":
            return [CheckResult("credentials", False, f"{who}: creating tickets needs an agent or admin")]
        limit = self._limit()
        return [CheckResult("credentials", True, who),
                CheckResult("attachments", True, f"up to {limit} bytes a file; larger bundles are split")]
