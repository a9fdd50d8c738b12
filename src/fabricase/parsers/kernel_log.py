"""Kernel log lines (journalctl -k, dmesg in its several time formats, /dev/kmsg) -> classified events.

Only the kinds that later stages act on are kept: network link down/up, NVIDIA Xid (with the catalog's
component as category), NVSwitch SXid, PCIe AER (by severity), a PCIe link trained below its capability, and
NIC driver faults (firmware health/reset, command timeouts: "nic-fatal") and warnings (transmit timeouts,
module temperature, cable unplugged: "nic-warning"). Every other line is counted, not returned.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from fabricase.parsers.xid import XidInfo, sxid_info, xid_info

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
    re.compile(r"\d+,\d+,(?P<usec>[0-9]{1,20}),[^;]*;(?P<msg>.*)", re.ASCII),
    # syslog excerpt without a time: "kernel: msg"
    re.compile(r"kernel(?:\[\d+\])?:\s+(?P<msg>.*)", re.ASCII),
)

_BDF = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
# Codes and link numbers are a few digits; a longer run is not one (and int() of thousands of digits raises).
_XID = re.compile(r"NVRM: Xid \(PCI:(?P<dev>[0-9a-fA-F:.]+)\): (?P<code>[0-9]{1,10})(?![0-9])", re.ASCII)
_SXID = re.compile(r"SXid \(PCI:(?P<dev>[0-9a-fA-F:.]+)\): (?P<code>[0-9]{1,10})(?![0-9])", re.ASCII)
_AER = re.compile(r"\bAER: (?!enabled\b)")
_AER_SOURCE = re.compile(rf"(?:received from|received:)\s+(?P<dev>{_BDF})", re.ASCII)
_LEADING_BDF = re.compile(rf"\S+ (?P<dev>{_BDF}):?\s", re.ASCII)
# "eth2: Link down", "eth0: Link is Down", "e1000e: eth0 NIC Link is Down", "eno1: Link is up at 1000 Mbps".
# A capital L and a letter-led name keep out "ata6: SATA link down" and "pciehp: Slot(1): Link Up".
_LINK = re.compile(
    r"(?:^|\s)(?P<iface>[A-Za-z][\w.@-]*):?\s+(?:NIC\s+)?Link\s+(?:is\s+)?(?P<state>[Dd]own|[Uu]p)\b", re.ASCII
)
_NOT_NETDEV = frozenset({"pciehp", "SATA", "PCIe"})
# "NVLink: fatal error detected on link 14(...", "RLW_REMAP Nonfatal XC1 i0 Link 10 (", "Link 28 sourcetrack"
_NVLINK = re.compile(r"\b[Ll]ink (?P<link>-?[0-9]{1,9})\b", re.ASCII)
_FATALITY = re.compile(r"\b(?P<word>Non-?fatal|Fatal)\b", re.ASCII | re.IGNORECASE)
_AER_CLASSES = (
    (re.compile(r"Uncorrect\w* \(Non-Fatal\)|severity=Uncorrected \(Non-Fatal\)", re.I), "uncorrected-nonfatal"),
    (re.compile(r"Uncorrect\w* \(Fatal\)|severity=Uncorrected \(Fatal\)", re.I), "uncorrected-fatal"),
    (re.compile(r"\bCorrect(?:ed|able)\b", re.I), "corrected"),
)
_LIMITED = re.compile(rf"(?P<dev>{_BDF}): [\d.]+ Gb/s available PCIe bandwidth, limited by ", re.ASCII)
_NIC_DRIVER = re.compile(r"\b(?:mlx[45]_\w+|efa|bnxt_\w+|irdma|ice)\b", re.ASCII)
# NVIDIA NVSentinel treats the first group as fatal for the NIC (pkg/nicdriver/config.go; telemetry.md a.1.3).
# "A.*B" is written "^(?>.*?A).*B": the atomic group settles on the first A, so a line holding A many times is
# scanned once, not once per A (quadratic).
_NIC_FATAL = (
    (re.compile(r"health compromised|^(?>.*?poll_health).*miss count", re.I), "health-compromised"),
    (re.compile(r"unrecoverable hardware error|\bsynd 0x[0-9a-f]+:", re.I), "unrecoverable-error"),
    (re.compile(r"\b(?:fw|firmware) (?:fatal|reset)|sync[ _]reset|fw_reset|health recovery|device reset", re.I),
     "firmware-reset"),
    (re.compile(r"^(?>.*?wait_func).*timeout|timeout\. Will cause a leak of a command resource", re.I),
     "command-timeout"),
)
_NIC_WARNING = (
    (re.compile(r"^(?>.*?NETDEV WATCHDOG: ).*transmit queue \d+ timed out", re.I), "tx-timeout"),
    (re.compile(r"^(?>.*?Port module event).*(?:High|Over) Temperature|^(?>.*?module).*overheat", re.I),
     "module-temperature"),
    (re.compile(r"Cable unplugged", re.I), "cable-unplugged"),
    (re.compile(r"insufficient power on the PCIe slot", re.I), "pcie-slot-power"),
    (re.compile(r"^(?>.*?\bACCESS_REG\().*failed|mlx5_cmd_out_err", re.I), "command-error"),
)
_WATCHDOG_IF = re.compile(r"NETDEV WATCHDOG: (?P<iface>[\w.@-]+) ", re.ASCII)


@dataclass(frozen=True)
class KernelEvent:
    """One classified kernel log line.

    timestamp: as logged (ISO 8601, ctime, or seconds since boot), None when the line had none.
    kind: "link-down" | "link-up" | "nvidia-xid" | "nvswitch-sxid" | "pcie-aer" | "pcie-link-limited" |
    "nic-fatal" | "nic-warning".
    device: PCI address as logged (Xid lines omit the function: "0000:3b:00"); interface: netdev name.
    code: the Xid/SXid number. line: 1-based line number in the log text.
    category (derived, not compared): the catalog's component of an Xid/SXid (nvlink, pcie, memory, ...),
    the AER class (corrected, uncorrected-nonfatal, uncorrected-fatal), the NIC fault (health-compromised,
    unrecoverable-error, firmware-reset, command-timeout, tx-timeout, module-temperature, cable-unplugged,
    pcie-slot-power, command-error) or "bandwidth-limited".
    nvlink: the NVLink (GPU) or port (NVSwitch) an Xid/SXid names; fatal: the line's own Fatal/Non-fatal word.
    """

    timestamp: str | None
    message: str
    kind: str
    device: str | None = None
    interface: str | None = None
    code: int | None = None
    line: int | None = None
    category: str | None = field(default=None, compare=False)
    nvlink: int | None = field(default=None, compare=False)
    fatal: bool | None = field(default=None, compare=False)

    @property
    def xid(self) -> XidInfo | None:
        """The catalog entry of an Xid or SXid event, else None."""
        if self.code is None:
            return None
        if self.kind == "nvidia-xid":
            return xid_info(self.code)
        return sxid_info(self.code) if self.kind == "nvswitch-sxid" else None


@dataclass
class KernelLog:
    """The classified events of one log, plus how many lines it had. Iterates over its events."""

    events: list[KernelEvent] = field(default_factory=list)
    total_lines: int = 0
    errors: list[str] = field(default_factory=list)  # what was not read whole (lines over MAX_LINE)

    def __iter__(self) -> Iterator[KernelEvent]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def __getitem__(self, index: int) -> KernelEvent:
        return self.events[index]

    def of_kind(self, kind: str) -> list[KernelEvent]:
        return [e for e in self.events if e.kind == kind]


MAX_LINE = 16384
_MAX_ERRORS = 100


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


def _first(patterns: tuple[tuple[re.Pattern[str], str], ...], message: str) -> str | None:
    return next((name for pattern, name in patterns if pattern.search(message)), None)


def _code_event(kind: str, match: re.Match[str], message: str) -> dict:
    code = int(match.group("code"))
    tail = message[match.end() :]
    link = _NVLINK.search(tail)
    fatality = _FATALITY.search(tail)
    info = xid_info(code) if kind == "nvidia-xid" else sxid_info(code)
    return {
        "kind": kind, "device": match.group("dev"), "code": code, "category": info.component,
        "nvlink": int(link.group("link")) if link and not link.group("link").startswith("-") else None,
        "fatal": None if fatality is None else not fatality.group("word").lower().startswith("non"),
    }  # fmt: skip


def _nic_event(message: str) -> dict | None:
    if not _NIC_DRIVER.search(message) and "NETDEV WATCHDOG" not in message:
        return None
    for kind, patterns in (("nic-fatal", _NIC_FATAL), ("nic-warning", _NIC_WARNING)):
        category = _first(patterns, message)
        if category is not None:
            device = _LEADING_BDF.match(message)
            watchdog = _WATCHDOG_IF.search(message)
            return {"kind": kind, "device": device.group("dev") if device else None, "category": category,
                    "interface": watchdog.group("iface") if watchdog else None}
    return None


# Every kept kind's pattern holds one of these literals: a line with none of them is no event (a cheap first test
# that spares the twenty patterns below on the ordinary line).
_NEEDLES = ("Xid (", "AER: ", "Gb/s available", "Link", "mlx", "efa", "bnxt", "irdma", "ice", "NETDEV WATCHDOG")


def _classify(message: str) -> dict | None:
    """The KernelEvent fields (beyond time, message and line) of a line worth keeping, else None."""
    if not any(needle in message for needle in _NEEDLES):
        return None
    if match := _XID.search(message):
        return _code_event("nvidia-xid", match, message)
    if match := _SXID.search(message):
        return _code_event("nvswitch-sxid", match, message)
    if _AER.search(message):
        source = _AER_SOURCE.search(message) or _LEADING_BDF.match(message)
        return {"kind": "pcie-aer", "device": source.group("dev") if source else None,
                "category": _first(_AER_CLASSES, message)}
    if match := _LIMITED.search(message):
        return {"kind": "pcie-link-limited", "device": match.group("dev"), "category": "bandwidth-limited"}
    if nic := _nic_event(message):
        return nic
    match = _LINK.search(message)
    if match and match.group("iface") not in _NOT_NETDEV:
        kind = "link-down" if match.group("state").lower() == "down" else "link-up"
        device = _LEADING_BDF.match(message[: match.start("iface")] + " ")
        return {"kind": kind, "device": device.group("dev") if device else None, "interface": match.group("iface")}
    return None


def parse_kernel_line(line: str, line_no: int | None = None) -> KernelEvent | None:
    """The event one log line records, or None when it is not one of the kept kinds. Only the first
    MAX_LINE characters are read: printk cuts a line near 1 KiB, and a longer one is not the kernel's."""
    line = line[:MAX_LINE]
    if not any(needle in line for needle in _NEEDLES):  # the message is part of the line: no event in it
        return None
    timestamp, message = _split_prefix(line.rstrip())
    found = _classify(message)
    if found is None:
        return None
    return KernelEvent(timestamp, message, line=line_no, **found)


def parse_kernel_log(text: str | None) -> KernelLog:
    """Classified events of a whole kernel log, in log order; never raises on malformed lines."""
    log = KernelLog()
    for number, line in enumerate((text or "").splitlines(), start=1):
        log.total_lines += 1
        if not line or line.isspace():  # nothing to classify: a million blank lines cost a million skips
            continue
        if len(line) > MAX_LINE and len(log.errors) < _MAX_ERRORS:
            log.errors.append(f"line {number}: {len(line)} characters: only the first {MAX_LINE} are read")
        event = parse_kernel_line(line, number)
        if event is not None:
            log.events.append(event)
    return log
