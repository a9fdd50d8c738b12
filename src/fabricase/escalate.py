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
    from fabricase.bundler.limits import DeskLimits
    from fabricase.bundler.upload import UploadTarget
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
    from fabricase.k8s.records import read_kubernetes_nodes
    from fabricase.parsers.identity import host_identity
    from fabricase.providers.identity import with_kubernetes_node

    k8s_nodes = read_kubernetes_nodes(capture.root)  # {} unless captured --via k8s
    out = []
    for hc in capture.hosts:
        try:
            identity = host_identity(hc) if hc.items else {}
        finally:
            hc.release()  # a fleet's streams must not all stay in memory
        out.append(HostSummary(hc.host, str(hc.status), hc.reason,
                               with_kubernetes_node(identity, k8s_nodes.get(hc.host))))
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
               bundle_sha256: str | None = None, sent_severity: DeskSeverity | None = None,
               full_bundle: Mapping[str, Any] | None = None) -> TicketDraft:
    """The ticket for the provider's desk, built from the diagnosis's provider-owned suspects: what is broken,
    where, how sure, what was ruled out (`checks`: templates.ruled_out.checks_run(capture.hosts)) and what we ask
    for. `checks`, `hosts` (host_summaries) and the diagnosis (of `findings`, without hardware aliases) are
    computed here when not given. `history`: the repeat offenders' lines (tracker.stats.history_lines), said in
    their suspects' sections. `bundle_sha256`: the written bundle file's sha256 (hashlib.file_digest), said beside
    the bundle id once the archive is written. `sent_severity`: the level the provider sends (its plan applied),
    which the body then states. `full_bundle`: a summary bundle's full one (FittedBundle.full), named at the end of
    the body by sha256, size and object, so the provider can ask for or fetch it."""
    from fabricase.analysis.probe_text import probe_text
    from fabricase.templates import render_draft
    from fabricase.templates.ruled_out import checks_run

    draft = render_draft(provider=provider, symptom=symptom, severity=severity, findings=findings,
                        hosts=_host_dicts(hosts if hosts is not None else host_summaries(capture)),
                        placements=placements, bundle_id=bundle_id,
                        capture_created_at=capture.created_at, escalation_id=escalation_id,
                        checks=checks if checks is not None else checks_run(capture.hosts),
                        kernel_logs=_KernelLogs(capture), events=events, diagnosis=diagnosis, history=history,
                        bundle_sha256=bundle_sha256, sent_severity=sent_severity, probe_lines=probe_text(capture))
    return draft if not full_bundle else dataclasses.replace(draft, body=draft.body + _full_bundle_text(full_bundle))


def _full_bundle_text(full: Mapping[str, Any]) -> str:
    """The ticket's paragraph on the full bundle a summary bundle stands for."""
    where = f"uploaded to {full['object']}" if full.get("object") else "kept by the operator: ask for it"
    return (f"\n\nThe attached bundle is a summary (the suspects' hosts, healthy peers and a fleet summary). The full "
            f"bundle is {full.get('name')}, {full.get('size')} bytes, sha256 {full.get('sha256')}, {where}.\n")


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
                     diagnosis: Diagnosis | None = None, escalation_id: str | None = None,
                     form: str = "auto", upload: UploadTarget | None = None,
                     limits: DeskLimits | None = None) -> Bundle:
    """The evidence bundle: the capture directory, findings, the ticket draft, the summaries (Markdown, and JSON
    fitted to the draft's desk), the HTML report (`samples`: what analyze_capture put in samples_out; without
    them the report reads the capture again), and reproduce.sh with the capture script it runs.

    form: "full" (the whole capture), "summary" (suspects, sampled peers and fleet-summary.json: see
    bundler/summary_form.py), or "auto": full when it reaches the desk (`limits`, else the draft's desk's) by
    some path, else summary, the full bundle kept beside it and, with `upload`, uploaded (bundler/upload.py).
    The result is a bundler.summary_form.FittedBundle saying which form it took."""
    from fabricase.bundler.limits import desk_limits
    from fabricase.bundler.summary_form import FittedBundle, fit_problem

    if form not in ("auto", "full", "summary"):
        raise ValueError(f"bundle form {form!r} is not auto, full or summary")
    hosts = hosts if hosts is not None else host_summaries(capture)
    redactor = redactor or make_redactor(capture)
    limits = limits or desk_limits(desk_of(draft.provider))
    build_full = form != "summary" or upload is not None
    extra = _bundle_extras(capture, findings, draft, placements=placements, samples=samples, symptom=symptom,
                           hosts=hosts, diagnosis=diagnosis, escalation_id=escalation_id, limits=limits,
                           with_report=build_full)  # the summary form renders its own, of its hosts
    why, full_path = "requested (--summary)", None
    if build_full:
        from fabricase.bundler.archive import build_bundle

        full = build_bundle(capture.root, out, extra=extra, mtime=_epoch(capture.created_at), redactor=redactor)
        problem = fit_problem(full.size, limits) if form == "auto" else None
        if form == "full" or problem is None:
            uploaded = _upload(full.path, upload)
            return FittedBundle(full.path, full.bundle_id, full.members, full.size, uploaded=uploaded,
                                full=_reference(full.path, uploaded) if uploaded else None)
        why = problem
        full_path = out.with_name(f"{_stem(out)}-full-{full.bundle_id[:12]}.tar.gz")
        out.replace(full_path)
    return _summary_bundle(capture, findings, draft, out, extra, why=why, full_path=full_path, upload=upload,
                           placements=placements or [], samples=samples or {}, hosts=hosts, diagnosis=diagnosis,
                           redactor=redactor, symptom=symptom, escalation_id=escalation_id)


def _stem(out: Path) -> str:
    name = out.name.lstrip(".").removesuffix(".partial")
    return name.removesuffix(".tar.gz").removesuffix(".tgz")


def _upload(path: Path, target: UploadTarget | None) -> Any:
    from fabricase.bundler.upload import upload_bundle

    return upload_bundle(path, target) if target is not None else None


def _reference(path: Path, uploaded: Any) -> dict[str, Any]:
    from fabricase.bundler.summary_form import full_reference

    return full_reference(path, uploaded)


def _bundle_extras(capture: Capture, findings: list[Finding], draft: TicketDraft, *, placements, samples,
                   symptom: str, hosts: Sequence[HostSummary], diagnosis: Diagnosis | None,
                   escalation_id: str | None, limits: DeskLimits, with_report: bool = True) -> dict[str, bytes]:
    from fabricase.bundler.reproduce import capture_script, reproduce_script
    from fabricase.bundler.summary import SummaryInput, fit_summary
    from fabricase.report import html_report

    summary = fit_summary(SummaryInput(
        title=draft.title, symptom=symptom or draft.title, severity=str(draft.severity), captured_at=capture.created_at,
        findings=findings, hosts=_host_dicts(hosts), placements=placements or [], diagnosis=diagnosis,
    ), limits.attachment_max_bytes)
    extra = {
        "findings.json": findings_json(findings).encode(),
        "ticket.md": (draft.title + "\n\n" + draft.body).encode(),
        "summary.md": (draft.summary or "").encode(),
        summary.name: summary.data,
        "reproduce.sh": reproduce_script(capture).encode(),
        "capture-script.sh": capture_script(capture).encode(),
    }
    if with_report:
        extra["report.html"] = html_report(capture, findings, placements or [], samples, diagnosis=diagnosis,
                                           symptom=symptom, escalation_id=escalation_id)
    return extra


def _summary_bundle(capture: Capture, findings: list[Finding], draft: TicketDraft, out: Path,
                    extra: dict[str, bytes], *, why: str, full_path: Path | None, upload: UploadTarget | None,
                    placements: list[Placement], samples: dict[str, list[MetricSample]],
                    hosts: Sequence[HostSummary], diagnosis: Diagnosis | None, redactor: Redactor, symptom: str,
                    escalation_id: str | None) -> Bundle:
    """The summary form (bundler/summary_form.py) written to `out`; the full bundle at `full_path` (when built)
    uploaded to `upload` (when given) first, so the summary names where it is. Its report shows the bundled
    hosts only (a fleet's heat map would weigh more than the rest of the summary)."""
    import tempfile

    from fabricase.bundler.archive import build_bundle
    from fabricase.bundler.fleet_summary import FLEET_SUMMARY_NAME, fleet_summary_bytes
    from fabricase.bundler.select import select_hosts
    from fabricase.bundler.summary_form import (
        FittedBundle,
        full_reference,
        summary_capture,
        summary_line,
        summary_record,
    )
    from fabricase.report import html_report

    uploaded = _upload(full_path, upload) if full_path is not None else None
    full = full_reference(full_path, uploaded) if full_path is not None else None
    chosen = select_hosts(capture.hosts, findings, diagnosis, samples, placements=placements, summaries=hosts)
    record = summary_record(chosen.included, chosen.left_out, why=why, full_bundle=full,
                            order=[hc.host for hc in capture.hosts])
    line = summary_line(record) or ""
    kept = set(chosen.included)
    bundled = dataclasses.replace(capture, hosts=[hc for hc in capture.hosts if hc.host in kept])
    report = html_report(bundled, findings, placements, {h: s for h, s in samples.items() if h in kept},
                         diagnosis=diagnosis, symptom=symptom, escalation_id=escalation_id)
    extra = {**extra, FLEET_SUMMARY_NAME: fleet_summary_bytes(samples, chosen.classes), "report.html": report,
             "ticket.md": extra["ticket.md"] + f"\n\nThis bundle is a {line}.\n".encode()}
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", suffix=".summary", dir=out.parent) as tmp:
        root = summary_capture(capture.root, Path(tmp) / "capture", chosen.included, record)
        b = build_bundle(root, out, extra=extra, mtime=_epoch(capture.created_at), redactor=redactor)
    note = None
    if full_path is not None and uploaded is None:
        note = (f"the full bundle stays local at {full_path} (sha256 {full['sha256'][:16]}); upload it with "
                "--upload-to s3://|gs://|az://... (or [bundle] upload_to in config.toml) for the provider")
    return FittedBundle(b.path, b.bundle_id, b.members, b.size, form="summary", record=record, full=full,
                        full_path=full_path, uploaded=uploaded, note=note)


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
