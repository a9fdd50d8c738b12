"""The ticket's timeline: when the errors began and last showed in the kernel log, when the evidence was
captured, and what happened to the escalation since. Pure: text and records in, entries out.

Kernel-log time stamps are kept as logged (ISO 8601, syslog or ctime, or seconds since boot): the log's own
clock is the evidence, and a provider can match it to their events only if it is not rewritten.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fabricase.models import EscalationEvent, Finding
from fabricase.parsers.kernel_log import KernelEvent, parse_kernel_log

__all__ = ["KERNEL_ERROR_KINDS", "TimelineEntry", "kernel_log_entries", "timeline"]

# Finding kind -> the kernel-log event kinds behind it. Only errors: boot-time link training messages and
# driver warnings are not where a fault began.
KERNEL_ERROR_KINDS: dict[str, tuple[str, ...]] = {
    "nvidia-xid": ("nvidia-xid",),
    "nvswitch-sxid": ("nvswitch-sxid",),
    "kernel-link-down": ("link-down",),
    "nic-firmware-fault": ("nic-fatal",),
    "kernel-pcie-aer": ("pcie-aer",),
}
_SECONDS = re.compile(r"\d+(?:\.\d+)?")


@dataclass(frozen=True)
class TimelineEntry:
    at: str
    what: str


def kernel_log_entries(findings: Iterable[Finding], logs: Mapping[str, str | None]) -> list[TimelineEntry]:
    """First and last kernel-log error of each host with a kernel-log finding, in host order.

    `logs` maps a host to its captured kernel log; only hosts with such findings are looked up, so a lazy
    mapping reads no more than those logs. Lines without a time stamp cannot be placed and are skipped.
    """
    wanted: dict[str, set[str]] = {}
    for f in findings:
        if f.host and f.kind in KERNEL_ERROR_KINDS:
            wanted.setdefault(f.host, set()).update(KERNEL_ERROR_KINDS[f.kind])
    entries = []
    for host in sorted(wanted):
        text = logs.get(host)
        if not text:
            continue
        events = [e for e in parse_kernel_log(text).events if e.kind in wanted[host] and e.timestamp]
        if not events:
            continue
        first, last = events[0], events[-1]
        if len(events) == 1:
            entries.append(TimelineEntry(_stamp(first), f"{host}: kernel-log error: {_describe(first)}"))
            continue
        entries.append(TimelineEntry(_stamp(first), f"{host}: first kernel-log error: {_describe(first)}"))
        entries.append(
            TimelineEntry(_stamp(last), f"{host}: last kernel-log error ({len(events)} in all): {_describe(last)}")
        )
    return entries


def timeline(
    *,
    capture_created_at: str,
    hosts_captured: int,
    kernel: Iterable[TimelineEntry] = (),
    events: Iterable[EscalationEvent] = (),
) -> list[TimelineEntry]:
    """Kernel-log errors (they come before the capture), the capture, then the escalation's events."""
    plural = "" if hosts_captured == 1 else "s"
    out = [*kernel, TimelineEntry(capture_created_at, f"evidence captured on {hosts_captured} host{plural}")]
    out += [TimelineEntry(e.at, f"{e.kind}: {e.detail}" if e.detail else e.kind) for e in events]
    return out


def _stamp(event: KernelEvent) -> str:
    stamp = event.timestamp or ""
    return f"{stamp} s after boot" if _SECONDS.fullmatch(stamp) else stamp


def _describe(event: KernelEvent) -> str:
    """A few words for one kernel-log event: what and where, as the log named it."""
    device = f" on {event.device}" if event.device else ""
    if event.kind == "nvidia-xid":
        return f"Xid {event.code}{device}"
    if event.kind == "nvswitch-sxid":
        return f"SXid {event.code}{device}"
    if event.kind == "link-down":
        return f"{event.interface or 'interface'} link down"
    if event.kind == "nic-fatal":
        return f"NIC {event.category or 'fatal error'}{device}"
    if event.kind == "pcie-aer":
        return f"PCIe AER {event.category or 'error'}{device}"
    return event.kind
