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
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabricase.capturedir import (
    PLACEMENTS_FILE,
    add_inputs,
    host_capture_from_stream,
    load_capture,
    load_placements,
    prepare_capture_dir,
    utc_now,
    write_capture_meta,
    write_host,
    write_placements,
)
from fabricase.collectors import select_collectors
from fabricase.collectors.framing import parse_stream
from fabricase.collectors.plan import CapturePlan, compile_script
from fabricase.config import Paths
from fabricase.errors import (
    CaptureError,
    CaptureInterrupted,
    ConfigError,
    DuplicateError,
    ParseError,
    TargetError,
)
from fabricase.models import (
    Bundle,
    Capture,
    Escalation,
    EscalationEvent,
    Finding,
    HostStatus,
    MetricSample,
    Placement,
    Severity,
    TicketDraft,
)
from fabricase.targets import Targets
from fabricase.transports import HostRun, Transport, get_transport, is_local_name

if TYPE_CHECKING:
    from fabricase.providers.base import PlannedRequest
    from fabricase.redact import Redactor
    from fabricase.tracker.store import Tracker

__all__ = [
    "CollectOptions",
    "OpenResult",
    "TopologySource",
    "analyze_capture",
    "build_bundle_for",
    "bundle_scope",
    "make_redactor",
    "redact_draft",
    "desk_of",
    "evidence_bundle",
    "fit_draft",
    "collect",
    "default_via",
    "host_summaries",
    "inventory_placements",
    "load_input",
    "make_draft",
    "merge_placements",
    "open_escalation",
    "resolve_placements",
    "store_placements",
    "topology_of",
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


def analyze_capture(capture: Capture, topology: dict[str, list[str]] | None = None,
                    samples_out: dict[str, list[MetricSample]] | None = None) -> list[Finding]:
    """Findings for a capture; `topology` maps host -> its shared components (switch, rack, network node);
    `samples_out` receives the samples the report's heat map reads (see fabricase.analysis.analyze)."""
    from fabricase.analysis import analyze

    return analyze(capture, topology=topology, samples_out=samples_out)


def topology_of(placements: list[Placement]) -> dict[str, list[str]]:
    """host -> the shared components the provider (or the static inventory) puts it under."""
    return {p.host: list(p.topology) for p in placements if p.topology}


def _says_anything(p: Placement) -> bool:
    return bool(p.topology or p.extra or any((p.instance_id, p.instance_type, p.region, p.zone, p.placement_group)))


def merge_placements(stored: list[Placement], new: list[Placement]) -> list[Placement]:
    """Per host, the new placement when it says anything about the host, else the stored one; sorted by host.
    A provider or inventory that knows nothing of a host never erases what an earlier source recorded."""
    merged = {p.host: p for p in stored}
    for p in new:
        if p.host not in merged or _says_anything(p):
            merged[p.host] = p
    return [merged[host] for host in sorted(merged)]


def inventory_placements(file: Path, hosts: list[str]) -> list[Placement]:
    """The hosts' placements in a static inventory file, matched as the static provider matches them (a host
    listed by its short name matches its FQDN). A missing or malformed file is a ConfigError naming it."""
    from fabricase.providers.static import StaticProvider

    if not file.is_file():
        raise ConfigError("inventory file not found", where=str(file))

    class _FromFile(StaticProvider):
        @property
        def inventory_path(self) -> Path:
            return file

    source = f"inventory:{os.path.abspath(file)}"
    located = _FromFile(Paths(data=file.parent, config=file.parent)).locate([{"host": h} for h in hosts])
    return [dataclasses.replace(p, source=source) for p in located]


@dataclass(frozen=True)
class TopologySource:
    """Where an analysis took the hosts' placements (so their switches, racks, network nodes) from."""

    origin: str  # "inventory" (--inventory), "capture" (its placements.json), "config-inventory", "none"
    path: str | None  # the file read
    hosts: int  # hosts in the capture
    placed: int  # of those, hosts under at least one shared component
    sources: dict[str, int] = field(default_factory=dict)  # placed hosts per placement source
    stored_in: str | None = None  # the placements.json this command wrote
    warning: str | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def describe(self) -> str:
        """One line for people: how many hosts are placed, and from where."""
        if self.origin == "none":
            return ("Topology: none (no --inventory, no placements.json in the capture, no inventory.json in the "
                    "config directory): a shared switch cannot be named")
        where = {
            "inventory": f"--inventory {self.path}",
            "capture": "the capture's placements.json" + (f" ({', '.join(self.sources)})" if self.sources else ""),
            "config-inventory": f"{self.path} (config directory)",
        }[self.origin]
        line = f"Topology: {self.placed} of {self.hosts} host(s) placed, from {where}"
        if not self.placed:
            line += ": a shared switch cannot be named"
        return line + (f"; stored in {self.stored_in}" if self.stored_in else "")


def _topology_source(origin: str, path: Path | None, capture: Capture, placements: list[Placement],
                     warning: str | None = None) -> TopologySource:
    names = {h.host for h in capture.hosts}
    placed = [p for p in placements if p.host in names and p.topology]
    sources: dict[str, int] = {}
    for p in placed:
        key = p.source or f"provider:{p.provider}"
        sources[key] = sources.get(key, 0) + 1
    return TopologySource(origin=origin, path=str(path) if path else None, hosts=len(names), placed=len(placed),
                          sources=dict(sorted(sources.items())), warning=warning)


def resolve_placements(capture: Capture, inventory: Path | None = None,
                       paths: Paths | None = None) -> tuple[list[Placement], TopologySource]:
    """The placements an analysis uses, and where they came from: `inventory` (over the stored ones, host by
    host), else the capture's placements.json when it places a host, else the config directory's
    inventory.json, else none. A malformed placements.json is a ParseError, unless `inventory` replaces it."""
    from fabricase.providers.static import INVENTORY_FILE

    hosts = [h.host for h in capture.hosts]
    if inventory is not None:
        try:
            stored, warning = load_placements(capture.root) or [], None
        except ParseError as exc:
            stored, warning = [], f"{exc} (ignored: --inventory replaces it)"
        placements = merge_placements(stored, inventory_placements(inventory, hosts))
        return placements, _topology_source("inventory", inventory, capture, placements, warning)
    try:
        stored = load_placements(capture.root)
    except ParseError as exc:
        raise ParseError(f"{exc.message}; fix or remove it, or give --inventory FILE", where=exc.where) from exc
    stored_path = capture.root / PLACEMENTS_FILE
    captured = set(hosts)
    if stored is not None and any(p.topology for p in stored if p.host in captured):
        return stored, _topology_source("capture", stored_path, capture, stored)
    config_file = paths.config / INVENTORY_FILE if paths else None
    if config_file is not None and config_file.is_file():
        placements = merge_placements(stored or [], inventory_placements(config_file, hosts))
        return placements, _topology_source("config-inventory", config_file, capture, placements)
    if stored is not None:
        return stored, _topology_source("capture", stored_path, capture, stored)
    return [], _topology_source("none", None, capture, [])


def store_placements(capture: Capture, placements: list[Placement], source: TopologySource) -> TopologySource:
    """Write the placements into the capture directory; a failure becomes the report's warning, because the
    analysis itself does not need the file."""
    try:
        return dataclasses.replace(source, stored_in=str(write_placements(capture.root, placements)))
    except CaptureError as exc:
        warning = "; ".join(w for w in (source.warning, f"placements not stored: {exc}") if w)
        return dataclasses.replace(source, warning=warning)


def inventory_topology(path: Path | None, paths: Paths | None = None) -> dict[str, list[str]]:
    """The static inventory's switches and racks: the file given, else the one in the config directory."""
    from fabricase.providers.static import TOPOLOGY_FIELDS, config_inventory, load_inventory

    file = path or (config_inventory(paths) if paths else None)
    if file is None:
        return {}
    inventory = load_inventory(file)
    return {host: [f"{k}:{entry[k]}" for k in TOPOLOGY_FIELDS if entry.get(k)] for host, entry in inventory.items()}


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


class _KernelLogs(Mapping[str, str | None]):
    """host -> its captured kernel log, read only when the timeline asks for that host."""

    def __init__(self, capture: Capture) -> None:
        self._hosts = {hc.host: hc for hc in capture.hosts}

    def __getitem__(self, host: str) -> str | None:
        hc = self._hosts[host]
        try:
            return hc.text("cmd:kernel-log")
        finally:
            hc.release()

    def __iter__(self) -> Iterator[str]:
        return iter(self._hosts)

    def __len__(self) -> int:
        return len(self._hosts)


def make_draft(capture: Capture, findings: list[Finding], *, provider: str, symptom: str,
               severity: Severity, placements: list[Placement], bundle_id: str | None,
               escalation_id: str | None, checks: Mapping[str, Any] | None = None,
               events: Sequence[EscalationEvent] = ()) -> TicketDraft:
    """The ticket for the provider's desk: what was found, where, since when, what was ruled out (`checks`:
    templates.ruled_out.checks_run(capture.hosts), computed here when not given) and what we ask for."""
    from fabricase.templates import render_draft
    from fabricase.templates.ruled_out import checks_run

    return render_draft(provider=provider, symptom=symptom, severity=severity, findings=findings,
                        hosts=host_summaries(capture), placements=placements, bundle_id=bundle_id,
                        capture_created_at=capture.created_at, escalation_id=escalation_id,
                        checks=checks if checks is not None else checks_run(capture.hosts),
                        kernel_logs=_KernelLogs(capture), events=events)


def _epoch(created_at: str) -> int:
    try:
        return int(datetime.strptime(created_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp())
    except ValueError:
        return 0


def findings_json(findings: list[Finding]) -> str:
    return json.dumps([f.to_dict() for f in findings], indent=2, sort_keys=True) + "\n"


def desk_of(provider: str, paths: Paths | None = None) -> str:
    """The desk that takes a provider's cases, whose limits its filings are fitted to and whose ticket template
    is rendered (bundler.limits.DESK_LIMITS): the static provider's configured desk (`[providers.static] desk`,
    outbox by default), else the provider's own."""
    from fabricase.bundler.limits import DESK_LIMITS
    from fabricase.config import provider_profile

    if provider == "static":
        desk = str(provider_profile(paths, "static").get("desk", "outbox")) if paths is not None else "outbox"
        return desk if desk in DESK_LIMITS else "generic"
    return provider if provider in DESK_LIMITS else "generic"


def fit_draft(draft: TicketDraft, desk: str) -> TicketDraft:
    """The draft with its body fitted to the desk's length limit (bundler.body.fit_ticket)."""
    from fabricase.bundler.body import fit_ticket

    return fit_ticket(draft, desk)


def make_redactor(capture: Capture, *, pseudonymize: bool = False, key: bytes | None = None) -> Redactor:
    """Secrets are always redacted; host names, addresses, MACs, GUIDs and users too when `pseudonymize`, with
    pseudonyms under `key` (the tracker keeps one per escalation: Tracker.pseudonym_key)."""
    from fabricase.redact import Redactor

    return Redactor(pseudonymize=pseudonymize, key=key, hosts=[hc.host for hc in capture.hosts])


def redact_draft(draft: TicketDraft, redactor: Redactor) -> TicketDraft:
    """The draft as the desk will see it: the same redaction as the bundle, so no secret reaches a ticket."""
    return dataclasses.replace(
        draft,
        title=redactor.redact_text("ticket.md", draft.title),
        body=redactor.redact_text("ticket.md", draft.body),
        summary=redactor.redact_text("summary.md", draft.summary) if draft.summary else draft.summary,
        hosts=[redactor.redact_text("hosts", h) for h in draft.hosts],
    )


def bundle_scope(capture: Capture) -> str:
    """The pseudonym-key scope of a capture bundled outside any escalation."""
    return f"capture:{Path(capture.root).resolve()}"


def build_bundle_for(capture: Capture, findings: list[Finding], draft: TicketDraft, out: Path, *,
                     placements: list[Placement] | None = None,
                     samples: dict[str, list[MetricSample]] | None = None, symptom: str = "",
                     redactor: Redactor | None = None) -> Bundle:
    """The evidence bundle: the capture directory, findings, the ticket draft, the summaries (Markdown, and JSON
    fitted to the draft's desk), the HTML report (`samples`: what analyze_capture put in samples_out; without
    them the report reads the capture again), and reproduce.sh with the capture script it runs."""
    from fabricase.bundler.archive import build_bundle
    from fabricase.bundler.limits import desk_limits
    from fabricase.bundler.reproduce import capture_script, reproduce_script
    from fabricase.bundler.summary import SummaryInput, fit_summary
    from fabricase.report import html_report

    summary = fit_summary(SummaryInput(
        title=draft.title, symptom=symptom or draft.title, severity=str(draft.severity), captured_at=capture.created_at,
        findings=findings, hosts=host_summaries(capture), placements=placements or [],
    ), desk_limits(desk_of(draft.provider)).attachment_max_bytes)
    extra = {
        "findings.json": findings_json(findings).encode(),
        "ticket.md": (draft.title + "\n\n" + draft.body).encode(),
        "summary.md": (draft.summary or "").encode(),
        summary.name: summary.data,
        "report.html": html_report(capture, findings, placements or [], samples),
        "reproduce.sh": reproduce_script(capture).encode(),
        "capture-script.sh": capture_script(capture).encode(),
    }
    return build_bundle(capture.root, out, extra=extra, mtime=_epoch(capture.created_at),
                        redactor=redactor or make_redactor(capture))


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
    requests: list[PlannedRequest] = field(default_factory=list)  # --dry-run: what filing would send
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase (open_escalation)


_SERIOUS = (Severity.CRITICAL, Severity.MAJOR)


def coverage(capture: Capture, findings: list[Finding],
             placements: list[Placement]) -> tuple[list[str], dict[str, str], list[tuple[None, str]]]:
    """What an escalation covers: the hosts with a major or critical finding (every captured host when none
    has: the symptom is the whole job's), their instance ids, and the shared components found at fault."""
    faulty = sorted({f.host for f in findings if f.host and f.severity in _SERIOUS})
    hosts = faulty or [hc.host for hc in capture.hosts]
    instances = {p.host: p.instance_id for p in placements if p.instance_id and p.host in hosts}
    shared = sorted({(None, f.component) for f in findings if f.host is None and f.severity in _SERIOUS},
                    key=lambda hc: hc[1])
    return hosts, instances, shared


def refuse_duplicates(tracker: Tracker, provider: str, hosts: list[str], instances: dict[str, str],
                      shared: list[tuple[None, str]]) -> None:
    """Raise DuplicateError, naming each open escalation that already covers one of these, and what."""
    from fabricase.filing import explain_duplicates

    found = explain_duplicates(tracker, provider=provider, hosts=hosts, instances=instances, components=shared)
    if not found:
        return
    said = "; ".join(f"{esc.id} ({', '.join(what[:3])}{', ...' if len(what) > 3 else ''})" for esc, what in found)
    first = found[0][0].id
    raise DuplicateError(f"already covered by open escalation(s) {said}: add this evidence with "
                         f"`fabricase attach {first} FILE`, or file a new case anyway with --force",
                         where=provider, duplicates=[(esc.id, what) for esc, what in found])


class _Clock:
    """Seconds spent per phase of one run (`with clock("bundle"): ...`), for the record of where time goes."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.spent[phase] = round(self.spent.get(phase, 0.0) + time.perf_counter() - t0, 4)


def open_escalation(capture: Capture, paths: Paths, *, provider_name: str, symptom: str,
                    severity: Severity | None, dry_run: bool = False, pseudonymize: bool = False,
                    force: bool = False) -> OpenResult:
    """Analyze, locate, bundle, render, file and track one escalation for an existing capture. The result's
    `timings` say where the time went: locate, analyze, render, bundle, record, file (the desk, uploads included)."""
    from fabricase.filing import file_escalation
    from fabricase.providers import get_provider
    from fabricase.templates.ruled_out import checks_run
    from fabricase.tracker.store import Tracker

    clock = _Clock()
    provider = get_provider(provider_name, paths)
    with clock("locate"):
        located = [dataclasses.replace(p, source=p.source or f"provider:{provider_name}")
                   for p in provider.locate(host_summaries(capture))]
        try:
            stored = load_placements(capture.root) or []
        except ParseError as exc:
            raise ParseError(f"{exc.message}; fix or remove it before opening", where=exc.where) from exc
        # Stored before the bundle is built, so that the bundle carries them and re-analysis names the switch.
        placements = merge_placements(stored, located)
        write_placements(capture.root, placements)
    samples: dict[str, list[MetricSample]] = {}
    with clock("analyze"):
        findings = analyze_capture(capture, topology_of(placements), samples_out=samples)
    severity = severity or worst_severity(findings)
    desk = desk_of(provider_name, paths)
    with clock("render"):
        # The ticket is written for the desk that will read it: a static provider filing to Jira gets Jira's.
        draft_kw = dict(provider=desk if provider_name == "static" and desk != "outbox" else provider_name,
                        symptom=symptom, severity=severity, placements=placements, checks=checks_run(capture.hosts))
    bundle_kw = dict(placements=placements, samples=samples, symptom=symptom)

    if dry_run:
        key = None
        if pseudonymize:
            with Tracker.open(paths) as keys:
                key = keys.pseudonym_key(bundle_scope(capture))
        redactor = make_redactor(capture, pseudonymize=pseudonymize, key=key)
        with clock("render"):
            inner = make_draft(capture, findings, bundle_id=None, escalation_id=None, **draft_kw)
        bundle_path = paths.bundles / f"dry-run-{capture.root.name}.tar.gz"
        with clock("bundle"):
            bundle = build_bundle_for(capture, findings, inner, bundle_path, redactor=redactor, **bundle_kw)
        with clock("render"):
            draft = redact_draft(make_draft(capture, findings, bundle_id=bundle.bundle_id, escalation_id=None,
                                            **draft_kw), redactor)
        ticket = bundle_path.with_suffix("").with_suffix(".ticket.md")
        ticket.write_text(draft.title + "\n\n" + draft.body)
        requests = provider.plan_case(escalation_id="FC-dry-run", draft=fit_draft(draft, desk),
                                      bundle_path=bundle.path)
        return OpenResult(capture, findings, bundle, draft, None, ticket, placements=placements, requests=requests,
                          timings=clock.spent)

    with clock("record"):
        tracker = Tracker.open(paths)
        hosts, instances, shared = coverage(capture, findings, placements)
        if not force:
            refuse_duplicates(tracker, provider_name, hosts, instances, shared)
        components = sorted({(f.host, f.component) for f in findings}, key=lambda hc: (hc[0] or "", hc[1]))
        esc = tracker.create(provider=provider_name, title=symptom[:120], symptom=symptom, severity=severity,
                             hosts=hosts, components=components, instances=instances)
        redactor = make_redactor(capture, pseudonymize=pseudonymize,
                                 key=tracker.pseudonym_key(esc.id) if pseudonymize else None)
    with clock("render"):
        inner = make_draft(capture, findings, bundle_id=None, escalation_id=esc.id, **draft_kw)
    with clock("bundle"):
        bundle = build_bundle_for(capture, findings, inner,
                                  paths.bundles / f"{esc.id}-{capture.root.name}.tar.gz", redactor=redactor,
                                  **bundle_kw)
    with clock("record"):
        tracker.add_event(esc.id, "bundle", f"bundle {bundle.bundle_id[:16]} built", {"path": str(bundle.path)})
    with clock("render"):
        draft = redact_draft(make_draft(capture, findings, bundle_id=bundle.bundle_id, escalation_id=esc.id,
                                        **draft_kw), redactor)
    with clock("file"):
        # Idempotent: the intent is recorded before the desk is called, and a retry reconciles by the case marker.
        esc = file_escalation(tracker, provider, esc.id, fit_draft(draft, desk), bundle.path)
    ticket = Path(esc.ticket_path) if esc.ticket_path else bundle.path
    return OpenResult(capture, findings, bundle, draft, esc, ticket, filed_at=esc.ticket_path,
                      placements=placements, timings=clock.spent)


def evidence_bundle(capture: Capture, paths: Paths, esc: Escalation, *,
                    pseudonymize: bool = False) -> tuple[Bundle, list[Finding]]:
    """A new bundle of a capture for an existing escalation (`fabricase attach --capture`): analyzed with the
    capture's placements, rendered for the escalation's desk, redacted (with the escalation's pseudonym key when
    asked), written next to the escalation's first bundle."""
    from fabricase.templates.ruled_out import checks_run
    from fabricase.tracker.store import Tracker

    placements, _ = resolve_placements(capture, None, paths)
    samples: dict[str, list[MetricSample]] = {}
    findings = analyze_capture(capture, topology_of(placements), samples_out=samples)
    desk = desk_of(esc.provider, paths)
    provider = desk if esc.provider == "static" and desk != "outbox" else esc.provider
    key = None
    if pseudonymize:
        with Tracker.open(paths) as keys:
            key = keys.pseudonym_key(esc.id)
    redactor = make_redactor(capture, pseudonymize=pseudonymize, key=key)
    draft = make_draft(capture, findings, provider=provider, symptom=esc.symptom, severity=worst_severity(findings),
                       placements=placements, bundle_id=None, escalation_id=esc.id, checks=checks_run(capture.hosts))
    out = paths.bundles / f"{esc.id}-{Path(capture.root).name}.tar.gz"
    bundle = build_bundle_for(capture, findings, draft, out, placements=placements, samples=samples,
                              symptom=esc.symptom, redactor=redactor)
    return bundle, findings
