"""Google Cloud: where a VM sits (cluster > block > sub-block > host) through Compute Engine, the faulty-host
channels (instances.reportHostAsFaulty, reservationSubBlocks.reportFaulty), and cases on Cloud Support v2.

Profile, `[providers.gcp]` of config.toml (every key optional):

    project = "my-project"            # else the host's FQDN (NAME.ZONE.c.PROJECT.internal), else the ADC project
    zone = "us-central1-b"            # else the FQDN; else each instance is looked up by name across zones
    support_parent = "projects/my-project"   # or "organizations/123"; default projects/<project>
    classification_id = "..."         # else searched with classification_query (a GPU one preferred)
    support_plan = "enhanced"  max_level = "P1"  severity = {major = "P1"}
    time_zone = "UTC"  language_code = "en"  subscribers = ["oncall@example.com"]  test_case = false
    attachment_max_bytes = 5000000    # the upload limit is not documented; bundles above it are split
    timeout_s = 60  locate_workers = 8
    endpoints = {compute = "https://...", support = "https://..."}   # private endpoints (and the tests)

Credentials only through Application Default Credentials (google.auth.default): never stored by fabricase.
"""

from __future__ import annotations

import itertools
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from google.cloud import support_v2

from fabricase.bundler.limits import MB, DeskLimits, bundle_delivery, desk_limits
from fabricase.bundler.parts import split_bundle
from fabricase.config import Paths, provider_profile
from fabricase.errors import ConfigError, ProviderError
from fabricase.models import Severity, TicketDraft
from fabricase.providers import gcp_support as support
from fabricase.providers.base import (
    CaseStatus,
    CheckResult,
    Feature,
    FilingResult,
    PlannedRequest,
    Provider,
    attachment_ref,
    case_marker,
)
from fabricase.providers.gcp_api import SUPPORT_ENDPOINT, as_dict
from fabricase.providers.gcp_compute import GcpCompute
from fabricase.templates.severity import DeskSeverity, Level, Scale, desk_severity

__all__ = ["GcpProvider"]

_LIST_MAX = 200  # recent cases read when looking for an escalation's marker


class GcpProvider(GcpCompute, Provider):
    """Compute Engine placements and faulty-host reports; Cloud Support v2 cases."""

    name = "gcp"
    unsupported = {
        Feature.REOPEN: "Cloud Support API v2 has no reopen: a closed case stays closed; open a new one that cites it",
    }
    sdk_modules = ("google.cloud.compute_v1", "google.cloud.support_v2")
    extra = "gcp"
    template = "ticket_gcp.md.j2"
    # ../shared/reference/cloud-apis.md, by line
    limits = DeskLimits(
        "gcp",
        body_max_chars=12_800,  # :410 "Comment body is at most 12,800 characters"
        # :419 and :788: the attachment limit "is not documented [UNVERIFIED]"; the strictest documented size
        # keeps an upload safe until the real one is configured (desk_limits("gcp", attachment_max_bytes=...))
        attachment_max_bytes=5 * MB,
        max_attachments=None,  # :788 "not documented"
    )
    # cloud-apis.md 2.2, Case.priority
    scale = Scale(
        "gcp",
        "priority",
        (
            Level("P4", "General questions"),
            Level("P3", "Medium impact"),
            Level("P2", "Severe impact: service greatly impaired"),
            Level("P1", "Critical impact: service unusable in production"),
            Level("P0", "Extreme impact: hard down"),
        ),
        # P0 is for a whole service hard down; one job's bad host or switch is P1 at worst.
        {Severity.CRITICAL: "P1", Severity.MAJOR: "P2", Severity.MINOR: "P3", Severity.INFO: "P4"},
    )

    def __init__(self, paths: Paths, *, credentials: Any = None, sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__(paths)
        self.profile = provider_profile(paths, "gcp")
        self._credentials, self._adc_project = credentials, None
        self._sleep = sleep
        self._clients: dict[str, Any] = {}

    def desk_severity(self, severity: Severity | str) -> DeskSeverity:
        p = self.profile
        return desk_severity("gcp", severity, max_level=p.get("max_level"), plan=p.get("support_plan"),
                             overrides=p.get("severity"))

    def _case_fields(self, marker: str, draft: TicketDraft, classification_id: str) -> dict[str, Any]:
        """The `Case` to create, as plain values (a dry run prints these)."""
        p = self.profile
        level = self.desk_severity(draft.severity)
        footer = f"\n\nfabricase escalation: {marker}"
        body = draft.body + footer if len(draft.body) + len(footer) <= support.COMMENT_MAX_CHARS else draft.body
        return {
            "display_name": support.case_subject(marker, draft.title),
            "description": body,
            "classification": {"id": classification_id},
            "priority": level.code,
            "time_zone": str(p.get("time_zone", "UTC")),
            "language_code": str(p.get("language_code", "en")),
            "subscriber_email_addresses": [str(s) for s in p.get("subscribers", [])],
            "test_case": bool(p.get("test_case", False)),
        }

    def _classification_id(self) -> str:
        if self.profile.get("classification_id"):
            return str(self.profile["classification_id"])
        query = str(self.profile.get("classification_query", support.DEFAULT_CLASSIFICATION_QUERY))
        client = self._support("CaseServiceClient")
        found = self._call("cloudsupport.caseClassifications.search", lambda: [as_dict(c) for c in itertools.islice(
            client.search_case_classifications(request={"query": query}, **self._read_kw()), 100)], "support")
        chosen = support.choose_classification(found)
        if chosen is None:
            raise ProviderError(f"no case classification matches {query}: set classification_id in "
                                "[providers.gcp]", where=self.name)
        return str(chosen["id"])

    def _files(self, draft: TicketDraft, bundle_path: Path | None, tmp: Path) -> list[Path]:
        """What goes to the case: the bundle (split into parts above the attachment limit) and the summary."""
        files: list[Path] = []
        if bundle_path is not None:
            bundle_path = Path(bundle_path)
            if not bundle_path.is_file():
                raise ProviderError("bundle file not found", where=str(bundle_path))
            files.extend(self._fitted(bundle_path, tmp, others=1 if draft.summary else 0))
        if draft.summary:
            (tmp / "summary.md").write_text(draft.summary, encoding="utf-8")
            files.append(tmp / "summary.md")
        return files

    def _fitted(self, path: Path, tmp: Path, *, others: int = 0) -> list[Path]:
        override = self.profile.get("attachment_max_bytes")
        limits = desk_limits("gcp", **({"attachment_max_bytes": int(override)} if override else {}))
        delivery = bundle_delivery(path.stat().st_size, limits, other_attachments=others)
        if delivery.kind == "split" and delivery.part_bytes:
            return split_bundle(path, delivery.part_bytes, out_dir=tmp)
        return [path]

    def _case(self, name: str) -> dict[str, Any]:
        client = self._support("CaseServiceClient")
        return self._call("cloudsupport.cases.get", lambda: as_dict(client.get_case(name=name, **self._read_kw())),
                          "support")

    def _find(self, marker: str) -> dict[str, Any] | None:
        client, parent = self._support("CaseServiceClient"), self._parent()
        searched = self._call("cloudsupport.cases.search", lambda: [as_dict(c) for c in itertools.islice(
            client.search_cases(request={"parent": parent, "query": f'"{marker}"'}, **self._read_kw()), _LIST_MAX)],
            "support")
        hits = [c for c in searched if marker in c.get("display_name", "")]
        if not hits:  # the search index lags a fresh case: the list is authoritative
            listed = self._call("cloudsupport.cases.list", lambda: [as_dict(c) for c in itertools.islice(
                client.list_cases(request={"parent": parent, "page_size": 100}, **self._read_kw()), _LIST_MAX)],
                "support")
            hits = [c for c in listed if marker in c.get("display_name", "")]
        return min(hits, key=lambda c: (c.get("create_time") or "", c["name"])) if hits else None

    def _location(self, case_name: str) -> str:
        return f"{(self._endpoint('support') or SUPPORT_ENDPOINT).rstrip('/')}/v2/{case_name}"

    def _result(self, case: dict[str, Any]) -> FilingResult:
        raw = str(case.get("state") or "STATE_UNSPECIFIED")
        return FilingResult(case_id=case["name"], raw_status=raw, state=support.case_state(raw),
                            location=self._location(case["name"]))

    def find_case(self, escalation_id: str) -> FilingResult | None:
        case = self._find(case_marker(escalation_id))
        return self._result(case) if case else None

    def file_case(self, *, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> FilingResult:
        """Find the escalation's case by its marker, else create it; then upload what it lacks. A filing cut
        short (a crash, an upload that failed) is completed by filing again: nothing is filed twice."""
        marker = case_marker(escalation_id)
        with tempfile.TemporaryDirectory(prefix="fabricase-gcp-") as tmp:
            files = self._files(draft, bundle_path, Path(tmp))
            case = self._find(marker)
            if case is None:
                fields = self._case_fields(marker, draft, self._classification_id())
                client, parent = self._support("CaseServiceClient"), self._parent()
                # cases.create has no request id: after a transient failure (a 504 once the case was made) the
                # case is searched for by its marker before trying again, and adopted when found
                case = self._call("cloudsupport.cases.create", lambda: as_dict(client.create_case(
                    parent=parent, case=_new_case(fields), **self._kw())), "support",
                    reconcile=lambda: self._find(marker))
            try:
                self._upload_missing(case["name"], files)
            except ProviderError as exc:
                raise ProviderError(f"case {case['name']} is open but not every attachment is on it ({exc.message});"
                                    " file again to finish: the case is found again by its marker",
                                    where=self.name) from exc
        return self._result(case)

    def plan_case(self, *, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> list[PlannedRequest]:
        """The requests file_case sends for a new case, in order, with attachments by name, size and sha256."""
        marker, parent = case_marker(escalation_id), self._parent()
        classification = self.profile.get("classification_id")
        plan = [PlannedRequest("cloudsupport", "cases.search", {"parent": parent, "query": f'"{marker}"'})]
        if not classification:
            query = str(self.profile.get("classification_query", support.DEFAULT_CLASSIFICATION_QUERY))
            plan.append(PlannedRequest("cloudsupport", "caseClassifications.search", {"query": query}))
        fields = self._case_fields(marker, draft, str(classification or "<first GPU classification found>"))
        plan.append(PlannedRequest("cloudsupport", "cases.create", {"parent": parent, "case": fields}))
        with tempfile.TemporaryDirectory(prefix="fabricase-gcp-") as tmp:
            for f in self._files(draft, bundle_path, Path(tmp)):
                plan.append(PlannedRequest("cloudsupport", "media.upload", {
                    "parent": f"{parent}/cases/<created>", "attachment.filename": f.name, **attachment_ref(f)}))
        return plan

    def _upload_missing(self, case_name: str, files: Iterable[Path]) -> None:
        files = list(files)
        if not files:
            return
        client = self._support("CaseAttachmentServiceClient")
        present = self._call("cloudsupport.attachments.list", lambda: {a.filename for a in itertools.islice(
            client.list_attachments(parent=case_name, **self._read_kw()), 1000)}, "support")
        for f in files:
            if f.name not in present:
                self._upload(case_name, f)

    def _upload(self, case_name: str, path: Path) -> dict[str, Any]:
        from google.auth.transport.requests import Request

        endpoint = self._endpoint("support") or SUPPORT_ENDPOINT
        creds = self._credentials_or_fail()

        def send() -> dict[str, Any]:
            headers: dict[str, str] = {}
            creds.before_request(Request(), "POST", endpoint, headers)
            return support.upload_attachment(endpoint, case_name, path, headers=headers, timeout_s=self._timeout)

        return self._call("cloudsupport.media.upload", send, "support")

    def attach(self, case_id: str, files: list[Path], note: str) -> None:
        """Upload the files (a bundle above the attachment limit as parts), then say what came in a comment."""
        with tempfile.TemporaryDirectory(prefix="fabricase-gcp-") as tmp:
            sent: list[str] = []
            for f in files:
                f = Path(f)
                if not f.is_file():
                    raise ProviderError("file not found", where=str(f))
                for part in self._fitted(f, Path(tmp)):
                    self._upload(case_id, part)
                    sent.append(part.name)
        self.comment(case_id, f"{note}\n\nAttached: {', '.join(sent)}" if note else f"Attached: {', '.join(sent)}")

    def comment(self, case_id: str, text: str) -> None:
        client = self._support("CommentServiceClient")
        for chunk in support.comment_chunks(text):
            self._call("cloudsupport.comments.create", lambda chunk=chunk: client.create_comment(
                parent=case_id, comment=support_v2.Comment(body=chunk), **self._kw()), "support")

    def case_status(self, case_id: str) -> CaseStatus:
        case = self._case(case_id)
        client = self._support("CommentServiceClient")
        comments = self._call("cloudsupport.comments.list", lambda: [as_dict(c) for c in itertools.islice(
            client.list_comments(parent=case_id, **self._read_kw()), 1000)], "support")
        raw = str(case.get("state") or "STATE_UNSPECIFIED")
        return CaseStatus(case_id=case_id, raw_status=raw, state=support.case_state(raw),
                          comments=support.comments_from(comments))

    def resolve_case(self, case_id: str, note: str | None) -> None:
        """Say why in a comment (when given), then close the case."""
        if note:
            self.comment(case_id, note)
        client = self._support("CaseServiceClient")
        self._call("cloudsupport.cases.close", lambda: client.close_case(request={"name": case_id}, **self._kw()),
                   "support")

    def escalate_case(self, case_id: str, reason: str, justification: str) -> FilingResult:
        """Escalate the case (reason RESOLUTION_TIME, TECHNICAL_EXPERTISE or BUSINESS_IMPACT)."""
        reason = reason.strip().upper().replace("-", "_")
        if reason not in support.ESCALATION_REASONS:
            raise ProviderError(f"unknown escalation reason {reason!r}; valid: {', '.join(support.ESCALATION_REASONS)}",
                                where=self.name)
        if not justification.strip():
            raise ProviderError("an escalation needs a justification", where=self.name)
        client = self._support("CaseServiceClient")
        escalation = support_v2.Escalation(reason=support_v2.Escalation.Reason[reason], justification=justification)
        case = self._call("cloudsupport.cases.escalate", lambda: as_dict(client.escalate_case(
            request={"name": case_id, "escalation": escalation}, **self._kw())), "support")
        return self._result(case)

    # --- check -----------------------------------------------------------------------------------------------

    def check(self) -> list[CheckResult]:
        """Credentials, project access (Compute Engine) and support access (cases and classifications)."""
        try:
            creds = self._credentials_or_fail()
            project = self._project()
        except (ProviderError, ConfigError) as exc:
            return [CheckResult("credentials", False, exc.message)]
        results = [CheckResult("credentials", True, f"{type(creds).__name__}; project {project}")]
        checks: list[tuple[str, Callable[[], str]]] = [
            ("project access", lambda: self._check_project(project)),
            ("support access", self._check_support),
            ("case classification", lambda: f"classification {self._classification_id()}"),
        ]
        for name, probe in checks:
            try:
                results.append(CheckResult(name, True, probe()))
            except (ProviderError, ConfigError) as exc:
                results.append(CheckResult(name, False, exc.message))
        return results

    def _check_project(self, project: str) -> str:
        client = self._compute("ProjectsClient")
        got = self._call("compute.projects.get", lambda: as_dict(client.get(project=project, **self._read_kw())),
                         "compute")
        return f"project {got.get('name') or project} readable"

    def _check_support(self) -> str:
        client, parent = self._support("CaseServiceClient"), self._parent()
        cases = self._call("cloudsupport.cases.list", lambda: list(itertools.islice(
            client.list_cases(request={"parent": parent, "page_size": 1}, **self._read_kw()), 1)), "support")
        return f"cases of {parent} readable ({len(cases)} listed)"


def _new_case(fields: dict[str, Any]) -> Any:
    fields = dict(fields)
    fields["priority"] = support_v2.Case.Priority[fields["priority"]]
    fields["classification"] = support_v2.CaseClassification(**fields["classification"])
    return support_v2.Case(**fields)
