"""The flow, one direction: targets -> transport -> capture -> parse/analyze -> locate -> bundle -> render
-> file -> track. The CLI calls these; they never print. Progress goes through callbacks."""

from __future__ import annotations

import atexit
import dataclasses
import json
import multiprocessing
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from fabricase.capturedir import (
    add_inputs,
    host_capture_from_stream,
    load_capture,
    prepare_capture_dir,
    utc_now,
    write_capture_meta,
    write_host,
)
from fabricase.collectors import select_collectors
from fabricase.collectors.framing import parse_stream
from fabricase.collectors.plan import CapturePlan, compile_script
from fabricase.config import Paths
from fabricase.errors import CaptureInterrupted, TargetError
from fabricase.models import (
    Bundle,
    Capture,
    Escalation,
    Finding,
    HostStatus,
    Placement,
    Severity,
    TicketDraft,
)
from fabricase.targets import Targets
from fabricase.transports import HostRun, Transport, get_transport, is_local_name

__all__ = [
    "CollectOptions",
    "OpenResult",
    "analyze_capture",
    "build_bundle_for",
    "collect",
    "default_via",
    "host_summaries",
    "load_input",
    "make_draft",
    "open_escalation",
]


@dataclass(frozen=True)
class CollectOptions:
    via: str | None = None  # None: local for this machine's names
    interval_s: float = 3.0
    since_s: int = 24 * 3600
    timeout_s: float | None = None  # per host; None: derived from the plan
    collectors: tuple[str, ...] = ()
    root: str = ""  # read host files under this folder (tests, golden host trees)
    nccl_logs: tuple[str, ...] = ()  # globs of a job's NCCL_DEBUG=INFO output, copied into the capture
    perf: bool = False  # also run the opt-in perf-test collector
    fanout: int = 64  # hosts captured at once (ssh)
    deadline_s: float | None = None  # overall limit: hosts not started by then are recorded as timed out
    ssh_options: tuple[str, ...] = ()  # passed to ssh as -o VALUE
    user: str | None = None
    gateways: tuple[str, ...] = ()  # tree mode: hosts split among these, each running `fabricase relay`
    gateway_command: str = "fabricase"


def default_via(targets: Targets) -> str:
    """slurm for a running job's nodes (ssh once it has ended), local for this machine, else ssh."""
    if targets.slurm is not None:
        return "slurm" if targets.slurm.running else "ssh"
    return "local" if all(is_local_name(h) for h in targets.hosts) else "ssh"


def _plan(opts: CollectOptions) -> CapturePlan:
    if opts.interval_s < 0:
        raise TargetError("interval must be zero or more seconds", where="--interval")
    extra = ("perf",) if opts.perf else ()
    return CapturePlan(collectors=tuple(select_collectors(list(opts.collectors), extra=extra)),
                       interval_s=opts.interval_s,
                       since_s=opts.since_s, root=opts.root)


def _host_budget(plan: CapturePlan) -> float:
    """Generous wall-clock limit for one host: the interval plus every command's own timeout."""
    commands = sum(c.timeout_s + 2 for col in plan.collectors for c in col.commands)
    return plan.interval_s + commands + 30


def _record_run(root: Path, run: HostRun, plan: CapturePlan, transport: str) -> None:
    stream = parse_stream(run.stdout)
    hc = host_capture_from_stream(run.host, stream, plan)
    hc.transport, hc.started_at, hc.finished_at = transport, run.started_at, run.finished_at
    hc.status, hc.reason = run.status, run.reason
    if run.status == HostStatus.OK and stream.error:
        # The script ran but what came back is incomplete or garbled: keep what parsed, say why.
        hc.status = HostStatus.PARTIAL if stream.items else HostStatus.FAILED
        hc.reason = f"capture stream: {stream.error}"
    elif run.status != HostStatus.OK and stream.items:
        hc.reason = f"{run.reason}; {len(stream.items)} items kept"
    write_host(root, hc, run.stdout)


def expand_globs(patterns: tuple[str, ...], option: str) -> list[Path]:
    """Files matching each pattern, sorted; a pattern that matches no file is an error naming it."""
    import glob

    found: list[Path] = []
    for pattern in patterns:
        matches = sorted(p for p in glob.glob(os.path.expanduser(pattern)) if os.path.isfile(p))
        if not matches:
            raise TargetError(f"no file matches {pattern!r}", where=option)
        found += [Path(m) for m in matches if Path(m) not in found]
    return found


class _Recorder:
    """Writes each host's capture as it arrives. With many hosts, parsing and writing run in worker processes
    (one per core), so a fleet is not serialized behind one core. Streams waiting for a worker are bounded
    in bytes, not in count: a host that hangs must still start early, and memory must stay bounded."""

    PARALLEL_FROM = 16
    IN_FLIGHT_BYTES = 256 * 2**20

    def __init__(self, root: Path, plan: CapturePlan, via: str, hosts: int) -> None:
        self.root, self.plan, self.via = root, plan, via
        self.pool: ProcessPoolExecutor | None = None
        self.futures: list[Future] = []
        self.in_flight = 0
        self.room = threading.Condition()
        workers = min(os.cpu_count() or 1, 8)
        if hosts >= self.PARALLEL_FROM and workers > 1:
            # spawn, not fork: the transport's threads are running.
            self.pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))

    def record(self, run: HostRun) -> None:
        if self.pool is None:
            _record_run(self.root, run, self.plan, self.via)
            return
        size = len(run.stdout)
        with self.room:
            self.room.wait_for(lambda: self.in_flight == 0 or self.in_flight + size <= self.IN_FLIGHT_BYTES)
            self.in_flight += size
        # A copy: the pool pickles later, in its own thread, and the caller drops run.stdout meanwhile.
        future = self.pool.submit(_record_run, self.root, dataclasses.replace(run), self.plan, self.via)
        future.add_done_callback(lambda _: self._release(size))
        self.futures.append(future)

    def _release(self, size: int) -> None:
        with self.room:
            self.in_flight -= size
            self.room.notify_all()

    def close(self) -> None:
        """Wait for every host to be written; a worker's error surfaces here."""
        try:
            for future in self.futures:
                future.result()
        finally:
            if self.pool is not None:
                self.pool.shutdown(cancel_futures=True)


def collect(targets: Targets, opts: CollectOptions, out_dir: Path,
            on_host: Callable[[HostRun], None] | None = None, transport: Transport | None = None,
            verify: bool = True, load: bool = True) -> Capture | None:
    """Capture every target host into a new capture directory and load it back (verified).

    `transport` overrides the one named by opts.via (tests and benchmarks: the fake transport)."""
    plan = _plan(opts)
    nccl_logs = expand_globs(opts.nccl_logs, "--nccl-log")  # before any capture work: fail fast
    via = transport.name if transport else opts.via or default_via(targets)
    job = {"job": targets.slurm or targets.job} if via == "slurm" else {}
    transport = transport or get_transport(via, fanout=opts.fanout, deadline_s=opts.deadline_s,
                                           ssh_options=opts.ssh_options, user=opts.user, gateways=opts.gateways,
                                           gateway_command=opts.gateway_command, **job)
    root = prepare_capture_dir(out_dir)
    created = utc_now()
    write_capture_meta(root, plan=plan, targets={**targets.describe(), "via": via},
                       hosts=list(targets.hosts), created_at=created)
    if nccl_logs:
        add_inputs(root, "nccl-log", nccl_logs)
    script = compile_script(plan)
    timeout = opts.timeout_s or _host_budget(plan)

    recorder = _Recorder(root, plan, via, len(targets.hosts))

    def done(run: HostRun) -> None:
        recorder.record(run)
        if on_host:
            on_host(run)
        run.stdout = b""  # handed over; a thousand hosts' streams must not pile up in memory

    try:
        runs = transport.run(list(targets.hosts), script, timeout_s=timeout, on_done=done)
        interrupted = any(r.reason == "interrupted" for r in runs)
        if interrupted:
            for host in targets.hosts[len(runs):]:  # the rest are recorded as never reached
                done(HostRun(host, HostStatus.FAILED, reason="not captured: interrupted"))
    finally:
        recorder.close()
    if interrupted:
        raise CaptureInterrupted("interrupted; what was gathered is kept here", where=str(root))
    return load_capture(root, verify=verify) if load else None


_TEMP_DIRS: list[str] = []


def _cleanup_temp() -> None:
    for d in _TEMP_DIRS:
        shutil.rmtree(d, ignore_errors=True)


atexit.register(_cleanup_temp)


def load_input(path: Path) -> Capture:
    """A capture directory, an unpacked bundle, or a bundle file (verified, then extracted to a temp dir)."""
    if path.is_file():
        from fabricase.bundler.verify import extract_bundle

        tmp = tempfile.mkdtemp(prefix="fabricase-bundle-")
        _TEMP_DIRS.append(tmp)
        dest = extract_bundle(path, Path(tmp))
        return load_capture(dest)
    return load_capture(path)


def analyze_capture(capture: Capture, topology: dict[str, list[str]] | None = None) -> list[Finding]:
    """Findings for a capture; `topology` maps host -> its shared components (switch, rack, network node)."""
    from fabricase.analysis import analyze

    return analyze(capture, topology=topology)


def topology_of(placements: list[Placement]) -> dict[str, list[str]]:
    """host -> the shared components the provider (or the static inventory) puts it under."""
    return {p.host: list(p.topology) for p in placements if p.topology}


def inventory_topology(path: Path | None, paths: Paths | None = None) -> dict[str, list[str]]:
    """The static inventory's switches and racks: the file given, else the one in the config directory."""
    from fabricase.providers.static import load_inventory

    file = path or (paths.config / "inventory.json" if paths else None)
    if file is None:
        return {}
    inventory = load_inventory(file)
    return {host: [f"{k}:{entry[k]}" for k in ("switch", "rack") if entry.get(k)] for host, entry in inventory.items()}


def host_summaries(capture: Capture) -> list[dict]:
    from fabricase.parsers.identity import host_identity

    out = []
    for hc in capture.hosts:
        identity = host_identity(hc) if hc.items else {}
        out.append({"host": hc.host, "status": str(hc.status), "reason": hc.reason, "identity": identity})
    return out


def worst_severity(findings: list[Finding]) -> Severity:
    ranked = sorted((f.severity for f in findings), key=lambda s: s.rank)
    return ranked[0] if ranked else Severity.MINOR


def make_draft(capture: Capture, findings: list[Finding], *, provider: str, symptom: str,
               severity: Severity, placements: list[Placement], bundle_id: str | None,
               escalation_id: str | None) -> TicketDraft:
    from fabricase.templates import render_draft

    return render_draft(provider=provider, symptom=symptom, severity=severity, findings=findings,
                        hosts=host_summaries(capture), placements=placements, bundle_id=bundle_id,
                        capture_created_at=capture.created_at, escalation_id=escalation_id)


def _epoch(created_at: str) -> int:
    try:
        return int(datetime.strptime(created_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp())
    except ValueError:
        return 0


def findings_json(findings: list[Finding]) -> str:
    return json.dumps([f.to_dict() for f in findings], indent=2, sort_keys=True) + "\n"


def build_bundle_for(capture: Capture, findings: list[Finding], draft: TicketDraft, out: Path) -> Bundle:
    """The evidence bundle: the capture directory, findings, the ticket draft and the summary."""
    from fabricase.bundler.archive import build_bundle

    extra = {
        "findings.json": findings_json(findings).encode(),
        "ticket.md": (draft.title + "\n\n" + draft.body).encode(),
        "summary.md": (draft.summary or "").encode(),
    }
    return build_bundle(capture.root, out, extra=extra, mtime=_epoch(capture.created_at))


@dataclass
class OpenResult:
    capture: Capture
    findings: list[Finding]
    bundle: Bundle
    draft: TicketDraft
    escalation: Escalation | None  # None on --dry-run
    ticket_path: Path
    filed_at: str | None = None
    placements: list[Placement] = field(default_factory=list)


def open_escalation(capture: Capture, paths: Paths, *, provider_name: str, symptom: str,
                    severity: Severity | None, dry_run: bool = False) -> OpenResult:
    """Analyze, locate, bundle, render, file and track one escalation for an existing capture."""
    from fabricase.providers import get_provider
    from fabricase.tracker.store import Tracker

    provider = get_provider(provider_name, paths)
    placements = provider.locate(host_summaries(capture))
    findings = analyze_capture(capture, topology_of(placements))
    severity = severity or worst_severity(findings)
    draft_kw = dict(provider=provider_name, symptom=symptom, severity=severity, placements=placements)

    if dry_run:
        inner = make_draft(capture, findings, bundle_id=None, escalation_id=None, **draft_kw)
        bundle_path = paths.bundles / f"dry-run-{capture.root.name}.tar.gz"
        bundle = build_bundle_for(capture, findings, inner, bundle_path)
        draft = make_draft(capture, findings, bundle_id=bundle.bundle_id, escalation_id=None, **draft_kw)
        ticket = bundle_path.with_suffix("").with_suffix(".ticket.md")
        ticket.write_text(draft.title + "\n\n" + draft.body)
        return OpenResult(capture, findings, bundle, draft, None, ticket, placements=placements)

    tracker = Tracker.open(paths)
    hosts = [h.host for h in capture.hosts]
    components = sorted({(f.host, f.component) for f in findings}, key=lambda hc: (hc[0] or "", hc[1]))
    esc = tracker.create(provider=provider_name, title=symptom[:120], symptom=symptom, severity=severity,
                         hosts=hosts, components=components)
    inner = make_draft(capture, findings, bundle_id=None, escalation_id=esc.id, **draft_kw)
    bundle = build_bundle_for(capture, findings, inner, paths.bundles / f"{esc.id}-{capture.root.name}.tar.gz")
    tracker.add_event(esc.id, "bundle", f"bundle {bundle.bundle_id[:16]} built", {"path": str(bundle.path)})
    draft = make_draft(capture, findings, bundle_id=bundle.bundle_id, escalation_id=esc.id, **draft_kw)
    result = provider.file_case(escalation_id=esc.id, draft=draft, bundle_path=bundle.path)
    location = Path(result.location)
    ticket = location / "ticket.md" if (location / "ticket.md").is_file() else location
    esc = tracker.mark_filed(esc.id, provider_case_id=result.case_id, raw_status=result.raw_status,
                             state=result.state, ticket_path=str(ticket), bundle_id=bundle.bundle_id,
                             bundle_path=str(bundle.path))
    return OpenResult(capture, findings, bundle, draft, esc, ticket, filed_at=result.location,
                      placements=placements)
