"""`summary.json`, the summary attachment (suspects, background, findings, topology, counters, timeline), fitted
to a desk's per-file limit: the least important detail goes first, and the document says what went. The
suspects (every owner's: the provider's are the ticket's, the others are the user's to act on) go last."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fabricase.errors import BundleError
from fabricase.models import Finding, Placement, Severity

if TYPE_CHECKING:
    from fabricase.diagnosis import Diagnosis

__all__ = ["SUMMARY_NAME", "FittedSummary", "SummaryInput", "fit_summary"]

SUMMARY_NAME = "summary.json"
SUMMARY_FORMAT = "fabricase-summary"
EVIDENCE_KEPT = 3  # evidence items per finding once the summary must shrink
TEXT_KEPT = 200  # characters of any one text once the summary must shrink further


@dataclass(frozen=True)
class SummaryInput:
    """What the summary attachment says. hosts: `escalate.host_summaries` records (host, status, reason,
    identity); timeline: entries with `at` and `what` (templates.timeline) or (at, what) pairs; counters:
    rows of the suspect components' key counters against the fleet (host, component, metric, value, fleet
    baseline, unit, ...), None when the findings' evidence (value and baseline) is all there is. diagnosis:
    the capture's suspects and background (pipeline.diagnose_capture); None: diagnosed from the findings."""

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
    diagnosis: Diagnosis | None = None


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
    suspects: int | None = None


# What the summary says it left out, in the order it is left out (fit_summary's ladder).
_DROP_ORDER = ("info", "evidence", "others", "text", "identity", "timeline", "counters", "findings", "rows",
               "suspects")


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


def _short_all(value: Any, dropped: _Dropped) -> Any:
    """Every text inside a JSON value shortened (`_Dropped.short`)."""
    if isinstance(value, dict):
        return {k: _short_all(v, dropped) for k, v in value.items()}
    if isinstance(value, list):
        return [_short_all(v, dropped) for v in value]
    return dropped.short(value)


def _summary_doc(s: SummaryInput, cut: _Cut, diagnosis: Mapping[str, Any]) -> dict[str, Any]:
    dropped = _Dropped(cut.text)
    suspect_docs = list(diagnosis.get("suspects", ()))
    if cut.suspects is not None and len(suspect_docs) > cut.suspects:
        dropped.add("suspects", len(suspect_docs) - cut.suspects, "least severe suspects")
        suspect_docs = suspect_docs[: cut.suspects]
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
    suspects |= {h for d in diagnosis.get("suspects", ()) for h in ([d["host"]] if d.get("host") else d["hosts"])}
    hosts = sorted((_host_dict(h) for h in s.hosts), key=lambda h: h["host"])
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
        "verdict": diagnosis.get("verdict"),
        "suspects": [_short_all(d, dropped) for d in suspect_docs],
        "background": [_short_all(b, dropped) for b in diagnosis.get("background", ())],
        "findings": docs,
        "topology": [_placement_doc(p) for p in placements],
        "counters": [{k: dropped.short(v) for k, v in r.items()} for r in counters],
        "timeline": timeline,
        "full_data": "the bundle: findings.json (every finding with all its evidence), capture/ (every counter)",
        "findings_total": len(ranked),
    }
    return {**doc, "complete": not dropped.counts, "dropped": dropped.lines()}


def _host_dict(h: Any) -> Mapping[str, Any]:
    """A host summary (models.HostSummary or its dict) as a dict."""
    return h.to_dict() if hasattr(h, "to_dict") else h


def _diagnosis_doc(s: SummaryInput) -> dict[str, Any]:
    """The diagnosis as JSON (Diagnosis.to_dict), diagnosed from the findings when the input has none."""
    if s.diagnosis is not None:
        return s.diagnosis.to_dict()
    from fabricase.templates.suspects import diagnosis_of

    return diagnosis_of(list(s.findings), [_host_dict(h) for h in s.hosts], list(s.placements)).to_dict()


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
    middle of the timeline, counter rows, the lowest-ranked findings, and last the least severe suspects.
    `dropped` (also in the document) says what went. Deterministic: the same input and limit give the same
    bytes."""

    if limit_bytes is not None and (isinstance(limit_bytes, bool) or not isinstance(limit_bytes, int)):
        raise BundleError(f"a summary limit must be a number of bytes, not {limit_bytes!r}")
    diagnosis = _diagnosis_doc(summary)  # once: every rung of the ladder renders the same suspects

    def encoded(cut: _Cut) -> tuple[bytes, list[str]]:
        doc = _summary_doc(summary, cut, diagnosis)
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
                        ("findings", len(summary.findings)), ("suspects", len(diagnosis.get("suspects", ())))):
        k = _largest(upper, lambda n, name=name, base=base: fits(_replace(base, **{name: n})))
        if k is not None:
            return FittedSummary(*encoded(_replace(base, **{name: k})))
        base = _replace(base, **{name: 0})
    raise BundleError(f"a summary of {limit_bytes} bytes cannot hold even its header; the desk's limit is too small")


def _replace(cut: _Cut, **changes: Any) -> _Cut:
    return dataclasses.replace(cut, **changes)


# --- bundle parts -----------------------------------------------------------------------------------------
