"""Building blocks of the escalation flow after the capture: host summaries, the ticket draft, redaction, the
evidence bundle, coverage and duplicates. fabricase.flow runs them as typed stages; they never print."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabricase.config import Paths
from fabricase.errors import DuplicateError
from fabricase.models import (
    Bundle,
    Capture,
    EscalationEvent,
    Finding,
    HostSummary,
    MetricSample,
    Placement,
    Severity,
    TicketDraft,
)

if TYPE_CHECKING:
    from fabricase.diagnosis import Diagnosis
    from fabricase.models import Escalation
    from fabricase.redact import Redactor
    from fabricase.templates.severity import DeskSeverity
    from fabricase.tracker.store import Coverage, Tracker

__all__ = [
    "build_bundle_for",
    "bundle_scope",
    "coverage",
    "desk_of",
    "duplicate_error",
    "findings_json",
    "fit_draft",
    "host_summaries",
    "make_draft",
    "make_redactor",
    "redact_draft",
    "refuse_duplicates",
    "severity_of",
    "template_of",
    "worst_severity",
]


def host_summaries(capture: Capture) -> list[HostSummary]:
    """Each host's status and identity (what locate, the ticket and the summary say of it). Read once per run:
    the caller passes the list on."""
    from fabricase.parsers.identity import host_identity

    out = []
    for hc in capture.hosts:
        try:
            identity = host_identity(hc) if hc.items else {}
        finally:
            hc.release()  # a fleet's streams must not all stay in memory
        out.append(HostSummary(hc.host, str(hc.status), hc.reason, identity))
    return out


def worst_severity(findings: list[Finding]) -> Severity:
    ranked = sorted((f.severity for f in findings), key=lambda s: s.rank)
    return ranked[0] if ranked else Severity.MINOR


def severity_of(diagnosis: Diagnosis) -> Severity:
    """An escalation's severity: its worst suspect's (minor when nothing was localized: the symptom stands alone)."""
    ranked = sorted((s.severity for s in diagnosis.suspects), key=lambda s: s.rank)
    return ranked[0] if ranked else Severity.MINOR


def _host_dicts(hosts: Sequence[HostSummary | dict] | None) -> list[dict] | None:
    if hosts is None:
        return None
    return [h.to_dict() if isinstance(h, HostSummary) else h for h in hosts]


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
               events: Sequence[EscalationEvent] = (), hosts: Sequence[HostSummary] | None = None,
               diagnosis: Diagnosis | None = None, history: Mapping[str, str] | None = None,
               bundle_sha256: str | None = None, sent_severity: DeskSeverity | None = None) -> TicketDraft:
    """The ticket for the provider's desk, built from the diagnosis's provider-owned suspects: what is broken,
    where, how sure, what was ruled out (`checks`: templates.ruled_out.checks_run(capture.hosts)) and what we ask
    for. `checks`, `hosts` (host_summaries) and the diagnosis (of `findings`, without hardware aliases) are
    computed here when not given. `history`: the repeat offenders' lines (tracker.stats.history_lines), said in
    their suspects' sections. `bundle_sha256`: the written bundle file's sha256 (hashlib.file_digest), said beside
    the bundle id once the archive is written. `sent_severity`: the level the provider sends (its plan applied),
    which the body then states."""
    from fabricase.analysis.probe_text import probe_text
    from fabricase.templates import render_draft
    from fabricase.templates.ruled_out import checks_run

    return render_draft(provider=provider, symptom=symptom, severity=severity, findings=findings,
                        hosts=_host_dicts(hosts if hosts is not None else host_summaries(capture)),
                        placements=placements, bundle_id=bundle_id,
                        capture_created_at=capture.created_at, escalation_id=escalation_id,
                        checks=checks if checks is not None else checks_run(capture.hosts),
                        kernel_logs=_KernelLogs(capture), events=events, diagnosis=diagnosis, history=history,
                        bundle_sha256=bundle_sha256, sent_severity=sent_severity, probe_lines=probe_text(capture))


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


def template_of(provider: str, desk: str) -> str:
    """The ticket template a filing is rendered with: a static provider filing to Jira or Zendesk gets that
    desk's; every other provider its own."""
    return desk if provider == "static" and desk != "outbox" else provider


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
                     redactor: Redactor | None = None, hosts: Sequence[HostSummary] | None = None,
                     diagnosis: Diagnosis | None = None, escalation_id: str | None = None) -> Bundle:
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
        findings=findings, hosts=_host_dicts(hosts if hosts is not None else host_summaries(capture)),
        placements=placements or [], diagnosis=diagnosis,
    ), desk_limits(desk_of(draft.provider)).attachment_max_bytes)
    extra = {
        "findings.json": findings_json(findings).encode(),
        "ticket.md": (draft.title + "\n\n" + draft.body).encode(),
        "summary.md": (draft.summary or "").encode(),
        summary.name: summary.data,
        "report.html": html_report(capture, findings, placements or [], samples, diagnosis=diagnosis,
                                   symptom=symptom, escalation_id=escalation_id),
        "reproduce.sh": reproduce_script(capture).encode(),
        "capture-script.sh": capture_script(capture).encode(),
    }
    return build_bundle(capture.root, out, extra=extra, mtime=_epoch(capture.created_at),
                        redactor=redactor or make_redactor(capture))


def coverage(capture: Capture, diagnosis: Diagnosis,
             placements: list[Placement]) -> tuple[list[str], dict[str, str], list[tuple[None, str]]]:
    """What an escalation covers: the hosts with a suspect (every captured host when none has: the symptom is
    the whole job's), their instance ids, and the shared components that are suspects."""
    faulty = sorted({s.host for s in diagnosis.suspects if s.host})
    hosts = faulty or [hc.host for hc in capture.hosts]
    instances = {p.host: p.instance_id for p in placements if p.instance_id and p.host in hosts}
    shared = sorted({(None, s.components[0]) for s in diagnosis.suspects if s.host is None}, key=lambda hc: hc[1])
    return hosts, instances, shared


def _next_step(esc: Escalation) -> str:
    """The command that really applies to an escalation covering the same hosts."""
    from fabricase.filing import holder

    if esc.provider_case_id is not None:
        return f"add this evidence with `fabricase attach {esc.id} --capture DIR`"
    return holder(esc) or f"its filing did not finish: `fabricase retry {esc.id}`"


def duplicate_error(tracker: Tracker, provider: str, found: list[Coverage]) -> DuplicateError:
    """DuplicateError naming each open escalation that already covers these hosts, what it covers, and for each
    the command that applies (attach to a filed case; retry an unfiled one; wait for one being filed)."""
    escs = [(tracker.get(c.escalation_id), c.matched) for c in found]
    said = "; ".join(f"{esc.id} ({', '.join(what[:3])}{', ...' if len(what) > 3 else ''}): {_next_step(esc)}"
                     for esc, what in escs)
    return DuplicateError(f"already covered by open escalation(s) {said}; or file a new case anyway with --force",
                          where=provider, duplicates=[(esc.id, what) for esc, what in escs])


def refuse_duplicates(tracker: Tracker, provider: str, hosts: list[str], instances: dict[str, str],
                      shared: list[tuple[None, str]]) -> None:
    """Raise DuplicateError, naming each open escalation that already covers one of these, and what."""
    found = tracker.covering(provider=provider, hosts=hosts, instances=instances.values(),
                             components=[c for _, c in shared])
    if found:
        raise duplicate_error(tracker, provider, found)
