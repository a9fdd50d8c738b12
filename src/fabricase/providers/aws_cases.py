"""AWS Support: the case desk of the AWS provider (aws.AwsProvider). Valid codes and severities
(DescribeServices, DescribeSeverityLevels, cached), CreateCase with the bundle attached by upload links or an
attachment set, replies, status, resolve and reopen.

Every call goes through the provider's `_call` (providers.retry); CreateCase has no idempotency token, so before
a retry the case the failed try may have opened is looked for (its subject carries case_marker).
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from fabricase.bundler.limits import desk_limits
from fabricase.config import Paths
from fabricase.errors import ProviderError
from fabricase.models import EscalationState, Severity, TicketDraft
from fabricase.providers import aws_support as supportapi
from fabricase.providers.aws_client import AwsSettings, error_code, http_status
from fabricase.providers.base import CaseStatus, FilingResult, PlannedRequest, attachment_ref, case_marker
from fabricase.templates.severity import DeskSeverity, desk_severity, scale_for

__all__ = ["CODES_CACHE", "AwsCases"]

# GetAttachmentUploadLinks refused as an operation this endpoint does not have (an older or partition endpoint):
# the bundle then goes by attachment sets, within 3 x 5 MB.
_NO_UPLOAD_LINKS = frozenset({"UnknownOperationException", "UnknownOperation", "InvalidAction", "NotImplemented",
                              "UnsupportedOperation"})
CODES_CACHE = "cache/aws-support-codes.json"  # under the data directory


def _links_missing(exc: ProviderError) -> bool:
    """GetAttachmentUploadLinks failed because the endpoint does not have the operation."""
    cause = exc.__cause__
    return cause is not None and (error_code(cause) in _NO_UPLOAD_LINKS or http_status(cause) in (404, 501))


def _subject(escalation_id: str, title: str) -> str:
    """The case subject: the marker find_case looks for, then the title (without its own [fabricase] tag)."""
    marker = case_marker(escalation_id)
    return title if marker in title else f"{marker} {title.removeprefix('[fabricase]').strip()}"


class AwsCases:
    """The AWS Support desk of the AWS provider: codes and severity, attachments, and the case from filing to
    reopening. It builds on the provider's plumbing: paths, name, settings, _now, _sleep, _support and _call."""

    paths: Paths
    name: str
    settings: AwsSettings
    _now: Callable[[], datetime]
    _sleep: Callable[[float], None]
    _support: Callable[[], Any]
    _call: Callable[[str, Callable[[], Any]], Any]

    # codes

    def _codes(self) -> supportapi.CaseCodes:
        failed = getattr(self, "_codes_error", None)
        if failed is not None:  # asked once in this run already (desk_severity): the same answer, not a second call
            raise failed
        s = self.settings
        support = self._support()
        now = self._now().timestamp()
        return supportapi.load_codes(
            self.paths.data / CODES_CACHE, service_code=s.service_code, language=s.language, ttl_s=s.codes_ttl_s,
            now=now, fetch=lambda: supportapi.fetch_codes(self._call, support, service_code=s.service_code,
                                                          language=s.language, now=now))

    def _sent_severity(self, severity: Severity | str, codes: supportapi.CaseCodes | None) -> DeskSeverity:
        """The configured mapping and caps, then the highest level this account's plan offers at or below it
        (DescribeSeverityLevels): what CreateCase sends, and what the ticket's body says."""
        s = self.settings
        mapped = desk_severity("aws", severity, max_level=s.max_severity, plan=s.support_plan, overrides=s.severity)
        picked = supportapi.pick_severity(mapped, codes.severity_levels if codes else ())
        if picked == mapped.code:
            return mapped
        return dataclasses.replace(mapped, code=picked, label=scale_for("aws").level(picked).label,
                                   capped_by="severity levels this account's support plan offers")

    def desk_severity(self, severity: Severity | str) -> DeskSeverity:
        try:
            codes = self._codes()
        except ProviderError as exc:  # no credentials or no plan: the body says the mapping; the filing, the error
            self._codes_error: ProviderError | None = exc
            codes = None
        return self._sent_severity(severity, codes)

    def _case_payload(self, escalation_id: str, draft: TicketDraft, codes: supportapi.CaseCodes | None) -> dict:
        s = self.settings
        payload: dict[str, Any] = {
            "subject": _subject(escalation_id, draft.title),
            "communicationBody": draft.body.strip() or draft.title,
            "serviceCode": s.service_code,
            "severityCode": self._sent_severity(draft.severity, codes).code,
            "issueType": "technical",
            "language": s.language,
        }
        category = supportapi.pick_category(codes.categories, s.category_code) if codes else s.category_code
        if category:
            payload["categoryCode"] = category
        if s.cc:
            payload["ccEmailAddresses"] = list(s.cc)
        return payload

    # attachments

    def _put_part(self, url: str, path: Path, offset: int, size: int) -> str:
        def put() -> str:
            with httpx.Client(timeout=httpx.Timeout(300.0, connect=10.0)) as http:
                response = http.put(url, content=supportapi.read_part(path, offset, size),
                                    headers={"Content-Length": str(size)})
                response.raise_for_status()
            etag = response.headers.get("ETag")
            if not etag:
                raise ProviderError(f"PUT upload part: {path.name}: no ETag in the answer", where=self.name)
            return etag

        return self._call("PUT upload part", put)

    def _groups(self, files: list[Path], tmp: Path, mode: str) -> list[supportapi.UploadGroup]:
        limits = desk_limits("aws")
        cap = limits.attachment_max_bytes if mode == "attachment-set" else limits.large_upload_max_bytes
        sizes: list[tuple[Path, int]] = []
        for path in files:
            try:
                size = path.stat().st_size
            except OSError as exc:
                raise ProviderError(f"cannot read attachment: {exc.strerror or exc}", where=str(path)) from exc
            parts = supportapi.split_to(path, cap, tmp) if cap is not None and size > cap else [path]
            sizes += [(p, p.stat().st_size) for p in parts]
        return supportapi.plan_uploads(sizes, limits, mode)

    def _send(self, group: supportapi.UploadGroup) -> dict[str, Any]:
        support = self._support()
        if group.via == "set":
            return {"attachmentSetId": supportapi.upload_set(self._call, support, group.files)}
        return {"uploadIds": [supportapi.upload_by_links(self._call, support, path, put=self._put_part,
                                                         sleep=self._sleep) for path in group.files]}

    def _deliver(self, files: list[Path], tmp: Path, *, single: bool) -> list[dict[str, Any]]:
        """Upload the files; the attachment references (attachmentSetId / uploadIds), one per request. `single`:
        they must go in one request (a new case), else the attachment is too large for the desk."""
        mode = self.settings.attachments
        groups = self._checked(self._groups(files, tmp, mode), single)
        try:
            return [self._send(g) for g in groups]
        except ProviderError as exc:
            if mode != "auto" or not any(g.via == "links" for g in groups) or not _links_missing(exc):
                raise
        # this endpoint has no upload links: attachment sets, within 3 x 5 MB
        return [self._send(g) for g in self._checked(self._groups(files, tmp, "attachment-set"), single)]

    def _checked(self, groups: list[supportapi.UploadGroup], single: bool) -> list[supportapi.UploadGroup]:
        if single and len(groups) > 1:
            names = ", ".join(p.name for g in groups for p in g.files)
            via_set = groups[0].via == "set"
            operation = "AddAttachmentsToSet" if via_set else "GetAttachmentUploadLinks"
            per = "3 files of 5 MB in an attachment set" if via_set else "10 uploads of 150 MB"
            raise ProviderError(f"{operation}: attachment too large: it needs {len(groups)} requests' worth of parts "
                                f"({names}); a new case takes {per}", where=self.name)
        return groups

    # the case

    def find_case(self, escalation_id: str) -> FilingResult | None:
        """The case whose subject carries this escalation's marker, among the cases of the last find_case_days
        days (resolved ones included)."""
        marker = case_marker(escalation_id)
        after = (self._now() - timedelta(days=self.settings.find_case_days)).strftime("%Y-%m-%dT%H:%M:%SZ")
        support = self._support()

        def search() -> dict[str, Any] | None:
            pages = support.get_paginator("describe_cases").paginate(
                includeResolvedCases=True, includeCommunications=False, afterTime=after,
                language=self.settings.language, PaginationConfig={"PageSize": 100})
            for page in pages:
                for case in page.get("cases", []):
                    if marker in (case.get("subject") or ""):
                        return case
            return None

        case = self._call("DescribeCases", search)
        if case is None:
            return None
        return FilingResult(case_id=case["caseId"], raw_status=case.get("status") or "unknown",
                            state=supportapi.case_state(case.get("status")),
                            location=supportapi.console_url(case.get("displayId"), case["caseId"]))

    def _describe_case(self, case_id: str) -> dict[str, Any]:
        support = self._support()
        cases = self._call("DescribeCases", lambda: support.describe_cases(
            caseIdList=[case_id], includeResolvedCases=True, includeCommunications=False)).get("cases", [])
        case = next((c for c in cases if c.get("caseId") == case_id), None)
        if case is None:
            raise ProviderError(f"DescribeCases: no case {case_id}", where=self.name)
        return case

    def _create(self, escalation_id: str, payload: dict[str, Any]) -> str:
        """CreateCase, retried on throttling and 5xx; before a retry, the case the failed try may have opened
        is looked for (CreateCase has no idempotency token)."""
        support = self._support()
        tries = 0

        def create() -> str:
            nonlocal tries
            tries += 1
            if tries > 1 and (found := self.find_case(escalation_id)) is not None:
                return found.case_id
            return support.create_case(**payload)["caseId"]

        return self._call("CreateCase", create)

    def file_case(self, *, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> FilingResult:
        """Open the case (or find the one this escalation already opened), with the bundle attached by upload
        links (any size up to 150 MB, more in parts) or an attachment set (3 x 5 MB)."""
        found = self.find_case(escalation_id)
        if found is not None:
            return found
        payload = self._case_payload(escalation_id, draft, self._codes())
        files = [Path(bundle_path)] if bundle_path is not None else []
        with tempfile.TemporaryDirectory(prefix="fabricase-aws-") as tmp:
            refs = self._deliver(files, Path(tmp), single=True) if files else []
        case_id = self._create(escalation_id, {**payload, **(refs[0] if refs else {})})
        try:  # the case exists now: a failed read-back must not make it look unfiled
            case = self._describe_case(case_id)
        except ProviderError:
            case = {"caseId": case_id}
        return FilingResult(case_id=case_id, raw_status=case.get("status") or "unknown", state=EscalationState.FILED,
                            location=supportapi.console_url(case.get("displayId"), case_id))

    def plan_case(self, *, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> list[PlannedRequest]:
        """The requests file_case would send. Valid codes come from the cache when it is fresh, else the two
        Describe requests are listed and the codes are the configured (or default) ones."""
        s = self.settings
        cached = supportapi.read_cache(self.paths.data / CODES_CACHE)
        fresh = (cached is not None and cached.service_code == s.service_code and cached.language == s.language
                 and 0 <= self._now().timestamp() - cached.fetched_at < s.codes_ttl_s)
        plan = [PlannedRequest("support", "DescribeCases", {"includeResolvedCases": True, "subject_contains":
                                                            case_marker(escalation_id)})]
        if not fresh:
            plan += [PlannedRequest("support", "DescribeServices", {"serviceCodeList": [s.service_code],
                                                                    "language": s.language}),
                     PlannedRequest("support", "DescribeSeverityLevels", {"language": s.language})]
        payload = self._case_payload(escalation_id, draft, cached if fresh else None)
        if bundle_path is not None:
            ref = attachment_ref(Path(bundle_path))
            limits = desk_limits("aws")
            links = s.attachments == "upload-links" or (
                s.attachments == "auto" and ref["size"] > (limits.attachment_max_bytes or 0))
            if links:
                plan += [PlannedRequest("support", "GetAttachmentUploadLinks",
                                        {"fileName": ref["name"], "fileSizeBytes": ref["size"]}),
                         PlannedRequest("https", "PUT <presigned upload URL> (each part)", {"attachment": ref}),
                         PlannedRequest("support", "CompleteAttachmentUpload", {"uploadId": "<from the links>"})]
                payload["uploadIds"] = ["<uploadId>"]
            else:
                plan.append(PlannedRequest("support", "AddAttachmentsToSet", {"attachments": [ref]}))
                payload["attachmentSetId"] = "<from AddAttachmentsToSet>"
        plan.append(PlannedRequest("support", "CreateCase", payload))
        return plan

    def _reply(self, case_id: str, text: str, refs: Mapping[str, Any] | None = None) -> None:
        text = text.strip()
        if not text:
            raise ProviderError("AddCommunicationToCase: the text is empty", where=self.name)
        if len(text) > 8000:
            raise ProviderError(f"AddCommunicationToCase: the text is {len(text)} characters; AWS takes 8000",
                                where=self.name)
        support = self._support()
        self._call("AddCommunicationToCase", lambda: support.add_communication_to_case(
            caseId=case_id, communicationBody=text, **(refs or {})))

    def attach(self, case_id: str, files: list[Path], note: str) -> None:
        """Add the files to the case, with the note, in as many replies as the desk's limits need."""
        with tempfile.TemporaryDirectory(prefix="fabricase-aws-") as tmp:
            refs = self._deliver([Path(f) for f in files], Path(tmp), single=False)
        for ref in refs:
            self._reply(case_id, note or "Evidence attached by fabricase.", ref)

    def comment(self, case_id: str, text: str) -> None:
        self._reply(case_id, text)

    def case_status(self, case_id: str) -> CaseStatus:
        case = self._describe_case(case_id)
        support = self._support()
        pages = self._call("DescribeCommunications", lambda: list(
            support.get_paginator("describe_communications").paginate(caseId=case_id)))
        communications = [c for page in pages for c in page.get("communications", [])]
        raw = case.get("status") or "unknown"
        return CaseStatus(case_id=case_id, raw_status=raw, state=supportapi.case_state(raw),
                          comments=supportapi.comments_of(communications))

    def resolve_case(self, case_id: str, note: str | None) -> None:
        """The note as a last reply, then ResolveCase."""
        if note and note.strip():
            self._reply(case_id, note)
        support = self._support()
        self._call("ResolveCase", lambda: support.resolve_case(caseId=case_id))

    def reopen_case(self, case_id: str, note: str) -> None:
        """AWS reopens a resolved case when the customer replies to it (within the window the Support Center
        allows): the note is that reply."""
        self._reply(case_id, note or "Reopened by fabricase: the fault is back.")
