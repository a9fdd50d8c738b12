"""`fabricase providers list|check`: what each provider can do here, and whether its configuration works,
without filing anything."""

from __future__ import annotations

import importlib.util
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from fabricase.cli.app import cli, paths
from fabricase.cli.output import emit_json, inert_text, out_console
from fabricase.errors import FabricaseError

# provider -> the SDK modules it needs (the registry's lazy imports bring them only when used)
SDK_MODULES: dict[str, tuple[str, ...]] = {
    "static": ("httpx",),
    "aws": ("boto3",),
    "gcp": ("google.cloud.compute_v1", "google.cloud.support_v2"),
    "azure": ("azure.identity", "azure.mgmt.compute", "azure.mgmt.support"),
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a broken one
        return False


def _sdk(name: str) -> dict[str, bool]:
    return {m: _installed(m) for m in SDK_MODULES.get(name, ())}


def provider_info(name: str) -> dict[str, Any]:
    """One provider as `providers list` shows it: SDK modules found, features it lacks and why (as the
    configured instance declares them), or why it cannot be loaded."""
    from fabricase.providers import get_provider
    from fabricase.providers.base import Feature

    info: dict[str, Any] = {"name": name, "sdk": _sdk(name), "available": True, "error": None}
    try:
        provider = get_provider(name, paths())
    except FabricaseError as exc:
        info.update(available=False, error=exc.message, features={}, unsupported={})
        return info
    info["unsupported"] = {str(f): reason for f, reason in provider.unsupported.items()}
    info["features"] = [str(f) for f in Feature if provider.supports(f)]
    desk = getattr(provider, "desk", None)
    if desk is not None:
        info["desk"] = desk.name
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
    """List the registered providers: SDK installed or not, and each feature they lack, with the reason."""
    from fabricase.providers import PROVIDERS

    infos = [provider_info(name) for name in PROVIDERS]
    if _json_wanted(as_json):
        emit_json(infos)
        return
    table = Table(title=f"{len(infos)} provider(s)", title_justify="left")
    for col in ("provider", "sdk", "supports", "not supported"):
        table.add_column(col, overflow="fold")
    for info in infos:
        sdk = ", ".join(f"{m} {'ok' if ok else 'missing'}" for m, ok in info["sdk"].items()) or "-"
        name = info["name"] + (f" ({info['desk']} desk)" if info.get("desk") else "")
        if not info["available"]:
            table.add_row(name, sdk, "-", info["error"])
            continue
        # one line per feature: the line breaks are ours, the reasons inert
        lacking = Text("\n").join(inert_text(f"{f}: {why}") for f, why in info["unsupported"].items()) or "-"
        table.add_row(name, sdk, ", ".join(info["features"]), lacking)
    out_console.print(table)


def configured_providers() -> list[str]:
    """Those with a [providers.<name>] section that the registry knows, plus static (always there)."""
    from fabricase.config import load_config
    from fabricase.providers import PROVIDERS

    section = load_config(paths()).get("providers", {})
    named = [n for n in section if n in PROVIDERS] if isinstance(section, dict) else []
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
    from fabricase.providers import PROVIDERS, provider_class

    for name in names:
        if name.strip().lower() not in PROVIDERS:
            provider_class(name)  # fails in one line listing the valid ones
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
    if not ok:
        raise click.exceptions.Exit(1)
