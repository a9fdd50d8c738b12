"""Commands that export Prometheus metrics: `export` (one capture) and `watch` (capture on an interval)."""

from __future__ import annotations

import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import click

from fabricase.cli.app import capture_from_targets, cli, paths, target_options
from fabricase.cli.capture_cmds import inventory_option, load_source, placements_for
from fabricase.cli.options import bounded
from fabricase.cli.output import echo_line, emit_json, err_console, hosts_json, out_console
from fabricase.errors import CaptureInterrupted, FabricaseError, TrackerError
from fabricase.metrics.filters import ExportFilter
from fabricase.models import Capture, HostStatus

_textfile_option = click.option(
    "--textfile", "out_dir", required=True, type=click.Path(path_type=Path, file_okay=False),
    help="The node_exporter textfile directory: fabricase.prom is written there atomically.")
_escalations_option = click.option(
    "--escalations/--no-escalations", default=True, show_default=True,
    help="Also export the tracker's open escalations (count per provider and state, oldest age, stale).")


def _escalations(enabled: bool):
    """The tracker's open escalations and the providers' track records (tracker/stats.py) as series; a tracker
    that cannot be read is a warning, not a failure of the capture's metrics."""
    if not enabled:
        return None
    from fabricase.config import provider_profile
    from fabricase.metrics.track_records import tracker_series
    from fabricase.tracker.store import Tracker

    try:
        desks = {"static": str(provider_profile(paths(), "static").get("desk", "outbox"))}
        with Tracker.open(paths()) as tracker:
            return tracker_series(tracker, datetime.now(UTC), desks=desks)
    except TrackerError as exc:
        err_console.print(f"warning: escalations not exported: {exc}", style="yellow", soft_wrap=True)
        return None


def _export(capture: Capture, source: str, inventory: Path | None, out_dir: Path, escalations: bool,
            keep: ExportFilter | None = None, placements: bool = True) -> dict:
    """Analyze one capture and write its textfile (the metrics `keep` keeps); what was written, for --json and
    the round line. Without placements (export --self) nothing but the capture itself is read."""
    from fabricase.metrics import FamiliesCollector, capture_families, exported_samples, registry_of, write_textfile
    from fabricase.metrics.filters import filter_families
    from fabricase.pipeline import diagnose_capture
    from fabricase.placements import topology_of

    placed = placements_for(capture, source, inventory)[0] if placements else []
    analysis = diagnose_capture(capture, topology_of(placed), placed)
    metric_families = capture_families(capture, analysis.findings, exported_samples(capture), placed,
                                       _escalations(escalations), diagnosis=analysis.diagnosis)
    if keep is not None:
        metric_families = filter_families(metric_families, keep)
    path = write_textfile(out_dir, registry_of(FamiliesCollector(metric_families)))
    return {"textfile": str(path), "capture_dir": str(capture.root), "created_at": capture.created_at,
            "families": len(metric_families), "series": sum(len(f.samples) for f in metric_families),
            "findings": len(analysis.findings), "suspects": len(analysis.diagnosis.suspects),
            "verdict": analysis.diagnosis.verdict_line, "hosts": hosts_json(capture), "_families": metric_families}


def _public(result: dict) -> dict:
    return {k: v for k, v in result.items() if not k.startswith("_")}


def _filter_options(f):
    """--errors-only, --no-totals, --metric and --exclude (metrics/filters.py), in that order in --help."""
    f = click.option("--exclude", multiple=True, metavar="GLOB",
                     help="Leave out metrics whose name matches, e.g. '*_bytes_*' (repeatable).")(f)
    f = click.option("--metric", "include", multiple=True, metavar="GLOB",
                     help="Write only metrics whose name matches, e.g. 'fabricase_rdma_*' (repeatable).")(f)
    f = click.option("--no-totals", is_flag=True,
                     help="Drop the raw hardware counter values (the *_total series); the rates stay.")(f)
    return click.option("--errors-only", is_flag=True,
                        help="Write only the error counters (errors, drops, discards, retransmits, link flaps; "
                             "rates and totals) and Xid/SXid events; with --metric, those too.")(f)


def _export_filter(errors_only: bool, no_totals: bool, include: tuple[str, ...], exclude: tuple[str, ...]):
    from fabricase.metrics.filters import ExportFilter, check_globs

    check_globs(include, "--metric")
    check_globs(exclude, "--exclude")
    return ExportFilter(errors_only=errors_only, totals=not no_totals, include=tuple(include), exclude=tuple(exclude))


@cli.command()
@click.argument("source", metavar="[DIR|BUNDLE]", required=False)
@_textfile_option
@click.option("--self", "node_local", is_flag=True,
              help="Node-local mode: capture this machine's counters (no other host, no tracker) and write only "
                   "its series; for a systemd timer or the DaemonSet on every node (docs/metrics.md).")
@click.option("--interval", "interval_s", default=10.0, show_default=True,
              **bounded("--interval", "With --self: seconds between the two counter snapshots."))
@click.option("--root", "root", default="", hidden=True,
              help="With --self: read host files under this folder instead of / (golden host trees, tests).")
@_filter_options
@inventory_option
@_escalations_option
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON on stdout.")
def export(source, out_dir, node_local, interval_s, root, errors_only, no_totals, include, exclude, inventory,
           escalations, as_json):
    """Analyze a capture directory or bundle and write its metrics (counter rates and totals, link states,
    perf results, findings, open escalations) in the node_exporter textfile format. Names: docs/metrics.md.

    With --self, capture this node instead (the local transport, the counter collectors only) and write
    only its series, labelled with its hostname. The filters choose what is written."""
    keep = _export_filter(errors_only, no_totals, include, exclude)
    if node_local:
        if source is not None or inventory is not None:
            raise click.UsageError("--self captures this node: give no DIR|BUNDLE and no --inventory")
        from fabricase.metrics.node import capture_self

        with tempfile.TemporaryDirectory(prefix="fabricase-export-") as tmp:
            capture = capture_self(Path(tmp) / "capture", interval_s=interval_s, root=root)
            result = _export(capture, str(capture.root), None, out_dir, False, keep, placements=False)
        result["capture_dir"] = None  # deleted: only the textfile stays
    elif source is None:
        raise click.UsageError("give the capture to export (DIR|BUNDLE), or --self for this node")
    else:
        result = _export(load_source(source), source, inventory, out_dir, escalations, keep)
    if as_json:
        emit_json({**_public(result), "filter": keep.describe()})
    else:
        out_console.print(f"Wrote {result['series']} series ({result['families']} metrics, {result['suspects']} "
                          f"suspect(s), {result['findings']} finding(s)) to {result['textfile']}",
                          soft_wrap=True)


def _sleep(seconds: float) -> None:
    """The wait between rounds (a seam for tests, which scrape /metrics while the watch waits)."""
    time.sleep(seconds)


@cli.command()
@target_options
@click.option("--interval-s", "period_s", default=300.0, show_default=True,
              **bounded("--interval-s", "Seconds from the start of one capture to the start of the next."))
@_textfile_option
@click.option("--listen", metavar="ADDR:PORT", default=None,
              help="Also serve /metrics on this address, e.g. 127.0.0.1:9464 (the textfile is written either way).")
@click.option("--count", default=None, **bounded("--count", "Stop after this many rounds."))
@_filter_options
@inventory_option
@_escalations_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON line per round on stdout.")
@click.pass_context
def watch(ctx, period_s, out_dir, listen, count, errors_only, no_totals, include, exclude, inventory, escalations,
          as_json, **target):
    """Capture the targets on an interval and keep the metrics textfile (and /metrics) current.

    A round that fails is a one-line warning and the watch goes on. Ctrl-C ends it with exit 130; the
    textfile keeps the last round's metrics. Each round's capture is analyzed and then deleted."""
    import json

    from fabricase.metrics import FamiliesCollector, registry_of
    from fabricase.metrics.watch import MetricsServer, parse_listen, watch_loop

    if target["replay"] is None and not (target["hosts"] or target["job"]):
        raise click.UsageError("give the targets to watch: --hosts, --job or --replay")
    keep = _export_filter(errors_only, no_totals, include, exclude)
    if listen is not None:
        parse_listen(listen)  # a bad address fails before the first capture
    collector = FamiliesCollector()
    server = MetricsServer(listen, registry_of(collector)) if listen else None

    def one_round(n: int) -> None:
        with tempfile.TemporaryDirectory(prefix="fabricase-watch-") as tmp:
            try:
                capture = capture_from_targets(target, Path(tmp) / "capture", quiet=True)
            except CaptureInterrupted as exc:
                raise KeyboardInterrupt from exc  # Ctrl-C ends the watch, not just the round
            source = target["replay"] or str(capture.root)
            result = _export(capture, source, inventory, out_dir, escalations, keep)
        collector.current = result["_families"]
        ok = sum(h["status"] == HostStatus.OK for h in result["hosts"])
        if as_json:
            click.echo(json.dumps({"round": n, **_public(result)}, sort_keys=True, default=str))
        else:
            out_console.print(f"round {n}: {ok}/{len(result['hosts'])} host(s), {result['suspects']} suspect(s), "
                              f"{result['findings']} finding(s), {result['series']} series -> "
                              f"{result['textfile']}", soft_wrap=True)

    def warn(n: int, exc: FabricaseError) -> None:
        err_console.print(f"warning: round {n} failed: {exc}", style="yellow", soft_wrap=True)

    try:
        if server is not None and not as_json:
            addr, port = server.address
            out_console.print(f"Serving /metrics on http://{addr}:{port}/metrics", soft_wrap=True)
        done = watch_loop(one_round, interval_s=period_s, count=count, on_error=warn, sleep=_sleep)
    except KeyboardInterrupt:
        kept = out_dir / "fabricase.prom"
        echo_line(f"fabricase: interrupted; {kept} keeps the last round's metrics"
                  if kept.is_file() else "fabricase: interrupted", err=True)
        ctx.exit(130)
    finally:
        if server is not None:
            server.close()
    if done == 0:
        raise click.exceptions.Exit(1)
