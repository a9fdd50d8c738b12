"""The fan-out engine and the fake transport: bounded concurrency, timeouts, deadline, order, no host lost."""

from __future__ import annotations

import threading
import time

from fabricase.models import HostStatus
from fabricase.transports.base import HostRun
from fabricase.transports.fake import FakeTransport
from fabricase.transports.fanout import run_fanout

STREAM = b"@@FC1 BEGIN 1 1\n@@FC1 END\n"


def test_every_host_comes_back_in_order_with_bounded_concurrency():
    active, peak, lock = 0, 0, threading.Lock()

    def run_one(host, deadline):
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.01)
        with lock:
            active -= 1
        return HostRun(host, HostStatus.OK, stdout=host.encode())

    hosts = [f"h{i:03d}" for i in range(60)]
    seen = []
    runs = run_fanout(hosts, run_one, fanout=8, on_done=lambda r: seen.append(r.host))
    assert [r.host for r in runs] == hosts and sorted(seen) == hosts
    assert peak <= 8


def test_a_transport_bug_on_one_host_does_not_lose_the_others():
    def run_one(host, deadline):
        if host == "bad":
            raise RuntimeError("boom")
        return HostRun(host, HostStatus.OK)

    runs = run_fanout(["a", "bad", "c"], run_one, fanout=2)
    assert [r.status for r in runs] == [HostStatus.OK, HostStatus.FAILED, HostStatus.OK]
    assert "transport error: RuntimeError: boom" in runs[1].reason


def test_hosts_not_started_before_the_deadline_are_timed_out_with_that_reason():
    def run_one(host, deadline):
        time.sleep(0.3)
        return HostRun(host, HostStatus.OK)

    runs = run_fanout([f"h{i}" for i in range(6)], run_one, fanout=2, deadline_s=0.1)
    assert [r.status for r in runs[:2]] == [HostStatus.OK, HostStatus.OK]
    assert all(r.status == HostStatus.TIMED_OUT and "deadline" in r.reason for r in runs[2:])


def test_fake_transport_hangs_time_out_and_the_rest_answer():
    fake = FakeTransport(lambda h: STREAM, fanout=16, latency_s=(0.0, 0.01), hang_fraction=0.1, seed=3)
    hosts = [f"gpu{i:03d}" for i in range(100)]
    runs = fake.run(hosts, "", timeout_s=0.5)
    hung = {h for h in hosts if fake.hangs(h)}
    assert hung and len(hung) < 25
    assert {r.host for r in runs if r.status == HostStatus.TIMED_OUT} == hung
    assert all(r.stdout == STREAM for r in runs if r.host not in hung)
