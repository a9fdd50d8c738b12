"""Run one capture per host, many at once: a bounded pool, a per-host timeout, an overall deadline.

Transports supply `run_one(host, deadline) -> HostRun`; this module schedules them. Every host comes back as
a HostRun, whatever happened: a host not started before the deadline is timed out with that reason, and
Ctrl-C stops starting new hosts, lets each running one end (the transport kills its own process), and marks
the rest as not captured.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from fabricase.models import HostStatus
from fabricase.transports.base import HostRun

__all__ = ["run_fanout"]

RunOne = Callable[[str, float], HostRun]  # (host, monotonic deadline) -> HostRun


def run_fanout(hosts: list[str], run_one: RunOne, *, fanout: int = 64, deadline_s: float | None = None,
               on_done: Callable[[HostRun], None] | None = None,
               stop: threading.Event | None = None) -> list[HostRun]:
    """Results in the order of `hosts`. `stop` (or Ctrl-C) ends the run early; nothing is lost."""
    stop = stop or threading.Event()
    deadline = time.monotonic() + deadline_s if deadline_s else float("inf")
    results: dict[str, HostRun] = {}
    pending = list(reversed(hosts))  # popped from the end: O(1)
    running: dict[Future, str] = {}

    def finish(run: HostRun) -> None:
        results[run.host] = run
        if on_done:
            on_done(run)

    finished: queue.SimpleQueue[Future] = queue.SimpleQueue()
    with ThreadPoolExecutor(max_workers=max(1, fanout), thread_name_prefix="fanout") as pool:
        while pending or running:
            try:
                while pending and len(running) < fanout and not stop.is_set() and time.monotonic() < deadline:
                    host = pending.pop()
                    future = pool.submit(run_one, host, deadline)
                    running[future] = host
                    future.add_done_callback(finished.put)  # O(1) per host, unlike wait() over all
                if not running:
                    break
                try:
                    future = finished.get(timeout=0.2)
                except queue.Empty:
                    continue
            except KeyboardInterrupt:
                # The running captures got the same SIGINT (same process group) and end on their own;
                # keep collecting them, start nothing new.
                stop.set()
                continue
            finish(_result(running.pop(future), future))
    reason = "interrupted" if stop.is_set() else "overall deadline reached before this host was started"
    status = HostStatus.FAILED if stop.is_set() else HostStatus.TIMED_OUT
    for host in pending:
        finish(HostRun(host, status, reason=f"not captured: {reason}"))
    return [results[h] for h in hosts if h in results]


def _result(host: str, fut: Future) -> HostRun:
    try:
        return fut.result()
    except KeyboardInterrupt:
        return HostRun(host, HostStatus.FAILED, reason="interrupted")
    except Exception as exc:  # a transport bug must not lose the other hosts
        status = HostStatus.FAILED
        return HostRun(host, status, reason=f"transport error: {type(exc).__name__}: {exc}"[:300])
