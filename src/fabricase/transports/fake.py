"""A transport that replays recorded capture streams, with latency and hangs injected: for fan-out tests and the
fleet-scale benchmark, where a thousand real hosts are not at hand. Deterministic for a given seed."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

from fabricase.models import HostStatus
from fabricase.transports.base import HostRun, Transport
from fabricase.transports.fanout import run_fanout

__all__ = ["FakeTransport"]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class FakeTransport(Transport):
    name = "fake"

    def __init__(self, stream_for: Callable[[str], bytes], *, fanout: int = 64,
                 latency_s: tuple[float, float] = (0.02, 0.2), hang_fraction: float = 0.0,
                 deadline_s: float | None = None, seed: int = 0) -> None:
        self.stream_for = stream_for
        self.fanout = fanout
        self.latency_s = latency_s
        self.hang_fraction = hang_fraction
        self.deadline_s = deadline_s
        self.seed = seed
        self.stop = threading.Event()

    def _plan(self, host: str) -> tuple[float, bool]:
        rng = random.Random(f"{self.seed}:{host}")
        return rng.uniform(*self.latency_s), rng.random() < self.hang_fraction

    def hangs(self, host: str) -> bool:
        return self._plan(host)[1]

    def run(self, hosts: list[str], script: str, *, timeout_s: float,
            on_done: Callable[[HostRun], None] | None = None) -> list[HostRun]:
        def run_one(host: str, deadline: float) -> HostRun:
            started = _now()
            latency, hang = self._plan(host)
            limit = min(timeout_s, max(deadline - time.monotonic(), 0))
            if hang or latency > limit:
                self.stop.wait(limit)  # a hung host: nothing comes back before the timeout
                return HostRun(host, HostStatus.TIMED_OUT, reason=f"capture did not finish within {timeout_s:g}s",
                               started_at=started, finished_at=_now())
            self.stop.wait(latency)
            return HostRun(host, HostStatus.OK, stdout=self.stream_for(host), rc=0, started_at=started,
                           finished_at=_now())

        return run_fanout(hosts, run_one, fanout=self.fanout, deadline_s=self.deadline_s, on_done=on_done,
                          stop=self.stop)
