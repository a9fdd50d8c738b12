"""The probe in a few lines people read: the verdict first, then the counts, the slow pairs and the bisection
table. The same lines go to the terminal, the report and the ticket (the caller escapes them for a terminal),
so they are plain text, each no wider than asked.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from fabricase.analysis.probe import ProbeAnalysis, probe_analysis
from fabricase.analysis.probe_tools import folded_hosts
from fabricase.models import Capture
from fabricase.probe.model import PAIR_KINDS, ProbeDoc

__all__ = ["BisectRow", "ProbeSummary", "probe_lines", "probe_summary", "probe_text", "summary_of"]

_SLOW_PAIR_LINES = 5  # the few slow pairs worth reading; the rest are counted


@dataclass(frozen=True)
class BisectRow:
    """One set of the bisection table: its round, hosts as a folded nodeset, busbw, and whether it was slow."""

    round: int
    depth: int
    hosts: str
    busbw_gbs: float | None
    slow: bool | None
    candidate: str | None = None
    reason: str | None = None  # why there is no figure


@dataclass
class ProbeSummary:
    """What the probe found, counted and named; probe_lines turns it into text."""

    tests: int = 0
    ok: int = 0
    failed: int = 0
    slow: int = 0
    not_judged: int = 0
    expected_pair_gbps: float | None = None
    pair_basis: str | None = None
    expected_busbw_gbs: float | None = None
    busbw_basis: str | None = None
    slow_pairs: list[str] = field(default_factory=list)
    more_slow_pairs: int = 0
    bisection: list[BisectRow] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)  # one line per suspect, the reason said once
    interrupted: bool = False
    stopped_reason: str | None = None
    leftovers: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)  # a stage that planned nothing, and why (ProbeDoc.notes)


def _number(value) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _basis(doc: ProbeDoc, key: str) -> str | None:
    value = doc.expected.get(key)
    return None if value is None else " ".join(str(value).split())[:160]


def summary_of(analysis: ProbeAnalysis, doc: ProbeDoc) -> ProbeSummary:
    """The summary of an analysis already made (probe_summary without reading the capture again)."""
    s = ProbeSummary(interrupted=doc.interrupted, stopped_reason=doc.stopped_reason)
    s.expected_pair_gbps, s.pair_basis = _number(doc.expected.get("pair_gbps")), _basis(doc, "pair_basis")
    s.expected_busbw_gbs, s.busbw_basis = _number(doc.expected.get("busbw_gbs")), _basis(doc, "busbw_basis")
    set_slow = {b.measure.test.id: b.slow for b in analysis.sets}
    for m in analysis.measures:
        s.tests += 1
        s.ok += m.status == "ok" and m.value is not None
        s.failed += m.status in ("failed", "timed-out") or m.could_not_run
        s.not_judged += not m.judged
        s.slow += bool(analysis.pair_slow.get(m.test.id) or set_slow.get(m.test.id))
    pairs = [m for m in analysis.measures if m.test.kind in PAIR_KINDS and analysis.pair_slow.get(m.test.id)]
    for m in pairs[:_SLOW_PAIR_LINES]:
        rail = "" if m.test.rail is None else f" rail {m.test.rail}"
        figure = f"{m.value:.4g} {m.unit}" if m.value is not None else (m.reason or "no figure")
        s.slow_pairs.append(f"{m.test.hosts[0]} -> {m.test.hosts[1]} {m.test.kind}{rail}: {figure}")
    s.more_slow_pairs = max(len(pairs) - _SLOW_PAIR_LINES, 0)
    s.bisection = [BisectRow(b.measure.test.round, b.depth, folded_hosts(b.measure.test.hosts), b.measure.value,
                             b.slow, b.candidate, b.measure.reason) for b in analysis.sets]  # fmt: skip
    for x in analysis.suspects:
        what = "slow NIC" if x.component.startswith("rdma:") else "slow host"
        where = f"{x.host} {x.component[5:]}" if x.component.startswith("rdma:") else x.host
        s.verdicts.append(f"{what} {where}: " + " and ".join(filter(None, [x.pair_reason, x.bisect_reason])))
    s.verdicts += [f"slow path {component[5:]}: {reason}" for component, reason, _ in analysis.paths]
    if analysis.below_expected:
        s.verdicts.append(f"fabric below expected: {analysis.below_expected}")
    if analysis.collective_slow:
        s.verdicts.append(f"collective slow: {analysis.collective_slow}")
    s.leftovers = [f"{r.test.id}: {' '.join(p.split())[:160]}" for r in doc.results for p in r.leftovers]
    s.not_run = [f"{stage}: {' '.join(str(doc.notes[stage]).split())[:200]}" for stage in ("rdma", "nccl")
                 if isinstance(doc.notes.get(stage), str)]
    return s


def probe_summary(capture: Capture, doc: ProbeDoc) -> ProbeSummary:
    """Counts, expectations, slow pairs, the bisection rounds and the suspects of one probe."""
    return summary_of(probe_analysis(capture, doc), doc)


def _wrap(text: str, width: int, indent: str = "  ") -> list[str]:
    return textwrap.wrap(text, width=width, subsequent_indent=indent, break_long_words=True,
                         break_on_hyphens=False) or [""]  # fmt: skip


def _busbw(row: BisectRow) -> str:
    return "-" if row.busbw_gbs is None else f"{row.busbw_gbs:.4g}"


def probe_lines(summary: ProbeSummary, width: int = 80) -> list[str]:
    """Plain-text lines, each at most `width` characters: the verdict, the counts, the bisection table."""
    width = max(width, 40)
    lines: list[str] = []
    nothing = "no slow host, NIC or path: every judged test was within the rule" if summary.tests else (
        "nothing was tested")
    for verdict in summary.verdicts or [nothing]:
        lines += _wrap(verdict, width)
    counts = (f"{summary.tests} tests: {summary.ok} ok, {summary.failed} failed or timed out, "
              f"{summary.slow} slow, {summary.not_judged} not judged")  # fmt: skip
    lines += _wrap(counts, width)
    for note in summary.not_run:
        lines += _wrap(f"not run: {note}", width)
    if summary.expected_pair_gbps is not None:
        lines += _wrap(f"expected pair rate {summary.expected_pair_gbps:g} Gb/s ({summary.pair_basis or 'given'})",
                       width)
    if summary.expected_busbw_gbs is not None:
        lines += _wrap(f"expected busbw {summary.expected_busbw_gbs:g} GB/s ({summary.busbw_basis or 'given'})",
                       width)
    if summary.slow_pairs:
        lines.append("slow pairs:"[:width])
        for pair in summary.slow_pairs:
            lines += _wrap(f"  {pair}", width, indent="    ")
        if summary.more_slow_pairs:
            lines.append(f"  and {summary.more_slow_pairs} more"[:width])
    if summary.bisection:
        lines.append(f"{'round':>5}  {'busbw GB/s':>10}  {'slow':<4}  hosts"[:width])
        for row in summary.bisection:
            slow = "?" if row.slow is None else ("yes" if row.slow else "no")
            hosts = row.hosts + (f" (tests {row.candidate})" if row.candidate else "")
            head = f"{row.round:>5}  {_busbw(row):>10}  {slow:<4}  "
            lines += _wrap(head + hosts, width, indent=" " * min(len(head), width // 2))
    if summary.interrupted or summary.stopped_reason:
        lines += _wrap(f"stopped early: {summary.stopped_reason or 'interrupted'}", width)
    for leftover in summary.leftovers:
        lines += _wrap(f"left running (killed): {leftover}", width)
    return [line[:width] for line in lines]


def probe_text(capture: Capture, width: int = 80) -> list[str]:
    """The probe's lines for the ticket and the report, when the capture holds a probe (probe.json); else []."""
    from fabricase.analysis.probe import load_probe

    doc, why = load_probe(capture.root)
    if doc is None:
        return [f"The probe's record could not be read: {why}"[:width]] if why else []
    return probe_lines(probe_summary(capture, doc), width=width)
