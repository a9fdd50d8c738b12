"""Outputs of the RDMA tools: `ibstat`, `ibstatus`, `ibv_devinfo [-v]`, `rdma link`, `rdma statistic show`.

Each parser returns a report of port records (same canonical state names as parsers.rdma) plus the parse errors;
nothing raises on malformed text and nothing absent becomes 0.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass, field

from fabricase.parsers.numbers import to_float, to_int
from fabricase.parsers.rdma import parse_counter, parse_phys_state, parse_port_state, parse_rate

__all__ = [
    "IbPortStatus", "IbToolReport", "RdmaStatistics", "parse_ibstat", "parse_ibstatus", "parse_ibv_devinfo",
    "parse_rdma_link", "parse_rdma_statistic",
]  # fmt: skip


@dataclass
class IbPortStatus:
    device: str
    port: int
    state: str | None = None  # canonical: ACTIVE, DOWN, INIT, ARMED
    state_code: int | None = None
    phys_state: str | None = None  # canonical: LINK_UP, POLLING, DISABLED, ...
    phys_state_code: int | None = None
    rate_gbps: float | None = None
    width: int | None = None  # lanes
    speed: str | None = None  # "NDR", or ibv_devinfo's per-lane "25.0 Gbps"
    link_layer: str | None = None
    netdev: str | None = None
    fields: dict[str, str] = field(default_factory=dict)  # every key: value of the port, verbatim


@dataclass
class IbToolReport:
    ports: list[IbPortStatus] = field(default_factory=list)
    devices: dict[str, dict[str, str]] = field(default_factory=dict)  # device -> its key: value lines
    errors: list[str] = field(default_factory=list)

    def port(self, device: str, port: int = 1) -> IbPortStatus | None:
        return next((p for p in self.ports if p.device == device and p.port == port), None)


@dataclass
class RdmaStatistics:
    links: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


# Port numbers and widths are small: a bounded count of digits keeps int() from raising on thousands of them.
_LINK_NEW = re.compile(r"^link\s+(\S+)/([0-9]{1,9})\b\s*(.*)$")
_LINK_OLD = re.compile(r"^[0-9]+/[0-9]+:\s+(\S+)/([0-9]{1,9}):\s*(.*)$")
_LANE_SPEED = re.compile(r"([0-9]{1,12}(?:\.[0-9]{1,12})?)\s*Gbps", re.ASCII)
_WIDTH = re.compile(r"([0-9]{1,3})X", re.ASCII)


class _KeyValue(typing.NamedTuple):
    key: str
    value: str


def _kv(line: str) -> _KeyValue | None:
    """`  key : value` -> (key, value): the key is what stands before the first colon, and holds no tab.

    String operations, not the regex `^(\\s*)([^:\\t]+?)\\s*:\\s*(.*?)\\s*$`: its overlapping quantifiers take
    quadratic time on a long run of spaces (40,000 spaces took 19 s)."""
    before, colon, after = line.partition(":")
    if not colon:
        return None
    key = before.strip()
    if not key or "\t" in key:
        return None
    return _KeyValue(key, after.strip())


def _set_states(p: IbPortStatus, state: str | None, phys: str | None) -> None:
    if state is not None:
        p.state_code, p.state = parse_port_state(state)
    if phys is not None:
        p.phys_state_code, p.phys_state = parse_phys_state(phys)


def _finish_ibstat_port(p: IbPortStatus) -> None:
    f = p.fields
    _set_states(p, f.get("State"), f.get("Physical state"))
    rate = f.get("Rate")
    if rate is not None:  # "400", or on some versions "400 Gb/sec (4X NDR)"; "nan" and "inf" are not rates
        p.rate_gbps = to_float(rate.strip())
        if p.rate_gbps is None:
            p.rate_gbps = parse_rate(rate)[0]
    p.link_layer = f.get("Link layer")


_SHORTEST = 3  # no header, key or value line of these tools is shorter ("a: b"): shorter lines are skipped unread


def parse_ibstat(text: str) -> IbToolReport:
    """`ibstat`: "CA 'mlx5_0'" blocks with "Port N:" sections (State, Physical state, Rate, Link layer)."""
    report = IbToolReport()
    device: str | None = None
    port: IbPortStatus | None = None
    for line in text.splitlines():
        if len(line.strip()) < _SHORTEST:
            continue
        ca = re.match(r"^CA '([^']*)'\s*$", line)
        if ca:
            device, port = ca.group(1), None
            report.devices[device] = {}
            continue
        head = re.match(r"^\s+Port\s+([0-9]{1,9}):\s*$", line)
        if head and device is not None:
            port = IbPortStatus(device, int(head.group(1)))
            report.ports.append(port)
            continue
        kv = _kv(line)
        if kv and device is not None and line[:1].isspace():
            target = port.fields if port is not None else report.devices[device]
            target[kv.key] = kv.value
            continue
        # ibstat prints "ibpanic: ... failed" on stdout when a device vanishes mid-listing.
        report.errors.append(f"unrecognized line: {line.strip()[:80]!r}")
    for p in report.ports:
        _finish_ibstat_port(p)
    return report


def parse_ibstatus(text: str) -> IbToolReport:
    """`ibstatus`: "Infiniband device 'mlx5_0' port 1 status:" blocks of sysfs-style values."""
    report = IbToolReport()
    port: IbPortStatus | None = None
    for line in text.splitlines():
        if len(line.strip()) < _SHORTEST:
            continue
        head = re.match(r"^Infiniband device '([^']*)' port ([0-9]{1,9}) status:\s*$", line)
        if head:
            port = IbPortStatus(head.group(1), int(head.group(2)))
            report.ports.append(port)
            report.devices.setdefault(port.device, {})
            continue
        kv = _kv(line)
        if kv and port is not None:
            port.fields[kv.key] = kv.value
            continue
        report.errors.append(f"unrecognized line: {line.strip()[:80]!r}")
    for p in report.ports:
        _set_states(p, p.fields.get("state"), p.fields.get("phys state"))
        p.rate_gbps, p.width, p.speed = parse_rate(p.fields.get("rate"))
        p.link_layer = p.fields.get("link_layer")
    return report


def _finish_devinfo_port(p: IbPortStatus) -> None:
    f = p.fields
    _set_states(p, f.get("state"), f.get("phys_state"))
    p.link_layer = f.get("link_layer")
    width = _WIDTH.match(f.get("active_width", ""))
    lane = _LANE_SPEED.match(f.get("active_speed", ""))
    p.width = int(width.group(1)) if width else None
    p.speed = f"{lane.group(1)} Gbps" if lane else None
    if width and lane and (per_lane := to_float(lane.group(1))) is not None:
        p.rate_gbps = int(width.group(1)) * per_lane


def parse_ibv_devinfo(text: str) -> IbToolReport:
    """`ibv_devinfo`, `-v`, `-d DEV -i PORT` and `-l`: hca_id blocks; "port: N" opens a port's key: value list.

    Flag lists (device_cap_flags) and capability sections of `-v` are kept out of the records; lines before the
    first hca_id (a pasted prompt) are ignored.
    """
    report = IbToolReport()
    device: str | None = None
    port: IbPortStatus | None = None
    listing = False
    for line in text.splitlines():
        stripped = line.strip()
        if len(stripped) < _SHORTEST or stripped.startswith("#"):
            continue
        if re.match(r"^[0-9]+ HCAs? found:", stripped):
            listing = True
            continue
        kv = _kv(line)
        if kv and kv.key == "hca_id":
            device, port, listing = kv.value, None, False
            report.devices[device] = {}
            continue
        if listing and re.fullmatch(r"\S+", stripped):
            report.devices.setdefault(stripped, {})
            continue
        if device is None:
            report.errors.append(f"unrecognized line: {stripped[:80]!r}")
            continue
        if kv and kv.key == "port" and (number := to_int(kv.value)) is not None:
            port = IbPortStatus(device, number)
            report.ports.append(port)
            continue
        if kv and kv.value:
            (port.fields if port is not None else report.devices[device]).setdefault(kv.key, kv.value)
    for p in report.ports:
        _finish_devinfo_port(p)
    return report


def _records(text: str, starts: tuple[re.Pattern[str], ...]) -> list[tuple[str, int, str] | str]:
    """Join continuation lines (wrapped output) onto the record they belong to; other lines are returned as is."""
    out: list[tuple[str, int, list[str]] | str] = []
    current: list[str] | None = None  # the body's parts, joined once: `body += line` is quadratic in a long record
    for line in text.splitlines():
        stripped = line.strip()
        if 0 < len(stripped) < _SHORTEST:
            continue
        match = next((m for m in (p.match(stripped) for p in starts) if m), None) if stripped else None
        if match:
            current = [match.group(3)]
            out.append((match.group(1), int(match.group(2)), current))
        elif not stripped or stripped.startswith("$ "):
            current = None
            if stripped:
                out.append(stripped)
        elif current is not None:
            current.append(stripped)
        else:
            out.append(stripped)
    return [r if isinstance(r, str) else (r[0], r[1], " ".join(r[2])) for r in out]


def parse_rdma_link(text: str) -> IbToolReport:
    """`rdma link`: "link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev eth0" (iproute2 now), and the
    2017 "1/1: mlx5_0/1: ifname ib0 ... phys_state 5: LinkUp rate 100 Gb/sec (4X EDR) ... state 4: ACTIVE"."""
    report = IbToolReport()
    for record in _records(text, (_LINK_NEW, _LINK_OLD)):
        if isinstance(record, str):
            report.errors.append(f"unrecognized line: {record[:80]!r}")
            continue
        device, number, body = record
        p = IbPortStatus(device, number)
        state = re.search(r"(?:^|\s)state\s+((?:[0-9]+:\s*)?[A-Za-z_]+)", body)
        phys = re.search(r"(?:physical_state|phys_state)\s+((?:[0-9]+:\s*)?[A-Za-z_]+)", body)
        _set_states(p, state.group(1) if state else None, phys.group(1) if phys else None)
        netdev = re.search(r"(?:netdev|ifname)\s+(\S+)", body)
        p.netdev = netdev.group(1) if netdev else None
        layer = re.search(r"link_layer\s+(\S+)", body)
        p.link_layer = layer.group(1) if layer else None
        rate = re.search(r"rate\s+([0-9.]+ Gb/sec(?: \([^)]*\))?)", body)
        if rate:
            p.fields["rate"] = rate.group(1)
            p.rate_gbps, p.width, p.speed = parse_rate(rate.group(1))
        report.ports.append(p)
    return report


def parse_rdma_statistic(text: str) -> RdmaStatistics:
    """`rdma statistic show`: "link <dev>/<port>" then counter-name value pairs (lines may wrap)."""
    stats = RdmaStatistics()
    for record in _records(text, (_LINK_NEW,)):
        if isinstance(record, str):
            stats.errors.append(f"unrecognized line: {record[:80]!r}")
            continue
        device, number, body = record
        tokens = body.split()
        counters: dict[str, int] = {}
        i = 0
        while i + 1 < len(tokens):
            name, value = tokens[i], parse_counter(tokens[i + 1])
            if name == "optional-counters":  # the list of enabled optional counters, not a value
                i += 2
                continue
            if value is None:
                stats.errors.append(f"link {device}/{number}: {name!r} is not followed by a number")
                break
            counters[name] = value
            i += 2
        else:
            if i < len(tokens):
                stats.errors.append(f"link {device}/{number}: {tokens[i]!r} has no value")
        if counters:
            stats.links.setdefault((device, number), {}).update(counters)
    return stats
