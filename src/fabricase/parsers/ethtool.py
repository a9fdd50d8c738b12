"""ethtool outputs: `-S` counters, link settings, `--show-fec`, `-i` driver info, `-m` module diagnostics, and the
`### <netdev>` sections that the capture commands print before each device's output.

Pure and total: any text gives a record; lines that cannot be read are named in the record's `errors`, and a
value that is absent or unreadable is None (or left out of a mapping), never 0.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from fabricase import native

__all__ = [
    "CounterTable",
    "EthtoolDriver",
    "EthtoolFec",
    "EthtoolLink",
    "ModuleInfo",
    "parse_ethtool_driver",
    "parse_ethtool_fec",
    "parse_ethtool_link",
    "parse_ethtool_module",
    "parse_ethtool_stats",
    "parse_int",
    "split_sections",
]

# Counters are u64 (20 digits); a longer run of digits is not a counter, and int() of thousands of digits raises.
_UINT = re.compile(r"[0-9]{1,40}", re.ASCII)
_MAX_ERRORS = 20


def parse_int(token: str | None) -> int | None:
    """A non-negative decimal integer of at most 40 digits, else None."""
    if token is None:
        return None
    token = token.strip()
    return int(token) if _UINT.fullmatch(token) else None


def _counter_line(line: str) -> tuple[str, int] | None:
    """ "     rx_packets: 12", bnxt_en "     [0]: rx_ucast_packets: 12" -> (name, value): the name is everything
    before the last colon. String operations: the regex it replaces (`^[ \\t]*([^\\n]*[^\\s:])[ \\t]*:`) was
    quadratic in a line of spaces."""
    name, colon, value = line.rpartition(":")
    name, value = name.strip(" \t"), value.strip(" \t\r")
    if not colon or not name or name[-1].isspace() or name[-1] == ":" or not _UINT.fullmatch(value):
        return None
    return name, int(value)


def _note(errors: list[str], message: str) -> None:
    """Record a parse error; past the cap only the count grows, so a garbage megabyte stays small."""
    if len(errors) < _MAX_ERRORS:
        errors.append(message)
    elif len(errors) == _MAX_ERRORS:
        errors.append("more unreadable lines not listed")


def split_sections(text: str | None) -> tuple[dict[str, str], list[str]]:
    """Split a multi-device command output at its `### <name>` header lines.

    Returns ({name: that device's output}, errors). Text before the first header is not attributed to any
    device and is reported; a repeated name keeps its first section.
    """
    sections: dict[str, str] = {}
    errors: list[str] = []
    parts = _split_at_headers(text or "")
    if parts[0].strip():
        errors.append("output before the first ### section header")
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in sections:
            _note(errors, f"repeated section {name!r} ignored")
        else:
            sections[name] = body
    return sections, errors


# A header line found by its leading "\n### " (the text is read with a "\n" in front): a literal prefix the regex
# engine searches for, where `^### ` in MULTILINE mode tries every position of a 10 kB output.
_HEADER = re.compile(r"\n### (\S+)[ \t]*\r?(?=\n|\Z)", re.ASCII)


def _split_at_headers(text: str) -> list[str]:
    """The text split at its header lines, a line `### <name>` (trailing blanks allowed): the text before the first
    header, then name, body, name, body...; each body runs from after its header's line break to the next header."""
    padded = "\n" + text
    parts, start = [], 1
    for match in _HEADER.finditer(padded):
        parts += (padded[start:match.start() + 1], match.group(1))
        start = match.end() + 1
    parts.append(padded[start:])
    return parts


class CounterTable(dict[str, int]):
    """`ethtool -S` counters by their driver's name, in output order; `errors` lists unreadable lines."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: list[str] = []


def parse_ethtool_stats(text: str | None) -> CounterTable:
    """`ethtool -S` output as {counter name: value}.

    Names are kept verbatim, including bnxt_en's per-ring "[0]: rx_discards" and ice's "rx_bytes.nic". The
    "NIC statistics:" header and blank lines are skipped; a line without an integer value is an error, and a
    repeated name keeps its first value.
    """
    table = CounterTable()
    if native.plain_counters is not None and text and text.isascii():  # C: the whole table in one pass
        lines = text.count("\n")
        names = _NAMES.get(lines)
        fast = native.plain_counters(text, names)
        if type(fast) is list:  # the counters named as in the last table of as many lines: only their values
            table.update(zip(names, fast, strict=True))  # type: ignore[arg-type]  # names is the tuple given
            return table
        if fast is not None:
            table.update(fast)
            if len(_NAMES) >= _MAX_LAYOUTS:
                _NAMES.clear()
            _NAMES[lines] = tuple(fast)
            return table
        return _counter_lines(text, table)  # not a plain table: the layouts and _plain_table say so too
    known = _known_layout(text or "")
    if known is not None:
        table.update(zip(*known, strict=True))
        return table
    fast = _plain_table(text or "")
    if fast is not None:
        table.update(fast)
        _learn_layout(text or "")
        return table
    return _counter_lines(text or "", table)


def _counter_lines(text: str, table: CounterTable) -> CounterTable:
    """parse_ethtool_stats line by line, each unreadable or repeated line named in table.errors."""
    for number, line in enumerate(text.split("\n"), 1):
        counter = _counter_line(line)
        if counter is None:
            stripped = line.strip()
            if stripped and not stripped.endswith("statistics:"):
                _note(table.errors, f"line {number}: not a counter: {stripped[:80]!r}")
        elif counter[0] in table:
            _note(table.errors, f"repeated counter {counter[0]!r} ignored")
        else:
            table[counter[0]] = counter[1]
    return table


# One plain counter line, "    rx_packets: 12", as _counter_line reads it: a name without colons or whitespace, a
# value of digits (spaces, tabs and carriage returns around either are stripped).
_PLAIN_LINE = re.compile(r"^[ \t]*([A-Za-z0-9_.\-]+)[ \t]*:[ \t\r]*([0-9]{1,40})[ \t\r]*$", re.ASCII | re.MULTILINE)


def _plain_table(text: str) -> dict[str, int] | None:
    """The counters of an output whose every line is a plain counter line, a blank line or a "... statistics:"
    header and whose names are all distinct (what drivers print, read in two regex passes rather than a Python
    loop over ~150 lines per port), else None: parse_ethtool_stats then reads it line by line and names errors."""
    pairs = _PLAIN_LINE.findall(text)
    for line in _PLAIN_LINE.sub("", text).split("\n"):
        stripped = line.strip()
        if stripped and not stripped.endswith("statistics:"):
            return None
    table = {name: int(value) for name, value in pairs}
    return table if len(table) == len(pairs) else None


class _Layout(NamedTuple):
    """A plain `ethtool -S` output with its values taken out: every port of a fleet prints one of a few. `fmt` is
    the text with "%s" for each value (a "%" of the text doubled); `pick` takes the values from text.split()."""

    names: tuple[str, ...]
    pick: operator.itemgetter
    fmt: str


_LAYOUTS: dict[tuple[int, str, str], list[_Layout]] = {}  # (token count, first, last but one token) -> layouts
# With the C extension: line count -> the counter names of the last plain table of that many lines. A port prints
# the same names every time, so native.plain_counters checks them in place and builds only the values.
_NAMES: dict[int, tuple[str, ...]] = {}
_MAX_LAYOUTS = 256


def _layout_key(tokens: list[str]) -> tuple[int, str, str]:
    return len(tokens), tokens[0], tokens[-2]


def _known_layout(text: str) -> tuple[tuple[str, ...], list[int]] | None:
    """(names, values) of an output that is a learned layout with other values, else None. Exact: the layout,
    filled with the values found, must give back the very text, and each value is 1-40 ASCII digits; the layout
    came from a text that _plain_table read, so this text reads the same. String operations in C, no regex."""
    tokens = text.split()
    if len(tokens) < 4:
        return None
    for layout in _LAYOUTS.get(_layout_key(tokens), ()):
        values = layout.pick(tokens)
        joined = "".join(values)
        if joined.isascii() and joined.isdigit() and max(map(len, values)) <= 40 and layout.fmt % values == text:
            return layout.names, list(map(int, values))
    return None


def _learn_layout(text: str) -> None:
    """Remember the layout of an output that _plain_table read, when each value is a token of its own (blank on
    both sides): then text.split() finds the values at the same places in every output of this layout."""
    names, picks, pieces, start, count = [], [], [], 0, 0
    for match in _PLAIN_LINE.finditer(text):
        begin, end = match.span(2)
        if not text[begin - 1].isspace():  # "rx_packets:12": the value is not a token of its own
            return
        piece = text[start:begin]
        count += len(piece.split())
        names.append(match.group(1))
        picks.append(count)
        pieces.append(piece.replace("%", "%%"))
        start, count = end, count + 1
    tokens = text.split()
    if len(picks) < 2 or len(tokens) < 4:  # itemgetter of one index gives a value, not a tuple
        return
    pieces.append(text[start:].replace("%", "%%"))
    if len(_LAYOUTS) >= _MAX_LAYOUTS:
        _LAYOUTS.clear()
    known = _LAYOUTS.setdefault(_layout_key(tokens), [])
    known.insert(0, _Layout(tuple(names), operator.itemgetter(*picks), "%s".join(pieces)))
    del known[4:]  # a few layouts can share a key; more is not a fleet


def _key_values(text: str | None) -> list[tuple[str, str]]:
    """Indented `Key: value` lines as (key, value); continuation lines (no colon) are skipped."""
    pairs = []
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            pairs.append((key.strip(), value.strip()))
    return pairs


_SPEED = re.compile(r"([0-9]{1,9})Mb/s", re.ASCII)


@dataclass
class EthtoolLink:
    """`ethtool <if>`: speed (Mb/s), duplex, lanes, auto-negotiation, port type, link detected."""

    interface: str | None = None
    speed_mbps: int | None = None
    duplex: str | None = None
    lanes: int | None = None
    autoneg: bool | None = None
    port: str | None = None
    link_detected: bool | None = None
    errors: list[str] = field(default_factory=list)


def _yes_no(value: str) -> bool | None:
    return {"yes": True, "on": True, "no": False, "off": False}.get(value.lower())


def parse_ethtool_link(text: str | None) -> EthtoolLink:
    """`ethtool <if>` link settings. "Unknown!" speed or duplex (no link) is None."""
    link = EthtoolLink()
    for key, value in _key_values(text):
        if key.startswith("Settings for"):
            link.interface = key.removeprefix("Settings for").strip() or None
        elif key == "Speed":
            match = _SPEED.fullmatch(value)
            link.speed_mbps = int(match.group(1)) if match else None
            if not match and not value.startswith("Unknown"):
                _note(link.errors, f"unreadable speed {value[:40]!r}")
        elif key == "Duplex":
            link.duplex = None if value.startswith("Unknown") or not value else value
        elif key == "Lanes":
            link.lanes = parse_int(value)
        elif key == "Auto-negotiation":
            link.autoneg = _yes_no(value)
        elif key == "Port":
            link.port = value or None
        elif key == "Link detected":
            link.link_detected = _yes_no(value)
    if text and text.strip() and link.interface is None:
        _note(link.errors, "no 'Settings for' line")
    return link


@dataclass
class EthtoolFec:
    """`ethtool --show-fec <if>`: configured encodings (e.g. ["Auto", "RS"]) and the active one ("RS")."""

    configured: list[str] = field(default_factory=list)
    active: str | None = None
    errors: list[str] = field(default_factory=list)


def parse_ethtool_fec(text: str | None) -> EthtoolFec:
    fec = EthtoolFec()
    for key, value in _key_values(text):
        if key.endswith("FEC encodings"):  # "Configured FEC encodings", older "Supported/Configured ..."
            fec.configured = value.split()
        elif key == "Active FEC encoding":
            fec.active = value or None
    if text and text.strip() and fec.active is None:
        _note(fec.errors, "no 'Active FEC encoding' line")
    return fec


@dataclass
class EthtoolDriver:
    """`ethtool -i <if>`: driver, its version, NIC firmware and the PCI address (bus-info)."""

    driver: str | None = None
    version: str | None = None
    firmware_version: str | None = None
    expansion_rom_version: str | None = None
    bus_info: str | None = None
    errors: list[str] = field(default_factory=list)


_DRIVER_KEYS = {
    "driver": "driver", "version": "version", "firmware-version": "firmware_version",
    "expansion-rom-version": "expansion_rom_version", "bus-info": "bus_info",
}  # fmt: skip


def parse_ethtool_driver(text: str | None) -> EthtoolDriver:
    info = EthtoolDriver()
    for key, value in _key_values(text):
        attr = _DRIVER_KEYS.get(key)
        if attr and value:
            setattr(info, attr, value)
    if text and text.strip() and info.driver is None:
        _note(info.errors, "no 'driver:' line")
    return info


@dataclass
class ModuleInfo:
    """`ethtool -m <if>`: transceiver identity and digital diagnostics.

    Optical powers are in mW per channel (1-based; SFP's single reading is channel 1). `alarms` lists the
    alarm and warning flags that read "On".
    """

    identifier: str | None = None
    vendor_name: str | None = None
    vendor_pn: str | None = None
    vendor_sn: str | None = None
    temperature_c: float | None = None
    voltage_v: float | None = None
    tx_power_mw: dict[int, float] = field(default_factory=dict)
    rx_power_mw: dict[int, float] = field(default_factory=dict)
    tx_bias_ma: dict[int, float] = field(default_factory=dict)
    alarms: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


_FLOAT = re.compile(r"[+-]?[0-9]{1,12}(?:\.[0-9]{1,12})?", re.ASCII)
_CHANNEL = re.compile(r"\(\s*(?:Channel|Lane)\s+([0-9]{1,2})\s*\)", re.ASCII)
_TEXT_KEYS = {"Identifier": "identifier", "Vendor name": "vendor_name", "Vendor PN": "vendor_pn",
              "Vendor SN": "vendor_sn"}  # fmt: skip


def _leading_float(value: str, unit: str) -> float | None:
    """The number before `unit` at the start of value ("45.12 degrees C / ...", "0.9603 mW / -0.18 dBm")."""
    number, _, rest = value.partition(" ")
    if not rest.startswith(unit) or not _FLOAT.fullmatch(number):
        return None
    return float(number)


def _module_reading(info: ModuleInfo, key: str, value: str) -> None:
    lowered = key.lower()
    if "threshold" in lowered:
        return
    match = _CHANNEL.search(key)
    channel = int(match.group(1)) if match else 1
    if "power" in lowered and ("rcvr" in lowered or "receiver" in lowered or "rx power" in lowered):
        target = info.rx_power_mw
    elif "power" in lowered and ("transmit" in lowered or "tx power" in lowered or "output power" in lowered):
        target = info.tx_power_mw
    elif "bias" in lowered:
        target = info.tx_bias_ma
    else:
        return
    reading = _leading_float(value, "mA" if target is info.tx_bias_ma else "mW")
    if reading is not None:
        target[channel] = reading


def parse_ethtool_module(text: str | None) -> ModuleInfo:
    """Module EEPROM decode (SFF-8472, SFF-8636, CMIS); hex dumps and unknown lines are skipped."""
    info = ModuleInfo()
    for key, value in _key_values(text):
        lowered = key.lower()
        if key in _TEXT_KEYS:
            setattr(info, _TEXT_KEYS[key], value or None)
        elif ("alarm" in lowered or "warning" in lowered) and "threshold" not in lowered:
            if value == "On":
                info.alarms.append(key)
        elif key == "Module temperature":
            info.temperature_c = _leading_float(value, "degrees")
        elif key == "Module voltage":
            info.voltage_v = _leading_float(value, "V")
        else:
            _module_reading(info, key, value)
    if text and text.strip() and info.identifier is None:
        _note(info.errors, "no 'Identifier' line: not a decoded module EEPROM")
    return info
