"""What every provider offers: locate hosts in its topology, and a desk that takes support cases.

A provider declares up front, in `unsupported`, each feature it lacks and why, so that a command can
refuse before any work starts instead of failing half way through a filing.
"""

from __future__ import annotations

import abc
import enum
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from fabricase.config import Paths
from fabricase.errors import UnsupportedError
from fabricase.models import EscalationState, Placement, Severity, TicketDraft
from fabricase.redact.gate import gated_methods

if TYPE_CHECKING:
    from fabricase.faulty import HostReport

if TYPE_CHECKING:
    from fabricase.bundler.limits import DeskLimits
    from fabricase.templates.severity import DeskSeverity, Scale

__all__ = [
    "CaseComment", "CaseStatus", "CheckResult", "FaultyHostReport", "Feature", "FilingResult", "PlannedRequest",
    "Provider", "attachment_ref", "case_marker", "escalation_of", "filing_key",
]  # fmt: skip


def filing_key(escalation_id: str, tracker_id: str) -> str:
    """What a provider is given as `escalation_id` when it files: the escalation's id and its tracker's id,
    "FC-1.ab12cd34". Every tracker numbers from FC-1; with the tracker's id, two engineers' FC-1 are two
    different keys, so neither adopts (or uploads into) the other's case."""
    return f"{escalation_id}.{tracker_id}"


def escalation_of(key: str) -> str:
    """The escalation id in a filing key ("FC-1.ab12cd34" -> "FC-1"); a bare id is returned as it is."""
    return key.partition(".")[0]


def case_marker(escalation_id: str) -> str:
    """The unique marker a filing puts in the case's subject (and body): after a crash or a timeout, the desk's
    recent cases are searched for it before filing again, so nothing is filed twice. escalation_id: the filing
    key (filing_key), so the marker is unique per tracker too: "[fabricase FC-1.ab12cd34]"."""
    return f"[fabricase {escalation_id}]"


def attachment_ref(path: Path) -> dict[str, Any]:
    """An attachment as a dry run lists it: name, size and sha256, never its bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return {"name": path.name, "size": path.stat().st_size, "sha256": digest.hexdigest()}


class Feature(enum.StrEnum):
    LOCATE = "locate"  # host -> instance, zone and network topology
    FILE_CASE = "file-case"  # open a support case
    ATTACH = "attach"  # attach a bundle to a case
    FAULTY_HOST_REPORT = "faulty-host-report"  # the provider's "this host is bad" channel
    COMMENT = "comment"
    SYNC = "sync"  # read back a case's status
    RESOLVE = "resolve"
    REOPEN = "reopen"
    CHECK = "check"  # `fabricase providers check`: credentials, plan, permissions, without filing


@dataclass(frozen=True)
class PlannedRequest:
    """One API request that an action would send, as `--dry-run` prints it. payload: the request's parameters,
    with every attachment replaced by attachment_ref (name, size, sha256)."""

    service: str  # "support", "ec2", "cloudsupport", "Microsoft.Support", "zendesk", ...
    operation: str  # the API's name for it: "CreateCase", "cases.create", "PUT supportTickets/{name}", ...
    payload: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"service": self.service, "operation": self.operation, "payload": self.payload}


@dataclass(frozen=True)
class CaseComment:
    at: str  # ISO 8601, as the desk gave it
    author: str
    body: str
    from_provider: bool  # True when the desk's people wrote it (waiting on us), False when we did


@dataclass(frozen=True)
class CaseStatus:
    """A case as the desk sees it now: its raw status, the normalized state, and its comments, oldest first."""

    case_id: str
    raw_status: str
    state: EscalationState
    comments: tuple[CaseComment, ...] = ()


@dataclass(frozen=True)
class CheckResult:
    """One line of `fabricase providers check`: what was checked, whether it works, and what was seen."""

    check: str  # "credentials", "support plan", "permission: support:CreateCase", ...
    ok: bool
    detail: str


@dataclass(frozen=True)
class FaultyHostReport:
    """What the provider's faulty-host channel said (AWS report_instance_status, GCP report_host_as_faulty or a
    sub-block's report_faulty, Azure Guest Health Reporting) to one fabricase.faulty.HostReport."""

    channel: str
    reference: str | None  # an operation or impact id, when the API returns one
    raw_status: str


@dataclass(frozen=True)
class FilingResult:
    """What the desk said when it took the case. location: where it lives (a URL, or the outbox folder)."""

    case_id: str
    raw_status: str
    state: EscalationState
    location: str


class Provider(abc.ABC):
    """Base of every provider. Subclasses set `name` and `unsupported` and stay stateless beyond `paths`.

    What the rest of fabricase reads about a provider is declared here too, so that a cloud is one file (the
    registry in providers/__init__.py derives the tables): `limits`, its desk's limits (None: the provider
    files to a configured desk, which declares its own); `scale`, its desk's severity scale (None:
    fabricase's own); `sdk_modules`, what it imports lazily (`providers list` says "sdk missing" without
    them); `extra`, the pyproject extra that installs them; `template`, its ticket template (None:
    `ticket_<name>.md.j2` when there is one, else the generic ticket).
    """

    name: ClassVar[str] = ""
    unsupported: ClassVar[dict[Feature, str]] = {}
    limits: ClassVar[DeskLimits | None] = None
    scale: ClassVar[Scale | None] = None
    sdk_modules: ClassVar[tuple[str, ...]] = ()
    extra: ClassVar[str | None] = None
    template: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        gated_methods(cls)  # every text and file a provider sends passes the redaction gate (redact/gate.py)
        # A missing reason would surface as an empty error message at the worst moment: check at import.
        for feature, reason in cls.unsupported.items():
            if not isinstance(feature, Feature) or not isinstance(reason, str) or not reason.strip():
                raise TypeError(f"{cls.__name__}.unsupported: {feature!r} needs a Feature and a reason")

    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    def supports(self, feature: Feature) -> bool:
        return Feature(feature) not in self.unsupported

    def require(self, feature: Feature) -> None:
        """Raise UnsupportedError, with the declared reason, when this provider lacks `feature`."""
        feature = Feature(feature)
        reason = self.unsupported.get(feature)
        if reason is not None:
            raise UnsupportedError(f"{feature.value} is not supported: {reason}", where=self.name)

    @abc.abstractmethod
    def locate(self, hosts: list[dict[str, Any]]) -> list[Placement]:
        """One Placement per host, in order. hosts: [{"host": name, "identity": {...}}] where identity holds
        what the capture read (DMI fields, instance id where the host exposes one)."""

    @abc.abstractmethod
    def file_case(self, *, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> FilingResult:
        """Open (or, when already opened for this escalation, find again) the support case."""

    @abc.abstractmethod
    def resolve_case(self, case_id: str, note: str | None) -> None:
        """Tell the desk that the case is resolved."""

    # Optional features: a provider that lacks one declares it in `unsupported`; these defaults then refuse
    # with the declared reason. A provider that has it overrides the method.

    def plan_case(self, *, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> list[PlannedRequest]:
        """The requests file_case would send, in order, without sending any (`--dry-run`)."""
        return [PlannedRequest(self.name, "file_case", {
            "escalation_id": escalation_id, "title": draft.title, "body_chars": len(draft.body),
            "attachments": [attachment_ref(Path(bundle_path))] if bundle_path is not None else [],
        })]

    def find_case(self, escalation_id: str) -> FilingResult | None:
        """The case this escalation already opened (found by case_marker among the desk's recent cases), or
        None: how a filing interrupted by a crash or a timeout is reconciled before trying again."""
        self.require(Feature.SYNC)
        raise NotImplementedError(f"{self.name}: find_case")

    def attach(self, case_id: str, files: list[Path], note: str) -> None:
        """Add files to the case, with a note, through the desk's upload path."""
        self.require(Feature.ATTACH)
        raise NotImplementedError(f"{self.name}: attach")

    def comment(self, case_id: str, text: str) -> None:
        self.require(Feature.COMMENT)
        raise NotImplementedError(f"{self.name}: comment")

    def case_status(self, case_id: str) -> CaseStatus:
        """The case's status and comments as the desk has them now (`fabricase sync`)."""
        self.require(Feature.SYNC)
        raise NotImplementedError(f"{self.name}: case_status")

    def reopen_case(self, case_id: str, note: str) -> None:
        self.require(Feature.REOPEN)
        raise NotImplementedError(f"{self.name}: reopen_case")

    def report_faulty_host(self, placement: Placement, report: HostReport, *,
                           disruption: str = "future") -> FaultyHostReport:
        """Tell the provider, through its faulty-host channel, that this host is bad: `report` (fabricase.faulty
        .plan_reports) carries the host's own provider-owned major or critical suspects, the category, the
        description (naming the support case) and the start of its first error. `disruption` ("future" or
        "immediate") is GCE's schedule; a cloud without one ignores it. Only `fabricase report-faulty` (and
        `open --report-faulty`) call this, through fabricase.faulty.send_reports, which records and dedupes."""
        self.require(Feature.FAULTY_HOST_REPORT)
        raise NotImplementedError(f"{self.name}: report_faulty_host")

    def desk_severity(self, severity: Severity | str) -> DeskSeverity | None:
        """The level this provider's desk is sent for a ticket of `severity`: its scale, caps, plan and overrides
        applied, exactly as file_case sends it. The ticket's body says this, so the two never disagree. None: the
        provider has no severity field of its own."""
        return None

    def check(self) -> list[CheckResult]:
        """What works for this provider here (credentials found, support plan, permissions), filing nothing."""
        self.require(Feature.CHECK)
        raise NotImplementedError(f"{self.name}: check")


gated_methods(Provider)
