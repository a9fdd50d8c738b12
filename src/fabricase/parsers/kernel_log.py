"""Kernel log lines (journalctl -k, dmesg in its several time formats, /dev/kmsg) -> classified events.

Only the kinds that later stages act on are kept: network link down/up, NVIDIA Xid, NVSwitch SXid and PCIe
AER. Every other line is counted, not returned.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["KernelEvent", "KernelLog", "parse_kernel_line", "parse_kernel_log"]

_ISO = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
# Line prefixes (time stamp and log source), tried in order; the first that matches is stripped from the message.
_PREFIXES = (
    # dmesg --decode: "kern  :warn  : 2025-01-21T02:21:33,498559+00:00 msg"
    re.compile(rf"[a-z]+\s*:[a-z]+\s*:\s+(?P<ts>{_ISO})\s+(?P<msg>.*)", re.ASCII),
    # journalctl -k -o short-iso-precise: "2026-11-29T23:00:00.123456+0000 host kernel: msg"
    # and dmesg --time-format iso: "2026-11-29T23:00:00,123456+00:00 msg"
    re.compile(rf"(?P<ts>{_ISO})\s+(?:\S+\s+kernel(?:\[\d+\])?:\s+)?(?P<msg>.*)", re.ASCII),
    # journalctl -k (short) / syslog: "Nov 29 23:00:00 host kernel: msg"
    re.compile(r"(?P<ts>[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2})\s+\S+\s+kernel(?:\[\d+\])?:\s+(?P<msg>.*)", re.ASCII),
    # dmesg -T: "[Fri Aug 29 20:09:52 2025] msg"
    re.compile(r"\[(?P<ts>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})\]\s*(?P<msg>.*)", re.ASCII),
    # plain dmesg, optionally with a syslog priority: "[   12.345] msg", "<6>[    2.608284] msg"
    re.compile(r"(?:<\d+>)?\[\s*(?P<ts>\d+(?:\.\d+)?)\]\s*(?P<msg>.*)", re.ASCII),
    # /dev/kmsg record: "6,3964,206764307,-;msg" (microseconds since boot)
    re.compile(r"\d+,\d+,(?P<usec>\d+),[^;]*;(?P<msg>.*)", re.ASCII),
    # syslog excerpt without a time: "kernel: msg"
    re.compile(r"kernel(?:\[\d+\])?:\s+(?P<msg>.*)", re.ASCII),
)

_BDF = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_XID = re.compile(r"NVRM: Xid \(PCI:(?P<dev>[0-9a-fA-F:.]+)\): (?P<code>\d+)", re.ASCII)
_SXID = re.compile(r"SXid \(PCI:(?P<dev>[0-9a-fA-F:.]+)\): (?P<code>\d+)", re.ASCII)
_AER = re.compile(r"\bAER: (?!enabled\b)")
_AER_SOURCE = re.compile(rf"(?:received from|received:)\s+(?P<dev>{_BDF})", re.ASCII)
_LEADING_BDF = re.compile(rf"\S+ (?P<dev>{_BDF}):?\s", re.ASCII)
# "eth2: Link down", "eth0: Link is Down", "e1000e: eth0 NIC Link is Down", "eno1: Link is up at 1000 Mbps".
# A capital L and a letter-led name keep out "ata6: SATA link down" and "pciehp: Slot(1): Link Up".
_LINK = re.compile(
    r"(?:^|\s)(?P<iface>[A-Za-z][\w.@-]*):?\s+(?:NIC\s+)?Link\s+(?:is\s+)?(?P<state>[Dd]own|[Uu]p)\b", re.ASCII
)
_NOT_NETDEV = frozenset({"pciehp", "SATA", "PCIe"})


@dataclass(frozen=True)
class KernelEvent:
    """One classified kernel log line.

    timestamp: as logged (ISO 8601, ctime, or seconds since boot), None when the line had none.
    kind: "link-down" | "link-up" | "nvidia-xid" | "nvswitch-sxid" | "pcie-aer".
    device: PCI address as logged (Xid lines omit the function: "0000:3b:00"); interface: netdev name.
    code: the Xid/SXid number. line: 1-based line number in the log text.
    """

    timestamp: str | None
    message: str
    kind: str
    device: str | None = None
    interface: str | None = None
    code: int | None = None
    line: int | None = None


@dataclass
class KernelLog:
    """The classified events of one log, plus how many lines it had. Iterates over its events."""

    events: list[KernelEvent] = field(default_factory=list)
    total_lines: int = 0

    def __iter__(self) -> Iterator[KernelEvent]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def __getitem__(self, index: int) -> KernelEvent:
        return self.events[index]

    def of_kind(self, kind: str) -> list[KernelEvent]:
        return [e for e in self.events if e.kind == kind]


def _split_prefix(line: str) -> tuple[str | None, str]:
    for pattern in _PREFIXES:
        match = pattern.fullmatch(line)
        if match:
            groups = match.groupdict()
            if groups.get("usec") is not None:
                usec = int(groups["usec"])
                return f"{usec // 1_000_000}.{usec % 1_000_000:06d}", match.group("msg")
            return groups.get("ts"), match.group("msg")
    return None, line


def _classify(message: str) -> tuple[str, str | None, str | None, int | None] | None:
    """(kind, device, interface, code) for a line worth keeping, else None."""
    if match := _XID.search(message):
        return "nvidia-xid", match.group("dev"), None, int(match.group("code"))
    if match := _SXID.search(message):
        return "nvswitch-sxid", match.group("dev"), None, int(match.group("code"))
    if _AER.search(message):
        source = _AER_SOURCE.search(message) or _LEADING_BDF.match(message)
        return "pcie-aer", source.group("dev") if source else None, None, None
    match = _LINK.search(message)
    if match and match.group("iface") not in _NOT_NETDEV:
        kind = "link-down" if match.group("state").lower() == "down" else "link-up"
        device = _LEADING_BDF.match(message[: match.start("iface")] + " ")
        return kind, device.group("dev") if device else None, match.group("iface"), None
    return None


def parse_kernel_line(line: str, line_no: int | None = None) -> KernelEvent | None:
    """The event one log line records, or None when it is not one of the kept kinds."""
    timestamp, message = _split_prefix(line.rstrip())
    found = _classify(message)
    if found is None:
        return None
    kind, device, interface, code = found
    return KernelEvent(timestamp, message, kind, device, interface, code, line_no)


def parse_kernel_log(text: str | None) -> KernelLog:
    """Classified events of a whole kernel log, in log order; never raises on malformed lines."""
    log = KernelLog()
    for number, line in enumerate((text or "").splitlines(), start=1):
        log.total_lines += 1
        event = parse_kernel_line(line, number)
        if event is not None:
            log.events.append(event)
    return log
