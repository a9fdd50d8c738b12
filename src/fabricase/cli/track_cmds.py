"""Commands over the escalation tracker: list (the morning view), show, sync, comment, attach, retry, resolve,
reopen."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import click
from rich import box
from rich.table import Table
from rich.text import Text

from fabricase.cli.app import cli, paths
from fabricase.cli.options import AGE_LIMIT, Age
from fabricase.cli.output import emit_json, err_console, inert_text, out_console
from fabricase.config import CONFIG_FILE, load_config
from fabricase.errors import ConfigError

EXIT_SOME_FAILED = 3  # sync: some escalations could not be read back (each one says why)

_STATES = click.Choice(["open", "waiting", "all", "draft", "filed", "waiting-provider", "waiting-us",
                        "resolved", "closed"])
_WAITING = {"provider": "provider", "us": "US", None: "-"}


def _tracker():
    from fabricase.tracker.store import Tracker

    return Tracker.open(paths())


def _provider(name: str):
    from fabricase import providers

    return providers.get_provider(name, paths())


def _needed(esc, skip: bool):
    """The escalation's provider, loaded only when the desk will be called (a case exists and not --local):
    a provider whose SDK is missing never stops a local record."""
    return None if skip or esc.provider_case_id is None else _provider(esc.provider)


def _stale_after(given: timedelta | None) -> timedelta:
    """--stale-after, else `[tracker] stale_after` of config.toml ("3d", or a number of days), else 3 days."""
    from fabricase.tracker.records import DEFAULT_STALE_AFTER, parse_age

    if given is not None:
        return given
    p = paths()
    section = load_config(p).get("tracker", {})
    value = section.get("stale_after") if isinstance(section, dict) else None
    if value is None:
        return DEFAULT_STALE_AFTER
    try:
        age = timedelta(days=value) if isinstance(value, int | float) else parse_age(str(value))
    except (ValueError, OverflowError) as exc:
        raise ConfigError(f"[tracker] stale_after: {exc}", where=str(p.config / CONFIG_FILE)) from exc
    if not timedelta(0) < age <= AGE_LIMIT:
        raise ConfigError(f"[tracker] stale_after: {value!r} is out of range (allowed: over 0 to "
                          f"{AGE_LIMIT.days}d)", where=str(p.config / CONFIG_FILE))
    return age


def _ago(iso: str | None) -> str:
    """How long ago, in the largest whole unit ("3d", "5h", "12m", "40s"); "never" for none."""
    from fabricase.tracker.records import parse_iso

    then = parse_iso(iso) if iso else None
    if then is None:
        return "never" if iso is None else "?"
    secs = max((datetime.now(UTC) - then).total_seconds(), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{int(secs // size)}{unit}"
    return f"{int(secs)}s"


def _hosts(hosts: list[str]) -> str:
    return ", ".join(hosts[:3]) + (f" +{len(hosts) - 3}" if len(hosts) > 3 else "")


def _brief(escalation) -> dict:
    return {k: v for k, v in escalation.to_dict().items() if k != "events"}


def _morning_table(title: str, rows) -> Table:
    """One provider's open cases. The columns that say who waits and for how long never shrink: on a narrow
    terminal the case id, hosts and title give way."""
    cells = [(r.escalation.id, str(r.escalation.state), _WAITING[r.waiting_on], _ago(r.escalation.created_at),
              _ago(r.last_reply_at) + (" STALE" if r.stale else ""), r.escalation.provider_case_id or "-",
              _hosts(r.escalation.hosts), r.escalation.title) for r in rows]  # fmt: skip
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0))
    for i, col in enumerate(("id", "state", "waiting on", "age", "last reply")):
        table.add_column(col, no_wrap=True, min_width=max(len(col), *(len(c[i]) for c in cells)))
    table.add_column("case", no_wrap=True, overflow="ellipsis", max_width=20)
    table.add_column("hosts", no_wrap=True, overflow="ellipsis", max_width=20)
    table.add_column("title", overflow="fold", ratio=1)
    for c in cells:
        last_reply = Text.assemble(c[4].removesuffix(" STALE"), (" STALE", "bold red")) if c[4].endswith(" STALE") \
            else c[4]
        table.add_row(*c[:4], last_reply, *c[5:])  # str cells: the console prints them inert
    return table


@cli.command(name="list")
@click.option("--provider", default=None, help="Only this provider's escalations.")
@click.option("--state", type=_STATES, default="open", show_default=True, help="Which escalations.")
@click.option("--host", default=None, metavar="HOST", help="Only those covering this host (or instance id).")
@click.option("--older-than", type=Age(), default=None,
              help=f"Only those opened at least this long ago (3d, 12h) [{Age().describe()}].")
@click.option("--stale-after", type=Age(allow_zero=False), default=None,
              help="Mark stale a case waiting on the provider with no reply this long (default 3d, or "
                   f"[tracker] stale_after in config.toml) [{Age(allow_zero=False).describe()}].")
@click.option("--stale", "stale_only", is_flag=True, help="Only the stale ones.")
@click.option("--json", "as_json", is_flag=True, help="Print the escalations as JSON (for dashboards).")
def list_(provider, state, host, older_than, stale_after, stale_only, as_json):
    """The morning view: per provider, open escalations oldest first, who is waiting on whom, the age of each
    and the time since the provider's last reply; stale ones marked."""
    with _tracker() as tracker:
        rows = tracker.overview(provider=provider, state=state, host=host, older_than=older_than,
                                stale_after=_stale_after(stale_after))
    rows = [r for r in rows if r.stale or not stale_only]
    if as_json:
        emit_json([r.to_dict() for r in rows])
        return
    if not rows:
        out_console.print(f"No {state} escalations.")
        return
    for name in dict.fromkeys(r.escalation.provider for r in rows):
        mine = [r for r in rows if r.escalation.provider == name]
        on_us = sum(r.waiting_on == "us" for r in mine)
        stale = sum(r.stale for r in mine)
        title = f"{name}: {len(mine)} {state}, {on_us} waiting on us" + (f", {stale} stale" if stale else "")
        out_console.print(_morning_table(title, mine))


@cli.command()
@click.argument("escalation_id", metavar="ESCALATION")
@click.option("--json", "as_json", is_flag=True, help="Print the escalation and its events as JSON.")
def show(escalation_id, as_json):
    """Show one escalation: where it was filed, its bundle, and its timeline of events and comments."""
    with _tracker() as tracker:
        view = tracker.tracked(escalation_id, stale_after=_stale_after(None))
    e = view.escalation
    if as_json:
        emit_json({**view.to_dict(), "events": e.to_dict()["events"]})
        return
    out_console.print(Text.assemble((e.id, "bold"), " ", inert_text(e.title)), soft_wrap=True)
    instances = ", ".join(f"{h}={i}" for h, i in sorted(view.instances.items())) or "-"
    reply = (_ago(view.last_reply_at) + " ago" if view.last_reply_at else "never") + (" (stale)" if view.stale else "")
    for label, value in (("provider", f"{e.provider} case {e.provider_case_id or '-'}"),
                         ("state", f"{e.state} ({e.raw_status or '-'})"),
                         ("waiting on", _WAITING[view.waiting_on]), ("last reply", reply),
                         ("severity", str(e.severity)), ("symptom", e.symptom),
                         ("hosts", ", ".join(e.hosts) or "-"), ("instances", instances),
                         ("components", ", ".join(e.components) or "-"), ("bundle", e.bundle_path or "-"),
                         ("bundle id", e.bundle_id or "-"), ("ticket", e.ticket_path or "-"),
                         ("created", e.created_at), ("filed", view.filed_at or "-"),
                         ("synced", view.last_synced_at or "never"), ("updated", e.updated_at)):
        out_console.print(f"  {label:<11}{value}", soft_wrap=True)
    out_console.print("  timeline")
    for ev in e.events:
        detail = ev.detail
        if ev.kind == "comment":
            who = "provider" if ev.data.get("from_provider") else "us"
            detail = f"[{ev.data.get('author', who)}, {who}] {detail}"
        out_console.print(f"    {ev.at}  {ev.kind:<9} {detail}", soft_wrap=True)  # a reply's newlines show as \\n


def _sync_table(results, failed: int) -> Table:
    cells = [(r.escalation_id, r.outcome,
              (r.state_to if r.state_from == r.state_to else f"{r.state_from} -> {r.state_to}") or "-",
              r.raw_status or "-", str(r.new_comments), r.reason or "") for r in results]  # fmt: skip
    table = Table(title=f"synced {len(results) - failed}/{len(results)}", title_justify="left",
                  box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0))
    for i, col in enumerate(("id", "outcome", "state")):
        table.add_column(col, no_wrap=True, min_width=max(len(col), *(len(c[i]) for c in cells)))
    table.add_column("desk status", no_wrap=True, overflow="ellipsis", max_width=24)
    table.add_column("new comments", justify="right")
    table.add_column("note", overflow="fold", ratio=1)
    for c in cells:
        table.add_row(*c)
    return table


@cli.command()
@click.argument("escalation_ids", metavar="[ESCALATION]...", nargs=-1)
@click.option("--provider", default=None, help="Only this provider's escalations.")
@click.option("--json", "as_json", is_flag=True, help="Print one result per escalation as JSON.")
def sync(escalation_ids, provider, as_json):
    """Pull the status and new comments of every open escalation from its provider's desk (or only those
    named). One escalation's error is reported and the others are still synced; exit 3 if any failed."""
    from fabricase import filing

    with _tracker() as tracker:
        results = filing.sync(tracker, _provider, provider=provider, escalations=escalation_ids or None)
    failed = [r for r in results if r.outcome == "error"]
    if as_json:
        emit_json([r.to_dict() for r in results])
    elif not results:
        out_console.print("Nothing to sync: no open escalation has a case at a desk.")
    else:
        out_console.print(_sync_table(results, len(failed)))
    for r in failed:
        err_console.print(f"warning: {r.escalation_id}: {r.reason}", style="yellow", soft_wrap=True)
    if failed:
        click.get_current_context().exit(EXIT_SOME_FAILED)


def _report(result, as_json: bool, done: str) -> None:
    if as_json:
        emit_json(result.to_dict())
        return
    out_console.print(done, soft_wrap=True)
    if not result.sent and result.reason:
        err_console.print(f"note: not sent to the desk: {result.reason}", soft_wrap=True)


_LOCAL = click.option("--local", is_flag=True, help="Record it in the tracker only; tell the desk nothing.")


@cli.command()
@click.argument("escalation_id", metavar="ESCALATION")
@click.argument("text")
@_LOCAL
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def comment(escalation_id, text, local, as_json):
    """Post a comment on the escalation's case and keep it in the timeline."""
    from fabricase import filing

    with _tracker() as tracker:
        esc = tracker.get(escalation_id)
        result = filing.comment(tracker, _needed(esc, local), esc.id, text, local=local)
    _report(result, as_json, f"{result.escalation.id}: comment recorded.")


@cli.command()
@click.argument("escalation_id", metavar="ESCALATION")
@click.argument("files", metavar="[FILE...]", nargs=-1,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--capture", "source", metavar="DIR|BUNDLE", default=None,
              help="New evidence: analyze this capture, bundle it (redacted) and attach the bundle, with a note "
                   "saying what it found.")
@click.option("--pseudonymize", is_flag=True, help="With --capture: pseudonyms under the escalation's key.")
@click.option("--note", default="", help="A note that goes with the files to the desk.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def attach(escalation_id, files, source, pseudonymize, note, as_json):
    """Upload new evidence to the escalation's case at the desk: files (a log, a bundle), or a capture that is
    analyzed and bundled first (--capture)."""
    from fabricase import filing

    if not files and source is None:
        raise click.UsageError("give FILE... to upload, or --capture DIR|BUNDLE to bundle new evidence")
    with _tracker() as tracker:
        esc = tracker.get(escalation_id)
        files = list(files)
        if source is not None:
            from fabricase.flow import attach_capture
            from fabricase.pipeline import load_input

            bundle, analysis = attach_capture(load_input(Path(source)), paths(), esc, pseudonymize=pseudonymize)
            files.insert(0, bundle.path)
            suspects = analysis.diagnosis.for_owner("provider")
            found = analysis.diagnosis.verdict_line + (
                f"; first: {suspects[0].name}: {suspects[0].verdict_text}" if suspects else "")
            note = (note + "\n\n" if note else "") + f"New evidence, bundle {bundle.bundle_id}: {found}."
        result = filing.attach(tracker, _provider(esc.provider), esc.id, files, note)
    _report(result, as_json, f"{result.escalation.id}: {len(files)} file(s) attached to "
                             f"{result.escalation.provider_case_id}.")


@cli.command()
@click.argument("escalation_id", metavar="ESCALATION")
@click.option("--json", "as_json", is_flag=True, help="Print the escalation as JSON.")
def retry(escalation_id, as_json):
    """Finish a filing that did not complete (a desk error, a timeout, a crash): search the desk for the case
    the earlier attempt may have opened (by its marker), record it if found, else file the recorded ticket and
    bundle (made again from the capture when none was recorded). Never files twice."""
    from fabricase import filing
    from fabricase.flow import rebuild

    with _tracker() as tracker:
        esc = tracker.get(escalation_id)
        already = esc.provider_case_id is not None
        result = filing.retry(tracker, _provider(esc.provider), esc.id, rebuild=lambda e: rebuild(e, paths()))
    if as_json:
        emit_json({**{k: v for k, v in result.to_dict().items() if k != "events"}, "already_filed": already})
        return
    said = "was filed already as" if already else "filed as"
    out_console.print(f"{result.id} {said} {result.provider_case_id} with {result.provider}.", soft_wrap=True)


@cli.command()
@click.argument("escalation_id", metavar="ESCALATION")
@click.option("--note", default=None, help="Why it is resolved (sent to the desk, kept in the timeline).")
@_LOCAL
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def resolve(escalation_id, note, local, as_json):
    """Resolve the escalation: tell the desk, then mark it resolved."""
    from fabricase import filing

    with _tracker() as tracker:
        esc = tracker.get(escalation_id)
        result = filing.resolve(tracker, _needed(esc, local or not esc.state.is_open), esc.id, note, local=local)
    _report(result, as_json, f"{result.escalation.id} resolved.")


@cli.command()
@click.argument("escalation_id", metavar="ESCALATION")
@click.option("--note", default="", help="Why it is reopened (sent to the desk, kept in the timeline).")
@_LOCAL
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def reopen(escalation_id, note, local, as_json):
    """Reopen a resolved or closed escalation: it waits on the provider again."""
    from fabricase import filing

    with _tracker() as tracker:
        esc = tracker.get(escalation_id)
        result = filing.reopen(tracker, _needed(esc, local or esc.state.is_open), esc.id, note, local=local)
    _report(result, as_json, f"{result.escalation.id} reopened: {result.escalation.state}.")
