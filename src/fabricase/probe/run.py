"""Run a probe: the planned tests, round by round, across the captured hosts; their outputs into the capture.

Stages, in this order, each only when asked for:
- rdma: ib_write_bw (ib_read_bw, ib_send_bw on request) between ring pairs (probe.plan.pair_rounds: each host
  with two partners, both directions), rail to rail, one test per host per round, at most `per_switch` tests a
  switch when the topology is known;
- tcp: iperf3 between the same pairs (the front-end network);
- nccl: all_reduce_perf across the hosts, and when it falls short (or --bisect), the bisection
  (probe.plan.Bisection): halves at once, recurse into the slow ones, finish with pairs;
- gpu: `dcgmi diag -r N` on every host at once, where DCGM is installed.

Guard rails: a time budget for the whole probe and a limit per test (each command also runs under `timeout` on
its host); after every round the round's hosts are swept for anything left under the probe's tag (killed, and
reported on the results); Ctrl-C (or `stop`) ends the current round, sweeps, and keeps everything that finished.
Nothing here prints: progress goes through `on_result`. The stages themselves: fabricase.probe.stages.
"""

from __future__ import annotations

import secrets
import shlex
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fabricase.capturedir import utc_now
from fabricase.models import Capture, HostStatus
from fabricase.probe.exec import Exec, Outcome, Running
from fabricase.probe.facts import host_facts
from fabricase.probe.model import ProbeDoc, ProbeResult, ProbeTest, item_source, server_item_source
from fabricase.probe.store import NewItem, append_items, write_probe_doc

__all__ = [
    "RDMA_TOOLS",
    "STAGE_NAMES",
    "Probe",
    "ProbeOptions",
    "run_probe",
]

STAGE_NAMES = ("rdma", "tcp", "nccl", "gpu")
RDMA_TOOLS = ("ib_write_bw", "ib_read_bw", "ib_send_bw")
SERVER_START_S = 1.0  # a server's ssh session and listen socket come up before its client connects
CONNECT_RETRIES = 2
_NOT_CONNECTED = ("couldn't connect", "unable to connect", "connection refused", "failed to connect")


@dataclass(frozen=True)
class ProbeOptions:
    stages: tuple[str, ...] = ("rdma", "nccl")
    rdma_tools: tuple[str, ...] = ("ib_write_bw",)
    devices: tuple[str, ...] = ()  # rails by device name, the same on every host; () = from the capture
    ib_port: int | None = None  # None: each rail's port from the capture, else 1
    gid_index: int | None = None  # None: from the capture's GID table (RoCE), else none
    qps: int | None = None
    duration_s: int = 5  # ib_*_bw -D, iperf3 -t
    message_bytes: int = 8 * 1024 * 1024
    rdma_port: int = 18515  # perftest's TCP port for the handshake; each test of a round gets its own
    iperf_port: int = 5201
    nccl_min_bytes: str = "1M"
    nccl_max_bytes: str = "8G"
    nccl_iters: int = 20
    nccl_warmup: int = 5
    gpus_per_host: int | None = None  # nccl-tests -g; None: from the capture, else 1
    expect_pair_gbps: float | None = None  # the port rate a pair is held against (90% of it); None: capture
    expect_tcp_gbps: float | None = None
    expect_busbw: float | None = None
    bisect: bool = False  # bisect even when the whole set meets the expected busbw, or none is known
    dcgm_level: int = 1
    budget_s: float = 600.0
    test_timeout_s: float = 120.0
    per_switch: int | None = None
    switch_of: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "switch_of"}
        d["stages"], d["rdma_tools"], d["devices"] = list(self.stages), list(self.rdma_tools), list(self.devices)
        return d


@dataclass
class _Pending:
    """One test of a round while it runs."""

    test: ProbeTest
    server: Running | None = None
    client: Running | None = None
    started: float = 0.0
    outcome: Outcome | None = None
    server_outcome: Outcome | None = None
    tries: int = 0
    stored: bool = False


class Probe:
    """One probe while it runs: the budget, the rounds, what was recorded (the stages drive it)."""

    def __init__(self, capture: Capture, exec_: Exec, opts: ProbeOptions, *, on_result, stop) -> None:
        self.capture, self.exec, self.opts = capture, exec_, opts
        self.on_result = on_result or (lambda result: None)
        self.stop = stop or threading.Event()
        self.tag = f"fcp-{secrets.token_hex(4)}"
        self.deadline = time.monotonic() + opts.budget_s
        self.round = 0
        self.results: list[ProbeResult] = []
        self.items: dict[str, list[NewItem]] = {}
        self.hosts = [h.host for h in capture.hosts if h.status in (HostStatus.OK, HostStatus.PARTIAL)]
        self.facts = {h.host: host_facts(h) for h in capture.hosts if h.host in self.hosts}
        self.stopped: str | None = None
        self.expected: dict[str, Any] = {}
        self.notes: dict[str, Any] = {}
        self.counter = 0
        self.live: list[Running] = []  # everything started, so that an interrupt anywhere can stop it

    def started(self, running: Running) -> Running:
        self.live.append(running)
        return running

    def abort(self) -> None:
        """After an interrupt outside a round's wait: stop what runs here and sweep every host."""
        self.stopped = self.stopped or "interrupted"
        for running in self.live:
            running.stop("interrupted")
        self._sweep(set(self.hosts))

    # -- time ---------------------------------------------------------------------------------------------
    def left(self) -> float:
        return self.deadline - time.monotonic()

    def limit(self) -> float:
        return max(1.0, min(self.opts.test_timeout_s, self.left()))

    def halted(self, needed_s: float) -> bool:
        """True when the probe must not start another round (stopped, or the budget cannot hold it)."""
        if self.stop.is_set():
            self.stopped = self.stopped or "interrupted"
        elif self.left() < needed_s:
            self.stopped = self.stopped or f"time budget of {self.opts.budget_s:g} s reached"
        return self.stopped is not None

    def next_id(self, kind: str) -> str:
        self.counter += 1
        return f"r{self.round}-{kind}-{self.counter:03d}"

    # -- recording ----------------------------------------------------------------------------------------
    def keep(self, host: str, item: NewItem) -> None:
        self.items.setdefault(host, []).append(item)

    def record(self, result: ProbeResult) -> None:
        self.results.append(result)
        self.on_result(result)

    def not_started(self, n: int) -> None:
        """Planned tests that will not run (the probe stopped before their round)."""
        self.notes["not_started"] = self.notes.get("not_started", 0) + n

    def skip(self, tests: Sequence[ProbeTest]) -> None:
        for test in tests:
            self.record(ProbeResult(test, "skipped", error=f"not run: {self.stopped}"))

    # -- running a round ------------------------------------------------------------------------------------
    def _round(self, pending: list[_Pending], start: Callable[[], None],
               restart: Callable[[_Pending], bool] = lambda p: False) -> None:
        """Start a round, wait for it, collect it; Ctrl-C anywhere in it stops what runs and keeps the rest."""
        try:
            start()
            self._wait_all(pending, restart)
        except KeyboardInterrupt:
            self._interrupt(pending)
        try:
            self._finish(pending)
        except KeyboardInterrupt:
            self._interrupt(pending)
            self._finish(pending)

    def _interrupt(self, pending: list[_Pending]) -> None:
        self.stop.set()
        self.stopped = "interrupted"
        for p in pending:
            for side in (p.client, p.server):
                if side is not None:
                    side.stop("interrupted")
        for p in pending:
            if p.outcome is None:
                p.outcome = p.client.wait(5) if p.client is not None else Outcome(
                    p.test.reporter, "interrupted", None, b"", b"", 0.0, utc_now(), "interrupted before it started")

    def _wait_all(self, pending: list[_Pending], restart: Callable[[_Pending], bool]) -> None:
        """Wait for every client (or collective); a stop request is an interrupt."""
        while True:
            running = [p for p in pending if p.outcome is None]
            if not running:
                return
            for p in running:
                if p.client is not None and p.client.done():
                    out = p.client.wait(5)
                    if _not_connected(out) and restart(p):  # the server was not listening yet
                        continue
                    p.outcome = out
            if self.stop.is_set():
                raise KeyboardInterrupt
            time.sleep(0.05)

    def _finish(self, pending: list[_Pending]) -> None:
        """Collect servers, sweep the round's hosts, store the outputs, record the results (once)."""
        for p in pending:
            if p.server is not None and p.server_outcome is None:
                if not p.server.done() and not self.stop.is_set():
                    p.server.wait(min(10.0, self.opts.duration_s + 5))
                p.server.stop("timed-out" if not self.stop.is_set() else "interrupted")
                p.server_outcome = p.server.wait(5)
        leftovers = self._sweep({h for p in pending for h in p.test.hosts})
        for p in pending:
            if not p.stored:
                p.stored = True
                self._store(p, leftovers)
        self.live = [r for r in self.live if not r.done()]  # a fleet's worth of finished tests is not kept

    def _sweep(self, hosts: set[str]) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        runs = {h: threading.Thread(target=lambda h=h: found.__setitem__(h, self.exec.sweep(h, self.tag)),
                                    daemon=True) for h in sorted(hosts)}  # fmt: skip
        for t in runs.values():
            t.start()
        for t in runs.values():
            t.join(30)
        return {h: v for h, v in found.items() if v}

    def _store(self, p: _Pending, leftovers: dict[str, list[str]]) -> None:
        out, test = p.outcome, p.test
        assert out is not None
        self.keep(test.reporter, NewItem(item_source(test.id), out.stdout, out.rc, shlex.join(test.argv),
                                         round(out.duration_s * 1000, 1), out.error, out.stderr))
        if p.server_outcome is not None and test.server is not None:
            s = p.server_outcome
            self.keep(test.server, NewItem(server_item_source(test.id), s.stdout, s.rc, shlex.join(test.server_argv),
                                           round(s.duration_s * 1000, 1), s.error, s.stderr))
        left = tuple(f"{h}: {line}" for h in test.hosts for line in leftovers.get(h, ()))
        self.record(ProbeResult(test, out.status, error=out.error, duration_s=out.duration_s,
                                started_at=out.started_at, leftovers=left))

    def run_pairs(self, tests: list[ProbeTest], env: Mapping[str, str] | None = None) -> dict[str, Outcome]:
        """One round of server/client tests at once; the clients' outcomes by test id."""
        limit = self.limit()
        pending = [_Pending(t, started=time.monotonic()) for t in tests]

        def client(p: _Pending) -> Running:
            return self.started(self.exec.start(p.test.reporter, p.test.argv, tag=self.tag, limit_s=limit, env=env))

        def start() -> None:
            for p in pending:
                p.server = self.started(self.exec.start(p.test.server or "", p.test.server_argv, tag=self.tag,
                                                        limit_s=limit, env=env))
            time.sleep(SERVER_START_S)
            for p in pending:
                p.client = client(p)

        def restart(p: _Pending) -> bool:
            if p.tries >= CONNECT_RETRIES or p.server is None or p.server.done() or self.stop.is_set():
                return False
            p.tries += 1
            time.sleep(SERVER_START_S)
            p.client = client(p)
            return True

        self._round(pending, start, restart)
        return {p.test.id: p.outcome for p in pending if p.outcome is not None}

    def run_collectives(self, tests: list[ProbeTest], env: Mapping[str, str]) -> dict[str, Outcome]:
        limit = self.limit()
        pending = [_Pending(t, started=time.monotonic()) for t in tests]

        def start() -> None:
            for p in pending:
                p.client = self.started(self.exec.collective(p.test.hosts, p.test.argv, tag=self.tag,
                                                             limit_s=limit, env=env))

        self._round(pending, start)
        return {p.test.id: p.outcome for p in pending if p.outcome is not None}

    def run_each(self, tests: list[ProbeTest]) -> None:
        """Tests that run on one host each, all at once (dcgmi diag)."""
        limit = self.limit()
        pending = [_Pending(t, started=time.monotonic()) for t in tests]

        def start() -> None:
            for p in pending:
                p.client = self.started(self.exec.start(p.test.reporter, p.test.argv, tag=self.tag, limit_s=limit))

        self._round(pending, start)


def _not_connected(out: Outcome) -> bool:
    if out.status != "failed":
        return False
    text = (out.stderr + out.stdout).decode("utf-8", "replace").lower()
    return any(word in text for word in _NOT_CONNECTED)


def run_probe(capture: Capture, exec_: Exec, opts: ProbeOptions, *,
              on_result: Callable[[ProbeResult], None] | None = None,
              stop: threading.Event | None = None) -> ProbeDoc:
    """Run the stages over the capture's reachable hosts, store every output in the capture directory and write
    probe.json; returns what was written. Ctrl-C ends the probe early with what finished kept."""
    from fabricase.probe.stages import STAGES

    unknown = [s for s in opts.stages if s not in STAGES]
    if unknown:
        raise ValueError(f"unknown probe stage {unknown[0]!r}; valid: {', '.join(STAGE_NAMES)}")
    probe = Probe(capture, exec_, opts, on_result=on_result, stop=stop)
    try:
        for name in STAGE_NAMES:
            if name in opts.stages and not probe.stopped:
                STAGES[name](probe)
    except KeyboardInterrupt:
        probe.abort()
    finally:
        for host, items in probe.items.items():
            append_items(capture.root, host, items)
        stopped = probe.stopped
        if stopped and probe.notes.get("not_started"):
            stopped += f"; {probe.notes['not_started']} planned tests not started"
        doc = ProbeDoc(hosts=list(probe.hosts), results=probe.results, expected=probe.expected,
                       options={**opts.describe(), "tag": probe.tag}, interrupted=stopped is not None,
                       stopped_reason=stopped, transport=exec_.name, notes=probe.notes)
        write_probe_doc(capture.root, doc)
    return replace(doc)
