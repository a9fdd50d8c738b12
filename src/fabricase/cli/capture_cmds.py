"""Commands that capture, analyze, bundle, verify, draft and open."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import click

from fabricase.bundler.summary_form import capture_summary, summary_line
from fabricase.cli.app import EXIT_PARTIAL, capture_from_targets, cli, paths, target_options
from fabricase.cli.options import Age
from fabricase.cli.output import emit_json, err_console, hosts_json, inert, inert_lines, out_console, print_hosts
from fabricase.cli.probe_cmd import print_probe, probe_options, run_probe_on, split_probe_values
from fabricase.cli.provider_cmds import ProviderChoice
from fabricase.cli.screen import diagnosis_json, print_diagnosis
from fabricase.errors import ParseError, VerifyError
from fabricase.models import HostStatus, Severity

_PROVIDERS = ProviderChoice()  # the registry's names, read when parsed: a plug-in provider is one
_SEVERITIES = click.Choice([s.value for s in Severity])


def load_source(path: str):
    from fabricase.pipeline import load_input

    return load_input(Path(path))


def placements_for(capture, source: str, inventory: Path | None):
    """resolve_placements, with a bundle's malformed placements.json named as the bundle's member (the
    folder it was extracted to is temporary)."""
    from fabricase.capturedir import PLACEMENTS_FILE
    from fabricase.placements import resolve_placements

    try:
        return resolve_placements(capture, inventory, paths())
    except ParseError as exc:
        if Path(source).is_file():
            raise ParseError(exc.message, where=f"{source}: capture/{PLACEMENTS_FILE}") from exc
        raise


_findings_option = click.option("--findings", "show_findings", is_flag=True,
                                help="Also print the raw findings behind the suspects, one row each.")


def diagnose_for(capture, placements):
    """Findings and the diagnosis built from them (pipeline.diagnose_capture), topology from the placements."""
    from fabricase.pipeline import diagnose_capture
    from fabricase.placements import topology_of

    return diagnose_capture(capture, topology_of(placements), placements)


_pseudonymize_option = click.option(
    "--pseudonymize", is_flag=True,
    help="Also replace host names, IP addresses, MACs, InfiniBand GUIDs/GIDs and user names with consistent "
         "pseudonyms (instance ids and provider topology ids are kept). Secrets are always redacted.")


@cli.command()
@target_options
@click.option("-o", "--output", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Capture directory to create (default: a new folder under the data directory).")
@click.option("--inventory", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Static inventory JSON ({\"hosts\": {host: {\"switch\", \"rack\"}}}): where the hosts sit, "
                   "stored in the capture as placements.json.")
@_findings_option
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout.")
def collect(out_dir, inventory, show_findings, as_json, **target):
    """Capture counters, logs and identity from the hosts into a capture directory, then diagnose it (topology
    from --inventory, else the config directory's inventory.json) and print the suspects."""
    from fabricase.capturedir import write_placements
    from fabricase.placements import inventory_placements

    if target["replay"]:
        raise click.UsageError("collect captures live hosts; --replay is for analyze, draft and open")
    if inventory is not None:
        inventory_placements(inventory, [])  # a bad inventory fails before any host is captured
    # Loaded from each host's record (host.json) and checked index, unverified: the items were hashed as they were
    # written. With capture format 3 no host's items are decoded until the analysis reads that host, and it
    # releases each host after reading it, so no fleet's items are held at once.
    capture = capture_from_targets(target, out_dir, quiet=as_json)
    stored = None
    if inventory is not None:
        stored = write_placements(capture.root, inventory_placements(inventory, [h.host for h in capture.hosts]))
    ok = sum(h.status == HostStatus.OK for h in capture.hosts)
    placements, _ = placements_for(capture, str(capture.root), None)
    analysis = diagnose_for(capture, placements)
    if as_json:
        emit_json({"capture_dir": str(capture.root), "hosts": _collected_hosts_json(capture),
                   "placements": str(stored) if stored else None,
                   "findings": [f.to_dict() for f in analysis.findings], **diagnosis_json(analysis.diagnosis)})
    else:
        print_hosts(capture)
        if stored:
            out_console.print(f"Placements stored in {stored}", soft_wrap=True)
        print_diagnosis(analysis.diagnosis, analysis.findings, show_findings=show_findings)
    if ok == 0:
        raise click.exceptions.Exit(1)
    if ok < len(capture.hosts):
        raise click.exceptions.Exit(EXIT_PARTIAL)


def _collected_hosts_json(capture) -> list[dict]:
    """output.hosts_json, counting a stored host's items from its index instead of decoding them again."""
    return [{"host": h.host, "status": str(h.status), "reason": h.reason,
             "items": h.item_count if hasattr(h, "item_count") else len(h.items)} for h in capture.hosts]


inventory_option = click.option(
    "--inventory", type=click.Path(path_type=Path, dir_okay=False), default=None,
    help="Static inventory JSON ({\"hosts\": {host: {\"switch\", \"rack\"}}}) for topology correlation, over "
         "the placements stored in the capture (default: those, else inventory.json in the config directory).")


@cli.command()
@click.argument("source", metavar="DIR|BUNDLE")
@inventory_option
@_findings_option
@click.option("--json", "as_json", is_flag=True,
              help="Print the verdict, suspects, background and raw findings as JSON on stdout.")
def analyze(source, inventory, show_findings, as_json):
    """Analyze a capture directory or bundle offline and print the diagnosis: a verdict line, one line per
    suspect (what to repair, with the key number against the fleet and the action) and the background.

    Topology (which hosts share a switch, rack or network node) comes from --inventory, else from the
    placements stored in the capture, else from the config directory's inventory.json. With --inventory on a
    directory, its placements are stored in the capture for later analyses and bundles."""
    from fabricase.placements import store_placements

    capture = load_source(source)
    placements, topology = placements_for(capture, source, inventory)
    if inventory is not None and Path(source).is_dir():
        topology = store_placements(capture, placements, topology)
    analysis = diagnose_for(capture, placements)
    left_out = capture_summary(capture.root)  # a summary bundle: the hosts it left out, said once
    if as_json:
        emit_json({"capture_dir": str(capture.root), "hosts": hosts_json(capture), "topology": topology.to_dict(),
                   "findings": [f.to_dict() for f in analysis.findings], **diagnosis_json(analysis.diagnosis),
                   "summary": left_out})
    else:
        print_hosts(capture)
        if left_out:
            out_console.print(inert(summary_line(left_out)), soft_wrap=True)
        out_console.print(topology.describe(), soft_wrap=True)
        print_probe(capture)
        print_diagnosis(analysis.diagnosis, analysis.findings, show_findings=show_findings)
    if topology.warning:
        err_console.print(f"warning: {topology.warning}", style="yellow", soft_wrap=True)


def _bundle_form_options(summary_flag: str):
    """--summary/--full-bundle and the upload options, shared by `bundle` and `open`."""
    def decorate(fn):
        for option in reversed((
            click.option(summary_flag, "summary", is_flag=True,
                         help="Bundle the suspects' hosts, 8 healthy peers per hardware class and a fleet summary "
                              "(default: only when the full bundle does not fit the desk's limits)."),
            click.option("--full-bundle", "full_bundle", is_flag=True,
                         help="Always bundle the whole capture, whatever its size."),
            click.option("--upload-to", default=None, metavar="URL",
                         help="Upload the full bundle to your own storage: s3://bucket/prefix/, "
                              "gs://bucket/prefix/ or az://account/container/prefix/ (signed with your usual "
                              "credentials). Default: [bundle] upload_to in config.toml, if set."),
            click.option("--no-upload", "no_upload", is_flag=True,
                         help="Upload nothing, even where config.toml's [bundle] sets upload_to."),
            click.option("--upload-url", default=None, metavar="URL",
                         help="Upload the full bundle with this presigned PUT URL you made."),
            click.option("--upload-endpoint", default=None, metavar="URL",
                         help="Another endpoint for the store (S3-compatible storage, an emulator)."),
            click.option("--expires", "expires", type=Age(allow_zero=False), default=None, metavar="DURATION",
                         help="How long the presigned URLs stay valid (e.g. 12h, 7d; S3 and GCS: 7d at most; "
                              "default: [bundle] expires in config.toml, else 7d)."),
            click.option("--presign-get", is_flag=True,
                         help="Also make a presigned GET URL of the uploaded bundle for the provider."),
        )):
            fn = option(fn)
        return fn
    return decorate


def bundle_choice(summary: bool, full_bundle: bool, upload_to: str | None, upload_url: str | None,
                  upload_endpoint: str | None, expires: timedelta | None, presign_get: bool, no_upload: bool = False):
    """(form, upload target) from the bundle options, and where no upload option is given, from config.toml's
    [bundle] (config.bundle_defaults, read only then); a UsageError for options that contradict each other."""
    from fabricase.bundler.upload import parse_upload_target
    from fabricase.config import bundle_defaults

    if summary and full_bundle:
        raise click.UsageError("choose one of the summary and --full-bundle forms")
    if upload_to and upload_url:
        raise click.UsageError("choose one of --upload-to and --upload-url")
    if no_upload and (upload_to or upload_url or presign_get):
        raise click.UsageError("--no-upload contradicts the upload options given with it")
    conf = {} if no_upload or upload_to or upload_url else bundle_defaults(paths())
    upload_to = upload_to or conf.get("upload_to")
    upload_endpoint = upload_endpoint or conf.get("upload_endpoint")
    presign_get = presign_get or (bool(conf.get("presign_get")) and upload_to is not None)
    if presign_get and not upload_to:
        raise click.UsageError("--presign-get needs --upload-to (fabricase signs only URLs it can sign)")
    if expires is None:
        expires = _configured_expires(conf.get("expires")) if conf.get("expires") else timedelta(days=7)
    where = upload_to or upload_url
    target = None
    if where:
        target = parse_upload_target(where, endpoint=upload_endpoint, expires_s=int(expires.total_seconds()),
                                     want_get=presign_get)
    return ("summary" if summary else "full" if full_bundle else "auto"), target


def _configured_expires(text: str) -> timedelta:
    from fabricase.config import CONFIG_FILE
    from fabricase.errors import ConfigError

    try:
        return Age(allow_zero=False).convert(text, None, None)
    except click.BadParameter as exc:
        raise ConfigError(f"[bundle] expires: {exc.message}", where=str(paths().config / CONFIG_FILE)) from exc


def bundle_lines(b) -> list[str]:
    """What `bundle` and `open` say of the bundle's form, the full bundle and its upload (FittedBundle)."""
    from fabricase.bundler.summary_form import summary_line

    lines = []
    line = summary_line(getattr(b, "record", None))
    if line:
        lines.append(f"  {line}")
    full = getattr(b, "full", None)
    if getattr(b, "full_path", None) is not None:
        lines.append(f"  full bundle {b.full_path} ({full['size']} bytes, sha256 {full['sha256']})")
    uploaded = getattr(b, "uploaded", None)
    if uploaded is not None:
        lines.append(f"  uploaded to {uploaded.object} (sha256 {uploaded.sha256})")
        if uploaded.get_url:
            lines.append(f"  provider's GET URL, valid until {uploaded.get_expires_at}: {uploaded.get_url}")
    if getattr(b, "note", None):
        lines.append(f"  note: {b.note}")
    return lines


def bundle_json(b) -> dict:
    uploaded = getattr(b, "uploaded", None)
    return {"form": getattr(b, "form", "full"), "summary": getattr(b, "record", None),
            "full_bundle": {**b.full, "path": str(b.full_path) if b.full_path else None} if b.full else None,
            "uploaded": None if uploaded is None else {
                **uploaded.reference(), "get_url": uploaded.get_url, "get_expires_at": uploaded.get_expires_at}}


@cli.command()
@click.argument("source", metavar="DIR")
@click.option("-o", "--output", "out", type=click.Path(path_type=Path), required=True,
              help="The bundle file to write (.tar.gz).")
@click.option("--provider", type=_PROVIDERS, default="static", show_default=True,
              help="Whose ticket template goes into the bundle, and whose desk limits it is fitted to.")
@click.option("--symptom", default="(not given)", help="What the workload saw.")
@_pseudonymize_option
@_bundle_form_options("--summary")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout.")
def bundle(source, out, provider, symptom, pseudonymize, summary, full_bundle, upload_to, no_upload, upload_url,
           upload_endpoint, expires, presign_get, as_json):
    """Build a deterministic evidence bundle from a capture directory (secrets redacted; see --pseudonymize).

    The same capture and options give the same bytes; with --pseudonymize, the pseudonym key is kept by the
    tracker for this capture, so rebuilding gives the same bytes too. When the whole capture would not fit the
    provider's desk, the bundle is a summary (see --summary) and the full one is written beside it, and
    uploaded with --upload-to or --upload-url."""
    from fabricase.escalate import build_bundle_for, bundle_scope, make_draft, make_redactor, severity_of
    from fabricase.tracker.store import Tracker

    form, target = bundle_choice(summary, full_bundle, upload_to, upload_url, upload_endpoint, expires, presign_get,
                                 no_upload)
    capture = load_source(source)
    placements, _ = placements_for(capture, source, None)
    analysis = diagnose_for(capture, placements)
    draft = make_draft(capture, analysis.findings, provider=provider, symptom=symptom,
                       severity=severity_of(analysis.diagnosis), placements=placements, bundle_id=None,
                       escalation_id=None, diagnosis=analysis.diagnosis)
    key = None
    if pseudonymize:
        with Tracker.open(paths()) as keys:
            key = keys.pseudonym_key(bundle_scope(capture))
    b = build_bundle_for(capture, analysis.findings, draft, out, placements=placements, samples=analysis.samples,
                         symptom=symptom, redactor=make_redactor(capture, pseudonymize=pseudonymize, key=key),
                         diagnosis=analysis.diagnosis, form=form, upload=target)
    if as_json:
        emit_json({"bundle_path": str(b.path), "bundle_id": b.bundle_id, "members": b.members, "size": b.size,
                   **bundle_json(b)})
    else:
        for line in (f"Bundle {b.path}", f"  id {b.bundle_id}", f"  {b.members} members, {b.size} bytes",
                     *bundle_lines(b)):
            out_console.print(inert(line), soft_wrap=True)


@cli.command()
@click.argument("bundle_path", metavar="BUNDLE", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the verification report as JSON.")
def verify(bundle_path, as_json):
    """Check a bundle's integrity: every member against MANIFEST.json (missing, extra, changed). A summary bundle
    says how many of the capture's hosts it holds and where the full one is."""
    from fabricase.bundler.summary_form import summary_line
    from fabricase.bundler.verify import verify_bundle

    report = verify_bundle(bundle_path)
    line = summary_line(report.summary)
    if as_json:
        emit_json({"bundle": str(bundle_path), "ok": report.ok, "bundle_id": report.bundle_id,
                   "members": report.members, "problems": report.problems, "summary": report.summary,
                   "summary_line": line})
        if not report.ok:
            raise click.exceptions.Exit(1)
        return
    if report.ok:
        out_console.print(f"OK {bundle_path}: {report.members} members, bundle id {report.bundle_id}", soft_wrap=True)
        if line:
            out_console.print(inert(line), soft_wrap=True)
        return
    for problem in report.problems:
        err_console.print(f"{bundle_path}: {problem}")  # a member name is data: one inert line each
    raise VerifyError(f"{len(report.problems)} problem(s): {report.problems[0]}", where=str(bundle_path),
                      problems=report.problems)


@cli.command()
@click.argument("parts", metavar="PART...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", type=click.Path(path_type=Path), required=True,
              help="The bundle file to rebuild (.tar.gz).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def join(parts, out, as_json):
    """Rebuild a bundle from the parts it was split into for a desk's size limit (any order). Every part is
    verified first, and the result must have the original bundle's sha256; otherwise nothing is written."""
    from fabricase.bundler.verify import join_parts, verify_bundle

    joined = join_parts(list(parts), out)
    report = verify_bundle(joined)
    if as_json:
        emit_json({"bundle_path": str(joined), "bundle_id": report.bundle_id, "parts": len(parts), "ok": report.ok})
    else:
        out_console.print(f"Joined {len(parts)} part(s) into {joined}", soft_wrap=True)
        out_console.print(f"  id {report.bundle_id}", soft_wrap=True)
    if not report.ok:
        raise VerifyError(f"the joined bundle does not verify: {report.problems[0]}", where=str(joined),
                          problems=report.problems)


@cli.command()
@click.argument("source", metavar="DIR|BUNDLE")
@click.option("--provider", type=_PROVIDERS, default="static", show_default=True, help="Ticket template.")
@click.option("--symptom", default="(not given)", help="What the workload saw.")
@click.option("--severity", type=_SEVERITIES, default=None, help="Override the severity.")
@click.option("--json", "as_json", is_flag=True, help="Print the draft as JSON.")
def draft(source, provider, symptom, severity, as_json):
    """Render the provider ticket for a capture or bundle without filing anything: exactly the text filing would
    send (redacted, and fitted to the desk's length limit), less the bundle id that filing adds."""
    from fabricase.escalate import desk_of, fit_draft, make_draft, make_redactor, redact_draft, severity_of, template_of

    capture = load_source(source)
    placements, _ = placements_for(capture, source, None)
    analysis = diagnose_for(capture, placements)
    desk = desk_of(provider, paths())
    d = make_draft(capture, analysis.findings, provider=template_of(provider, desk), symptom=symptom,
                   severity=Severity(severity) if severity else severity_of(analysis.diagnosis),
                   placements=placements, bundle_id=None, escalation_id=None, diagnosis=analysis.diagnosis)
    d = fit_draft(redact_draft(d, make_redactor(capture)), desk)
    left_out = capture_summary(capture.root)
    if left_out:
        err_console.print(inert(summary_line(left_out)), soft_wrap=True)
    if as_json:
        emit_json({"provider": d.provider, "title": d.title, "body": d.body, "severity": str(d.severity),
                   "hosts": d.hosts, "components": d.components})
    else:
        click.echo(inert_lines(d.title + "\n\n" + d.body))  # the ticket's lines, each inert


@cli.command(name="open")
@target_options
@click.option("--symptom", required=True, help="What the workload saw, e.g. 'allreduce busbw fell 40%'.")
@click.option("--provider", type=_PROVIDERS, default="static", show_default=True,
              help="Where to file (static: a local outbox).")
@click.option("--severity", type=_SEVERITIES, default=None, help="Override the severity from the findings.")
@click.option("--dry-run", is_flag=True, help="Capture, analyze, bundle and draft; file and track nothing.")
@_pseudonymize_option
@click.option("--force", is_flag=True,
              help="File even when an open escalation already covers these hosts, instances or switches.")
@_findings_option
@click.option("--report-faulty", is_flag=True,
              help="After filing, report the hosts with a provider-owned major or critical suspect through the "
                   "cloud's faulty-host channel, as `fabricase report-faulty` does (GCE: disruption future).")
@click.option("--probe", "with_probe", is_flag=True,
              help="After the capture, run the probe's active tests across the hosts (see `fabricase probe "
                   "--help`; its options apply) and put their results in the bundle and ticket.")
@probe_options
@_bundle_form_options("--summary-bundle")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout.")
def open_(symptom, provider, severity, dry_run, pseudonymize, force, show_findings, report_faulty, with_probe,
          summary, full_bundle, upload_to, no_upload, upload_url, upload_endpoint, expires, presign_get, as_json,
          **values):
    """Capture, analyze, bundle, draft, file and track one escalation.

    When the whole capture does not fit the desk, the bundle attached is a summary (the suspects' hosts, healthy
    peers and a fleet summary); the full bundle is kept beside it, named in the ticket by sha256, and uploaded to
    your storage with --upload-to or --upload-url."""
    from fabricase.flow import open_escalation

    form, upload = bundle_choice(summary, full_bundle, upload_to, upload_url, upload_endpoint, expires, presign_get,
                                 no_upload)
    bundle_args = {"bundle_form": form, "upload": upload} if form != "auto" or upload is not None else {}
    probe_values, target = split_probe_values(values)
    if with_probe and target["replay"]:
        raise click.UsageError("--probe runs tests on live hosts; it cannot be added to a --replay")
    capture = capture_from_targets(target, None, quiet=as_json, analyze_hosts=not with_probe)
    if with_probe:
        _doc, capture = run_probe_on(capture, target, probe_values, quiet=as_json)
    if not any(h.status == HostStatus.OK for h in capture.hosts) and not as_json:
        err_console.print("warning: no host was captured; the ticket will say so", style="yellow")
    result = open_escalation(capture, paths(), provider_name=provider, symptom=symptom,
                             severity=Severity(severity) if severity else None, dry_run=dry_run,
                             pseudonymize=pseudonymize, force=force, **bundle_args)
    esc = result.escalation
    faulty = None
    if report_faulty and as_json:
        from fabricase.cli.faulty_cmd import report_after_open

        faulty = report_after_open(result, provider, dry_run=dry_run, as_json=True)
    if as_json:
        emit_json({
            "escalation_id": esc.id if esc else None,
            "state": str(esc.state) if esc else "dry-run",
            "provider": provider,
            "provider_case_id": esc.provider_case_id if esc else None,
            "case_marker": result.case_marker,
            "resumed": result.resumed,
            "bundle_path": str(result.bundle.path),
            "bundle_id": result.bundle.bundle_id,
            **bundle_json(result.bundle),
            "ticket_path": str(result.ticket_path),
            "capture_dir": str(result.capture.root),
            "hosts": hosts_json(result.capture),
            "findings": [f.to_dict() for f in result.findings],
            **diagnosis_json(result.diagnosis),
            "requests": [r.to_dict() for r in result.requests],
            "timings_s": result.timings,
            **({"faulty_reports": faulty} if faulty is not None else {}),
        })
        return
    try:
        _print_opened(result, provider, show_findings)
    except Exception as exc:  # filed already: a failure to print must not invite a second filing
        line = inert(f"warning: could not print the summary ({type(exc).__name__}: {exc}); "
                     f"{_filed_line(result, provider)}")
        click.echo(line.encode("ascii", "backslashreplace").decode("ascii"), err=True)  # ASCII: any stderr takes it
    if report_faulty:
        from fabricase.cli.faulty_cmd import report_after_open

        report_after_open(result, provider, dry_run=dry_run, as_json=False)


def _filed_line(result, provider: str) -> str:
    esc = result.escalation
    if esc is None:
        return "dry run: nothing filed or tracked"
    return f"escalation {esc.id} ({esc.state}, {provider} case {esc.provider_case_id}), ticket {result.ticket_path}"


def _print_opened(result, provider: str, show_findings: bool) -> None:
    """What `open` prints for people once the escalation is filed (or drafted, with --dry-run)."""
    esc = result.escalation
    print_hosts(result.capture)
    print_diagnosis(result.diagnosis, result.findings, show_findings=show_findings)
    out_console.print(f"Bundle      {result.bundle.path}", soft_wrap=True)
    out_console.print(f"  id        {result.bundle.bundle_id}", soft_wrap=True)
    for line in bundle_lines(result.bundle):
        out_console.print(inert(f"  {line}"), soft_wrap=True)
    out_console.print(f"Ticket      {result.ticket_path}", soft_wrap=True)
    if esc:
        resumed = " (resumed: an earlier filing had not finished)" if result.resumed else ""
        out_console.print(f"Escalation  {esc.id} ({esc.state}, {provider} case {esc.provider_case_id}){resumed}",
                          soft_wrap=True)
    else:
        out_console.print("Dry run: nothing filed or tracked. Filing would send:")
        for n, r in enumerate(result.requests, 1):
            out_console.print(f"  {n}. {r.service} {r.operation} {json.dumps(r.payload, sort_keys=True)}",
                              soft_wrap=True)
