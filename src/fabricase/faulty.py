"""Faulty-host reports: which hosts to tell the cloud about, what to tell it, and telling it once.

A cloud's faulty-host channel (EC2 ReportInstanceStatus, GCE reportHostAsFaulty or a sub-block's reportFaulty,
Azure Guest Health Reporting) takes a host out of service, so a report must be about that host alone and only
for a fault the provider repairs:

- `plan_reports` (pure): one `HostReport` per host with a provider-owned suspect of major or critical severity,
  carrying that host's own suspects only, the provider's category and a description built from them, the start
  of its first error (`first_errors`) and the support case it belongs to;
- `send_reports`: the request each report makes (the provider module's `planned_report`, the same function its
  `report_faulty_host` sends through), printed on a dry run, or sent and recorded in the tracker as a
  "faulty-report" event per host and channel, so that running it again sends nothing twice.

docs/providers/faulty-host.md describes the command (`fabricase report-faulty`) and each channel.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from fabricase.errors import FabricaseError, ProviderError, TargetError
from fabricase.models import Capture, Finding, Placement, Severity
from fabricase.redact import gate

if TYPE_CHECKING:
    from fabricase.diagnosis import Diagnosis, Suspect
    from fabricase.providers.base import PlannedRequest, Provider
    from fabricase.tracker.store import Tracker

__all__ = [
    "CATEGORIES", "DISRUPTIONS", "EVENT_KIND", "INTENT_KIND", "PLANNERS", "REPORTED_SEVERITIES", "RESEND_SAFE",
    "HostReport", "Intent", "ReportOutcome",
    "ReportRequest", "captured_at", "describe", "first_errors", "plan_reports", "plan_request", "report_header",
    "reportable_suspects", "request_hash", "send_reports", "suspect_line",
]  # fmt: skip

REPORTED_SEVERITIES = (Severity.CRITICAL, Severity.MAJOR)
# GCE's disruption schedule: "future" lets the VM run on (it is moved at a time Compute Engine schedules);
# "immediate" stops it now and restarts it on another host. Other clouds have no schedule.
DISRUPTIONS = ("future", "immediate")
EVENT_KIND = "faulty-report"
DESCRIPTION_MAX = 1000  # every channel's description is kept to this; the support case carries the rest

# provider -> "module:function" that builds one host's request (ReportRequest) without sending it. The provider's
# report_faulty_host sends exactly what this function builds, so a dry run shows what a real run sends.
PLANNERS: dict[str, str] = {
    "aws": "fabricase.providers.aws_ec2:planned_report",
    "gcp": "fabricase.providers.gcp_compute:planned_report",
    "azure": "fabricase.providers.azure_health:planned_report",
}
# provider -> "module:function" giving the provider's own category for a host's findings (worst first).
CATEGORIES: dict[str, str] = {
    "aws": "fabricase.providers.aws_ec2:report_category",
    "gcp": "fabricase.providers.gcp_compute:report_category",
    "azure": "fabricase.providers.azure_health:report_category",
}


class Escalated(Protocol):
    """What a report needs of its escalation: its id and the provider's case id (None before filing)."""

    id: str
    provider_case_id: str | None


@dataclass(frozen=True)
class Intent:
    """An escalation that is not recorded (`open --dry-run --report-faulty`): an id to name, no case yet."""

    id: str
    provider_case_id: str | None = None


@dataclass(frozen=True)
class HostReport:
    """One host's faulty-host report: its own provider-owned major or critical suspects, the findings behind
    them (major or critical only), the provider's category, the description sent, when its first error began,
    and the escalation and support case it belongs to."""

    host: str
    instance: str | None  # the instance id the placement names (an ARM resource id on Azure)
    suspects: tuple[Suspect, ...]
    findings: tuple[Finding, ...]
    category: str  # the provider's category: an ec2 reason code, a GCE behavior, an Azure impact category
    description: str  # names the escalation and the support case first, then one line per suspect
    start: datetime  # UTC
    case: str | None  # the support case id, None when the escalation is not filed yet
    escalation: str
    placement: Placement

    @property
    def header(self) -> str:
        return report_header(self.escalation, self.case, self.host, len(self.suspects))


@dataclass(frozen=True)
class ReportRequest:
    """The one request a host's report makes: the channel it goes to and the request as the SDK takes it."""

    channel: str  # "ec2:ReportInstanceStatus", "compute.instances.reportHostAsFaulty", ...
    request: PlannedRequest


@dataclass(frozen=True)
class ReportOutcome:
    """What happened to one host's report. status: "would send" (dry run), "sent", "already reported" (a
    faulty-report event of this escalation has the same host and channel), "cannot report" (the request cannot
    be made: no instance id, not located), "failed" (the channel refused it) or "maybe reported" (an earlier
    run stopped while sending it, on a channel where a second report is a second record: not sent again)."""

    host: str
    status: str
    channel: str | None = None
    reference: str | None = None
    detail: str = ""
    request: dict[str, Any] = field(default_factory=dict)
    report: HostReport | None = None

    def to_dict(self) -> dict[str, Any]:
        r = self.report
        return {
            "host": self.host, "status": self.status, "channel": self.channel, "reference": self.reference,
            "detail": self.detail, "request": self.request,
            "instance": r.instance if r else None, "category": r.category if r else None,
            "start": _iso(r.start) if r else None, "case": r.case if r else None,
            "suspects": [s.name for s in r.suspects] if r else [],
        }


def _load(spec: str) -> Callable[..., Any]:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- planning (pure) --------------------------------------------------------------------------------------------


def reportable_suspects(diagnosis: Diagnosis) -> dict[str, list[Suspect]]:
    """host -> its provider-owned suspects of major or critical severity, worst first. A shared suspect (a
    switch, a block) is no one host's: it goes in the support case, never in a host's report."""
    out: dict[str, list[Suspect]] = {}
    for s in diagnosis.suspects:
        if s.owner == "provider" and s.host and Severity(s.severity) in REPORTED_SEVERITIES:
            out.setdefault(s.host, []).append(s)
    return {host: sorted(found, key=lambda s: Severity(s.severity).rank) for host, found in sorted(out.items())}


def suspect_line(s: Suspect) -> str:
    """`major: gpu003 mlx5_5/1 (ens6np0): bad link (cable, optic or switch port); symbol_error 40 in 5 s`."""
    number = " ".join((s.key_number or "").split())
    return f"{Severity(s.severity)}: {s.name}: {s.verdict_text}" + (f"; {number}" if number else "")


def report_header(escalation: str, case: str | None, host: str, suspects: int) -> str:
    """The line every report leads with, so that the cloud's engineers find the support case."""
    where = f"support case {case}" if case else "support case not filed yet"
    plural = "suspect" if suspects == 1 else "suspects"
    return f"fabricase {escalation}, {where}: {suspects} {plural} on {host}"


def describe(header: str, lines: Iterable[str], limit: int = DESCRIPTION_MAX) -> str:
    """The header, then the lines, gated as one text (a key spread over lines is one key again), cut to
    `limit` characters: the header (the case) always survives the cut."""
    text = gate.text("\n".join([header, *lines]))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _findings_of(suspects: Sequence[Suspect], by_id: Mapping[str, Finding], host: str) -> tuple[Finding, ...]:
    out: list[Finding] = []
    for s in suspects:
        for fid in s.findings:
            f = by_id.get(fid)
            if f is not None and f.host == host and f.severity in REPORTED_SEVERITIES and f not in out:
                out.append(f)
    return tuple(sorted(out, key=lambda f: f.sort_key))


def plan_reports(diagnosis: Diagnosis, placements: Sequence[Placement], escalation: Escalated, *, provider: str,
                 findings: Sequence[Finding], first_errors: Mapping[str, datetime], captured_at: datetime,
                 hosts: Sequence[str] = ()) -> list[HostReport]:
    """One report per host with a provider-owned suspect of major or critical severity (only `hosts`, when
    given: naming a host with none is a TargetError), each with its own suspects only. An empty list means
    there is nothing to report: the caller refuses."""
    from fabricase.diagnosis import finding_ids

    if provider not in CATEGORIES:
        raise ProviderError(f"{provider} has no faulty-host channel (known: {', '.join(sorted(CATEGORIES))})",
                            where=escalation.id)
    category_of = _load(CATEGORIES[provider])
    by_id = dict(zip(finding_ids(list(findings)), findings, strict=True))
    by_host = reportable_suspects(diagnosis)
    wanted = list(dict.fromkeys(hosts))
    missing = [h for h in wanted if h not in by_host]
    if missing:
        raise TargetError(f"{', '.join(missing)}: no provider-owned suspect of major or critical severity to "
                          "report", where=escalation.id)
    placed = {p.host: p for p in placements}
    reports = []
    for host, suspects in by_host.items():
        if wanted and host not in wanted:
            continue
        placement = placed.get(host) or Placement(host=host, provider=provider)
        own = _findings_of(suspects, by_id, host)
        header = report_header(escalation.id, escalation.provider_case_id, host, len(suspects))
        reports.append(HostReport(
            host=host, instance=placement.instance_id, suspects=tuple(suspects), findings=own,
            category=category_of(placement, own), description=describe(header, map(suspect_line, suspects)),
            start=first_errors.get(host, captured_at), case=escalation.provider_case_id, escalation=escalation.id,
            placement=placement))
    return reports


# -- when the first error began ---------------------------------------------------------------------------------

_KERNEL_LOG = "cmd:kernel-log"
_CTIME = "%a %b %d %H:%M:%S %Y"


def _kernel_time(stamp: str | None, boot: float | None) -> datetime | None:
    """A kernel log timestamp (ISO 8601, ctime, or seconds since boot) as UTC, or None."""
    if not stamp:
        return None
    stamp = stamp.strip().strip("[]").strip()
    try:
        seconds = float(stamp)
    except ValueError:
        seconds = None
    if seconds is not None:
        return datetime.fromtimestamp(boot + seconds, UTC) if boot is not None else None
    for parse in (datetime.fromisoformat, lambda s: datetime.strptime(" ".join(s.split()), _CTIME)):
        try:
            at = parse(stamp)
        except ValueError:
            continue
        return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return None


def _host_first_error(hc: Any, findings: Sequence[Finding]) -> datetime | None:
    """The earliest time this host's findings can date: the kernel log's own line for a kernel-log finding (an
    event of its kind whose device or interface its summary names), the start of the interval a counter rose
    in, or the snapshot a state was read at."""
    from fabricase.parsers.kernel_log import parse_kernel_log

    epochs = {s.index: s.epoch for s in hc.snapshots if s.epoch is not None}
    first = hc.snapshots[0] if hc.snapshots else None
    boot = first.epoch - first.uptime_start if first and first.epoch is not None and \
        first.uptime_start is not None else None
    times: list[datetime] = []
    events = None
    for f in findings:
        for ev in f.evidence:
            if ev.source == _KERNEL_LOG:
                if events is None:
                    events = parse_kernel_log(hc.text(_KERNEL_LOG, 0)).events
                for e in events:
                    names = [n for n in (e.device, e.interface) if n]
                    at = _kernel_time(e.timestamp, boot) if any(n in f.summary for n in names) else None
                    if at is not None:
                        times.append(at)
            elif ev.snapshot is not None:
                # A counter's rise happened within the interval before the snapshot it was read at.
                index = ev.snapshot - 1 if ev.snapshot > 0 and ev.metric.endswith((".delta", ".rate")) else ev.snapshot
                if epochs.get(index) is not None:
                    times.append(datetime.fromtimestamp(epochs[index], UTC))
    return min(times) if times else None


def first_errors(capture: Capture, findings: Sequence[Finding]) -> dict[str, datetime]:
    """host -> when its first error began, as far as its findings' evidence dates it (hosts it cannot date are
    left out: the caller falls back on the capture's time)."""
    per_host: dict[str, list[Finding]] = {}
    for f in findings:
        if f.host and f.severity in REPORTED_SEVERITIES:
            per_host.setdefault(f.host, []).append(f)
    out = {}
    for host, mine in per_host.items():
        hc = capture.host(host)
        if hc is None:
            continue
        try:
            at = _host_first_error(hc, mine)
        finally:
            hc.release()
        if at is not None:
            out[host] = at
    return out


def captured_at(capture: Capture) -> datetime:
    """The capture's own time (capture.json created_at), the fallback start of a report."""
    try:
        at = datetime.fromisoformat(capture.created_at.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return datetime.now(UTC).replace(microsecond=0)
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


# -- sending ----------------------------------------------------------------------------------------------------


def request_hash(request: PlannedRequest) -> str:
    """sha256 of the request's canonical JSON: what the tracker keeps of what was sent."""
    doc = json.dumps(request.to_dict(), sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(doc.encode()).hexdigest()


INTENT_KIND = "faulty-report-intent"
# Channels where sending the same report again is harmless: GCE's request id names the report (a repeat is the
# same operation), EC2's instance status is a state, not a record. Azure names each impact anew: a report whose
# run died after its intent may have been filed, so it is not sent again without a look at the portal.
RESEND_SAFE = frozenset({"aws", "gcp"})


def _reported(tracker: Tracker, escalation_id: str) -> tuple[dict[tuple[str, str], Mapping[str, Any]],
                                                             set[tuple[str, str]]]:
    """(host, channel) -> the "faulty-report" event's data, and the (host, channel) pairs whose intent was
    recorded but whose report was never recorded (a run that died while sending)."""
    events = tracker.get(escalation_id).events
    done = {(e.data.get("host"), e.data.get("channel")): e.data for e in events if e.kind == EVENT_KIND}
    pending = {(e.data.get("host"), e.data.get("channel")) for e in events if e.kind == INTENT_KIND} - set(done)
    return done, pending


def plan_request(provider: str, report: HostReport, disruption: str) -> ReportRequest:
    """The request `report` makes on `provider`'s channel (ProviderError when it cannot be made)."""
    if disruption not in DISRUPTIONS:
        raise ProviderError(f"unknown disruption schedule {disruption!r} (allowed: {', '.join(DISRUPTIONS)})",
                            where=report.escalation)
    if provider not in PLANNERS:
        raise ProviderError(f"{provider} has no faulty-host channel", where=report.escalation)
    return _load(PLANNERS[provider])(report.placement, report, disruption=disruption)


def send_reports(tracker: Tracker | None, provider: Provider, escalation: Escalated, reports: Sequence[HostReport],
                 *, dry_run: bool, disruption: str = "future") -> list[ReportOutcome]:
    """Each report's request. Dry run: what would be sent, nothing is. Otherwise each host not yet reported on
    its channel for this escalation is sent and recorded ("faulty-report": host, channel, reference, request
    hash); one host's failure does not stop the others. `tracker` may be None only for a dry run."""
    from fabricase.providers.base import Feature

    provider.require(Feature.FAULTY_HOST_REPORT)
    if not dry_run and tracker is None:
        raise ProviderError("a faulty-host report is recorded in the tracker: none given", where=escalation.id)
    done, pending = _reported(tracker, escalation.id) if tracker is not None else ({}, set())
    outcomes = []
    for report in reports:
        try:
            planned = plan_request(provider.name, report, disruption)
        except FabricaseError as exc:
            outcomes.append(ReportOutcome(report.host, "cannot report", detail=exc.message, report=report))
            continue
        common = dict(channel=planned.channel, request=planned.request.to_dict(), report=report)
        earlier = done.get((report.host, planned.channel))
        if earlier is not None:
            outcomes.append(ReportOutcome(report.host, "already reported", reference=earlier.get("reference"),
                                          detail=f"reported earlier ({earlier.get('at') or 'see the timeline'})",
                                          **common))
            continue
        if dry_run:
            outcomes.append(ReportOutcome(report.host, "would send", **common))
            continue
        if (report.host, planned.channel) in pending and provider.name not in RESEND_SAFE:
            outcomes.append(ReportOutcome(report.host, "maybe reported", detail=(
                "an earlier run stopped while sending this report: check the provider's portal before reporting "
                "again"), **common))
            continue
        tracker.add_event(escalation.id, INTENT_KIND, f"reporting {report.host} through {planned.channel}",
                          {"host": report.host, "channel": planned.channel,
                           "request_sha256": request_hash(planned.request)})
        try:
            sent = provider.report_faulty_host(report.placement, report, disruption=disruption)
        except FabricaseError as exc:
            outcomes.append(ReportOutcome(report.host, "failed", detail=exc.message, **common))
            continue
        digest = request_hash(planned.request)
        tracker.add_event(escalation.id, EVENT_KIND,
                          f"{report.host} reported faulty through {planned.channel}"
                          + (f" ({sent.reference})" if sent.reference else ""),
                          {"host": report.host, "channel": planned.channel, "reference": sent.reference,
                           "request_sha256": digest, "raw_status": sent.raw_status, "category": report.category,
                           "at": _iso(datetime.now(UTC))})
        done[(report.host, planned.channel)] = {"reference": sent.reference}
        outcomes.append(ReportOutcome(report.host, "sent", reference=sent.reference, detail=sent.raw_status,
                                      **common))
    return outcomes
