"""Consoles and the printers every command shares. Human output to stdout, warnings to stderr.

Everything a capture says (host names, components, summaries, reasons) is printed through `plain` or as rich
Text: a host named "[/x]" must not be read as markup, and an ESC in a component must not reach the terminal."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import click
from rich import box
from rich.console import Console, ConsoleDimensions
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from fabricase.models import Capture, Finding, HostStatus

__all__ = ["emit_json", "err_console", "hosts_json", "markup_safe", "out_console", "plain", "print_findings",
           "print_hosts", "severity_text"]


class _Console(Console):
    """A console whose width follows COLUMNS when it is printed to, not when it was made: the CLI's consoles are
    made at import, and a terminal (or a test) may change the width after."""

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        columns = os.environ.get("COLUMNS", "")
        return ConsoleDimensions(int(columns), size.height) if columns.isdigit() and int(columns) > 0 else size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


# Paths are printed with soft_wrap=True: a wrapped path cannot be copied back into a shell.
out_console: Console = _Console(highlight=False, soft_wrap=False)
err_console: Console = _Console(stderr=True, highlight=False)

# C0 and C1 controls (ESC, CR, BEL, newline...) and the bidirectional overrides that reorder what is shown.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def plain(value: Any) -> str:
    """Text from a capture made inert for a terminal: each control character shown as \\xNN (or \\uNNNN)."""
    return _UNSAFE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else
                       f"\\u{ord(m.group()):04x}", str(value))


def markup_safe(value: Any) -> str:
    """`plain`, with rich markup escaped, for an f-string that is printed with markup."""
    return escape(plain(value))


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


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
    hosts = [plain(f.host or "(shared)") for f in findings]
    components = [plain(f.component) for f in findings]
    table = Table(title=f"{len(findings)} finding(s)", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  padding=(0, 1, 0, 0), expand=True)
    table.add_column("sev", no_wrap=True, width=max(len(str(f.severity)) for f in findings))
    table.add_column("host", overflow="fold", width=min(max(map(len, hosts)), max(8, width // 6)))
    table.add_column("component", overflow="fold", width=min(max(map(len, components)), max(12, width // 5)))
    table.add_column("summary", overflow="fold", ratio=1)
    for f, host, component in zip(findings, hosts, components, strict=True):
        table.add_row(severity_text(f.severity), Text(host), Text(component), Text(plain(f.summary)))
    console.print(table)


def print_hosts(capture: Capture, console: Console | None = None) -> None:
    console = console or out_console
    bad = [h for h in capture.hosts if h.status != HostStatus.OK]
    ok = len(capture.hosts) - len(bad)
    console.print(Text(f"Captured {ok}/{len(capture.hosts)} host(s) into {plain(capture.root)}"), soft_wrap=True)
    for h in bad:
        err_console.print(Text(f"warning: {plain(h.host)}: {h.status}: {plain(h.reason)}", style="yellow"),
                          highlight=False)


def hosts_json(capture: Capture) -> list[dict]:
    return [{"host": h.host, "status": str(h.status), "reason": h.reason, "items": len(h.items)}
            for h in capture.hosts]
