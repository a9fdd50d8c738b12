"""The ticket's timeline: first and last kernel-log errors, the capture, the escalation's events."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
import ticket_cases as tc

from fabricase.models import EscalationEvent, Finding, Severity
from fabricase.templates.timeline import TimelineEntry, kernel_log_entries, timeline


class OnlyThese(Mapping):
    """A lazy map of kernel logs that fails the test when asked for a host it should not need."""

    def __init__(self, logs):
        self.logs = logs

    def __getitem__(self, host):
        if host not in self.logs:
            pytest.fail(f"read the kernel log of {host}, which has no kernel-log finding")
        return self.logs[host]

    def __iter__(self):
        return iter(self.logs)

    def __len__(self):
        return len(self.logs)

    def get(self, host, default=None):
        return self[host]


def test_first_and_last_kernel_log_error_of_each_host():
    entries = kernel_log_entries(tc.findings(), OnlyThese({"gpu002": tc.KERNEL_LOG_GPU002}))
    assert entries == [
        TimelineEntry("2024-05-14T08:02:11.204518+0000", "gpu002: first kernel-log error: eth3 link down"),
        TimelineEntry("2024-05-14T08:12:41.550190+0000", "gpu002: last kernel-log error (4 in all): eth3 link down"),
    ]


def test_only_the_kinds_behind_the_findings_count():
    log = (
        "[  812.004211] NVRM: Xid (PCI:0000:9b:00): 79, pid=0, GPU has fallen off the bus.\n"
        "[  815.100000] mlx5_core 0000:9c:00.1 eth3: Link down\n"
        "no time stamp: NVRM: Xid (PCI:0000:9b:00): 79, pid=0, GPU has fallen off the bus.\n"
    )
    xid = Finding("nvidia-xid", Severity.CRITICAL, "gpu004", "gpu:6", "Xid 79 GPU_HAS_FALLEN_OFF_THE_BUS x2")
    assert kernel_log_entries([xid], {"gpu004": log}) == [
        TimelineEntry("812.004211 s after boot", "gpu004: kernel-log error: Xid 79 on 0000:9b:00"),
    ]


def test_hosts_without_a_log_or_a_kernel_finding_add_nothing():
    link = Finding("kernel-link-down", Severity.MAJOR, "gpu009", "netdev:eth0", "s")
    shared = Finding("kernel-link-down", Severity.MAJOR, None, "switch:x", "s")
    rule = Finding("link-flap", Severity.MAJOR, "gpu001", "netdev:eth0", "s")
    assert kernel_log_entries([link, shared, rule], {"gpu009": None}) == []
    assert kernel_log_entries([link], {"gpu009": "eth0: Link down\n"}) == []  # no time stamp to place it


def test_timeline_order():
    kernel = [TimelineEntry("812.0 s after boot", "gpu004: kernel-log error: Xid 79")]
    events = [EscalationEvent("2024-05-14T09:00:00Z", "filed", "case-123"), EscalationEvent("2024-05-15T10:00:00Z",
                                                                                           "resolved", "")]
    assert timeline(capture_created_at="2024-05-14T08:30:00Z", hosts_captured=1, kernel=kernel, events=events) == [
        kernel[0],
        TimelineEntry("2024-05-14T08:30:00Z", "evidence captured on 1 host"),
        TimelineEntry("2024-05-14T09:00:00Z", "filed: case-123"),
        TimelineEntry("2024-05-15T10:00:00Z", "resolved"),
    ]
