"""Consoles and the printers every command shares. Human output to stdout, warnings to stderr.

Everything a command prints may quote data that others wrote: host names, symptoms, kernel-log lines, member
names, desk replies. The consoles here make all of it inert, so that a command cannot forget:
- markup is off: "[/x]" or "[link=...]" in a host name prints as it is, and never raises;
- every string they print (a plain str, a table cell, a title) goes through `inert`: ESC, CR, backspace, a
  newline, the other controls and the bidi overrides show as \\x1b, \\r, \\n, \\u202e;
- as a last line of defence, every segment they write has its controls escaped too (a Text built from data
  keeps its newlines; build one with `inert_text`).
Our own styling is a Text or a style= argument, never markup; our own line breaks are separate prints.
Lines printed with click.echo go through `inert` (one line) or `inert_lines` (a document such as the ticket)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from typing import Any

import click
from rich import box
from rich.console import Console, ConsoleDimensions, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text

from fabricase.errors import UNSAFE_CHARACTERS, inert
from fabricase.models import Capture, Finding, HostStatus

__all__ = ["echo_line", "emit_json", "err_console", "hosts_json", "inert", "inert_lines", "inert_text",
           "out_console", "print_findings", "print_hosts", "severity_text"]

# A segment's unsafe characters but its line breaks (which rich itself makes when it lays text out).
_UNSAFE_IN_SEGMENT = re.compile(f"(?!\\n)[{UNSAFE_CHARACTERS}]")


def inert_lines(text: object) -> str:
    """A document (the ticket) with its own line breaks kept and every line made `inert`."""
    return "\n".join(inert(line) for line in str(text).split("\n"))


def inert_text(value: object, style: str | Style = "") -> Text:
    """Data as a rich Text, inert (a Text is printed as built, so it is made inert here)."""
    return Text(inert(value), style=style)


def echo_line(text: object, *, err: bool = False) -> None:
    """One inert line through click (errors, and the lines printed outside the consoles)."""
    click.echo(inert(text), err=err)


class _Console(Console):
    """A console that prints data inert (markup off, every string and segment escaped; see the module's
    docstring) and whose width follows COLUMNS when it is printed to, not when it was made: the CLI's consoles
    are made at import, and a terminal (or a test) may change the width after."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(markup=False, emoji=False, highlight=False, **kwargs)

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        columns = os.environ.get("COLUMNS", "")
        return ConsoleDimensions(int(columns), size.height) if columns.isdigit() and int(columns) > 0 else size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]

    def render_str(self, text: str, **kwargs: Any) -> Text:
        """Every string printed, a table's cells and titles included, as inert Text: never read as markup or
        emoji codes, whatever the caller asks."""
        kwargs.update(markup=False, emoji=False)
        return super().render_str(inert(text), **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        """The segments to write, with any control character that reached one escaped (rich's own control
        segments, cursor moves of a progress bar, are left alone)."""
        for segment in super().render(renderable, options):
            if segment.control or not _UNSAFE_IN_SEGMENT.search(segment.text):
                yield segment
            else:
                yield Segment(_UNSAFE_IN_SEGMENT.sub(lambda m: inert(m.group()), segment.text), segment.style)


# Paths are printed with soft_wrap=True: a wrapped path cannot be copied back into a shell. Warnings and errors
# always are: rich's word wrap could start a new line with words from the data ("verify: OK").
out_console: Console = _Console(soft_wrap=False)
err_console: Console = _Console(stderr=True, soft_wrap=True)


def emit_json(data: Any) -> None:
    """JSON on stdout; ensure_ascii writes every control and bidi character as \\uNNNN, so JSON is inert too."""
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str, ensure_ascii=True))


_SEV_STYLE = {"critical": "bold red", "major": "red", "minor": "yellow", "info": "dim"}


def severity_text(severity: object) -> Text:
    sev = str(severity)
    return Text(sev, style=_SEV_STYLE.get(sev, ""))


def print_findings(findings: list[Finding], console: Console | None = None) -> None:
    """The raw findings, one row each. The summary column keeps at least a third of the width, so that it never
    wraps one word per line; long hosts and components fold inside their own capped columns."""
    console = console or out_console
    if not findings:
        console.print("No findings: every captured component looks healthy.")
        return
    width = console.width
    hosts = [inert(f.host or "(shared)") for f in findings]
    components = [inert(f.component) for f in findings]
    table = Table(title=f"{len(findings)} finding(s)", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  padding=(0, 1, 0, 0), expand=True)
    table.add_column("sev", no_wrap=True, width=max(len(str(f.severity)) for f in findings))
    table.add_column("host", overflow="fold", width=min(max(map(len, hosts)), max(8, width // 6)))
    table.add_column("component", overflow="fold", width=min(max(map(len, components)), max(12, width // 5)))
    table.add_column("summary", overflow="fold", ratio=1)
    for f, host, component in zip(findings, hosts, components, strict=True):
        table.add_row(severity_text(f.severity), Text(host), Text(component), Text(inert(f.summary)))
    console.print(table)


def print_hosts(capture: Capture, console: Console | None = None) -> None:
    console = console or out_console
    bad = [h for h in capture.hosts if h.status != HostStatus.OK]
    ok = len(capture.hosts) - len(bad)
    # inert here too: the caller may pass a console of its own.
    console.print(inert_text(f"Captured {ok}/{len(capture.hosts)} host(s) into {inert(capture.root)}"),
                  soft_wrap=True)
    for h in bad:
        err_console.print(inert_text(f"warning: {h.host}: {h.status}: {h.reason}", style="yellow"))


def hosts_json(capture: Capture) -> list[dict]:
    return [{"host": h.host, "status": str(h.status), "reason": h.reason, "items": len(h.items)}
            for h in capture.hosts]
