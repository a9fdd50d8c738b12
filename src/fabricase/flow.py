"""The `open` flow as typed stages, each taking the records the earlier ones made and returning its own:

    capture -> locate (Located) -> diagnose (Analysis) -> plan (EscalationPlan) -> record (Recorded)
            -> bundle (Bundle) -> render (Rendered) -> file (Escalation) -> track

`open`, `open --dry-run` and `attach --capture` run the same sequence (`run`); they differ only in where it stops
and in what `record` does (a new escalation, none for a dry run, the existing one for attach). Why this order, and
where it departs from the architecture's, is in docs/open-flow.md: placements come before analysis (topology
correlation needs them), and the escalation's key exists before anything is redacted (pseudonyms are keyed per
escalation). The CLI calls `open_escalation` and `attach_capture`; nothing here prints."""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabricase.escalate import (
    build_bundle_for,
    bundle_scope,
    coverage,
    desk_of,
    duplicate_error,
    fit_draft,
    host_summaries,
    make_draft,
    make_redactor,
    redact_draft,
    severity_of,
    template_of,
)
from fabricase.models import Bundle, Capture, Escalation, HostSummary, Placement, Severity, TicketDraft
from fabricase.pipeline import Analysis, diagnose_capture
from fabricase.placements import topology_of
from fabricase.redact import gate

if TYPE_CHECKING:
    from fabricase.bundler.upload import UploadTarget
    from fabricase.config import Paths
    from fabricase.diagnosis import Diagnosis
    from fabricase.providers.base import PlannedRequest, Provider
    from fabricase.redact import Redactor
    from fabricase.templates.severity import DeskSeverity
    from fabricase.tracker.store import Coverage, Tracker

__all__ = [
    "EscalationPlan",
    "Located",
    "OpenResult",
    "Recorded",
    "Rendered",
    "attach_capture",
    "locate",
    "open_escalation",
    "plan",
    "rebuild",
    "record",
    "render",
    "run",
]  # fmt: skip


@dataclass(frozen=True)
class Located:
    """Where the hosts sit (stored in the capture before analysis) and what the capture says of each host."""

    placements: list[Placement]
    hosts: list[HostSummary]


@dataclass(frozen=True)
class EscalationPlan:
    """What one escalation is about and where it goes, decided from the diagnosis before anything is written."""

    provider: str  # where it is filed: aws, gcp, azure, static
    desk: str  # whose limits and template: bundler.limits.DESK_LIMITS key
    template: str  # the ticket template rendered (a static provider filing to Jira gets Jira's)
    symptom: str
    severity: Severity
    hosts: list[str]  # covered: hosts with a suspect (every captured host when none has)
    instances: dict[str, str]  # host -> instance id, of those hosts
    shared: list[tuple[None, str]]  # shared components with a suspect
    components: list[tuple[str | None, str]]  # (host, component) of every suspect
    sent_severity: DeskSeverity | None = None  # the level the provider's desk is sent (its plan applied)
    warning: str | None = None  # said first in the ticket: filed with --force although ...


@dataclass(frozen=True)
class Recorded:
    """The escalation the bundle and ticket belong to (None: a dry run) and the redactor keyed for it. resumed:
    `open` found an unfiled escalation of its own hosts (a filing that did not finish) and goes on with it."""

    escalation: Escalation | None
    redactor: Redactor
    resumed: bool = False
    history: dict[str, str] = field(default_factory=dict)  # repeat offenders' lines (`history`), for the ticket


@dataclass(frozen=True)
class Rendered:
    """The ticket as the desk sees it: redacted (`draft`, the whole text) and fitted to the desk (`fitted`)."""

    draft: TicketDraft
    fitted: TicketDraft


@dataclass
class OpenResult:
    capture: Capture
    findings: list
    bundle: Bundle
    draft: TicketDraft
    escalation: Escalation | None  # None on --dry-run
    ticket_path: Path | str  # the outbox file, the bundle (a dry run), or the desk's case URL
    filed_at: str | None = None
    placements: list[Placement] = field(default_factory=list)
    requests: list[PlannedRequest] = field(default_factory=list)  # --dry-run: what filing would send
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage
    diagnosis: Diagnosis | None = None  # the suspects and background (always set by open_escalation)
    resumed: bool = False  # an unfiled escalation of the same hosts was finished instead of a new one made
    case_marker: str | None = None  # what the case's subject carries: "[fabricase FC-1.<tracker id>]"


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


def locate(capture: Capture, provider: Provider, provider_name: str) -> Located:
    """The provider's placements merged over the stored ones, and written to the capture before analysis, so that
    the bundle carries them and a later `analyze BUNDLE` names the same switch."""
    from fabricase.capturedir import load_placements, write_placements
    from fabricase.errors import ParseError
    from fabricase.placements import merge_placements

    hosts = host_summaries(capture)
    located = [dataclasses.replace(p, source=p.source or f"provider:{provider_name}")
               for p in provider.locate([h.to_dict() for h in hosts])]
    try:
        stored = load_placements(capture.root) or []
    except ParseError as exc:
        raise ParseError(f"{exc.message}; fix or remove it before opening", where=exc.where) from exc
    placements = merge_placements(stored, located)
    write_placements(capture.root, placements)
    return Located(placements, hosts)


def stored_location(capture: Capture, paths: Paths) -> Located:
    """Where the hosts sit by what the capture (or the config's inventory) says: no provider call (attach)."""
    from fabricase.placements import resolve_placements

    placements, _ = resolve_placements(capture, None, paths)
    return Located(placements, host_summaries(capture))


def diagnose(capture: Capture, located: Located) -> Analysis:
    return diagnose_capture(capture, topology_of(located.placements), located.placements)


_CLOUDS = {"aws": "AWS", "gcp": "GCP", "azure": "Azure"}


def cloud_gap(provider_name: str, hosts: list[str], placements: list[Placement]) -> str | None:
    """Why a case at this cloud would name no instance: no covered host carries that cloud's identity in the
    capture, or none of their instances was found in the configured regions or zones (a found one has its zone
    or region); None when one was, or for a provider that is not a cloud."""
    if provider_name not in _CLOUDS:
        return None
    cloud = _CLOUDS[provider_name]
    mine = [p for p in placements if p.host in set(hosts) and p.provider == provider_name]
    if any(p.instance_id and (p.zone or p.region) for p in mine):
        return None
    ids = sorted({p.instance_id for p in mine if p.instance_id})
    if not ids:
        return f"none of the {len(hosts)} host(s) carries a {cloud} identity in its capture (no instance id)"
    said = ", ".join(ids[:3]) + (", ..." if len(ids) > 3 else "")
    return f"no {cloud} instance {said} was found in the configured regions or zones"


def plan(capture: Capture, analysis: Analysis, located: Located, *, provider_name: str, symptom: str,
         severity: Severity | None, paths: Paths, provider: Provider | None = None, force: bool = False,
         check_cloud: bool = False) -> EscalationPlan:
    """What the escalation is about and where it goes. check_cloud: refuse (ProviderError) a case at a cloud when
    none of its hosts is that cloud's instance; with `force` it is filed with that warning first in the ticket."""
    from fabricase.errors import ProviderError
    from fabricase.templates.severity import ticket_severity

    desk = desk_of(provider_name, paths)
    hosts, instances, shared = coverage(capture, analysis.diagnosis, located.placements)
    # What the desk is told and what the tracker records agree: the provider's suspects, capped by the stated
    # impact and by the CEILING table (one noisy port is never "system down").
    stated = severity or severity_of(analysis.diagnosis)  # not given: the worst suspect's; minor when none
    filed = ticket_severity(analysis.diagnosis.for_owner("provider"), stated).severity
    components = sorted({(s.host, c) for s in analysis.diagnosis.suspects for c in s.components[:1]},
                        key=lambda hc: (hc[0] or "", hc[1]))
    gap = cloud_gap(provider_name, hosts, located.placements) if check_cloud else None
    if gap and not force:
        raise ProviderError(f"not filed: {gap}; check the provider's regions and the capture's hosts, or file "
                            "anyway with --force", where=provider_name)
    return EscalationPlan(
        provider=provider_name, desk=desk,
        template=template_of(provider_name, desk),
        symptom=symptom, severity=filed,
        hosts=hosts, instances=instances, shared=shared, components=components,
        sent_severity=provider.desk_severity(filed) if provider is not None else None,
        warning=f"filed with --force although {gap}: this case names no instance" if gap else None,
    )


def _resumable(tracker: Tracker, found: list[Coverage], provider: str) -> Escalation | None:
    """The one escalation `open` may go on with instead of refusing: the covering escalations are all unfiled,
    of this provider, and none is being filed by a live attempt; the oldest is taken."""
    from fabricase.filing import holder

    escs = [tracker.get(c.escalation_id) for c in found]
    if not escs or any(e.provider_case_id is not None or e.provider != provider or holder(e) for e in escs):
        return None
    return escs[0]


def record(capture: Capture, p: EscalationPlan, paths: Paths, *, dry_run: bool, pseudonymize: bool, force: bool,
           existing: Escalation | None = None, owner: Mapping[str, Any] | None = None) -> Recorded:
    """The escalation (new, none for a dry run, or the existing one for attach) and its redactor. Duplicates are
    refused here, before any bundle is written, in the same transaction as the insert; hosts covered only by an
    unfiled escalation (a filing that did not finish) resume it. The pseudonym key is the escalation's, so it
    exists first. owner: the attempt (filing.attempt) that will file it, recorded with it."""
    from fabricase.filing import holder
    from fabricase.tracker.store import CoveredError, Tracker

    if dry_run or existing is not None:
        key = None
        if pseudonymize:
            with Tracker.open(paths) as keys:
                key = keys.pseudonym_key(existing.id if existing else bundle_scope(capture))
        return Recorded(existing, make_redactor(capture, pseudonymize=pseudonymize, key=key))
    data = {"owner": dict(owner or {}), "capture": str(capture.root), "pseudonymize": pseudonymize}
    resumed = False
    with Tracker.open(paths) as tracker:
        try:
            esc = tracker.create(provider=p.provider, title=p.symptom[:120], symptom=p.symptom, severity=p.severity,
                                 hosts=p.hosts, components=p.components, instances=p.instances,
                                 exclusive=not force, data=data)
        except CoveredError as exc:
            draft = _resumable(tracker, exc.found, p.provider)
            if draft is None:
                raise duplicate_error(tracker, p.provider, exc.found) from None
            token = data["owner"].get("token")
            esc = tracker.claim(draft.id, "resumed", "an earlier filing did not finish: open goes on with it", data,
                                lambda e: holder(e, exempt=token))
            resumed = True
        key = tracker.pseudonym_key(esc.id) if pseudonymize else None
    return Recorded(esc, make_redactor(capture, pseudonymize=pseudonymize, key=key), resumed)


def history(p: EscalationPlan, rec: Recorded, paths: Paths) -> dict[str, str]:
    """The repeat offenders among this escalation's hosts and components: earlier escalations of the same port,
    host or switch within DEFAULT_REPEAT_DAYS of a resolution (tracker/stats.py), as lines for their suspects."""
    from datetime import UTC, datetime

    from fabricase.tracker import db
    from fabricase.tracker.stats import DEFAULT_REPEAT_DAYS, history_lines, repeat_history
    from fabricase.tracker.store import Tracker

    sqlite = db.sqlite_file(db.parse_url(paths.database_url))
    if sqlite is not None and not sqlite.is_file():  # no tracker yet (a first dry run): no history, none made
        return {}
    with Tracker.open(paths) as tracker:
        return history_lines(repeat_history(tracker, provider=p.provider, hosts=p.hosts, components=p.components,
                                            now=datetime.now(UTC), days=DEFAULT_REPEAT_DAYS,
                                            exclude=rec.escalation.id if rec.escalation else None))


def _draft(capture: Capture, analysis: Analysis, located: Located, p: EscalationPlan, rec: Recorded,
           bundle_id: str | None, bundle_sha256: str | None = None,
           full_bundle: Mapping[str, Any] | None = None) -> TicketDraft:
    from fabricase.templates.ruled_out import checks_run

    draft = make_draft(capture, analysis.findings, provider=p.template, symptom=p.symptom, severity=p.severity,
                       placements=located.placements, bundle_id=bundle_id,
                       escalation_id=rec.escalation.id if rec.escalation else None, checks=checks_run(capture.hosts),
                       hosts=located.hosts, diagnosis=analysis.diagnosis, history=rec.history,
                       sent_severity=p.sent_severity, bundle_sha256=bundle_sha256, full_bundle=full_bundle)
    if p.warning:  # first, where the support engineer reads before anything else
        draft = dataclasses.replace(draft, body=f"Warning: {p.warning}.\n\n{draft.body}")
    return draft


def bundle(capture: Capture, analysis: Analysis, located: Located, p: EscalationPlan, rec: Recorded,
           out: Path, *, form: str = "auto", upload: UploadTarget | None = None) -> Bundle:
    """The evidence bundle; the ticket inside it cannot know the bundle's own id, so it is rendered without. form
    and upload: escalate.build_bundle_for's (a summary bundle when the full one does not fit the desk)."""
    inner = _draft(capture, analysis, located, p, rec, None)
    return build_bundle_for(capture, analysis.findings, inner, out, placements=located.placements,
                            samples=analysis.samples, symptom=p.symptom, redactor=rec.redactor, hosts=located.hosts,
                            diagnosis=analysis.diagnosis,
                            escalation_id=rec.escalation.id if rec.escalation else None, form=form, upload=upload)


def render(capture: Capture, analysis: Analysis, located: Located, p: EscalationPlan, rec: Recorded,
           b: Bundle) -> Rendered:
    """The ticket naming the bundle (its id and its file's sha256), through the same redaction as the bundle, then
    fitted to the desk."""
    with b.path.open("rb") as fh:
        sha256 = hashlib.file_digest(fh, "sha256").hexdigest()
    draft = redact_draft(_draft(capture, analysis, located, p, rec, b.bundle_id, sha256,
                                getattr(b, "full", None)), rec.redactor)
    return Rendered(draft, gate.outbound(fit_draft(draft, p.desk)))  # the gate runs on the final text


def _bundle_stem(capture: Capture, rec: Recorded) -> str:
    """An escalation's bundles are numbered in the order they were made (FC-3-1, FC-3-2, ...); a dry run's
    are named after the capture."""
    if rec.escalation is None:
        return f"dry-run-{capture.root.name}"
    return f"{rec.escalation.id}-{1 + sum(1 for e in rec.escalation.events if e.kind == 'bundle')}"


def _named(b: Bundle) -> Bundle:
    """The bundle moved to its final name, which carries its id: `FC-3-2-<12 hex>.tar.gz`. A new capture in a
    folder of the same name, or a second attach, never overwrites a bundle already filed."""
    stem = b.path.name.removeprefix(".").removesuffix(".partial")
    final = b.path.with_name(f"{stem}-{b.bundle_id[:12]}.tar.gz")
    b.path.replace(final)
    return dataclasses.replace(b, path=final)


@dataclass
class _Run:
    """What `run` made, stage by stage."""

    located: Located
    analysis: Analysis
    plan: EscalationPlan
    recorded: Recorded
    bundle: Bundle
    rendered: Rendered
    timings: dict[str, float]
    provider: Provider  # the one instance the run asked (placements, the severity sent): filing uses it too


def run(capture: Capture, paths: Paths, *, provider_name: str, symptom: str, severity: Severity | None,
        dry_run: bool = False, pseudonymize: bool = False, force: bool = False,
        existing: Escalation | None = None, owner: Mapping[str, Any] | None = None, bundle_form: str = "auto",
        upload: UploadTarget | None = None) -> _Run:
    """Every stage up to the rendered ticket, in order (filing is the caller's: only `open` files)."""
    from fabricase.providers import get_provider

    clock = _Clock()
    provider = get_provider(provider_name, paths)
    with clock("locate"):
        located = locate(capture, provider, provider_name) if existing is None else stored_location(capture, paths)
    with clock("analyze"):
        analysis = diagnose(capture, located)
    with clock("render"):
        p = plan(capture, analysis, located, provider_name=provider_name, symptom=symptom, severity=severity,
                 paths=paths, provider=provider, force=force or dry_run, check_cloud=existing is None)
    with clock("record"):
        rec = record(capture, p, paths, dry_run=dry_run, pseudonymize=pseudonymize, force=force, existing=existing,
                     owner=owner)
        rec = dataclasses.replace(rec, history=history(p, rec, paths))
    with clock("bundle"):
        b = _named(bundle(capture, analysis, located, p, rec, paths.bundles / f".{_bundle_stem(capture, rec)}.partial",
                          form=bundle_form, upload=upload))
    if rec.escalation is not None:
        from fabricase.tracker.store import Tracker

        with clock("record"), Tracker.open(paths) as tracker:
            tracker.add_event(rec.escalation.id, "bundle", f"bundle {b.bundle_id[:16]} built",
                              {"path": str(b.path), "bundle_id": b.bundle_id, "capture": str(capture.root)})
    with clock("render"):
        rendered = render(capture, analysis, located, p, rec, b)
    return _Run(located, analysis, p, rec, b, rendered, clock.spent, provider)


def open_escalation(capture: Capture, paths: Paths, *, provider_name: str, symptom: str,
                    severity: Severity | None, dry_run: bool = False, pseudonymize: bool = False,
                    force: bool = False, bundle_form: str = "auto", upload: UploadTarget | None = None) -> OpenResult:
    """Locate, diagnose, plan, record, bundle, render, file and track one escalation for an existing capture. The
    result's `timings` say where the time went per stage (the desk, uploads included, under "file")."""
    from fabricase.filing import attempt

    with attempt() as owner:  # held from the record to the filing: no other `open` or `retry` files it meanwhile
        return _open(capture, paths, provider_name=provider_name, symptom=symptom, severity=severity,
                     dry_run=dry_run, pseudonymize=pseudonymize, force=force, owner=owner,
                     bundle_form=bundle_form, upload=upload)


def _open(capture: Capture, paths: Paths, *, provider_name: str, symptom: str, severity: Severity | None,
          dry_run: bool, pseudonymize: bool, force: bool, owner: Mapping[str, Any], bundle_form: str = "auto",
          upload: UploadTarget | None = None) -> OpenResult:
    from fabricase.filing import file_escalation, filing_key_of
    from fabricase.providers.base import case_marker
    from fabricase.tracker.store import Tracker

    r = run(capture, paths, provider_name=provider_name, symptom=symptom, severity=severity, dry_run=dry_run,
            pseudonymize=pseudonymize, force=force, owner=owner, bundle_form=bundle_form, upload=upload)
    common = dict(placements=r.located.placements, diagnosis=r.analysis.diagnosis, resumed=r.recorded.resumed)
    provider = r.provider
    if r.recorded.escalation is None:
        ticket = r.bundle.path.with_suffix("").with_suffix(".ticket.md")
        ticket.write_text(r.rendered.fitted.title + "\n\n" + r.rendered.fitted.body)
        requests = provider.plan_case(escalation_id="FC-dry-run", draft=r.rendered.fitted, bundle_path=r.bundle.path)
        return OpenResult(capture, r.analysis.findings, r.bundle, r.rendered.draft, None, ticket, requests=requests,
                          timings=r.timings, **common)
    clock = _Clock()
    with clock("file"), Tracker.open(paths) as tracker:
        # Idempotent: the intent is recorded before the desk is called, and a retry reconciles by the case marker.
        esc = file_escalation(tracker, provider, r.recorded.escalation.id, r.rendered.fitted, r.bundle.path,
                              owner=owner)
        marker = case_marker(filing_key_of(tracker, esc))
    where = esc.ticket_path
    ticket = (where if "://" in where else Path(where)) if where else r.bundle.path  # a URL is kept whole
    return OpenResult(capture, r.analysis.findings, r.bundle, r.rendered.draft, esc, ticket, filed_at=esc.ticket_path,
                      timings={**r.timings, **clock.spent}, case_marker=marker, **common)


def attach_capture(capture: Capture, paths: Paths, esc: Escalation, *,
                   pseudonymize: bool = False) -> tuple[Bundle, Analysis]:
    """A new bundle of a capture for an existing escalation (`fabricase attach --capture`): the same stages as
    `open`, with the capture's stored placements, the escalation's desk and pseudonym key, and no new record."""
    r = run(capture, paths, provider_name=esc.provider, symptom=esc.symptom, severity=None,
            pseudonymize=pseudonymize, existing=esc)
    return r.bundle, r.analysis


def recorded_capture(esc: Escalation) -> Path | None:
    """The capture an escalation was last made from (its "bundle", "resumed" or "created" event), if it is still
    there."""
    for event in reversed(esc.events):
        where = event.data.get("capture") if isinstance(event.data, dict) else None
        if event.kind in ("bundle", "resumed", "created") and where and Path(where).is_dir():
            return Path(where)
    return None


def rebuild(esc: Escalation, paths: Paths) -> tuple[TicketDraft, Path]:
    """The ticket and bundle of an escalation made again from its capture (`retry` when no intent recorded
    them: the run stopped before filing began). Bundles are deterministic: the same capture gives the same id."""
    from fabricase.errors import TrackerError
    from fabricase.pipeline import load_input

    where = recorded_capture(esc)
    if where is None:
        raise TrackerError("its capture is gone and no filing recorded a ticket: open it again from a new "
                           "capture (`fabricase open ... --force`)", where=esc.id)
    pseudonymize = any(e.data.get("pseudonymize") for e in esc.events if isinstance(e.data, dict))
    r = run(load_input(where), paths, provider_name=esc.provider, symptom=esc.symptom, severity=esc.severity,
            pseudonymize=pseudonymize, existing=esc)
    return r.rendered.fitted, r.bundle.path
