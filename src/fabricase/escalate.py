"""The escalation flow after the capture: analyze -> locate -> bundle -> render -> file -> track. The CLI calls
these; they never print."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabricase.capturedir import (
    load_placements,
    write_placements,
)
from fabricase.config import Paths
from fabricase.errors import (
    DuplicateError,
    ParseError,
)
from fabricase.models import (
    Bundle,
    Capture,
    Escalation,
    EscalationEvent,
    Finding,
    MetricSample,
    Placement,
    Severity,
    TicketDraft,
)

if TYPE_CHECKING:
    from fabricase.diagnosis import Diagnosis
    from fabricase.providers.base import PlannedRequest
    from fabricase.redact import Redactor
    from fabricase.tracker.store import Tracker

from fabricase.pipeline import analyze_capture, diagnose_capture
from fabricase.placements import (
    merge_placements,
    resolve_placements,
    topology_of,
)

__all__ = [
    "OpenResult",
    "build_bundle_for",
    "bundle_scope",
    "coverage",
    "desk_of",
    "evidence_bundle",
    "findings_json",
    "fit_draft",
    "host_summaries",
    "make_draft",
    "make_redactor",
    "open_escalation",
    "redact_draft",
    "refuse_duplicates",
    "worst_severity",
]

def host_summaries(capture: Capture) -> list[dict]:
    """Each host's status and identity (what locate, the ticket and the summary say of it). Read once per run:
    the caller passes the list on."""
    from fabricase.parsers.identity import host_identity

    out = []
    for hc in capture.hosts:
        try:
            identity = host_identity(hc) if hc.items else {}
        finally:
            hc.release()  # a fleet's streams must not all stay in memory
        out.append({"host": hc.host, "status": str(hc.status), "reason": hc.reason, "identity": identity})
    return out


def worst_severity(findings: list[Finding]) -> Severity:
    ranked = sorted((f.severity for f in findings), key=lambda s: s.rank)
    return ranked[0] if ranked else Severity.MINOR


class _KernelLogs(Mapping[str, str | None]):
    """host -> its captured kernel log, read only when the timeline asks for that host."""

    def __init__(self, capture: Capture) -> None:
        self._hosts = {hc.host: hc for hc in capture.hosts}

    def __getitem__(self, host: str) -> str | None:
        hc = self._hosts[host]
        try:
            return hc.text("cmd:kernel-log")
        finally:
            hc.release()

    def __iter__(self) -> Iterator[str]:
        return iter(self._hosts)

    def __len__(self) -> int:
        return len(self._hosts)


def make_draft(capture: Capture, findings: list[Finding], *, provider: str, symptom: str,
               severity: Severity, placements: list[Placement], bundle_id: str | None,
               escalation_id: str | None, checks: Mapping[str, Any] | None = None,
               events: Sequence[EscalationEvent] = (), hosts: list[dict] | None = None) -> TicketDraft:
    """The ticket for the provider's desk: what was found, where, since when, what was ruled out (`checks`:
    templates.ruled_out.checks_run(capture.hosts)) and what we ask for. `checks` and `hosts` (host_summaries)
    are computed here when not given."""
    from fabricase.templates import render_draft
    from fabricase.templates.ruled_out import checks_run

    return render_draft(provider=provider, symptom=symptom, severity=severity, findings=findings,
                        hosts=hosts if hosts is not None else host_summaries(capture), placements=placements,
                        bundle_id=bundle_id,
                        capture_created_at=capture.created_at, escalation_id=escalation_id,
                        checks=checks if checks is not None else checks_run(capture.hosts),
                        kernel_logs=_KernelLogs(capture), events=events)


def _epoch(created_at: str) -> int:
    try:
        return int(datetime.strptime(created_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp())
    except ValueError:
        return 0


def findings_json(findings: list[Finding]) -> str:
    return json.dumps([f.to_dict() for f in findings], indent=2, sort_keys=True) + "\n"


def desk_of(provider: str, paths: Paths | None = None) -> str:
    """The desk that takes a provider's cases, whose limits its filings are fitted to and whose ticket template
    is rendered (bundler.limits.DESK_LIMITS): the static provider's configured desk (`[providers.static] desk`,
    outbox by default), else the provider's own."""
    from fabricase.bundler.limits import DESK_LIMITS
    from fabricase.config import provider_profile

    if provider == "static":
        desk = str(provider_profile(paths, "static").get("desk", "outbox")) if paths is not None else "outbox"
        return desk if desk in DESK_LIMITS else "generic"
    return provider if provider in DESK_LIMITS else "generic"


def fit_draft(draft: TicketDraft, desk: str) -> TicketDraft:
    """The draft with its body fitted to the desk's length limit (bundler.body.fit_ticket)."""
    from fabricase.bundler.body import fit_ticket

    return fit_ticket(draft, desk)


def make_redactor(capture: Capture, *, pseudonymize: bool = False, key: bytes | None = None) -> Redactor:
    """Secrets are always redacted; host names, addresses, MACs, GUIDs and users too when `pseudonymize`, with
    pseudonyms under `key` (the tracker keeps one per escalation: Tracker.pseudonym_key)."""
    from fabricase.redact import Redactor

    return Redactor(pseudonymize=pseudonymize, key=key, hosts=[hc.host for hc in capture.hosts])


def redact_draft(draft: TicketDraft, redactor: Redactor) -> TicketDraft:
    """The draft as the desk will see it: the same redaction as the bundle, so no secret reaches a ticket."""
    return dataclasses.replace(
        draft,
        title=redactor.redact_text("ticket.md", draft.title),
        body=redactor.redact_text("ticket.md", draft.body),
        summary=redactor.redact_text("summary.md", draft.summary) if draft.summary else draft.summary,
        hosts=[redactor.redact_text("hosts", h) for h in draft.hosts],
    )


def bundle_scope(capture: Capture) -> str:
    """The pseudonym-key scope of a capture bundled outside any escalation."""
    return f"capture:{Path(capture.root).resolve()}"


def build_bundle_for(capture: Capture, findings: list[Finding], draft: TicketDraft, out: Path, *,
                     placements: list[Placement] | None = None,
                     samples: dict[str, list[MetricSample]] | None = None, symptom: str = "",
                     redactor: Redactor | None = None, hosts: list[dict] | None = None) -> Bundle:
    """The evidence bundle: the capture directory, findings, the ticket draft, the summaries (Markdown, and JSON
    fitted to the draft's desk), the HTML report (`samples`: what analyze_capture put in samples_out; without
    them the report reads the capture again), and reproduce.sh with the capture script it runs."""
    from fabricase.bundler.archive import build_bundle
    from fabricase.bundler.limits import desk_limits
    from fabricase.bundler.reproduce import capture_script, reproduce_script
    from fabricase.bundler.summary import SummaryInput, fit_summary
    from fabricase.report import html_report

    summary = fit_summary(SummaryInput(
        title=draft.title, symptom=symptom or draft.title, severity=str(draft.severity), captured_at=capture.created_at,
        findings=findings, hosts=hosts if hosts is not None else host_summaries(capture),
        placements=placements or [],
    ), desk_limits(desk_of(draft.provider)).attachment_max_bytes)
    extra = {
        "findings.json": findings_json(findings).encode(),
        "ticket.md": (draft.title + "\n\n" + draft.body).encode(),
        "summary.md": (draft.summary or "").encode(),
        summary.name: summary.data,
        "report.html": html_report(capture, findings, placements or [], samples),
        "reproduce.sh": reproduce_script(capture).encode(),
        "capture-script.sh": capture_script(capture).encode(),
    }
    return build_bundle(capture.root, out, extra=extra, mtime=_epoch(capture.created_at),
                        redactor=redactor or make_redactor(capture))


@dataclass
class OpenResult:
    capture: Capture
    findings: list[Finding]
    bundle: Bundle
    draft: TicketDraft
    escalation: Escalation | None  # None on --dry-run
    ticket_path: Path
    filed_at: str | None = None
    placements: list[Placement] = field(default_factory=list)
    requests: list[PlannedRequest] = field(default_factory=list)  # --dry-run: what filing would send
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase (open_escalation)
    diagnosis: Diagnosis | None = None  # the suspects and background the findings were turned into


_SERIOUS = (Severity.CRITICAL, Severity.MAJOR)


def coverage(capture: Capture, findings: list[Finding],
             placements: list[Placement]) -> tuple[list[str], dict[str, str], list[tuple[None, str]]]:
    """What an escalation covers: the hosts with a major or critical finding (every captured host when none
    has: the symptom is the whole job's), their instance ids, and the shared components found at fault."""
    faulty = sorted({f.host for f in findings if f.host and f.severity in _SERIOUS})
    hosts = faulty or [hc.host for hc in capture.hosts]
    instances = {p.host: p.instance_id for p in placements if p.instance_id and p.host in hosts}
    shared = sorted({(None, f.component) for f in findings if f.host is None and f.severity in _SERIOUS},
                    key=lambda hc: hc[1])
    return hosts, instances, shared


def refuse_duplicates(tracker: Tracker, provider: str, hosts: list[str], instances: dict[str, str],
                      shared: list[tuple[None, str]]) -> None:
    """Raise DuplicateError, naming each open escalation that already covers one of these, and what."""
    from fabricase.filing import explain_duplicates

    found = explain_duplicates(tracker, provider=provider, hosts=hosts, instances=instances, components=shared)
    if not found:
        return
    said = "; ".join(f"{esc.id} ({', '.join(what[:3])}{', ...' if len(what) > 3 else ''})" for esc, what in found)
    first = found[0][0].id
    raise DuplicateError(f"already covered by open escalation(s) {said}: add this evidence with "
                         f"`fabricase attach {first} FILE`, or file a new case anyway with --force",
                         where=provider, duplicates=[(esc.id, what) for esc, what in found])


class _Clock:
    """Seconds spent per phase of one run (`with clock("bundle"): ...`), for the record of where time goes."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.spent[phase] = round(self.spent.get(phase, 0.0) + time.perf_counter() - t0, 4)


def open_escalation(capture: Capture, paths: Paths, *, provider_name: str, symptom: str,
                    severity: Severity | None, dry_run: bool = False, pseudonymize: bool = False,
                    force: bool = False) -> OpenResult:
    """Analyze, locate, bundle, render, file and track one escalation for an existing capture. The result's
    `timings` say where the time went: locate, analyze, render, bundle, record, file (the desk, uploads included)."""
    from fabricase.filing import file_escalation
    from fabricase.providers import get_provider
    from fabricase.templates.ruled_out import checks_run
    from fabricase.tracker.store import Tracker

    clock = _Clock()
    provider = get_provider(provider_name, paths)
    summaries = host_summaries(capture)  # read once: locate, the tickets and the summary share it
    with clock("locate"):
        located = [dataclasses.replace(p, source=p.source or f"provider:{provider_name}")
                   for p in provider.locate(summaries)]
        try:
            stored = load_placements(capture.root) or []
        except ParseError as exc:
            raise ParseError(f"{exc.message}; fix or remove it before opening", where=exc.where) from exc
        # Stored before the bundle is built, so that the bundle carries them and re-analysis names the switch.
        placements = merge_placements(stored, located)
        write_placements(capture.root, placements)
    with clock("analyze"):
        analysis = diagnose_capture(capture, topology_of(placements), placements)
    findings, samples, diagnosis = analysis.findings, analysis.samples, analysis.diagnosis
    severity = severity or worst_severity(findings)
    desk = desk_of(provider_name, paths)
    with clock("render"):
        # The ticket is written for the desk that will read it: a static provider filing to Jira gets Jira's.
        draft_kw = dict(provider=desk if provider_name == "static" and desk != "outbox" else provider_name,
                        symptom=symptom, severity=severity, placements=placements, checks=checks_run(capture.hosts),
                        hosts=summaries)
    bundle_kw = dict(placements=placements, samples=samples, symptom=symptom, hosts=summaries)

    if dry_run:
        key = None
        if pseudonymize:
            with Tracker.open(paths) as keys:
                key = keys.pseudonym_key(bundle_scope(capture))
        redactor = make_redactor(capture, pseudonymize=pseudonymize, key=key)
        with clock("render"):
            inner = make_draft(capture, findings, bundle_id=None, escalation_id=None, **draft_kw)
        bundle_path = paths.bundles / f"dry-run-{capture.root.name}.tar.gz"
        with clock("bundle"):
            bundle = build_bundle_for(capture, findings, inner, bundle_path, redactor=redactor, **bundle_kw)
        with clock("render"):
            draft = redact_draft(make_draft(capture, findings, bundle_id=bundle.bundle_id, escalation_id=None,
                                            **draft_kw), redactor)
        ticket = bundle_path.with_suffix("").with_suffix(".ticket.md")
        ticket.write_text(draft.title + "\n\n" + draft.body)
        requests = provider.plan_case(escalation_id="FC-dry-run", draft=fit_draft(draft, desk),
                                      bundle_path=bundle.path)
        return OpenResult(capture, findings, bundle, draft, None, ticket, placements=placements, requests=requests,
                          timings=clock.spent, diagnosis=diagnosis)

    with clock("record"):
        tracker = Tracker.open(paths)
        hosts, instances, shared = coverage(capture, findings, placements)
        if not force:
            refuse_duplicates(tracker, provider_name, hosts, instances, shared)
        components = sorted({(f.host, f.component) for f in findings}, key=lambda hc: (hc[0] or "", hc[1]))
        esc = tracker.create(provider=provider_name, title=symptom[:120], symptom=symptom, severity=severity,
                             hosts=hosts, components=components, instances=instances)
        redactor = make_redactor(capture, pseudonymize=pseudonymize,
                                 key=tracker.pseudonym_key(esc.id) if pseudonymize else None)
    with clock("render"):
        inner = make_draft(capture, findings, bundle_id=None, escalation_id=esc.id, **draft_kw)
    with clock("bundle"):
        bundle = build_bundle_for(capture, findings, inner,
                                  paths.bundles / f"{esc.id}-{capture.root.name}.tar.gz", redactor=redactor,
                                  **bundle_kw)
    with clock("record"):
        tracker.add_event(esc.id, "bundle", f"bundle {bundle.bundle_id[:16]} built", {"path": str(bundle.path)})
    with clock("render"):
        draft = redact_draft(make_draft(capture, findings, bundle_id=bundle.bundle_id, escalation_id=esc.id,
                                        **draft_kw), redactor)
    with clock("file"):
        # Idempotent: the intent is recorded before the desk is called, and a retry reconciles by the case marker.
        esc = file_escalation(tracker, provider, esc.id, fit_draft(draft, desk), bundle.path)
    ticket = Path(esc.ticket_path) if esc.ticket_path else bundle.path
    return OpenResult(capture, findings, bundle, draft, esc, ticket, filed_at=esc.ticket_path,
                      placements=placements, timings=clock.spent, diagnosis=diagnosis)


def evidence_bundle(capture: Capture, paths: Paths, esc: Escalation, *,
                    pseudonymize: bool = False) -> tuple[Bundle, list[Finding]]:
    """A new bundle of a capture for an existing escalation (`fabricase attach --capture`): analyzed with the
    capture's placements, rendered for the escalation's desk, redacted (with the escalation's pseudonym key when
    asked), written next to the escalation's first bundle."""
    from fabricase.templates.ruled_out import checks_run
    from fabricase.tracker.store import Tracker

    placements, _ = resolve_placements(capture, None, paths)
    summaries = host_summaries(capture)
    samples: dict[str, list[MetricSample]] = {}
    findings = analyze_capture(capture, topology_of(placements), samples_out=samples)
    desk = desk_of(esc.provider, paths)
    provider = desk if esc.provider == "static" and desk != "outbox" else esc.provider
    key = None
    if pseudonymize:
        with Tracker.open(paths) as keys:
            key = keys.pseudonym_key(esc.id)
    redactor = make_redactor(capture, pseudonymize=pseudonymize, key=key)
    draft = make_draft(capture, findings, provider=provider, symptom=esc.symptom, severity=worst_severity(findings),
                       placements=placements, bundle_id=None, escalation_id=esc.id, checks=checks_run(capture.hosts),
                       hosts=summaries)
    out = paths.bundles / f"{esc.id}-{Path(capture.root).name}.tar.gz"
    bundle = build_bundle_for(capture, findings, draft, out, placements=placements, samples=samples,
                              symptom=esc.symptom, redactor=redactor, hosts=summaries)
    return bundle, findings
