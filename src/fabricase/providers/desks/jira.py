"""Jira Service Management (Cloud) through its REST API (../shared/reference/cloud-apis.md section 4).

    [providers.static]
    desk = "jira"
    [providers.static.jira]
    base_url = "https://acme.atlassian.net"
    service_desk_id = "10"
    request_type_id = "42"

Credentials: FABRICASE_JIRA_EMAIL and FABRICASE_JIRA_TOKEN (an Atlassian API token), Basic auth.
JSM has no idempotency key: a filing first searches the desk's requests for case_marker(escalation id), before
creating and again before every retry of the create, and a filing that stopped half way is completed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fabricase.bundler.limits import DeskLimits
from fabricase.errors import FabricaseError, ProviderError
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

__all__ = ["JIRA_STATES", "JiraDesk", "jira_state"]

# currentStatus.status (lower case) -> state; JSM's default workflows. Anything else goes by its category.
JIRA_STATES: dict[str, EscalationState] = {
    "open": EscalationState.FILED,
    "new": EscalationState.FILED,
    "to do": EscalationState.FILED,
    "waiting for support": EscalationState.WAITING_PROVIDER,
    "in progress": EscalationState.WAITING_PROVIDER,
    "work in progress": EscalationState.WAITING_PROVIDER,
    "escalated": EscalationState.WAITING_PROVIDER,
    "pending": EscalationState.WAITING_PROVIDER,
    "waiting for customer": EscalationState.WAITING_US,
    "resolved": EscalationState.RESOLVED,
    "done": EscalationState.RESOLVED,
    "completed": EscalationState.RESOLVED,
    "closed": EscalationState.CLOSED,
    "canceled": EscalationState.CLOSED,
    "cancelled": EscalationState.CLOSED,
    "declined": EscalationState.CLOSED,
}
_CATEGORY_STATES = {"new": EscalationState.FILED, "indeterminate": EscalationState.WAITING_PROVIDER,
                    "done": EscalationState.RESOLVED}
_RESOLVE = re.compile(r"resolve|done|close|complete", re.I)
_REOPEN = re.compile(r"re-?open|back to", re.I)
_XSRF = {"X-Atlassian-Token": "no-check", "X-ExperimentalApi": "opt-in"}


def jira_state(status: str, category: str | None) -> EscalationState:
    """A JSM request's normalized state from its status name, else its status category."""
    known = JIRA_STATES.get(status.strip().lower())
    if known is not None:
        return known
    return _CATEGORY_STATES.get((category or "").strip().lower(), EscalationState.WAITING_PROVIDER)


class JiraDesk(Desk):
    name = "jira"
    unsupported = {}
    credentials_env = ("FABRICASE_JIRA_EMAIL", "FABRICASE_JIRA_TOKEN")
    sdk_modules = ("httpx",)
    template = "ticket_jira.md.j2"
    limits = DeskLimits(
        "jira",
        # not in cloud-apis.md: a Jira Cloud text field (the request's `description`) holds 32,767 characters
        body_max_chars=32_767,
        # cloud-apis.md :748 and :792 "set per instance by the admin": read GET /rest/api/3/attachment/meta
        # `uploadLimit` and pass it as desk_limits("jira", attachment_max_bytes=upload_limit)
        attachment_max_bytes=None,
    )
    # the default priority scheme of Jira Cloud
    scale = Scale(
        "jira",
        "priority",
        tuple(Level(name, name) for name in ("Lowest", "Low", "Medium", "High", "Highest")),
        {Severity.CRITICAL: "Highest", Severity.MAJOR: "High", Severity.MINOR: "Medium", Severity.INFO: "Low"},
    )

    # --- plumbing ----------------------------------------------------------------------------------------

    def _api(self) -> DeskApi:
        email_, token = self.credentials()
        return DeskApi(self.where, self.setting("base_url", required=True), (email_, token),
                       auth_hint=" and ".join(self.credentials_env),
                       timeout_s=float(self.setting("timeout_s", 30.0, kind=(int, float))), sleep=self.ctx.sleep)

    @property
    def _desk_id(self) -> str:
        return str(self.setting("service_desk_id", required=True, kind=(str, int)))

    def _upload_limit(self, api: DeskApi) -> int | None:
        meta = api.call("read attachment settings", "GET", "/rest/api/3/attachment/meta")
        if meta.get("enabled") is False:
            raise ProviderError("attachments are disabled on this Jira site (Settings > Attachments)",
                                where=self.where)
        limit = meta.get("uploadLimit")
        return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None

    def _temporary(self, api: DeskApi, files: list[Path]) -> list[str]:
        ids = []
        for f in files:
            got = api.call(f"upload {f.name}", "POST", f"/rest/servicedeskapi/servicedesk/{self._desk_id}"
                           "/attachTemporaryFile", form_file=f, headers=_XSRF)
            ids.extend(t["temporaryAttachmentId"] for t in got.get("temporaryAttachments", []))
        return ids

    def _link(self, api: DeskApi, key: str, ids: list[str], note: str) -> None:
        api.call("attach files", "POST", f"/rest/servicedeskapi/request/{key}/attachment", json_body={
            "temporaryAttachmentIds": ids, "public": True, "additionalComment": {"body": note}}, headers=_XSRF)

    def _attached_names(self, api: DeskApi, key: str) -> set[str]:
        got = api.call("list attachments", "GET", f"/rest/servicedeskapi/request/{key}/attachment",
                       params={"limit": 100})
        return {a.get("filename", "") for a in got.get("values", [])}

    def _result(self, api: DeskApi, request: dict[str, Any]) -> FilingResult:
        key = request["issueKey"]
        current = request.get("currentStatus") or {}
        raw = current.get("status", "")
        web = (request.get("_links") or {}).get("web") or f"{api.base_url}/browse/{key}"
        return FilingResult(case_id=key, raw_status=raw, state=jira_state(raw, current.get("statusCategory")),
                            location=web)

    def _find(self, api: DeskApi, escalation_id: str) -> dict[str, Any] | None:
        marker = case_marker(escalation_id)
        got = api.call("search requests", "GET", "/rest/servicedeskapi/request", params={
            "searchTerm": escalation_id, "serviceDeskId": self._desk_id, "requestOwnership": "ALL_REQUESTS",
            "requestStatus": "ALL_REQUESTS", "limit": 50})
        for request in got.get("values", []):
            fields = {f.get("fieldId"): f.get("value") for f in request.get("requestFieldValues", [])}
            if marker in str(fields.get("summary", "")):
                return request
        return None

    def _create_payload(self, escalation_id: str, draft: TicketDraft) -> dict[str, Any]:
        values: dict[str, Any] = {"summary": subject_for(escalation_id, draft.title),
                                  "description": self.fitted_body(draft)}
        if self.setting("send_priority", True, kind=bool):
            values["priority"] = {"name": self.desk_code(draft)}
        return {"serviceDeskId": self._desk_id,
                "requestTypeId": str(self.setting("request_type_id", required=True, kind=(str, int))),
                "requestFieldValues": values}

    # --- the desk's operations ---------------------------------------------------------------------------

    def plan(self, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> list[PlannedRequest]:
        files = [attachment_ref(Path(bundle_path))] if bundle_path is not None else []
        desk = self._desk_id
        return [
            PlannedRequest("jira", "GET /rest/servicedeskapi/request", {"searchTerm": escalation_id}),
            PlannedRequest("jira", "GET /rest/api/3/attachment/meta", {}),
            *[PlannedRequest("jira", f"POST /rest/servicedeskapi/servicedesk/{desk}/attachTemporaryFile",
                             {"file": f}) for f in files],
            PlannedRequest("jira", "POST /rest/servicedeskapi/request", self._create_payload(escalation_id, draft)),
            *([PlannedRequest("jira", "POST /rest/servicedeskapi/request/{key}/attachment",
                              {"temporaryAttachmentIds": [f["name"] for f in files], "public": True})]
              if files else []),
        ]

    def find(self, escalation_id: str) -> FilingResult | None:
        api = self._api()
        found = self._find(api, escalation_id)
        return self._result(api, found) if found is not None else None

    def file(self, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> FilingResult:
        api = self._api()
        payload = self._create_payload(escalation_id, draft)
        existing = self._find(api, escalation_id)
        files = [Path(bundle_path)] if bundle_path is not None else []
        limit = self._upload_limit(api) if files else None
        with self.deliverable(files, limit) as parts:
            have = self._attached_names(api, existing["issueKey"]) if existing and parts else set()
            missing = [p for p in parts if p.name not in have]
            # Uploaded before the request exists: a file the desk refuses (413) leaves no request behind.
            ids = self._temporary(api, missing)
            request = existing or api.call(
                "create request", "POST", "/rest/servicedeskapi/request", json_body=payload,
                reconcile=lambda: self._find(api, escalation_id))
            if ids:
                names = ", ".join(p.name for p in missing)
                self._link(api, request["issueKey"], ids, f"Evidence bundle from fabricase: {names}")
        return self._result(api, request)

    def attach(self, case_id: str, files: list[Path], note: str) -> None:
        api = self._api()
        with self.deliverable(list(map(Path, files)), self._upload_limit(api)) as parts:
            ids = self._temporary(api, parts)
            self._link(api, case_id, ids, note)

    def comment(self, case_id: str, text: str) -> None:
        self._api().call("add comment", "POST", f"/rest/servicedeskapi/request/{case_id}/comment",
                         json_body={"body": text, "public": True})

    def status(self, case_id: str) -> CaseStatus:
        api = self._api()
        request = api.call("read request", "GET", f"/rest/servicedeskapi/request/{case_id}")
        me = api.call("read own account", "GET", "/rest/api/3/myself").get("accountId")
        got = api.call("read comments", "GET", f"/rest/servicedeskapi/request/{case_id}/comment",
                       params={"limit": 100})
        comments = []
        for c in got.get("values", []):
            author = c.get("author") or {}
            comments.append(CaseComment(at=(c.get("created") or {}).get("iso8601", ""),
                                        author=author.get("displayName") or author.get("emailAddress") or "",
                                        body=c.get("body", ""), from_provider=author.get("accountId") != me))
        comments.sort(key=lambda c: c.at)
        current = request.get("currentStatus") or {}
        raw = current.get("status", "")
        return CaseStatus(case_id=case_id, raw_status=raw, state=jira_state(raw, current.get("statusCategory")),
                          comments=tuple(comments))

    def _transition(self, case_id: str, setting: str, pattern: re.Pattern[str], note: str | None) -> None:
        api = self._api()
        got = api.call("list transitions", "GET", f"/rest/servicedeskapi/request/{case_id}/transition")
        choices = [(str(t.get("id")), t.get("name", "")) for t in got.get("values", [])]
        wanted = self.setting(setting)
        match = [c for c in choices if (c[1].lower() == wanted.lower() if wanted else pattern.search(c[1]))]
        if not match:
            available = ", ".join(name for _, name in choices) or "none"
            raise ProviderError(f"{case_id} has no {'transition ' + repr(wanted) if wanted else 'such transition'} "
                                f"(available: {available}); set [providers.static.jira] {setting}",
                                where=self.where)
        body: dict[str, Any] = {"id": match[0][0]}
        if note:
            body["additionalComment"] = {"body": note}
        api.call(f"transition to {match[0][1]!r}", "POST", f"/rest/servicedeskapi/request/{case_id}/transition",
                 json_body=body)

    def resolve(self, case_id: str, note: str | None) -> None:
        self._transition(case_id, "resolve_transition", _RESOLVE, note)

    def reopen(self, case_id: str, note: str) -> None:
        self._transition(case_id, "reopen_transition", _REOPEN, note)

    def check(self) -> list[CheckResult]:
        try:
            api = self._api()
        except FabricaseError as exc:
            return [CheckResult("credentials", False, exc.message)]
        results = []
        steps = (
            ("credentials", lambda: api.call("read own account", "GET", "/rest/api/3/myself"),
             lambda me: f"authenticated as {me.get('displayName') or me.get('emailAddress') or me.get('accountId')}"),
            ("service desk", lambda: api.call("read service desk", "GET",
                                              f"/rest/servicedeskapi/servicedesk/{self._desk_id}"),
             lambda d: f"{d.get('projectName') or d.get('projectKey') or self._desk_id} (id {self._desk_id})"),
            ("request type", lambda: api.call(
                "read request type", "GET", f"/rest/servicedeskapi/servicedesk/{self._desk_id}/requesttype/"
                f"{self.setting('request_type_id', required=True, kind=(str, int))}"),
             lambda t: str(t.get("name") or t.get("id"))),
            ("attachments", lambda: self._upload_limit(api),
             lambda limit: f"upload limit {limit} bytes" if limit else "no upload limit reported"),
        )
        for check, run, say in steps:
            try:
                results.append(CheckResult(check, True, say(run())))
            except FabricaseError as exc:
                results.append(CheckResult(check, False, exc.message))
        return results
