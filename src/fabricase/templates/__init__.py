"""Render tickets and summaries from findings.

Templates are package data (`ticket_<provider>.md.j2`, falling back to `ticket_generic.md.j2`, and
`summary.md.j2`). The facts are put in order here (sorting, the host table, the requested action);
the templates only lay them out, so a provider template can extend `ticket_generic.md.j2` and replace
one block. StrictUndefined makes a misspelled variable an error instead of an empty ticket section.
"""

from __future__ import annotations

import functools
import math
import re
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

import jinja2

from fabricase.models import Evidence, Finding, Placement, Severity, TicketDraft

__all__ = ["environment", "format_evidence", "md_table", "render", "render_draft", "requested_action"]

TITLE_MAX = 120
WIDTH = 100
SUMMARY_CELL = 60  # a finding's summary in the compact table; the ticket has it in full
_CABLE_KINDS = {"link-flap", "netdev-errors"}
_OK = "ok"
_GLUE = re.compile(r"\b(snapshot|baseline) (\S+)")


@functools.cache
def environment() -> jinja2.Environment:
    """The shared Jinja2 environment, built on first use."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("fabricase", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(["html"]),
        keep_trailing_newline=True,
        # block tags on their own lines leave no blank lines behind: templates read like the output
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(num=format_number, evidence=format_evidence, wrap=wrap, hostlist=hostlist)
    env.globals.update(md_table=md_table)
    return env


def render(name: str, **context: Any) -> str:
    """Render one template by file name (e.g. `summary.md.j2`)."""
    return environment().get_template(name).render(**context)


def ticket_template(provider: str) -> str:
    """`ticket_<provider>.md.j2` when the package ships one, else the generic ticket."""
    name = f"ticket_{provider}.md.j2"
    return name if name in environment().list_templates() else "ticket_generic.md.j2"


def render_draft(
    *,
    provider: str,
    symptom: str,
    severity: Severity,
    findings: list[Finding],
    hosts: list[dict],
    placements: list[Placement],
    bundle_id: str | None,
    capture_created_at: str,
    escalation_id: str | None,
) -> TicketDraft:
    """The ticket (title, body) and the Markdown summary for one escalation."""
    ordered = sorted(findings, key=lambda f: f.sort_key)
    worst = ordered[0] if ordered else None
    captured = sorted(hosts, key=lambda h: h["host"])
    with_findings = {f.host for f in ordered if f.host}
    affected = sorted(with_findings)
    title_hosts = affected or [h["host"] for h in captured]
    context = {
        "provider": provider,
        "title": ticket_title(worst, symptom, len(title_hosts)),
        "one_line": _one_line(ordered, captured, symptom),
        "symptom": " ".join(symptom.split()),
        "severity": str(severity),
        "findings": ordered,
        "hosts": captured,
        "affected_rows": _host_rows(affected, captured, placements),
        "identities": _identities(captured, with_findings),
        "ruled_out": [h["host"] for h in captured if h["host"] not in with_findings and h["status"] == _OK],
        "not_captured": [h for h in captured if h["host"] not in with_findings and h["status"] != _OK],
        "status_rows": _status_rows(captured),
        "finding_rows": _finding_rows(ordered),
        "action": requested_action(worst),
        "bundle_id": bundle_id,
        "capture_created_at": capture_created_at,
        "escalation_id": escalation_id,
    }
    return TicketDraft(
        provider=provider,
        title=context["title"],
        body=render(ticket_template(provider), **context),
        severity=severity,
        hosts=title_hosts,
        components=sorted({f.component for f in ordered}),
        bundle_id=bundle_id,
        summary=render("summary.md.j2", **context),
    )


def ticket_title(worst: Finding | None, symptom: str, n_hosts: int) -> str:
    """`[fabricase] <worst finding summary or symptom> on <n> host(s)`, one line, <= 120 chars."""
    tail = f" on {n_hosts} host{'' if n_hosts == 1 else 's'}"
    head = "[fabricase] "
    what = " ".join((worst.summary if worst else symptom).split()) or "fabric fault"
    return head + _shorten(what, TITLE_MAX - len(head) - len(tail)) + tail


def requested_action(worst: Finding | None) -> str:
    """What the provider is asked to do, from the worst finding's kind."""
    if worst is None:
        return "Investigate the fabric path of the hosts above; no single component was localized."
    where = f"{worst.component} of {worst.host}" if worst.host else worst.component
    if worst.kind in _CABLE_KINDS:
        return f"Inspect or replace the cable/transceiver on {where}."
    if worst.kind == "host-unreachable":
        return f"Check host reachability of {worst.host or worst.component}."
    return f"Investigate {where} ({worst.kind})."


def format_number(value: Any) -> str:
    """Counters as integers, rates with enough digits to compare, never scientific for everyday sizes."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-" if value is None else str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if float(value).is_integer():
        return str(int(value))
    if abs(value) >= 1e-3:
        return f"{value:.4f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


def format_evidence(ev: Evidence) -> str:
    """`metric = value unit (baseline ...; source ...)`."""
    unit = ev.unit or ""
    line = f"{ev.metric} = {format_number(ev.value)}" + (unit if unit[:1] in ("", "/", "%") else f" {unit}")
    notes = []
    if ev.baseline is not None:
        notes.append(f"baseline {format_number(ev.baseline)}")
    if ev.source:
        notes.append(f"source {ev.source}")
    if ev.snapshot is not None:
        notes.append(f"snapshot {ev.snapshot}")
    return line + (f" ({'; '.join(notes)})" if notes else "")


def wrap(text: str, indent: str = "", first: str | None = None, width: int = WIDTH) -> str:
    """Fill text to `width`; continuation lines get `indent`. Paths and ids are never split."""
    # keep "snapshot 1" and "baseline 0" on one line: NUL is not whitespace to textwrap
    glued = _GLUE.sub(lambda m: f"{m[1]}\0{m[2]}", " ".join(str(text).split()))
    return textwrap.fill(
        glued,
        width=width,
        initial_indent=indent if first is None else first,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    ).replace("\0", " ")


def hostlist(names: Iterable[str]) -> str:
    """Host names folded the way fabric engineers write them: `gpu[001-064]`."""
    names = sorted(names)
    try:
        from ClusterShell.NodeSet import NodeSet, NodeSetException

        return str(NodeSet.fromlist(names))
    except (ImportError, NodeSetException, ValueError):
        return ",".join(names)


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """An aligned Markdown table (readable as plain text in a mail client too)."""
    cells = [[_cell(c) for c in headers]] + [[_cell(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(line.rstrip() for line in lines)


def _cell(value: Any) -> str:
    text = " ".join(format_number(value).split()) if value is not None else "-"
    return (text or "-").replace("|", "\\|")


def _one_line(ordered: list[Finding], captured: list[dict], symptom: str) -> str:
    n_hosts = len(captured)
    if not ordered:
        return f"No faulty component was localized on the {n_hosts} hosts captured; the symptom remains."
    counts = {s: sum(1 for f in ordered if f.severity == s) for s in Severity}
    by_severity = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    affected = len({f.host for f in ordered if f.host})
    worst = ordered[0]
    where = f"{worst.component} on {worst.host}" if worst.host else worst.component
    return (
        f"{len(ordered)} finding{'s' if len(ordered) != 1 else ''} ({by_severity}) on {affected} of "
        f"{n_hosts} hosts captured; worst: {where}: {' '.join(worst.summary.split())}"
    )


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
    return [
        [i, str(f.severity), f.host or "shared", f.component, _shorten(f.summary, SUMMARY_CELL)]
        for i, f in enumerate(ordered, 1)
    ]


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _identities(captured: list[dict], with_findings: set[str]) -> list[dict]:
    """Identity facts (DMI product, BIOS, ...) of the hosts with findings; unknown values left out."""
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
