"""Fit what fabricase hands a desk to the desk's limits (bundler/limits.py).

- `fit_body`: the ticket body, most important section first, cut at section then line boundaries, never
  inside a table row or an open code block, ending with one line saying what was left out.
- `fit_summary`: `summary.json`, the summary attachment (findings, topology, counters, timeline), within a
  per-file limit: the least important detail goes first and the document says what went.
- `split_bundle`: a bundle too large for the desk, as parts that each verify on their own (a small bundle
  holding one slice of the whole, and the list of every slice's sha256) and join back to the same bytes
  (`verify.join_parts`). Format: docs/bundles.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import shlex
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricase.bundler.archive import build_bundle
from fabricase.bundler.verify import (
    PART_DATA,
    PART_FORMAT,
    PART_FORMAT_VERSION,
    PART_INFO,
    bundle_id_of,
    verify_bundle,
)
from fabricase.errors import BundleError, VerifyError
from fabricase.models import Finding, Placement, Severity, TicketDraft

__all__ = [
    "MIN_PART_BYTES",
    "SUMMARY_NAME",
    "FittedSummary",
    "SummaryInput",
    "fit_body",
    "fit_summary",
    "fit_ticket",
    "markdown_sections",
    "part_names",
    "split_bundle",
]

SECTION_SEP = "\n\n"
NOTE_NAMES = 4  # sections named in the cut note; the rest are counted
SUMMARY_NAME = "summary.json"
SUMMARY_FORMAT = "fabricase-summary"
EVIDENCE_KEPT = 3  # evidence items per finding once the summary must shrink
TEXT_KEPT = 200  # characters of any one text once the summary must shrink further
MIN_PART_BYTES = 64 * 1024
_CHUNK = 1 << 20

# Blocks a cut must not break: Markdown fences (``` or ~~~) and Jira {noformat}/{code} blocks.
_MD_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_JIRA_BLOCK = re.compile(r"^\{(noformat|code)(?::[^}]*)?\}\s*$")
_MD_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_JIRA_HEADING = re.compile(r"^h[1-6]\.\s+(.*?)\s*$")
_UNDERLINE = re.compile(r"^(?:-{3,}|={3,})\s*$")  # a plain-text heading's underline (markup "text")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


class _Blocks:
    """Tracks whether a line is inside a fenced block, and the line that would close it."""

    def __init__(self) -> None:
        self.closer = ""  # the line that closes the open block, "" outside one
        self._closes: re.Pattern[str] | None = None
        self.just_opened = False

    def feed(self, line: str) -> None:
        self.just_opened = False
        if self._closes is not None:
            if self._closes.match(line):
                self._closes, self.closer = None, ""
            return
        if m := _MD_FENCE.match(line):
            marker = m.group(1)
            self._closes = re.compile(rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}\s*$")
            self.closer, self.just_opened = marker, True
        elif m := _JIRA_BLOCK.match(line):
            self._closes = re.compile(rf"^\{{{m.group(1)}\}}\s*$")
            self.closer, self.just_opened = "{" + m.group(1) + "}", True


def _heading(lines: list[str], i: int) -> tuple[str, int] | None:
    """(title, lines it takes) when lines[i] starts a heading in any of the ticket markups."""
    line = lines[i]
    if m := _MD_HEADING.match(line) or _JIRA_HEADING.match(line):
        return m.group(1), 1
    nxt = lines[i + 1] if i + 1 < len(lines) else ""
    if line.strip() and not line.lstrip().startswith("|") and _UNDERLINE.match(nxt):
        return line.strip(), 2
    return None


def markdown_sections(text: str, *, first_title: str = "summary") -> list[tuple[str, str]]:
    """A rendered ticket body split at its headings (Markdown `##`, Jira `h2.`, or underlined plain text),
    never inside a fenced block: [(title, text)], the text starting with its heading. The text before the
    first heading is a section titled `first_title`."""
    lines = text.split("\n")
    sections: list[tuple[str, list[str]]] = [(first_title, [])]
    blocks = _Blocks()
    for i, line in enumerate(lines):
        found = _heading(lines, i) if not blocks.closer else None
        if found is not None and (sections[-1][1] or len(sections) > 1):
            sections.append((found[0], []))
        elif found is not None:
            sections[0] = (found[0], [])
        blocks.feed(line)
        sections[-1][1].append(line)
    return [(title, _trim("\n".join(body))) for title, body in sections if "\n".join(body).strip()]


def _trim(text: str) -> str:
    """Without leading and trailing blank lines (indentation of the first line is kept)."""
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


def _cut_section(text: str, room: int) -> tuple[str, int, int] | None:
    """The longest head of a section that fits `room` characters and cuts no block: a table keeps its header
    with its separator, an open fence is closed, a heading is not left alone. (text, lines kept, lines)."""
    lines = text.split("\n")
    head = (_heading(lines, 0) or ("", 0))[1]
    blocks = _Blocks()
    best: tuple[str, int, int] | None = None
    paragraph: tuple[str, int, int] | None = None  # the best cut at the end of a paragraph or list item
    length, content = -1, False
    for i, line in enumerate(lines):
        length += len(line) + 1
        if length > room:
            break
        blocks.feed(line)
        content = content or (i >= head and bool(line.strip()))
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        header_alone = line.lstrip().startswith("|") and bool(_TABLE_SEPARATOR.match(nxt)) and not blocks.closer
        if not content or blocks.just_opened or header_alone:
            continue
        kept = lines[: i + 1] + ([blocks.closer] if blocks.closer else [])
        candidate = _trim("\n".join(kept))
        if len(candidate) <= room:
            best = (candidate, i + 1, len(lines))
            if not nxt.strip():
                paragraph = best
    # a whole finding reads better than one cut after its first line, unless that wastes half the room
    if paragraph is not None and best is not None and 2 * len(paragraph[0]) >= len(best[0]):
        return paragraph
    return best


def _title(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _note(limit: int, cut: tuple[str, int, int] | None, omitted: list[str], full_text: str) -> str:
    left = []
    if cut is not None:
        title, kept, total = cut
        left.append(f"the end of \u201c{_title(title)}\u201d ({total - kept} of {total} lines)")
    named = [f"\u201c{_title(t)}\u201d" for t in omitted[:NOTE_NAMES]]
    if len(omitted) > NOTE_NAMES:
        named.append(f"{len(omitted) - NOTE_NAMES} more section{'s' if len(omitted) - NOTE_NAMES > 1 else ''}")
    if named:
        left.append(("the section " if len(omitted) == 1 else "the sections ") + ", ".join(named))
    what = " and ".join(left) if left else "part of the text"
    return f"(Cut to the desk's {limit}-character limit: left out {what}. The full text is in the bundle: {full_text}.)"


def _prefix(sections: list[tuple[str, str]], budget: int) -> tuple[list[str], tuple[str, int, int] | None, list[str]]:
    """The most important sections that fit `budget`, the last one cut at a line; and what was left out."""
    kept: list[str] = []
    used = 0
    for i, (title, text) in enumerate(sections):
        sep = len(SECTION_SEP) if kept else 0
        if used + sep + len(text) <= budget:
            kept.append(text)
            used += sep + len(text)
            continue
        cut = _cut_section(text, budget - used - sep)
        rest = [t for t, _ in sections[i + 1 :]]
        if cut is None:
            return kept, None, [title, *rest]
        kept.append(cut[0])
        return kept, (title, cut[1], cut[2]), rest
    return kept, None, []


def fit_body(sections: Sequence[tuple[str, str]], limit: int, *, full_text: str = "ticket.md") -> str:
    """The ticket body from (title, text) sections, most important first, in at most `limit` characters
    (Python str length: what the desks' APIs count). Sections are joined by one blank line; when they do not
    all fit, the body ends with one line naming what was left out and where the full text is."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise BundleError(f"a body limit must be an integer, not {limit!r}")
    parts = [(title, _trim(text)) for title, text in sections if text.strip()]
    whole = SECTION_SEP.join(text for _, text in parts)
    if len(whole) <= limit:
        return whole
    reserve = 0
    for _ in range(8):  # the note names what it leaves out, so its length depends on the cut: settle it
        kept, cut, omitted = _prefix(parts, limit - reserve - len(SECTION_SEP))
        note = _note(limit, cut, omitted, full_text)
        if len(note) <= reserve:
            break
        reserve = len(note)
    body = SECTION_SEP.join([*kept, note])
    if len(body) > limit:  # a very small limit: the short note, and what fits beside it
        note = f"(Cut to {limit} characters; full text: {full_text}.)"
        kept = _prefix(parts, limit - len(note) - len(SECTION_SEP))[0]
        body = SECTION_SEP.join([*kept, note])
    if len(body) > limit:
        raise BundleError(f"a {limit}-character body cannot hold even the note saying the ticket was cut")
    return body


# --- summary.json ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SummaryInput:
    """What the summary attachment says. hosts: `pipeline.host_summaries` records (host, status, reason,
    identity); timeline: entries with `at` and `what` (templates.timeline) or (at, what) pairs; counters:
    rows of the suspect components' key counters against the fleet (host, component, metric, value, fleet
    baseline, unit, ...), None when the findings' evidence (value and baseline) is all there is."""

    title: str
    symptom: str
    severity: str
    captured_at: str
    findings: Sequence[Finding]
    hosts: Sequence[Mapping[str, Any]] = ()
    placements: Sequence[Placement] = ()
    timeline: Sequence[Any] = ()
    counters: Sequence[Mapping[str, Any]] | None = None
    bundle_id: str | None = None
    escalation_id: str | None = None


@dataclass(frozen=True)
class FittedSummary:
    data: bytes  # summary.json
    dropped: list[str] = field(default_factory=list)  # what was left out, most important last
    name: str = SUMMARY_NAME


@dataclass(frozen=True)
class _Cut:
    """How much of the summary to keep; None: all of it."""

    info: bool = True
    evidence: int | None = None
    others: bool = True  # hosts without a finding, and their topology
    text: int | None = None
    timeline: int | None = None
    counters: int | None = None
    findings: int | None = None


# What the summary says it left out, in the order it is left out (fit_summary's ladder).
_DROP_ORDER = ("info", "evidence", "others", "text", "identity", "timeline", "counters", "findings", "rows")


class _Dropped:
    """Counts what one rendering of the summary leaves out, and shortens texts (counting them)."""

    def __init__(self, text_limit: int | None) -> None:
        self.text_limit = text_limit
        self.counts: dict[str, tuple[int, str]] = {}

    def add(self, stage: str, n: int, what: str) -> None:
        if n:
            total = self.counts.get(stage, (0, what))[0] + n
            self.counts[stage] = (total, what)

    def short(self, text: Any) -> Any:
        if self.text_limit is None or not isinstance(text, str) or len(text) <= self.text_limit:
            return text
        self.add("text", 1, f"texts cut to {self.text_limit} characters")
        return text[: self.text_limit - 3] + "..."

    def lines(self) -> list[str]:
        return [f"{self.counts[k][0]} {self.counts[k][1]}" for k in _DROP_ORDER if k in self.counts]


def _finding_doc(f: Finding, cut: _Cut, dropped: _Dropped) -> dict[str, Any]:
    doc = f.to_dict()
    evidence = doc["evidence"]
    keep = len(evidence) if cut.evidence is None else cut.evidence
    dropped.add("evidence", len(evidence) - keep if keep < len(evidence) else 0,
                f"evidence items beyond the first {keep} of each finding")
    doc["evidence"] = [{k: dropped.short(v) for k, v in ev.items()} for ev in evidence[:keep]]
    doc["summary"] = dropped.short(doc["summary"])
    if cut.text is not None and len(doc["related"]) > 8:
        dropped.add("text", 1, f"texts cut to {cut.text} characters")
        doc["related"] = [*doc["related"][:8], f"... {len(doc['related']) - 8} more"]
    return doc


def _placement_doc(p: Placement) -> dict[str, Any]:
    fields = ("host", "provider", "instance_id", "instance_type", "region", "zone", "placement_group", "topology")
    return {name: getattr(p, name) for name in fields}


def _timeline_doc(entries: Sequence[Any], cut: _Cut, dropped: _Dropped) -> list[dict[str, Any]]:
    rows = [{"at": e[0], "what": e[1]} if isinstance(e, tuple | list) else {"at": e.at, "what": e.what}
            for e in entries]
    rows = [{k: dropped.short(v) for k, v in r.items()} for r in rows]
    keep = None if cut.timeline is None else max(cut.timeline, 2)  # always when it began, and the latest
    if keep is None or len(rows) <= keep:
        return rows
    dropped.add("timeline", len(rows) - keep, "timeline entries from the middle")
    head = (keep + 1) // 2
    return rows[:head] + rows[len(rows) - (keep - head):]


def _summary_doc(s: SummaryInput, cut: _Cut) -> dict[str, Any]:
    dropped = _Dropped(cut.text)
    findings = ranked = sorted(s.findings, key=lambda f: f.sort_key)
    if not cut.info:
        dropped.add("info", sum(f.severity == Severity.INFO for f in findings), "info findings")
        findings = [f for f in findings if f.severity != Severity.INFO]
    if cut.findings is not None and len(findings) > cut.findings:
        dropped.add("findings", len(findings) - cut.findings, "lowest-ranked findings")
        findings = findings[: cut.findings]
    docs = [_finding_doc(f, cut, dropped) for f in findings]
    shared = {f.component for f in findings if f.host is None}
    suspects = {f.host for f in findings if f.host} | {p.host for p in s.placements if shared & set(p.topology)}
    hosts = sorted(s.hosts, key=lambda h: h["host"])
    statuses: dict[str, int] = {}
    for h in hosts:
        statuses[str(h["status"])] = statuses.get(str(h["status"]), 0) + 1
    others = [h for h in hosts if h["host"] not in suspects]
    placements = sorted(s.placements, key=lambda p: p.host)
    if not cut.others:
        dropped.add("others", len(others), "hosts without a finding (counted by status only)")
        placements = [p for p in placements if p.host in suspects]
    # a counter row goes with its finding: rows of components whose every finding was dropped go too
    gone = {(f.host, f.component) for f in ranked} - {(f.host, f.component) for f in findings}
    counters = [dict(r) for r in (s.counters or ()) if (r.get("host"), r.get("component")) not in gone]
    dropped.add("rows", len(s.counters or ()) - len(counters), "counter rows of dropped findings")
    if cut.counters is not None and len(counters) > cut.counters:
        dropped.add("counters", len(counters) - cut.counters, "counter rows")
        counters = counters[: cut.counters]
    timeline = _timeline_doc(s.timeline, cut, dropped)

    def host_doc(h: Mapping[str, Any], suspect: bool) -> dict[str, Any]:
        doc = {"host": h["host"], "status": str(h["status"]), "reason": dropped.short(h.get("reason"))}
        if not suspect:
            return doc
        if cut.text is not None:  # identities go with the long texts: they are in the bundle's host.json
            dropped.add("identity", 1 if h.get("identity") else 0, "identities of suspect hosts")
            return doc
        return {**doc, "identity": dict(h.get("identity") or {})}

    doc = {
        "format": SUMMARY_FORMAT,
        "format_version": 1,
        "title": dropped.short(s.title),
        "symptom": dropped.short(s.symptom),
        "severity": str(s.severity),
        "captured_at": s.captured_at,
        "bundle_id": s.bundle_id,
        "escalation_id": s.escalation_id,
        "hosts": {
            "captured": len(hosts),
            "by_status": dict(sorted(statuses.items())),
            "suspects": [host_doc(h, True) for h in hosts if h["host"] in suspects],
            "others": [host_doc(h, False) for h in others] if cut.others else [],
        },
        "findings": docs,
        "topology": [_placement_doc(p) for p in placements],
        "counters": [{k: dropped.short(v) for k, v in r.items()} for r in counters],
        "timeline": timeline,
        "full_data": "the bundle: findings.json (every finding with all its evidence), capture/ (every counter)",
    }
    return {**doc, "complete": not dropped.counts, "dropped": dropped.lines()}


def _encode(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _largest(upper: int, fits: Callable[[int], bool]) -> int | None:
    """The largest k in [0, upper] with fits(k) (fits grows with smaller k), or None."""
    if not fits(0):
        return None
    lo, hi = 0, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def fit_summary(summary: SummaryInput, limit_bytes: int | None, *, evidence: int = EVIDENCE_KEPT) -> FittedSummary:
    """summary.json in at most `limit_bytes` (None: no limit). Detail goes in this order until it fits: info
    findings, evidence beyond the first `evidence` of each finding, hosts without a finding, long texts, the
    middle of the timeline, counter rows, the lowest-ranked findings. `dropped` (also in the document) says
    what went. Deterministic: the same input and limit give the same bytes."""

    if limit_bytes is not None and (isinstance(limit_bytes, bool) or not isinstance(limit_bytes, int)):
        raise BundleError(f"a summary limit must be a number of bytes, not {limit_bytes!r}")

    def encoded(cut: _Cut) -> tuple[bytes, list[str]]:
        doc = _summary_doc(summary, cut)
        return _encode(doc), doc["dropped"]

    def fits(cut: _Cut) -> bool:
        return limit_bytes is None or len(encoded(cut)[0]) <= limit_bytes

    steps = [_Cut(), _Cut(info=False), _Cut(info=False, evidence=evidence)]
    steps.append(_Cut(info=False, evidence=evidence, others=False))
    steps.append(_Cut(info=False, evidence=evidence, others=False, text=TEXT_KEPT))
    for cut in steps:
        if fits(cut):
            return FittedSummary(*encoded(cut))
    base = steps[-1]
    for name, upper in (("timeline", len(summary.timeline)), ("counters", len(summary.counters or ())),
                        ("findings", len(summary.findings))):
        k = _largest(upper, lambda n, name=name, base=base: fits(_replace(base, **{name: n})))
        if k is not None:
            return FittedSummary(*encoded(_replace(base, **{name: k})))
        base = _replace(base, **{name: 0})
    raise BundleError(f"a summary of {limit_bytes} bytes cannot hold even its header; the desk's limit is too small")


def _replace(cut: _Cut, **changes: Any) -> _Cut:
    return dataclasses.replace(cut, **changes)


# --- bundle parts -----------------------------------------------------------------------------------------


def part_names(bundle_name: str, count: int) -> list[str]:
    """`<name>.part001-of-003`, ...: zero-padded, so that a shell glob lists them in order."""
    width = max(3, len(str(count)))
    return [f"{bundle_name}.part{k:0{width}d}-of-{count:0{width}d}" for k in range(1, count + 1)]


def _gzip_mtime(path: Path) -> int:
    """The bundle's pinned time (its gzip header's MTIME): the parts carry the same."""
    with path.open("rb") as fh:
        head = fh.read(10)
    if len(head) < 10 or head[:2] != b"\x1f\x8b":
        raise BundleError("not a gzip file", where=str(path))
    return int.from_bytes(head[4:8], "little")


def _slices(path: Path, size: int, slice_bytes: int) -> list[dict[str, Any]]:
    out = []
    with path.open("rb") as fh:
        for k, offset in enumerate(range(0, size, slice_bytes), start=1):
            data = fh.read(slice_bytes)
            out.append({"index": k, "offset": offset, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    return out


def _whole_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _part_info(parent: dict[str, Any], slices: list[dict[str, Any]], index: int) -> bytes:
    names = part_names(parent["name"], len(slices))
    doc = {
        "format": PART_FORMAT,
        "format_version": PART_FORMAT_VERSION,
        "parent": parent,
        "index": index,
        "count": len(slices),
        "parts": [{**s, "name": n} for s, n in zip(slices, names, strict=True)],
        # joined without fabricase: the slices in order (the zero-padded names sort so), then compare sha256
        "join": f"for p in {shlex.quote(parent['name'])}.part*-of-{names[0].rsplit('-of-', 1)[1]}; "
                f"do tar -xzOf \"$p\" {PART_DATA}; done > {shlex.quote(parent['name'])}",
    }
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()


def split_bundle(bundle_path: Path, part_bytes: int, *, out_dir: Path | None = None) -> list[Path]:
    """The bundle as parts of at most `part_bytes` each, written to `out_dir` (default: beside it); the
    bundle itself, alone, when it already fits. Each part is a bundle of its own that `verify_bundle` checks
    (PART.json and one slice, part.bin); `verify.join_parts` puts the slices back together. The bundle is
    verified first: a damaged bundle is not split. Deterministic: the same bundle gives the same parts."""
    bundle_path = Path(bundle_path)
    try:
        size = bundle_path.stat().st_size
    except OSError as exc:
        raise BundleError(f"cannot read: {exc.strerror or exc}", where=str(bundle_path)) from exc
    if isinstance(part_bytes, bool) or not isinstance(part_bytes, int) or part_bytes < MIN_PART_BYTES:
        raise BundleError(f"a part must be allowed at least {MIN_PART_BYTES} bytes, not {part_bytes!r}")
    if size <= part_bytes:
        return [bundle_path]
    report = verify_bundle(bundle_path)
    if not report.ok:
        raise VerifyError(f"not split: the bundle fails verification ({report.problems[0]})",
                          where=str(bundle_path), problems=report.problems)
    out_dir = Path(out_dir) if out_dir is not None else bundle_path.parent
    parent = {"name": bundle_path.name, "size": size, "sha256": _whole_sha256(bundle_path),
              "bundle_id": bundle_id_of(bundle_path)}
    mtime = _gzip_mtime(bundle_path)
    # a part holds its slice plus its own manifest, PART.json (one line per part) and tar/gzip framing
    overhead = 4096 + part_bytes // 512
    for _ in range(8):
        count = math.ceil(size / (part_bytes - overhead))
        slice_bytes = part_bytes - overhead - 128 * count
        if slice_bytes < part_bytes // 2:
            raise BundleError(f"{count} parts of {part_bytes} bytes would be mostly overhead; allow larger parts",
                              where=str(bundle_path))
        slices = _slices(bundle_path, size, slice_bytes)
        paths = _write_parts(bundle_path, parent, slices, mtime, out_dir)
        excess = max(p.stat().st_size for p in paths) - part_bytes
        if excess <= 0:
            return paths
        for p in paths:
            p.unlink()
        overhead += excess + 4096
    raise BundleError("could not fit the parts to the size given", where=str(bundle_path))


def _write_parts(bundle_path: Path, parent: dict[str, Any], slices: list[dict[str, Any]], mtime: int,
                 out_dir: Path) -> list[Path]:
    paths = []
    with tempfile.TemporaryDirectory(prefix="fabricase-part-") as empty, bundle_path.open("rb") as fh:
        for s, name in zip(slices, part_names(parent["name"], len(slices)), strict=True):
            fh.seek(s["offset"])
            data = fh.read(s["size"])
            extra = {PART_INFO: _part_info(parent, slices, s["index"]), PART_DATA: data}
            paths.append(build_bundle(Path(empty), out_dir / name, extra=extra, mtime=mtime).path)
    return paths


# When a ticket body must be cut to a desk's length, what the provider's engineer must read even if nothing else
# fits comes right after the summary: what we ask for, and the bundle that proves it.
_KEEP_FIRST = ("requested action", "references")


def fit_ticket(draft: TicketDraft, desk: str) -> TicketDraft:
    """The draft with its body fitted to the desk's length limit (fit_body, sections reordered so the requested
    action and references come first when something must go); unchanged when it fits. The full text is always
    in the bundle's ticket.md."""
    from fabricase.bundler.limits import desk_limits

    limit = desk_limits(desk).body_max_chars
    if limit is None or len(draft.body) <= limit:
        return draft
    sections = markdown_sections(draft.body)
    first = [sec for sec in sections[1:] if sec[0].strip().lower().startswith(_KEEP_FIRST)]
    ordered = sections[:1] + first + [sec for sec in sections[1:] if sec not in first]
    return dataclasses.replace(draft, body=fit_body(ordered, limit))
