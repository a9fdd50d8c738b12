"""Render tickets and summaries from the diagnosis: one section per suspect the desk's owner acts on
(templates/suspects.py), the others in the user's summary; the raw findings stay in the bundle.

Templates are package data: `ticket_<desk>.md.j2` (aws, gcp, azure, jira, zendesk, email), falling back to
`ticket_generic.md.j2`, and `summary.md.j2`. A template of the same name in `<config dir>/templates/` takes
precedence; an override reaches the shipped template it replaces as `fabricase/<name>`. The facts are put in
order here (the suspects' facts, the host facts, what was ruled out, the timeline, the ticket's severity, the
requested action); the templates only lay them out (with the filters and globals of templates/filters.py), so a
desk's template extends `ticket_generic.md.j2` and replaces blocks. A ticket template's output is the subject on its
first line, a blank line, then the body.
StrictUndefined makes a misspelled variable an error instead of an empty ticket section.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2
import markupsafe

from fabricase.config import resolve_paths
from fabricase.diagnosis import Diagnosis, Suspect
from fabricase.errors import ConfigError
from fabricase.models import EscalationEvent, Finding, HostSummary, Placement, Severity, TicketDraft
from fabricase.templates.facts import host_facts
from fabricase.templates.filters import (
    MARKUPS,
    WIDTH,
    below_common,
    columns,
    distinct,
    format_evidence,
    format_number,
    heading,
    hostlist,
    jira_table,
    md_table,
    prose,
    table,
    wrap,
)
from fabricase.templates.inert import inert_block
from fabricase.templates.ruled_out import power_caveats, ruled_out
from fabricase.templates.severity import DeskSeverity, desk_severity, ticket_severity
from fabricase.templates.suspects import (
    TITLE_MAX,
    diagnosis_of,
    for_desk,
    leftover_history,
    scope_line,
    shorten,
    suspect_facts,
    suspect_history,
    suspect_hosts,
    ticket_title,
)
from fabricase.templates.timeline import kernel_log_entries, timeline

__all__ = [
    "MARKUPS",
    "environment",
    "format_evidence",
    "format_number",
    "hostlist",
    "jira_table",
    "md_table",
    "render",
    "render_draft",
    "ticket_template",
    "ticket_title",
    "user_template_dir",
    "wrap",
]

SUMMARY_CELL = 60  # a finding's summary in the compact table, at most; the ticket has it in full
SUMMARY_MIN = 30
PACKAGE_PREFIX = "fabricase"  # `{% extends "fabricase/ticket_aws.md.j2" %}` reaches the shipped template
_OK = "ok"


def user_template_dir(config_dir: Path | None = None) -> Path:
    """`<config dir>/templates`: the user's overrides (XDG config, or FABRICASE_HOME)."""
    return (config_dir or resolve_paths().config) / "templates"


def environment(override_dir: Path | None = None) -> jinja2.Environment:
    """The Jinja2 environment: templates in `override_dir` first, then the package's.

    Built once per state of the override directory (names and mtimes), so that an override added, edited or
    removed while the process runs is seen; the package's templates never change under it.
    """
    return _environment(override_dir, _listing(override_dir))


def _listing(override_dir: Path | None) -> tuple:
    if override_dir is None:
        return ()
    try:
        files = (p for p in override_dir.rglob("*") if p.is_file())
        return tuple(sorted((str(p.relative_to(override_dir)), p.stat().st_mtime_ns) for p in files))
    except OSError:
        return ()  # unreadable: the loader says so when a template is looked up


@functools.lru_cache(maxsize=8)
def _environment(override_dir: Path | None, _listing: tuple) -> jinja2.Environment:
    package = jinja2.PackageLoader("fabricase", "templates")
    first = [jinja2.FileSystemLoader(str(override_dir))] if override_dir else []
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader([*first, package, jinja2.PrefixLoader({PACKAGE_PREFIX: package})]),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(["html"]),
        keep_trailing_newline=True,
        # block tags on their own lines leave no blank lines behind: templates read like the output
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_inert,
    )
    env.filters.update(num=format_number, evidence=format_evidence, wrap=wrap, hostlist=hostlist, columns=columns,
                       distinct=distinct, prose=prose, below_common=below_common)
    env.globals.update(md_table=md_table, table=table, heading=heading)
    return env


@jinja2.pass_context
def _inert(ctx: jinja2.runtime.Context, value: Any) -> Any:
    """Every `{{ ... }}` of a ticket or summary: what data puts there is shown, never read as markup.

    Structure made by the template's own helpers (heading, table) is Markup and passes; an HTML template is
    escaped by its autoescape instead."""
    if ctx.eval_ctx.autoescape or isinstance(value, markupsafe.Markup) or not isinstance(value, str):
        return value
    return inert_block(value)


def render(name: str, *, template_dir: Path | None = None, **context: Any) -> str:
    """Render one template by file name (e.g. `summary.md.j2`), overrides in `template_dir` first (None: the
    shipped templates only).

    An error in an override (syntax, an unknown variable, an unreadable file) is a ConfigError naming the file
    and line; in a shipped template it is a bug and propagates as is.
    """
    env = environment(template_dir)
    try:
        return env.get_template(name).render(**context)
    except (jinja2.TemplateError, OSError) as exc:
        where = _user_frame(exc, template_dir)
        if where is None:
            raise
        message = getattr(exc, "message", None) or getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(f"template {name}: {' '.join(str(message).split())}", where=where) from exc


def _user_frame(exc: BaseException, template_dir: Path | None) -> str | None:
    """`file:line` of the override the error came from, or None when it came from a shipped template."""
    if template_dir is None:
        return None
    filename = getattr(exc, "filename", None)
    if filename and Path(filename).is_relative_to(template_dir):
        lineno = getattr(exc, "lineno", None)
        return f"{filename}:{lineno}" if lineno else str(filename)
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if Path(frame.filename).is_relative_to(template_dir):
            return f"{frame.filename}:{frame.lineno}"
    return None


def ticket_template(provider: str, template_dir: Path | None = None) -> str:
    """`ticket_<provider>.md.j2` when an override (default `<config dir>/templates`) or the package has one,
    else the generic ticket."""
    from fabricase.providers import ticket_template_name

    name = ticket_template_name(provider)
    env = environment(template_dir or user_template_dir())
    return name if name in env.list_templates() else "ticket_generic.md.j2"


def render_draft(
    *,
    provider: str,
    symptom: str,
    severity: Severity,
    findings: list[Finding],
    hosts: Sequence[dict | HostSummary],
    placements: list[Placement],
    bundle_id: str | None,
    capture_created_at: str,
    escalation_id: str | None,
    checks: Mapping[str, Collection[str]] | None = None,
    kernel_logs: Mapping[str, str | None] | None = None,
    events: Sequence[EscalationEvent] = (),
    max_level: str | None = None,
    support_plan: str | None = None,
    severity_overrides: Mapping[str, str] | None = None,
    template_dir: Path | None = None,
    diagnosis: Diagnosis | None = None,
    owner: str = "provider",
    history: Mapping[str, str] | None = None,
    bundle_sha256: str | None = None,
    sent_severity: DeskSeverity | None = None,
    probe_lines: Sequence[str] = (),
) -> TicketDraft:
    """The ticket (title, body) and the Markdown summary for one escalation, built from the suspects.

    diagnosis: the capture's (pipeline.diagnose_capture); None: diagnosed here from the findings and the host
    summaries in `hosts` (no hardware aliases). owner: the desk's owner; only its suspects go in the ticket,
    the others to the summary. severity: the stated impact; the ticket is filed at what the suspects justify,
    never above it (`severity.ticket_severity`).
    checks: per host, the checks its capture ran (`ruled_out.checks_run(capture.hosts)`), for "ruled out".
    kernel_logs: host -> its captured kernel log, for the timeline's first and last errors (only suspect hosts
    with kernel-log findings are looked up). events: the escalation's history, for the timeline.
    max_level, support_plan, severity_overrides: cap and adjust the desk's severity (`severity.desk_severity`).
    sent_severity: the level the provider will send (Provider.desk_severity: its plan and the account's offered
    levels applied); the body then says exactly that. probe_lines: what the probe's active tests found and how
    the bisection narrowed it down (analysis.probe.probe_lines), for the "Active tests" section.
    template_dir: the user's overrides; default `<config dir>/templates`.
    history: repeat offenders, key ("gpu001", "gpu001/rdma:mlx5_3/1", "switch:leaf-3") -> the line its suspect's
    section says (tracker.stats.history_lines); lines no suspect takes go in a short History section.
    bundle_id: the bundle's id (its manifest's sha256); bundle_sha256: the bundle file's own sha256, known only
    once the archive is written. The ticket labels both: the file a reader downloaded is checked against the
    second, what it holds against the first.
    """
    template_dir = template_dir or user_template_dir()
    ordered = sorted(findings, key=lambda f: f.sort_key)
    captured = sorted((_host_dict(h) for h in hosts), key=lambda h: h["host"])
    if diagnosis is None:
        diagnosis = diagnosis_of(findings, captured, placements)
    owned, others = for_desk(diagnosis, owner)
    affected = sorted({h for s in owned for h in suspect_hosts(s)})
    anyone = {h for s in diagnosis.suspects for h in suspect_hosts(s)}
    title_hosts = affected or [h["host"] for h in captured]
    status = {h["host"]: h["status"] for h in captured}
    identity = {h["host"]: h.get("identity") or {} for h in captured}
    where = {p.host: p for p in placements}
    clear, not_run = ruled_out(checks, ordered, suspects=diagnosis.suspects,
                               caveats=power_caveats(diagnosis.power)) if checks is not None else ([], [])
    on_suspects = [f for f in ordered if f.host in set(affected)]
    kernel = kernel_log_entries(on_suspects, kernel_logs) if kernel_logs is not None else []
    filed = ticket_severity(owned, severity)
    desk = sent_severity if sent_severity is not None and sent_severity.severity == filed.severity else (
        desk_severity(provider, filed.severity, max_level=max_level, plan=support_plan, overrides=severity_overrides))
    context = {
        "provider": provider,
        "owner": owner,
        "markup": "markdown",  # a desk's template sets its own: text, jira
        "hosts_title": "Affected hosts",  # and names the hosts in its terms: instances, VMs
        "title": ticket_title(owned, symptom, len(title_hosts)),
        "one_line": scope_line(diagnosis, owned, owner) + ".",
        "symptom": " ".join(symptom.split()),
        "scope": f"Hosts with suspects: {hostlist(affected)}." if affected else "",
        "severity": str(filed.severity),
        "stated_severity": str(severity),
        "severity_why": f": {filed.reason}",
        "severity_reason": filed.reason,
        "desk_severity": desk,
        "severity_note": f"; capped from {desk.wanted} by the {desk.capped_by}" if desk.capped else "",
        "suspects": [suspect_facts(s, i, len(owned), identity.get(s.host or ""), suspect_history(s, history or {}))
                     for i, s in enumerate(owned, 1)],
        "history": leftover_history(owned, history or {}, title_hosts),
        "other_suspects": [suspect_facts(s, i, len(others), identity.get(s.host or ""))
                           for i, s in enumerate(others, 1)],
        "summary_groups": _summary_groups(diagnosis, owner, identity),
        "background": [b.text for b in diagnosis.background],
        "verdict_line": diagnosis.verdict_line,
        "diagnosis": diagnosis,
        "findings": ordered,
        "n_findings": len(ordered),
        "hosts": captured,
        "affected": [host_facts(h, status.get(h), where.get(h)) for h in affected],
        "affected_rows": _host_rows(affected, captured, placements),
        "shared": _shared(owned, placements, status),
        "facts": {p.host: host_facts(p.host, status.get(p.host), p) for p in placements},
        "identities": _identities(captured, set(affected)),
        "ruled_out": [h["host"] for h in captured if h["host"] not in anyone and h["status"] == _OK],
        "ruled_out_checks": [c.text for c in clear],
        "not_checked": [c.topic for c in not_run],
        "not_captured": [h for h in captured if h["host"] not in anyone and h["status"] != _OK],
        "status_rows": _status_rows(captured),
        "finding_rows": _finding_rows(ordered),
        "timeline": timeline(
            capture_created_at=capture_created_at, hosts_captured=len(captured), kernel=kernel, events=events
        ),
        "action": _action(owned),
        "bundle_id": bundle_id,
        "bundle_sha256": bundle_sha256,
        "capture_created_at": capture_created_at,
        "escalation_id": escalation_id,
        "probe_lines": list(probe_lines),
    }
    name = ticket_template(provider, template_dir)
    subject, body = _split_subject(render(name, template_dir=template_dir, **context))
    return TicketDraft(
        provider=provider,
        title=shorten(subject, TITLE_MAX) if subject else context["title"],
        body=body,
        severity=filed.severity,
        hosts=title_hosts,
        components=sorted({c for s in owned for c in s.components}),
        bundle_id=bundle_id,
        summary=render("summary.md.j2", template_dir=template_dir, **context),
    )


def _host_dict(h: Any) -> dict:
    """A host summary as the templates read it: {host, status, reason, identity} (models.HostSummary or a dict)."""
    return h.to_dict() if hasattr(h, "to_dict") else dict(h)


# owner -> how the user's summary heads that owner's suspects
OWNER_TITLES = {
    "provider": "the provider's to repair",
    "operator": "ours to fix (configuration, drivers, operations)",
    "application": "the application's",
}


def _summary_groups(diagnosis: Diagnosis, owner: str, identity: Mapping[str, Mapping]) -> list[dict[str, Any]]:
    """The summary's suspects, every owner's, the desk's owner first: [{owner, title, suspects}]."""
    owners = sorted({s.owner for s in diagnosis.suspects}, key=lambda o: (o != owner, o))
    groups = []
    for o in owners:
        mine = [s for s in diagnosis.suspects if s.owner == o]
        title = "Suspects: " + OWNER_TITLES.get(o, o) + (" (in the ticket)" if o == owner else "")
        groups.append({"owner": o, "title": title,
                       "suspects": [suspect_facts(s, i, len(mine), identity.get(s.host or ""))
                                    for i, s in enumerate(mine, 1)]})
    return groups


def _action(owned: Sequence[Suspect]) -> str:
    """What the ticket asks for as a whole: the one suspect's action, or each suspect's."""
    if not owned:
        return ("No single component was localized: please check the fabric path of the captured hosts for the "
                "symptom described; the attached bundle holds every counter.")
    if len(owned) == 1:
        return owned[0].action
    return (f"Please act on each of the {len(owned)} suspects above as its action says, the most severe first; "
            "the attached bundle holds the counters behind every line.")


def _shared(owned: Sequence[Suspect], placements: Sequence[Placement],
            status: Mapping[str, str]) -> list[dict[str, Any]]:
    """The shared suspects (switch, network node, sub-block), each with the facts of the hosts under it: the
    suspect's own list, else the placements whose topology names it."""
    where = {p.host: p for p in placements}
    out = []
    for s in owned:
        if s.host is not None or not s.components:
            continue
        component = s.components[0]
        names = s.hosts or sorted(p.host for p in placements if component in p.topology)
        out.append({"component": component, "hosts": [host_facts(h, status.get(h), where.get(h)) for h in names]})
    return out


def _split_subject(text: str) -> tuple[str, str]:
    """A ticket template writes the subject, a blank line, then the body."""
    subject, sep, body = text.partition("\n\n")
    if not sep or "\n" in subject.strip():
        return "", text  # an override without a subject line: the whole output is the body
    return " ".join(subject.split()), body


def _host_rows(affected: list[str], captured: list[dict], placements: list[Placement]) -> list[list[Any]]:
    status = {h["host"]: h["status"] for h in captured}
    where = {p.host: p for p in placements}
    rows = []
    for name in affected:
        p = where.get(name)
        topology = " > ".join(p.topology) if p and p.topology else None
        rows.append([name, status.get(name), p and p.instance_id, p and p.zone, topology])
    return rows


def _finding_rows(ordered: list[Finding]) -> list[list[Any]]:
    """The compact table's rows; the summary cell gets what the other columns leave of WIDTH (ids are never cut)."""
    rows = [[i, str(f.severity), f.host or "shared", f.component] for i, f in enumerate(ordered, 1)]
    headers = ["#", "severity", "host", "component"]
    used = sum(max(len(str(c)) for c in col) + 3 for col in zip(headers, *rows, strict=True)) + 4
    cell = max(SUMMARY_MIN, min(SUMMARY_CELL, WIDTH - used))
    return [[*row, _shorten(f.summary, cell)] for row, f in zip(rows, ordered, strict=True)]


def _shorten(text: str, limit: int) -> str:
    return shorten(text, limit)


def _identities(captured: list[dict], with_findings: set[str]) -> list[dict]:
    """Identity facts (DMI product, BIOS, ...) of the hosts with suspects; unknown values left out."""
    out = []
    for h in captured:
        known = {k: v for k, v in (h.get("identity") or {}).items() if v not in (None, "")}
        if h["host"] in with_findings and known:
            out.append({"host": h["host"], "identity": known})
    return out


def _status_rows(captured: list[dict]) -> list[list[Any]]:
    groups: dict[str, list[str]] = {}
    for h in captured:
        groups.setdefault(str(h["status"]), []).append(h["host"])
    return [[status, len(names), hostlist(names)] for status, names in sorted(groups.items())]
