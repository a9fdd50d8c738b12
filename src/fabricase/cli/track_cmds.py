"""Commands over the escalation tracker: list, show, resolve."""

from __future__ import annotations

from datetime import UTC, datetime

import click
from rich.table import Table

from fabricase.cli.app import cli, paths
from fabricase.cli.output import emit_json, out_console

_STATES = click.Choice(["open", "waiting", "all", "draft", "filed", "waiting-provider", "waiting-us",
                        "resolved", "closed"])


def _tracker():
    from fabricase.tracker.store import Tracker

    return Tracker.open(paths())


def _age(iso: str) -> str:
    try:
        then = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return "?"
    secs = max((datetime.now(UTC) - then).total_seconds(), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{int(secs // size)}{unit}"
    return f"{int(secs)}s"


@cli.command(name="list")
@click.option("--provider", default=None, help="Only this provider's escalations.")
@click.option("--state", type=_STATES, default="open", show_default=True, help="Which escalations.")
@click.option("--json", "as_json", is_flag=True, help="Print the escalations as JSON.")
def list_(provider, state, as_json):
    """List tracked escalations, oldest first."""
    escs = _tracker().list(provider=provider, state=state)
    if as_json:
        emit_json([{k: v for k, v in e.to_dict().items() if k != "events"} for e in escs])
        return
    if not escs:
        out_console.print(f"No {state} escalations.")
        return
    table = Table(title=f"{len(escs)} escalation(s), {state}", title_justify="left")
    for col in ("id", "provider", "state", "age", "sev", "hosts", "title"):
        table.add_column(col, overflow="fold" if col == "title" else "ellipsis")
    for e in escs:
        hosts = ", ".join(e.hosts[:3]) + (f" +{len(e.hosts) - 3}" if len(e.hosts) > 3 else "")
        table.add_row(e.id, e.provider, str(e.state), _age(e.created_at), str(e.severity), hosts, e.title)
    out_console.print(table)


@cli.command()
@click.argument("escalation_id", metavar="ESCALATION")
@click.option("--json", "as_json", is_flag=True, help="Print the escalation and its events as JSON.")
def show(escalation_id, as_json):
    """Show one escalation: where it was filed, its bundle and its timeline."""
    e = _tracker().get(escalation_id)
    if as_json:
        emit_json(e.to_dict())
        return
    out_console.print(f"[bold]{e.id}[/] {e.title}")
    for label, value in (("provider", f"{e.provider} case {e.provider_case_id or '-'}"),
                         ("state", f"{e.state} ({e.raw_status or '-'})"), ("severity", str(e.severity)),
                         ("symptom", e.symptom), ("hosts", ", ".join(e.hosts) or "-"),
                         ("components", ", ".join(e.components) or "-"), ("bundle", e.bundle_path or "-"),
                         ("bundle id", e.bundle_id or "-"), ("ticket", e.ticket_path or "-"),
                         ("created", e.created_at), ("updated", e.updated_at)):
        out_console.print(f"  {label:<11}{value}", highlight=False)
    out_console.print("  timeline")
    for ev in e.events:
        out_console.print(f"    {ev.at}  {ev.kind:<8} {ev.detail}", highlight=False)


@cli.command()
@click.argument("escalation_id", metavar="ESCALATION")
@click.option("--note", default=None, help="Why it is resolved (kept in the timeline).")
@click.option("--json", "as_json", is_flag=True, help="Print the resolved escalation as JSON.")
def resolve(escalation_id, note, as_json):
    """Mark an escalation resolved."""
    e = _tracker().resolve(escalation_id, note)
    if as_json:
        emit_json({k: v for k, v in e.to_dict().items() if k != "events"})
    else:
        out_console.print(f"{e.id} resolved.")
