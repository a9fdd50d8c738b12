"""`fabricase report-faulty`: tell the cloud, through its own faulty-host channel, which hosts of an escalation
are bad (fabricase.faulty plans and sends; this prints). `open --report-faulty` runs the same after filing."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from fabricase.cli.app import EXIT_PARTIAL, cli, paths
from fabricase.cli.output import echo_line, emit_json
from fabricase.errors import ConfigError, ProviderError
from fabricase.faulty import DISRUPTIONS, ReportOutcome

__all__ = ["report_after_open", "report_faulty", "run_reports"]

WIDTH = 80  # what the dry run fits: an 80-column terminal, a ticket comment, an e-mail
_FAILED = ("failed", "cannot report", "maybe reported")


def _usable(placement: Any, provider: str) -> bool:
    return placement is not None and placement.provider == provider and bool(placement.instance_id)


def _locate_missing(provider: Any, capture: Any, placements: list, hosts: Sequence[str]) -> list:
    """The placements, with the hosts to report that have no usable placement of this provider located now (a
    capture given with --capture may have none stored). A provider that cannot locate leaves them as they are."""
    from fabricase.escalate import host_summaries
    from fabricase.placements import merge_placements
    from fabricase.providers.base import Feature

    placed = {p.host: p for p in placements}
    need = [h for h in hosts if not _usable(placed.get(h), provider.name)]
    if not need or not provider.supports(Feature.LOCATE):
        return placements
    summaries = [s for s in host_summaries(capture) if s.host in need]
    located = provider.locate([s.to_dict() for s in summaries]) if summaries else []
    return merge_placements(placements, located)


def run_reports(tracker: Any, provider: Any, escalation: Any, *, capture: Any, findings: list, diagnosis: Any,
                placements: list, hosts: Sequence[str] = (), dry_run: bool, disruption: str) -> list[ReportOutcome]:
    """Plan (only hosts with a provider-owned major or critical suspect, each with its own) and send or, on a
    dry run, list the reports. ProviderError when there is nothing to report."""
    from fabricase.faulty import captured_at, first_errors, plan_reports, reportable_suspects, send_reports
    from fabricase.providers.base import Feature

    provider.require(Feature.FAULTY_HOST_REPORT)
    candidates = [h for h in reportable_suspects(diagnosis) if not hosts or h in hosts]
    if candidates:
        placements = _locate_missing(provider, capture, placements, candidates)
    reports = plan_reports(diagnosis, placements, escalation, provider=provider.name, findings=findings,
                           first_errors=first_errors(capture, findings), captured_at=captured_at(capture),
                           hosts=hosts)
    if not reports:
        raise ProviderError("no host has a provider-owned suspect of major or critical severity: nothing to "
                            "report (the support case carries the rest)", where=escalation.id)
    return send_reports(tracker, provider, escalation, reports, dry_run=dry_run, disruption=disruption)


def _load(escalation: Any, source: str | None) -> tuple[Any, list, Any]:
    """The capture (the escalation's bundle, or --capture), its stored placements and its analysis."""
    from fabricase.pipeline import diagnose_capture, load_input
    from fabricase.placements import resolve_placements, topology_of

    where = source or escalation.bundle_path
    if not where:
        raise ConfigError(f"{escalation.id} has no bundle: give --capture DIR|BUNDLE", where=escalation.id)
    if not Path(where).exists():
        raise ConfigError(f"the evidence is gone: {where}; give --capture DIR|BUNDLE", where=escalation.id)
    capture = load_input(Path(where))
    placements, _ = resolve_placements(capture, None, paths())
    return capture, placements, diagnose_capture(capture, topology_of(placements), placements)


# -- printing ---------------------------------------------------------------------------------------------------


def _wrap(text: str, indent: int) -> list[str]:
    pad = " " * indent
    out = []
    for line in str(text).split("\n"):
        out += textwrap.wrap(line, WIDTH, initial_indent=pad, subsequent_indent=pad + "  ",
                             break_long_words=True, break_on_hyphens=False) or [pad]
    return out


def _field(key: str, value: Any, indent: int) -> list[str]:
    """`key: value` wrapped to WIDTH; a multi-line text (a description) goes below its key, indented."""
    if isinstance(value, dict):
        return _wrap(f"{key}:", indent) + [x for k, v in value.items() for x in _field(k, v, indent + 2)]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [x for n, v in enumerate(value) for x in _field(f"{key}[{n}]", v, indent)]
    if isinstance(value, str) and "\n" in value:
        return _wrap(f"{key}:", indent) + _wrap(value, indent + 2)
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return _wrap(f"{key}: {text}", indent)


def outcome_lines(outcome: ReportOutcome, *, show_request: bool) -> list[str]:
    """One host's report for people, every line at most WIDTH columns."""
    r = outcome.report
    lines = _wrap(f"{outcome.host}: {outcome.status}", 0)
    if r is not None:
        lines += _wrap(f"instance  {r.instance or '-'}", 2) + _wrap(f"category  {r.category}", 2)
        lines += _wrap(f"since     {r.start:%Y-%m-%dT%H:%M:%SZ}", 2)
        lines += _wrap(f"case      {r.case or 'not filed yet'} ({r.escalation})", 2)
        for s in r.suspects:
            lines += _wrap(f"suspect   {s.severity}: {s.name}: {s.verdict_text}", 2)
    if outcome.channel:
        lines += _wrap(f"channel   {outcome.channel}" + (f" ({outcome.reference})" if outcome.reference else ""), 2)
    if outcome.detail:
        lines += _wrap(f"note      {outcome.detail}", 2)
    if show_request and outcome.request:
        request = outcome.request
        lines += _wrap(f"request   {request['service']} {request['operation']}", 2)
        for key, value in request["payload"].items():
            lines += _field(key, value, 4)
    return lines


def _print(outcomes: list[ReportOutcome], escalation: Any, *, dry_run: bool) -> None:
    head = "Dry run: nothing sent or recorded. " if dry_run else ""
    hosts = "host" if len(outcomes) == 1 else "hosts"
    for line in _wrap(f"{head}{escalation.id}: {len(outcomes)} {hosts} to report", 0):
        echo_line(line)
    for outcome in outcomes:
        for line in outcome_lines(outcome, show_request=dry_run):
            echo_line(line, err=outcome.status in _FAILED and not dry_run)


def _exit_for(outcomes: list[ReportOutcome]) -> None:
    failed = [o for o in outcomes if o.status in _FAILED]
    if failed:
        raise click.exceptions.Exit(1 if len(failed) == len(outcomes) else EXIT_PARTIAL)


# -- commands ---------------------------------------------------------------------------------------------------

DISRUPTION_HELP = (
    "GCP only: when Compute Engine acts on the report. future: the host is marked faulty and the VM "
    "keeps running; it is moved off the host later. immediate: Compute Engine STOPS THE VM NOW and restarts it on "
    "another host, interrupting whatever runs on it; only immediate reports an NVLink switch fault of a "
    "rack-scale machine to its reservation sub-block (every VM in it). AWS and Azure have no schedule.")


@cli.command(name="report-faulty")
@click.argument("escalation_id", metavar="ESCALATION")
@click.argument("hosts", metavar="[HOST]...", nargs=-1)
@click.option("--dry-run", is_flag=True, help="Print each host's report and the request it would send; send and "
                                              "record nothing.")
@click.option("--disruption", type=click.Choice(DISRUPTIONS), default="future", show_default=True,
              help=DISRUPTION_HELP)
@click.option("--capture", "source", metavar="DIR|BUNDLE", default=None,
              help="Take the suspects from this capture or bundle instead of the escalation's bundle.")
@click.option("--json", "as_json", is_flag=True, help="Print one record per host as JSON.")
def report_faulty(escalation_id, hosts, dry_run, disruption, source, as_json):
    """Report the escalation's faulty hosts through the cloud's own channel (EC2 ReportInstanceStatus, GCE
    reportHostAsFaulty or a sub-block's reportFaulty, Azure Guest Health Reporting), naming the support case.

    Only hosts with a provider-owned suspect of major or critical severity are reported (HOST... narrows them),
    each with its own suspects; with none, nothing is sent. Each report is recorded in the tracker, and a host
    already reported on its channel for this escalation is not reported again. Try --dry-run first."""
    from fabricase.providers import get_provider
    from fabricase.tracker.store import Tracker

    with Tracker.open(paths()) as tracker:
        esc = tracker.get(escalation_id)
        provider = get_provider(esc.provider, paths())
        capture, placements, analysis = _load(esc, source)
        outcomes = run_reports(tracker, provider, esc, capture=capture, findings=analysis.findings,
                               diagnosis=analysis.diagnosis, placements=placements, hosts=list(hosts),
                               dry_run=dry_run, disruption=disruption)
    if as_json:
        emit_json({"escalation_id": esc.id, "dry_run": dry_run, "disruption": disruption,
                   "reports": [o.to_dict() for o in outcomes]})
    else:
        _print(outcomes, esc, dry_run=dry_run)
    _exit_for(outcomes)


def report_after_open(result: Any, provider_name: str, *, dry_run: bool, as_json: bool) -> list[dict[str, Any]]:
    """`open --report-faulty`: the reports of the escalation just filed (listed only, on a dry run), printed
    for people unless `as_json`, and returned as JSON records. A failure is a warning on stderr and a record: the
    case is filed already, and `fabricase report-faulty FC-n` can finish the reports later."""
    from fabricase.errors import FabricaseError
    from fabricase.faulty import Intent
    from fabricase.providers import get_provider
    from fabricase.tracker.store import Tracker

    esc = result.escalation if result.escalation is not None else Intent("FC-dry-run", None)
    try:
        provider = get_provider(provider_name, paths())
        common = dict(capture=result.capture, findings=result.findings, diagnosis=result.diagnosis,
                      placements=result.placements, dry_run=dry_run, disruption="future")
        if dry_run:
            outcomes = run_reports(None, provider, esc, **common)
        else:
            with Tracker.open(paths()) as tracker:
                outcomes = run_reports(tracker, provider, esc, **common)
    except FabricaseError as exc:
        echo_line(f"warning: faulty-host reports: {exc}; run `fabricase report-faulty {esc.id}` to retry",
                  err=True)
        return [{"status": "failed", "detail": str(exc)}]
    if not as_json:
        _print(outcomes, esc, dry_run=dry_run)
    return [o.to_dict() for o in outcomes]
