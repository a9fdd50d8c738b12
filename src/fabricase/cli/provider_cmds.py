"""`fabricase providers list|check`: what each provider can do here, and whether its configuration works,
without filing anything."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from fabricase.cli.app import cli, paths
from fabricase.cli.options import Age
from fabricase.cli.output import emit_json, inert_text, out_console
from fabricase.errors import FabricaseError

_HINT = re.compile(r"pip install '[^'\s]+'")


class ProviderChoice(click.Choice):
    """`--provider`: the registered providers' names, read from the registry when the option is parsed or its
    help printed, so that a provider added by a plug-in (`fabricase.providers` entry points) is a choice."""

    def __init__(self) -> None:
        super().__init__((), case_sensitive=True)

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        from fabricase.providers import provider_names

        return tuple(provider_names())

    @choices.setter
    def choices(self, _value: Any) -> None:  # click.Choice.__init__ sets it; the registry is the source
        pass


def _sdk(modules: tuple[str, ...], missing: list[str]) -> dict[str, bool]:
    return {m: m not in missing for m in modules}


def _unavailable(info: dict[str, Any], error: str, install: str | None) -> dict[str, Any]:
    info.update(available=False, error=error, install=install, features=[], unsupported={})
    return info


def provider_info(name: str) -> dict[str, Any]:
    """One provider as `providers list` shows it: its declared SDK modules, found or not (any missing: not
    available, with the install hint), the features it lacks and why (as the configured instance declares
    them), or why it cannot be loaded; the static provider's desks too."""
    from fabricase.providers import get_provider, load_class, missing_sdk, registration, sdk_hint
    from fabricase.providers.base import Feature, Provider

    reg = registration(name)
    info: dict[str, Any] = {"name": reg.name, "sdk": {}, "available": True, "error": None, "install": None}
    try:
        cls = load_class(reg, Provider)
    except FabricaseError as exc:
        cause = exc.__cause__
        missing = getattr(cause, "name", None) if isinstance(cause, ImportError) else None
        info["sdk"] = {missing: False} if missing else {}
        return _unavailable(info, exc.message, reg.install_hint if missing else None)
    missing = missing_sdk(cls)
    info["sdk"] = _sdk(cls.sdk_modules, missing)
    if missing:
        return _unavailable(info, f"sdk missing: {', '.join(missing)}: {sdk_hint(cls, reg)}", sdk_hint(cls, reg))
    try:
        provider = get_provider(name, paths())
    except FabricaseError as exc:
        return _unavailable(info, exc.message, None)
    info["unsupported"] = {str(f): reason for f, reason in provider.unsupported.items()}
    info["features"] = [str(f) for f in Feature if provider.supports(f)]
    desk = getattr(provider, "desk", None)
    if desk is not None:
        info["desk"] = desk.name
        info["desks"] = [desk_info(d) for d in _desk_names()]
    return info


def _desk_names() -> list[str]:
    from fabricase.providers.desks import desk_names

    return desk_names()


def _rendered_template(key: str) -> str:
    """The ticket template a desk key renders here: its declared one when the package or the user's overrides
    have it, else the generic ticket."""
    from fabricase.providers import ticket_template_name
    from fabricase.templates import environment, user_template_dir

    name = ticket_template_name(key)
    return name if name in environment(user_template_dir(paths().config)).list_templates() else "ticket_generic.md.j2"


def desk_info(name: str) -> dict[str, Any]:
    """One desk of the static provider as `providers list` shows it: SDK modules, severity field, ticket
    template, or why it cannot be loaded."""
    from fabricase.providers import missing_sdk, registration, sdk_hint
    from fabricase.providers.desks import desk_class
    from fabricase.templates.severity import scale_for

    reg = registration(name, "desk")
    info: dict[str, Any] = {"name": reg.name, "sdk": {}, "available": True, "error": None, "install": None}
    try:
        cls = desk_class(name)
    except FabricaseError as exc:
        cause = exc.__cause__
        missing_module = getattr(cause, "name", None) if isinstance(cause, ImportError) else None
        return {**info, "sdk": {missing_module: False} if missing_module else {}, "available": False,
                "error": exc.message, "install": reg.install_hint if missing_module else None}
    missing = missing_sdk(cls)
    scale = scale_for(name)
    info.update(sdk=_sdk(cls.sdk_modules, missing), template=_rendered_template(name),
                severity=f"{scale.field} (fabricase's scale)" if scale.desk == "generic" else scale.field)
    if missing:
        info.update(available=False, error=f"sdk missing: {', '.join(missing)}: {sdk_hint(cls, reg)}",
                    install=sdk_hint(cls, reg))
    return info


@cli.group()
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the same as --json after the subcommand).")
@click.pass_context
def providers(ctx: click.Context, as_json: bool) -> None:
    """The providers: what each can do, and whether its configuration works here."""
    ctx.ensure_object(dict)
    ctx.obj["providers_json"] = as_json


def _json_wanted(as_json: bool) -> bool:
    ctx = click.get_current_context()
    return as_json or bool((ctx.obj or {}).get("providers_json"))


@providers.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print the providers as JSON.")
def list_providers(as_json: bool) -> None:
    """List the registered providers: SDK installed or not (not available without it, and how to install it),
    each feature they lack, with the reason, and the desks the static provider can file to."""
    from fabricase.providers import provider_names

    infos = [provider_info(name) for name in provider_names()]
    if _json_wanted(as_json):
        emit_json(infos)
        return
    table = Table(title=f"{len(infos)} provider(s)", title_justify="left")
    for col in ("provider", "sdk", "supports", "not supported"):
        table.add_column(col, overflow="fold")
    for info in infos:
        name = info["name"] + (f" ({info['desk']} desk)" if info.get("desk") else "")
        if not info["available"]:
            table.add_row(name, _sdk_cell(info), "- (not available)", _why_cell(info))
            continue
        # one line per feature: the line breaks are ours, the reasons inert
        lacking = Text("\n").join(inert_text(f"{f}: {why}") for f, why in info["unsupported"].items()) or "-"
        table.add_row(name, _sdk_cell(info), ", ".join(info["features"]), lacking)
    out_console.print(table)
    desks = next((i["desks"] for i in infos if i.get("desks")), [])
    if desks:
        out_console.print(_desks_table(desks))
    _print_hints([*infos, *desks])


def _why_cell(info: dict[str, Any]) -> str:
    """Why a provider or desk is not available; a missing SDK's hint goes on a line of its own below."""
    if info["install"]:
        missing = [m for m, ok in info["sdk"].items() if not ok]
        return f"sdk missing: {', '.join(missing)}" if missing else "sdk missing"
    return info["error"]


def _print_hints(infos: list[dict[str, Any]]) -> None:
    """One line per install hint, never wrapped: a table cell would fold `pip install 'fabricase[azure]'`, and
    the user copies it whole."""
    for info in infos:
        if info["install"]:
            out_console.print(f"{info['name']}: sdk missing, install it with: {info['install']}", soft_wrap=True)


def _sdk_cell(info: dict[str, Any]) -> str:
    return ", ".join(f"{m} {'ok' if ok else 'missing'}" for m, ok in info["sdk"].items()) or "-"


def _desks_table(desks: list[dict[str, Any]]) -> Table:
    table = Table(title=f"{len(desks)} desk(s) for [providers.static] desk", title_justify="left")
    for col in ("desk", "sdk", "severity", "ticket template"):
        table.add_column(col, overflow="fold")
    for d in desks:
        if not d["available"]:
            table.add_row(d["name"], _sdk_cell(d), "-", _why_cell(d))
        else:
            table.add_row(d["name"], _sdk_cell(d), d["severity"], d["template"])
    return table


def configured_providers() -> list[str]:
    """Those with a [providers.<name>] section that the registry knows, plus static (always there)."""
    from fabricase.config import load_config
    from fabricase.providers import provider_names

    section = load_config(paths()).get("providers", {})
    named = [n for n in section if n in provider_names()] if isinstance(section, dict) else []
    return ["static", *sorted(n for n in named if n != "static")]


def run_checks(name: str) -> dict[str, Any]:
    """provider.check() as one provider's report; a provider that cannot load or check is a failed line."""
    from fabricase.providers import get_provider

    try:
        provider = get_provider(name, paths())
        checks = [{"check": r.check, "ok": r.ok, "detail": r.detail} for r in provider.check()]
    except FabricaseError as exc:
        checks = [{"check": "provider", "ok": False, "detail": exc.message}]
    if not checks:
        checks = [{"check": "provider", "ok": False, "detail": "the provider checked nothing"}]
    return {"name": name, "ok": all(c["ok"] for c in checks), "checks": checks}


@providers.command()
@click.argument("names", nargs=-1, metavar="[NAME...]")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def check(names: tuple[str, ...], as_json: bool) -> None:
    """Check each configured provider (or NAME...): credentials found, support plan, permissions, the desk
    reachable. Files nothing. Exit 1 when a check fails."""
    from fabricase.providers import provider_names, registration

    for name in names:
        if name.strip().lower() not in provider_names():
            registration(name)  # fails in one line listing the valid ones
    wanted = [n.strip().lower() for n in names] or configured_providers()
    reports = [run_checks(name) for name in wanted]
    ok = all(r["ok"] for r in reports)
    if _json_wanted(as_json):
        emit_json({"ok": ok, "providers": reports})
    else:
        table = Table(title="provider checks", title_justify="left")
        for col in ("provider", "check", "result", "detail"):
            table.add_column(col, overflow="fold")
        for report in reports:
            for c in report["checks"]:
                result = Text("ok", style="green") if c["ok"] else Text("FAILED", style="red")
                table.add_row(report["name"], c["check"], result, c["detail"])  # str cells: printed inert
        out_console.print(table)
        hints = [(r["name"], _HINT.search(c["detail"])) for r in reports for c in r["checks"] if not c["ok"]]
        _print_hints([{"name": name, "install": m.group(0)} for name, m in hints if m])
    if not ok:
        raise click.exceptions.Exit(1)


# -- providers stats: track records (tracker/stats.py) -----------------------------------------------------


def _span(seconds: float | None) -> str:
    """A duration as a column shows it: 45m, 5.5h, 3.2d; "-" for none."""
    if seconds is None:
        return "-"
    if seconds < 3600:
        return f"{round(seconds / 60)}m"
    hours = seconds < 2 * 86400
    return f"{seconds / (3600 if hours else 86400):.1f}".removesuffix(".0") + ("h" if hours else "d")


def _stats_row(label: str, g: Any) -> list[str]:
    ratio = "-" if g.reopen_ratio is None else f"{g.reopened}/{g.resolved} {g.reopen_ratio:.0%}"
    return [label, str(g.cases), f"{_span(g.first_reply.median_s)} / {_span(g.first_reply.p90_s)}",
            f"{_span(g.resolve.median_s)} / {_span(g.resolve.p90_s)}",
            *(str(n) for n in g.open_by_age.values()), ratio]  # fmt: skip


def _stats_table(record: Any) -> Table:
    """One row per provider, then one per desk where a provider has desks of its own (static)."""
    from rich import box

    from fabricase.tracker.stats import AGE_BUCKETS

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0))
    # two-line headers: the line breaks are ours (a Text), so the console keeps them
    table.add_column(Text("\nprovider"), overflow="fold")
    table.add_column(Text("\ncases"), justify="right", no_wrap=True)
    table.add_column(Text("1st reply\np50 / p90"), no_wrap=True)
    table.add_column(Text("resolve\np50 / p90"), no_wrap=True)
    for i, (name, _) in enumerate(AGE_BUCKETS):
        table.add_column(Text(("open\n" if i == 0 else "\n") + name), justify="right", no_wrap=True)
    table.add_column(Text("\nreopened"), no_wrap=True)
    for g in record.providers:
        table.add_row(*_stats_row(g.provider, g))
        for d in record.desks:
            if d.provider == g.provider and d.desk != g.provider:
                table.add_row(*_stats_row(f"  {d.desk} desk", d))
    return table


def _stats_notes(record: Any) -> list[str]:
    """What the table cannot say: the window, where the static desks came from, who has not replied yet."""
    since = f"escalations created since {record.since[:10]}" if record.since else "every escalation"
    notes = [f"Track records of {since}; times from filing (p50: median, p90: 90th percentile)."]
    sources = {s for d in record.desks if d.provider == "static" for s in d.desk_sources}
    if "config" in sources:
        notes.append("Static desks of cases whose filing did not name one: the desk configured now.")
    waiting = [f"{g.provider} {g.awaiting_reply}" for g in record.providers if g.awaiting_reply]
    if waiting:
        notes.append("Open cases with no reply yet: " + ", ".join(waiting) + ".")
    return notes


def _offender_line(r: Any) -> str:
    host, component = r.host_component
    what = {"host": f"host {host}", "port": f"{host} {component}", "switch": component}[r.kind]
    ids = ", ".join(e.id for e in r.escalations)
    return f"  {r.provider} {what}: {len(r.escalations)} escalations since {r.escalations[0].created_at[:10]}: {ids}"


@providers.command()
@click.option("--since", type=Age(allow_zero=False), default=None,
              help=f"Only escalations created in this last period, e.g. 90d, 12w (default: all) "
                   f"[{Age(allow_zero=False).describe()}].")
@click.option("--repeat-days", type=click.IntRange(1, 3650), default=30, show_default=True,
              help="A host, port or switch escalated again within this many days of a resolution is a repeat "
                   "offender.")
@click.option("--json", "as_json", is_flag=True, help="Print the track records as JSON.")
def stats(since: timedelta | None, repeat_days: int, as_json: bool) -> None:
    """Each provider's (and desk's) track record: time to first reply and to resolution (median and 90th
    percentile), open cases by age, reopen rate, and repeat offenders. Read from the tracker; sends nothing."""
    from datetime import UTC, datetime

    from fabricase.config import provider_profile
    from fabricase.tracker.stats import load_cases, track_record
    from fabricase.tracker.store import Tracker

    desks = {"static": str(provider_profile(paths(), "static").get("desk", "outbox"))}
    now = datetime.now(UTC)
    with Tracker.open(paths()) as tracker:
        record = track_record(load_cases(tracker, desks=desks), now=now, since=since, repeat_days=repeat_days)
    if _json_wanted(as_json):
        emit_json(record.to_dict())
        return
    if not record.providers:
        out_console.print("No escalations" + (f" created since {record.since[:10]}." if record.since else "."))
        return
    out_console.print(_stats_table(record))
    for line in _stats_notes(record):
        out_console.print(line)
    if record.repeat_offenders:
        out_console.print(f"Repeat offenders (escalated again within {repeat_days} days of a resolution):")
        for r in record.repeat_offenders:
            out_console.print(_offender_line(r))
