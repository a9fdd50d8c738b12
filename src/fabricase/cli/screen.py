"""The one screen `analyze`, `collect` and `open` print: the verdict line, one line per suspect (severity, host,
what, the key number against the fleet, and the action on an indented second line), one line of background, and a
pointer to the raw findings (`--findings` prints them too).

Column widths are computed from the console's width, so that at 80 columns as at 160 nothing wraps one word per
line: the host and component columns are capped, and the key number takes the rest."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from fabricase.cli.output import inert, out_console, print_findings, severity_text
from fabricase.diagnosis import VERDICTS, Diagnosis, Suspect
from fabricase.diagnosis.naming import component_words
from fabricase.models import Finding, Severity

__all__ = ["SuspectLine", "background_line", "diagnosis_json", "power_lines", "print_diagnosis", "suspect_line"]

_GAP = 2  # spaces between columns
_ACTION_MARK = "→ "


@dataclass(frozen=True)
class SuspectLine:
    """One suspect as the terminal shows it, every field already safe to print."""

    severity: Severity
    host: str  # "(shared)" for a switch, rack, network node, block or sub-block
    what: str  # the component in the engineer's words: mlx5_4/1 (ens4np0), GPU 3, switch:leaf-3
    key: str  # the key number against the fleet
    verdict: str  # the verdict's short title: "link errors"
    action: str


def suspect_line(s: Suspect) -> SuspectLine:
    if s.host is None:
        what = component_words(s.components[:1]) if s.components else "shared component"
    else:
        what = "host" if s.unit == "host" else component_words(s.components, s.unit)
    verdict = VERDICTS.get(s.verdict)
    key = " ".join(s.key_number.split()) or s.verdict_text
    return SuspectLine(s.severity, inert(s.host or "(shared)"), inert(what), inert(key),
                       inert(verdict.title if verdict else s.verdict_text), inert(" ".join(s.action.split())))


def background_line(diagnosis: Diagnosis, width: int) -> str:
    """One line: the background lines (the diagnosis puts the most widespread first) joined while they fit the
    width, then "+N more"; a first line too long for the width is cut, never the count of the others."""
    if not diagnosis.background:
        return "Background: nothing rose at fleet-normal rates."
    texts = [inert(b.text) for b in diagnosis.background]
    head = "Background: "

    def more(shown: int) -> str:
        return f"; +{len(texts) - shown} more" if len(texts) > shown else ""

    shown = 1
    while shown < len(texts) and len(head + "; ".join(texts[:shown + 1]) + more(shown + 1)) <= width:
        shown += 1
    body, tail = "; ".join(texts[:shown]), more(shown)
    room = max(width - len(head) - len(tail), 20)
    if len(body) > room:
        body = body[:room - 1].rstrip() + "…"
    return head + body + tail


def power_lines(diagnosis: Diagnosis) -> list[str]:
    """One short line per thing the capture could not rule out (analysis.power): an interval too short to see a
    low error rate, a fleet too small to compare. Printed under the background, which they qualify; the whole
    sentence is in --json, the report and the ticket."""
    return [f"Not ruled out: {inert(line)}" for line in diagnosis.power_short]


def _raw_line(findings: list[Finding]) -> str:
    by = Counter(str(f.severity) for f in findings)
    counts = ", ".join(f"{by[str(s)]} {s}" for s in Severity if by[str(s)])
    return f"{len(findings)} raw finding(s) ({counts}): --findings lists them"


def _suspect_table(lines: list[SuspectLine], width: int) -> list[Table | Padding]:
    """One grid per suspect with the same fixed column widths (so that they line up), each followed by its verdict
    and action, indented under the host and cut to one line: the whole action is in --json and in the ticket."""
    sev_w = max(len(str(s.severity)) for s in lines)
    host_w = min(max(len(s.host) for s in lines), max(8, width // 6))
    what_w = min(max(len(s.what) for s in lines), max(16, width // 6))
    out: list[Table | Padding] = []
    for s in lines:
        grid = Table.grid(padding=(0, _GAP, 0, 0), expand=True)
        grid.add_column(no_wrap=True, width=sev_w)
        grid.add_column(overflow="fold", width=host_w)
        grid.add_column(overflow="fold", width=what_w)
        grid.add_column(overflow="fold", ratio=1)
        grid.add_row(severity_text(s.severity), Text(s.host), Text(s.what), Text(s.key))
        out.append(grid)
        action = Text.assemble((s.verdict, "bold"), " " + _ACTION_MARK, (s.action, "dim"), no_wrap=True,
                               overflow="ellipsis")
        out.append(Padding(action, (0, 0, 0, sev_w + _GAP)))
    return out


def print_diagnosis(diagnosis: Diagnosis, findings: list[Finding], *, console: Console | None = None,
                    show_findings: bool = False) -> None:
    """The verdict, the suspects, the background and the raw findings' count (their table with show_findings)."""
    console = console or out_console
    width = console.width
    console.print(Text(inert(diagnosis.verdict_line), style="bold"))
    lines = [suspect_line(s) for s in diagnosis.suspects]
    if lines:
        for renderable in _suspect_table(lines, width):
            console.print(renderable)
    console.print(Text(background_line(diagnosis, width), no_wrap=True, overflow="ellipsis"))
    if diagnosis.limits:
        console.print(Text("Not judged: " + "; ".join(inert(x) for x in diagnosis.limits), style="yellow"))
    for line in power_lines(diagnosis):
        console.print(Text(line, style="yellow", no_wrap=True, overflow="ellipsis"))
    if show_findings:
        print_findings(findings, console)
    elif findings:
        console.print(Text(_raw_line(findings), style="dim"))


def diagnosis_json(diagnosis: Diagnosis | None) -> dict:
    """What --json adds beside the raw findings: the verdict line, the suspects and the background lines."""
    if diagnosis is None:
        return {"verdict": None, "suspects": [], "background": []}
    return {"verdict": diagnosis.verdict_line, "suspects": [s.to_dict() for s in diagnosis.suspects],
            "background": [b.to_dict() for b in diagnosis.background],
            **({"power": [p.to_dict() for p in diagnosis.power], "power_text": diagnosis.power_text}
               if diagnosis.power else {})}
