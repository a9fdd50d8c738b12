"""`ip -s -d link` (iproute2, any age; also `-s -s`): per interface state, MTU, flags, parent PCI device and the
counter blocks ("RX: bytes packets errors dropped missed mcast" and the next line's values)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabricase.parsers.ethtool import parse_int

__all__ = ["IpLink", "IpLinkReport", "parse_ip_link"]

# "4: eth0: <BROADCAST,...> mtu 9000 qdisc mq state UP ...", "7: eth0.100@eth0: <...>", "9: vf0@NONE: <...>"
_HEADER = re.compile(r"([0-9]{1,10}):\s+([^\s:@]+)(?:@(\S+?))?:\s+<([^>]*)>(.*)", re.ASCII)
_BLOCK = re.compile(r"(RX|TX)(?:\s+errors)?:\s*(.*)", re.ASCII)
_WORD_AFTER = ("mtu", "qdisc", "state", "mode", "group", "qlen", "parentbus", "parentdev", "master")


@dataclass
class IpLink:
    """One interface. counters: "rx_bytes", "rx_packets", "rx_errors", "rx_dropped", "rx_missed" (older iproute2:
    "rx_overrun"), "rx_mcast", "tx_carrier", "tx_collsns", ...; with -s -s also "rx_errors_crc",
    "rx_errors_length", "tx_errors_aborted", ...: `<direction>_<column>`, error detail as `<direction>_errors_<column>`.
    """

    index: int
    name: str
    parent: str | None = None  # after "@": a VLAN's lower device, or NONE
    flags: list[str] = field(default_factory=list)
    mtu: int | None = None
    state: str | None = None  # UP, DOWN, UNKNOWN, LOWERLAYERDOWN
    link_type: str | None = None  # ether, loopback, infiniband, none
    parentbus: str | None = None  # pci, virtio
    parentdev: str | None = None  # the PCI address of a physical port
    altnames: list[str] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)


@dataclass
class IpLinkReport:
    links: dict[str, IpLink] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def _words(text: str) -> dict[str, str]:
    """The value after each known keyword in a line of `word value` pairs."""
    tokens = text.split()
    found = {}
    for i, token in enumerate(tokens[:-1]):
        if token in _WORD_AFTER and token not in found:
            found[token] = tokens[i + 1]
    return found


def _apply_words(link: IpLink, text: str) -> None:
    words = _words(text)
    if "mtu" in words:
        link.mtu = parse_int(words["mtu"])
    if "state" in words:
        link.state = words["state"]
    if "parentbus" in words:
        link.parentbus = words["parentbus"]
    if "parentdev" in words:
        link.parentdev = words["parentdev"]


def _read_counters(link: IpLink, heading: str, columns: list[str], values: list[str], errors: list[str]) -> None:
    direction = heading[:2].lower()
    prefix = f"{direction}_errors_" if "errors" in heading.split(":")[0] else f"{direction}_"
    numbers = [parse_int(v) for v in values]
    if len(columns) != len(values) or any(n is None for n in numbers):
        errors.append(f"{link.name}: {heading.split(':')[0]} values do not match their columns")
        return
    for column, number in zip(columns, numbers, strict=True):
        link.counters.setdefault(prefix + column, number)  # type: ignore[arg-type]


def parse_ip_link(text: str | None) -> IpLinkReport:
    """Every interface in the output, by name. Lines that belong to no interface are errors.

    The counter blocks of SR-IOV VFs (after a "vf N" line) are not the interface's own and are skipped.
    """
    report = IpLinkReport()
    link: IpLink | None = None
    pending: tuple[str, list[str]] | None = None
    in_vf = False
    for number, raw in enumerate((text or "").splitlines(), 1):
        line = raw.strip()
        header = _HEADER.fullmatch(raw.rstrip())
        if header:
            index, name, parent, flags, rest = header.groups()
            link = IpLink(int(index), name, parent, [f for f in flags.split(",") if f])
            _apply_words(link, rest)
            report.links.setdefault(name, link)
            pending, in_vf = None, False
            continue
        if not line:
            continue
        if link is None:
            report.errors.append(f"line {number}: outside any interface: {line[:60]!r}")
            continue
        block = _BLOCK.fullmatch(line)
        if pending is not None:
            if block is None:
                if not in_vf:
                    _read_counters(link, pending[0], pending[1], line.split(), report.errors)
                pending = None
                continue
            report.errors.append(f"line {number}: {link.name}: {pending[0].split(':')[0]} has no values")
        if block:
            pending = (line, block.group(2).split())
        elif line.startswith("vf "):
            in_vf = True
        elif line.startswith("link/"):
            link.link_type = line.split()[0].removeprefix("link/") or None
            _apply_words(link, line)
        elif line.startswith("altname "):
            link.altnames.append(line.split(None, 1)[1])
        elif not in_vf:
            _apply_words(link, line)  # detail lines: parentbus/parentdev may sit on their own line
    return report
