"""Capture and analysis: targets -> transport -> capture -> parse/analyze. The CLI calls these; they never print.
Progress goes through callbacks. Where hosts sit: fabricase.placements; bundling, filing and tracking:
fabricase.escalate."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import gc
import multiprocessing
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fabricase import capture_write
from fabricase.capture_scan import scan_host
from fabricase.capturedir import (
    add_inputs,
    host_capture_from_stream,
    load_capture,
    prepare_capture_dir,
    utc_now,
    write_capture_meta,
    write_host,
    write_stream,
)
from fabricase.collectors import select_collectors
from fabricase.collectors.framing import parse_stream
from fabricase.collectors.plan import CapturePlan, compile_script
from fabricase.errors import (
    CaptureError,
    CaptureInterrupted,
    TargetError,
)
from fabricase.models import (
    Capture,
    Finding,
    HostCapture,
    HostStatus,
    MetricSample,
)
from fabricase.targets import Targets
from fabricase.trace import debug
from fabricase.trace import hosts as host_count
from fabricase.transports import HostRun, Transport, get_transport, is_local_name

if TYPE_CHECKING:
    from fabricase.analysis.pool import Outcome
    from fabricase.analysis.power import PowerStatement
    from fabricase.diagnosis import Diagnosis, HostHardware
    from fabricase.models import Placement


__all__ = [
    "CollectOptions",
    "Analysis",
    "analyze_capture",
    "collect",
    "default_via",
    "diagnose_capture",
    "expand_globs",
    "load_input",
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
    kubeconfig: str | None = None  # --via k8s: the kubeconfig file (else KUBECONFIG, ~/.kube/config, in-cluster)
    k8s_context: str | None = None  # its context (else the current one)
    k8s_namespace: str = "fabricase"  # where the fabricase-node DaemonSet runs
    k8s_debug_pods: bool = False  # enter nodes without a DaemonSet pod through a privileged debug pod
    k8s_debug_image: str | None = None  # that pod's image (needs sh and nsenter)
    # Analyze each host (with the diagnosis's hardware hook) in the recording worker as soon as it is written, so
    # that the analysis runs while the fan-out waits for slower hosts; the capture carries the results for
    # diagnose_capture (Capture.analyzed). For commands that diagnose the capture as collected.
    analyze_hosts: bool = False


def default_via(targets: Targets) -> str:
    """k8s for Kubernetes nodes, slurm for a running job's nodes (ssh once it has ended), local for this machine,
    else ssh."""
    if targets.k8s:
        return "k8s"
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


def _record_and_analyze(root: Path, run: HostRun, plan: CapturePlan, transport: str, version: int,
                        analyze: bool, stored: Path | None = None) -> Outcome | None:
    """_record_run, then, with `analyze`, the host loaded back as load_capture loads it and analyzed as
    diagnose_capture would (analysis.prepare_host with the hardware hook); None when that fails in any way: the
    diagnosis then analyzes the host itself, and says what is wrong there (recording never fails for it).
    `stored`: the stream is in that file already (capture_write.write_stream), not in run.stdout."""
    if stored is not None:
        try:
            run.stdout = stored.read_bytes()
        except OSError as exc:
            raise CaptureError(f"cannot read capture: {exc.strerror}", where=str(stored)) from exc
    _record_run(root, run, plan, transport, version, stored=stored is not None)
    if not analyze:
        return None
    from fabricase.analysis import prepare_host
    from fabricase.capturedir import load_host

    try:
        return prepare_host(load_host(root, run.host, version), _prepared_hook())
    except Exception:  # noqa: BLE001 - a second look, in the parent, reports it
        return None


def _prepared_hook() -> Callable:
    """The per-host hook the recording workers analyze with: diagnose_capture's (the hardware aliases). Capture.
    analyzed_with names it, so that only an analysis with this very hook takes the workers' results."""
    from fabricase.diagnosis import host_hardware

    return host_hardware


def _record_run(root: Path, run: HostRun, plan: CapturePlan, transport: str, version: int | None = None,
                stored: bool = False) -> None:
    """Index and store one host's stream (`stored`: its stream file is written already)."""
    version = version or capture_write.WRITTEN_VERSION
    raw = None if stored else run.stdout
    index = None
    try:
        if version >= 3:  # straight into index.fci, no item objects (capture_scan)
            scanned = scan_host(run.stdout, plan)
            stream, count, index = scanned.result, scanned.items, scanned.index
            hc = HostCapture(run.host, HostStatus.OK, "", snapshots=scanned.snapshots)
        else:
            stream = parse_stream(run.stdout)
            count = len(stream.items)
            hc = host_capture_from_stream(run.host, stream, plan)
    except Exception as exc:  # a bug met on one host's bytes: that host is failed, the fleet's capture goes on
        hc = HostCapture(run.host, HostStatus.FAILED, transport, started_at=run.started_at,
                         finished_at=run.finished_at,
                         reason=f"capture stream: cannot be indexed ({type(exc).__name__}: {str(exc)[:200]})")
        write_host(root, hc, raw, version)
        return
    hc.transport, hc.started_at, hc.finished_at = transport, run.started_at, run.finished_at
    hc.status, hc.reason = run.status, run.reason
    if run.status == HostStatus.OK and stream.error:
        # The script ran but what came back is incomplete or garbled: keep what parsed, say why.
        hc.status = HostStatus.PARTIAL if count else HostStatus.FAILED
        hc.reason = f"capture stream: {stream.error}"
    elif run.status != HostStatus.OK and count:
        hc.reason = f"{run.reason}; {count} items kept"
    write_host(root, hc, raw, version, index=index)


def _importing_fleet_step() -> threading.Thread:
    """analysis.import_fleet_step in a thread of its own, started now (a failed import is the fleet step's to
    report when it imports the same)."""
    def run() -> None:
        from fabricase.analysis import import_fleet_step

        with contextlib.suppress(ImportError):
            import_fleet_step()

    thread = threading.Thread(target=run, name="fabricase-import-fleet-step", daemon=True)
    thread.start()
    return thread


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
    (one per core), so a fleet is not serialized behind one core. A stream is stored in its host's folder as it
    arrives (one write) and the worker reads it there: streams waiting for a worker cost no memory here, so the
    fan-out never waits for the workers, and a host that hangs starts (and times out) as early as the fan-out
    reaches it. A stream that cannot be stored goes to the worker through the pipe instead (the worker then
    says why it cannot be written); those are bounded in bytes, not in count."""

    PARALLEL_FROM = 16
    IN_FLIGHT_BYTES = 256 * 2**20

    def __init__(self, root: Path, plan: CapturePlan, via: str, hosts: int, version: int,
                 analyze: bool = False) -> None:
        self.root, self.plan, self.via, self.version, self.analyze = root, plan, via, version, analyze
        self.pool: ProcessPoolExecutor | None = None
        self.futures: list[tuple[str, Future]] = []
        self.analyzed: dict[str, Outcome] = {}  # host -> its analysis, when the workers analyze (analyze_hosts)
        self.in_flight = 0
        self.room = threading.Condition()
        workers = min(os.cpu_count() or 1, 8)
        if hosts >= self.PARALLEL_FROM and workers > 1:
            # spawn, not fork: the transport's threads are running.
            self.pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
            # Each submit to a pool with no idle worker starts one: all of them now, while this process is small
            # (a new process counts its parent's pages until it runs its own program; once the fleet step's
            # modules were imported here, each worker's peak read 140 MiB for its 60).
            for _ in range(workers):
                self.pool.submit(int)
            debug("recording: %s in %d worker processes%s", host_count(hosts), workers,
                  ", each host analyzed as it is written" if analyze else "")
        else:
            debug("recording: %s in this process (%s)", host_count(hosts), f"fewer than {self.PARALLEL_FROM} hosts"
                  if hosts < self.PARALLEL_FROM else "one core")

    def record(self, run: HostRun) -> None:
        if self.pool is None:
            _record_run(self.root, run, self.plan, self.via, self.version)
            return
        try:
            stored: Path | None = write_stream(self.root, run.host, run.stdout)
        except CaptureError:
            stored = None
        size = 0 if stored else len(run.stdout)
        with self.room:
            self.room.wait_for(lambda: self.in_flight == 0 or self.in_flight + size <= self.IN_FLIGHT_BYTES)
            self.in_flight += size
        # A copy: the pool pickles later, in its own thread, and the caller drops run.stdout meanwhile.
        handed = dataclasses.replace(run, stdout=b"") if stored else dataclasses.replace(run)
        future = self.pool.submit(_record_and_analyze, self.root, handed, self.plan, self.via, self.version,
                                  self.analyze, stored)
        future.add_done_callback(lambda done: self._release(size, done))
        self.futures.append((run.host, future))

    def _release(self, size: int, done: Future) -> None:
        with self.room:
            self.in_flight -= size
            self.room.notify_all()
        if not self.analyze or done.cancelled() or done.exception() is not None:
            return  # close() says what went wrong
        if done.result() is not None:
            from fabricase.analysis import share_strings  # imported by now: the outcome's unpickling did

            share_strings(done.result())
        # The host's outcome, just loaded here (about 2,500 objects), stays until the fleet step: into the
        # collector's permanent generation with the rest of this process's heap, rather than walked by every
        # young collection until it is old (1,024 HGX hosts: 0.8 s of this process's CPU). Nothing is lost:
        # close() unfreezes, and a cycle frozen meanwhile is collected after.
        gc.freeze()

    def close(self) -> None:
        """Wait for every host to be written; a worker's error surfaces here."""
        try:
            for host, future in self.futures:
                outcome = future.result()
                if outcome is not None:
                    self.analyzed[host] = outcome
        finally:
            if self.pool is not None:
                self.pool.shutdown(cancel_futures=True)
            if self.analyze:
                gc.unfreeze()


def collect(targets: Targets, opts: CollectOptions, out_dir: Path,
            on_host: Callable[[HostRun], None] | None = None, transport: Transport | None = None,
            verify: bool = False, load: bool = True, capture_format: int | None = None) -> Capture | None:
    """Capture every target host into a new capture directory and load it back.

    Loaded unverified by default: every item was hashed from the bytes just written, and reading each one back
    only to hash it again costs a full pass over the capture (verify is for captures from elsewhere). With format
    3 the load reads each host's record and checks its index, and builds no item objects until a host is used.
    `transport` overrides the one named by opts.via (tests and benchmarks: the fake transport);
    `capture_format`: the format written, default capture_write.WRITTEN_VERSION (read at call time)."""
    from fabricase.analysis.pool import fewer_collections

    version = capture_format or capture_write.WRITTEN_VERSION
    plan = _plan(opts)
    nccl_logs = expand_globs(opts.nccl_logs, "--nccl-log")  # before any capture work: fail fast
    via = transport.name if transport else opts.via or default_via(targets)
    debug("collect: %s via %s%s, fanout %d, capture format %d", host_count(len(targets.hosts)), via,
          "" if transport or opts.via else " (chosen for these targets)", opts.fanout, version)
    job = {"job": targets.slurm or targets.job} if via == "slurm" else {}
    transport = transport or get_transport(via, fanout=opts.fanout, deadline_s=opts.deadline_s,
                                           ssh_options=opts.ssh_options, user=opts.user, gateways=opts.gateways,
                                           gateway_command=opts.gateway_command, kubeconfig=opts.kubeconfig,
                                           k8s_context=opts.k8s_context, k8s_namespace=opts.k8s_namespace,
                                           k8s_debug_pods=opts.k8s_debug_pods,
                                           k8s_debug_image=opts.k8s_debug_image, **job)
    root = prepare_capture_dir(out_dir)
    created = utc_now()
    write_capture_meta(root, plan=plan, targets={**targets.describe(), "via": via},
                       hosts=list(targets.hosts), created_at=created, version=version)
    if nccl_logs:
        add_inputs(root, "nccl-log", nccl_logs)
    script = compile_script(plan)
    timeout = opts.timeout_s or _host_budget(plan)

    recorder = _Recorder(root, plan, via, len(targets.hosts), version, analyze=opts.analyze_hosts)
    warm = _importing_fleet_step() if opts.analyze_hosts and recorder.pool is not None else None

    def done(run: HostRun) -> None:
        recorder.record(run)
        if on_host:
            on_host(run)
        run.stdout = b""  # handed over; a thousand hosts' streams must not pile up in memory

    try:
        with fewer_collections():  # the workers' outcomes pile up here: a full collection each time they grow
            runs = transport.run(list(targets.hosts), script, timeout_s=timeout, on_done=done)
        transport.record_extras(root)  # --via k8s: providerID, zone, instance type, for locate
        interrupted = any(r.reason == "interrupted" for r in runs)
        if interrupted:
            for host in targets.hosts[len(runs):]:  # the rest are recorded as never reached
                done(HostRun(host, HostStatus.FAILED, reason="not captured: interrupted"))
    finally:
        with fewer_collections():
            recorder.close()
        if warm is not None:
            warm.join()  # done long before: the analysis pool forks only in a process without other threads
    if interrupted:
        raise CaptureInterrupted("interrupted; what was gathered is kept here", where=str(root))
    if not load:
        return None
    capture = load_capture(root, verify=verify)
    if recorder.analyzed:
        capture.analyzed, capture.analyzed_with = recorder.analyzed, _prepared_hook()
    return capture


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
        try:
            return load_capture(dest)
        except CaptureError as exc:
            # Name the bundle's member, not the temporary folder it was extracted to (gone at exit).
            if exc.where and exc.where.startswith(tmp):
                exc.where = f"{path}: {exc.where[len(tmp):].lstrip(os.sep)}"
            raise
    return load_capture(path)


def analyze_capture(capture: Capture, topology: dict[str, list[str]] | None = None,
                    samples_out: dict[str, list[MetricSample]] | None = None) -> list[Finding]:
    """Findings for a capture; `topology` maps host -> its shared components (switch, rack, network node);
    `samples_out` receives the samples the report's heat map reads (see fabricase.analysis.analyze)."""
    from fabricase.analysis import analyze

    return analyze(capture, topology=topology, samples_out=samples_out)


@dataclass
class Analysis:
    """The analyze and diagnose stages' output: the raw findings (findings.json, `--json`), the diagnosis built from
    them (what people read), and what both took from the capture's items, so that nothing reads them again."""

    findings: list[Finding]
    diagnosis: Diagnosis
    samples: dict[str, list[MetricSample]]  # host -> the samples fleet statistics read (report heat map)
    hardware: dict[str, HostHardware]  # host -> its components' aliases and identity facts


def diagnose_capture(capture: Capture, topology: dict[str, list[str]] | None = None,
                     placements: list[Placement] | None = None) -> Analysis:
    """Findings and the diagnosis of a capture, in one read of each host's items. `topology`: host -> its shared
    components (placements.topology_of); `placements`: for the instance ids in each suspect's identity."""
    from fabricase.analysis import analyze
    from fabricase.analysis.pool import fewer_collections
    from fabricase.diagnosis import diagnose, host_hardware

    samples: dict[str, list[MetricSample]] = {}
    hardware: dict[str, HostHardware] = {}
    power: list[PowerStatement] = []
    with fewer_collections():
        findings = analyze(capture, topology=topology, samples_out=samples, per_host=host_hardware,
                           per_host_out=hardware, power_out=power)
        diagnosis = diagnose(findings, hosts=capture.hosts, hardware=hardware, samples=samples,
                             placements=placements or [], power=power)
    return Analysis(findings, diagnosis, samples, hardware)
