"""Per-host analysis over a process pool: the rules of one host read only that host's items, so hosts are
analyzed side by side, one process per core. Python's own work (parsing, rules) holds the GIL, which is why
threads would not help and processes do.

The pool forks: children inherit the capture (its hosts and their lazily read items) and the per-host function
as they are, so nothing but results crosses a pipe, and a closure or lambda works as a hook (the parent's heap is
frozen for the garbage collector meanwhile, so that the children's collections leave it alone). Forking is only
safe in a process with one thread (a forked lock held by another thread stays held forever), so a process that
runs threads, a platform without fork, a small fleet, or FABRICASE_ANALYSIS_WORKERS=1 stays serial; results are
the same either way, in the same order (tests/analysis/test_golden_fleet.py compares both).

What a host's analysis changes on the host itself (its status and reason: a counter reset, a failure) is carried
back and applied to the parent's host, so that a capture analyzed in the pool reads as one analyzed serially.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fabricase.models import HostCapture, HostStatus
from fabricase.trace import debug
from fabricase.trace import hosts as host_count

__all__ = ["MIN_POOL_HOSTS", "Outcome", "apply_outcome", "fewer_collections", "map_hosts", "outcome_of",
           "pool_workers"]

T = TypeVar("T")
MIN_POOL_HOSTS = 64  # below this a fork and its pipes cost more than they save (a host takes a few ms)
_CHUNKS_PER_WORKER = 8  # small enough to even out slow hosts, large enough that a chunk's pickling is cheap
WORKERS_ENV = "FABRICASE_ANALYSIS_WORKERS"
# Allocations between young-generation collections while hosts are analyzed (CPython's default is 700). A host's
# analysis makes tens of thousands of short-lived, acyclic samples and items; at the default the collector ran
# every few hundred of them and re-walked the young objects each time: about a fifth of the analysis's CPU time
# (bench_analysis.py --full, 1,024 hosts). Cycles are still collected, only less often.
_YOUNG_THRESHOLD = 100_000


@dataclass
class Outcome(Generic[T]):
    """One host's result, or the failure `fn` raised (an exception of `catch`, else it propagates), and the host's
    status and reason after the work."""

    value: T | None
    error: BaseException | None
    status: HostStatus
    reason: str | None


def pool_workers(hosts: int) -> int:
    """How many processes analyze `hosts` hosts: 1 (serial) unless the fleet is large enough, the machine has
    more than one core for us, fork is available and this process runs no other thread. The --debug trace says
    which, and why."""
    env = os.environ.get(WORKERS_ENV, "").strip()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    wanted = int(env) if env.isdigit() and int(env) > 0 else cores
    serial = _serial_reason(hosts, wanted, env)
    if serial is not None:
        debug("analysis: %s in this process (serial: %s)", host_count(hosts), serial)
        return 1
    debug("analysis: %s in %d forked processes", host_count(hosts), min(wanted, hosts))
    return min(wanted, hosts)


def _serial_reason(hosts: int, wanted: int, env: str) -> str | None:
    """Why the analysis of `hosts` hosts stays in this process, or None when a pool may run."""
    if hosts < MIN_POOL_HOSTS:
        return f"fewer than {MIN_POOL_HOSTS} hosts"
    if wanted < 2:
        return f"{WORKERS_ENV}={env}" if env else "one core available"
    if threading.active_count() > 1:  # a forked lock held by another thread would stay held
        return f"{threading.active_count()} threads run in this process, and forking is unsafe then"
    if "fork" not in multiprocessing.get_all_start_methods():
        return "this platform cannot fork"
    return None


# Set in the parent just before the fork and read by the children: (hosts, fn, exception types to catch).
_JOB: tuple[Sequence[HostCapture], Callable[[HostCapture], Any], tuple[type[BaseException], ...]] | None = None


def _one(hc: HostCapture, fn: Callable[[HostCapture], T], catch: tuple[type[BaseException], ...]) -> Outcome[T]:
    try:
        value, error = fn(hc), None
    except catch as exc:
        value, error = None, exc
    return Outcome(value, error, hc.status, hc.reason)


def outcome_of(hc: HostCapture, fn: Callable[[HostCapture], T],
               catch: tuple[type[BaseException], ...] = ()) -> Outcome[T]:
    """`fn(hc)` as map_hosts runs it for one host, ready to cross a pipe (another process's worker: the
    recording worker of pipeline.collect)."""
    with fewer_collections():
        return _portable(_one(hc, fn, catch))


def _chunk(bounds: tuple[int, int]) -> list[Outcome]:
    assert _JOB is not None, "pool child without a job"
    hosts, fn, catch = _JOB
    return [_portable(_one(hosts[i], fn, catch)) for i in range(*bounds)]


def _portable(outcome: Outcome) -> Outcome:
    """An exception crosses the pipe without its traceback and cause (which may not pickle); what a caller reads
    of a caught error is its own attributes."""
    if outcome.error is not None:
        outcome.error.__cause__ = outcome.error.__context__ = None
        outcome.error.__traceback__ = None
    return outcome


def _bounds(n: int, workers: int) -> list[tuple[int, int]]:
    size = max(1, -(-n // (workers * _CHUNKS_PER_WORKER)))
    return [(start, min(start + size, n)) for start in range(0, n, size)]


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """The garbage collector's young generation collected every _YOUNG_THRESHOLD allocations, not 700, for the
    duration (the process's thresholds are restored after; a pool's children inherit them when forked)."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], _YOUNG_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def map_hosts(hosts: Sequence[HostCapture], fn: Callable[[HostCapture], T],
              catch: tuple[type[BaseException], ...] = ()) -> list[Outcome[T]]:
    """`fn(hc)` for every host, in order, in a pool of processes when pool_workers says so; the host's status and
    reason as the work left them are applied to `hosts` here too. `fn`'s result and the exceptions in `catch`
    must pickle when a pool runs (an exception class needs its constructor's arguments in `args`, or
    __reduce__)."""
    with fewer_collections():
        return _map_hosts(hosts, fn, catch)


def _map_hosts(hosts: Sequence[HostCapture], fn: Callable[[HostCapture], T],
               catch: tuple[type[BaseException], ...]) -> list[Outcome[T]]:
    global _JOB
    workers = pool_workers(len(hosts))
    if workers < 2:
        return [_one(hc, fn, catch) for hc in hosts]
    _JOB = (hosts, fn, catch)
    # The parent's objects go to the collector's permanent generation while the children run: a child's full
    # collection would otherwise walk the whole inherited heap (the capture, the CLI's state) and, by touching
    # each object's header, copy its pages. bench_fleet.py, 1,024 HGX hosts: the analysis took 40 s, now 20 s.
    gc.freeze()
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            outcomes = [o for part in pool.map(_chunk, _bounds(len(hosts), workers)) for o in part]
    finally:
        gc.unfreeze()
        _JOB = None
    for hc, outcome in zip(hosts, outcomes, strict=True):
        apply_outcome(hc, outcome)
    return outcomes


def apply_outcome(hc: HostCapture, outcome: Outcome) -> None:
    """The host's status and reason as its analysis elsewhere (a pool child, a recording worker) left them."""
    if (hc.status, hc.reason) != (outcome.status, outcome.reason):
        hc.status, hc.reason = outcome.status, outcome.reason
