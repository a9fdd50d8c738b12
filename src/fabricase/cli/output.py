"""Consoles and the printers every command shares. Human output to stdout, warnings to stderr."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from fabricase.models import Capture, Finding, HostStatus

__all__ = ["emit_json", "err_console", "hosts_json", "out_console", "print_findings", "print_hosts"]

# Paths are printed with soft_wrap=True: a wrapped path cannot be copied back into a shell.
out_console = Console(highlight=False, soft_wrap=False)
err_console = Console(stderr=True, highlight=False)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


_SEV_STYLE = {"critical": "bold red", "major": "red", "minor": "yellow", "info": "dim"}


def print_findings(findings: list[Finding]) -> None:
    if not findings:
        out_console.print("No findings: every captured component looks healthy.")
        return
    table = Table(title=f"{len(findings)} finding(s)", title_justify="left", expand=False)
    table.add_column("sev")
    table.add_column("host")
    table.add_column("component")
    table.add_column("summary", overflow="fold")
    for f in findings:
        sev = str(f.severity)
        table.add_row(f"[{_SEV_STYLE[sev]}]{sev}[/]", f.host or "(shared)", f.component, f.summary)
    out_console.print(table)


def print_hosts(capture: Capture) -> None:
    bad = [h for h in capture.hosts if h.status != HostStatus.OK]
    ok = len(capture.hosts) - len(bad)
    out_console.print(f"Captured {ok}/{len(capture.hosts)} host(s) into {capture.root}", soft_wrap=True)
    for h in bad:
        err_console.print(f"warning: {h.host}: {h.status}: {h.reason}", style="yellow", highlight=False)


def hosts_json(capture: Capture) -> list[dict]:
    return [{"host": h.host, "status": str(h.status), "reason": h.reason, "items": len(h.items)}
            for h in capture.hosts]
