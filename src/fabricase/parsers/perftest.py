"""perftest output (`ib_write_bw`, `ib_read_bw`, `ib_send_bw`, `ib_*_lat`) -> one result record.

A capture may hold the server's and the client's output one after the other, or interleaved line by line (both
ran in one terminal); the header fields are taken from the first test header and each message size is kept
once (the first row seen for it). Bandwidth is reported as printed and also in Gb/s: perftest's "MB/sec" is
MiB/s (it divides by 0x100000; newer versions say "MiB/sec"), so 1 MB/sec = 8 * 1048576 / 1e9 Gb/s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabricase.parsers.numbers import to_int

__all__ = ["LatencyRow", "PerftestResult", "PerftestRow", "mb_per_s_to_gbps", "parse_perftest"]

_MIB_BITS = 8 * 1048576 / 1e9
_TITLE = re.compile(r"^\s*(?P<title>[A-Za-z_][\w ]*?\s(?P<kind>BW|Latency|Lat)\s+Test)\s*$")
# "Dual-port       : OFF\t\tDevice         : mlx5_0": one or two "key : value" pairs on a line, read by _pairs.
_KEY_CHARS = frozenset("_*.() -")
_VALUE = re.compile(r"\s*(\S+)")
_MAX_COLONS = 16  # a header line holds one or two pairs; past this many colons a line is not one
_KEYS = {
    "Device": "device", "Link type": "link_type", "Transport type": "transport", "Connection type": "connection",
    "Number of qps": "qps", "Mtu": "mtu", "GID index": "gid_index", "TX depth": "tx_depth",
}  # fmt: skip
_INT_KEYS = frozenset({"qps", "mtu", "gid_index", "tx_depth"})
_BW_HEADER = re.compile(r"#bytes\s+#iterations\s+BW[ _]peak\[(?P<unit>Gb/sec|MB/sec|MiB/sec)\]", re.IGNORECASE)
_LAT_HEADER = re.compile(r"#bytes\s+#iterations\s+t_min\[usec\]")
# At most 20 digits a side: perftest prints no longer number, and int() of thousands of digits raises.
_NUMBER = re.compile(r"[0-9]{1,20}(?:\.[0-9]{1,20})?", re.ASCII)
_COMMAND = re.compile(r"^\s*[#$]\s*(?P<cmd>(?:\S*/)?ib_(?:write|read|send|atomic)_(?:bw|lat)\b.*)$")
_FAILURE = re.compile(r"(?i)\b(?:couldn'?t|can'?t|cannot|unable to|failed|failure|error|not found|invalid)\b")
_WARNING = re.compile(r"(?i)conflicting cpu frequency|cpu frequency is not max|warning")
_WC_STATUS = re.compile(r"Failed status (?P<status>[0-9]{1,10})(?![\w.])")
_LAT_FIELDS = ("t_min_us", "t_max_us", "t_typical_us", "t_avg_us", "t_stdev_us", "t_p99_us", "t_p999_us")


def mb_per_s_to_gbps(value: float) -> float:
    """perftest MB/sec (MiB/s) to Gb/s."""
    return value * _MIB_BITS


@dataclass(frozen=True)
class PerftestRow:
    """One bandwidth row. bw_* are as printed (unit on the result); *_gbps converted to Gb/s.

    bw_peak is None where perftest prints 0.00 for a peak it did not measure (duration mode, `-D`).
    """

    bytes: int
    iterations: int
    bw_peak: float | None
    bw_avg: float
    msg_rate_mpps: float | None
    bw_peak_gbps: float | None
    bw_avg_gbps: float


@dataclass(frozen=True)
class LatencyRow:
    """One latency row, microseconds; the percentile columns are absent on old perftest versions."""

    bytes: int
    iterations: int
    t_min_us: float | None = None
    t_max_us: float | None = None
    t_typical_us: float | None = None
    t_avg_us: float | None = None
    t_stdev_us: float | None = None
    t_p99_us: float | None = None
    t_p999_us: float | None = None


@dataclass
class PerftestResult:
    """A perftest run. test: the title ("RDMA_Write BW Test"); kind "bw" | "lat" | None.

    port: from an echoed command line (`-i 1`, `--ib-port=1`) when there is one; perftest does not print it.
    errors: failures the tool printed (connection, QP, completion errors) and parse problems ("parse: ...").
    """

    test: str | None = None
    kind: str | None = None
    device: str | None = None
    port: int | None = None
    link_type: str | None = None
    transport: str | None = None
    connection: str | None = None
    mtu: int | None = None
    qps: int | None = None
    gid_index: int | None = None
    tx_depth: int | None = None
    bw_unit: str | None = None  # "Gb/sec" (--report_gbits), or "MB/sec" / "MiB/sec" (both MiB/s)
    command: str | None = None
    server: str | None = None  # the host the client connected to, from the echoed command line
    rows: list[PerftestRow] = field(default_factory=list)
    latency: list[LatencyRow] = field(default_factory=list)
    sections: int = 0  # test headers seen (2 when server and client output were captured together)
    completion_status: int | None = None  # "Failed status 12": the ibv_wc_status of a failed completion
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def largest(self) -> PerftestRow | None:
        """The row with the largest message: the one to compare with the link rate."""
        return max(self.rows, key=lambda r: r.bytes, default=None)

    @property
    def ok(self) -> bool:
        return bool(self.rows or self.latency) and not self.errors


def _key_start(segment: str) -> int | None:
    """Where the key ending `segment` starts: its last run of key characters ([\\w*.() -]), from the first ASCII
    letter in it; None when there is none."""
    start = len(segment)
    while start and (segment[start - 1].isalnum() or segment[start - 1] in _KEY_CHARS):
        start -= 1
    return next((i for i in range(start, len(segment)) if segment[i].isascii() and segment[i].isalpha()), None)


def _pairs(line: str) -> list[tuple[str, str]]:
    """The `key : value` pairs of a line, left to right, among its first _MAX_COLONS colons: the key is the run of
    key characters before a colon, the value the next word. One pass over the line; the regex it replaces tried a
    lazy key from every letter of a long line to its end (quadratic)."""
    pairs: list[tuple[str, str]] = []
    start = 0
    for _ in range(_MAX_COLONS):
        colon = line.find(":", start)
        if colon < 0:
            break
        segment = line[start:colon].rstrip()
        key_at = _key_start(segment)
        value = _VALUE.match(line, colon + 1) if key_at is not None else None  # only after a key: one scan per pair
        if key_at is None or value is None:
            start = colon + 1
            continue
        pairs.append((segment[key_at:], value.group(1)))
        start = value.end()
    return pairs


def _numbers(line: str) -> list[str] | None:
    tokens = line.split()
    return tokens if tokens and all(_NUMBER.fullmatch(t) for t in tokens) else None


def _bw_row(tokens: list[str], unit: str) -> PerftestRow | None:
    if len(tokens) not in (4, 5) or "." in tokens[0] or "." in tokens[1]:
        return None
    peak: float | None = float(tokens[2])
    avg = float(tokens[3])
    if peak == 0.0 and avg > 0.0:
        peak = None
    rate = float(tokens[4]) if len(tokens) == 5 else None
    scale = 1.0 if unit == "Gb/sec" else _MIB_BITS
    peak_gbps = None if peak is None else peak * scale
    return PerftestRow(int(tokens[0]), int(tokens[1]), peak, avg, rate, peak_gbps, avg * scale)


def _lat_row(tokens: list[str]) -> LatencyRow | None:
    if not 3 <= len(tokens) <= 2 + len(_LAT_FIELDS) or "." in tokens[0] or "." in tokens[1]:
        return None
    values = dict(zip(_LAT_FIELDS, (float(t) for t in tokens[2:]), strict=False))
    return LatencyRow(int(tokens[0]), int(tokens[1]), **values)


# perftest options that take a value: what follows them is not the server's name.
_VALUE_OPTIONS = frozenset(
    {"-d", "-i", "-s", "-D", "-n", "-q", "-x", "-p", "-m", "-c", "-t", "-r", "-u", "-l", "-T", "-S", "-I", "-Q",
     "-w", "-y", "-o", "-E", "-J", "-j", "-K", "-k"}
)  # fmt: skip


def _apply_command(result: PerftestResult, command: str) -> None:
    result.command = result.command or command
    args = command.split()
    positional: list[str] = []
    i = 1
    while i < len(args):
        arg, nxt = args[i], args[i + 1] if i + 1 < len(args) else None
        port = to_int(nxt) if arg in ("-i", "--ib-port") else to_int(arg[10:]) if arg.startswith("--ib-port=") else None
        if port is not None:
            result.port = port
        elif arg in ("-d", "--ib-dev") and nxt and result.device is None:
            result.device = nxt
        elif arg.startswith("--ib-dev=") and result.device is None:
            result.device = arg[9:] or None
        if arg in _VALUE_OPTIONS or arg in ("--ib-port", "--ib-dev"):
            i += 2
            continue
        if not arg.startswith("-"):
            positional.append(arg)
        i += 1
    result.server = result.server or (positional[0] if positional else None)


def _apply_header(result: PerftestResult, pairs: list[tuple[str, str]]) -> None:
    for key, value in pairs:
        name = _KEYS.get(key.strip())
        if name is None or getattr(result, name) is not None:
            continue
        if name in _INT_KEYS:
            number = to_int(value.removesuffix("[B]"))
            if number is not None:
                setattr(result, name, number)
        else:
            setattr(result, name, value)


def _add_row(result: PerftestResult, row: PerftestRow | LatencyRow, seen: dict[int, object]) -> None:
    earlier = seen.get(row.bytes)
    if earlier is None:
        seen[row.bytes] = row
        (result.rows if isinstance(row, PerftestRow) else result.latency).append(row)  # type: ignore[arg-type]
    elif earlier != row:
        result.warnings.append(f"a second, different row for {row.bytes} bytes (kept the first)")


_MAX_LINES = 20_000  # a perftest run prints a few hundred lines (one row per message size, a few headers)


def parse_perftest(text: str | None) -> PerftestResult:
    """The test header, result rows and printed failures of perftest output; never raises."""
    result = PerftestResult()
    table: str | None = None  # "bw" or "lat": the kind of the last table header seen
    unit: str | None = None
    seen: dict[int, object] = {}
    warned: set[str] = set()
    lines = (text or "").splitlines()
    if len(lines) > _MAX_LINES:
        result.errors.append(f"parse: {len(lines)} lines: only the first {_MAX_LINES} are read")
        del lines[_MAX_LINES:]
    for raw in lines:
        line = raw.strip()
        if len(line) < 3 or set(line) <= set("-*"):  # no row ("1 2"), pair or title is shorter
            continue
        if match := _TITLE.match(raw):
            result.sections += 1
            result.test = result.test or match.group("title")
            result.kind = result.kind or ("bw" if match.group("kind") == "BW" else "lat")
            continue
        if match := _COMMAND.match(raw):
            _apply_command(result, match.group("cmd").strip())
            continue
        if match := _BW_HEADER.search(line):
            table, unit = "bw", match.group("unit")
            result.bw_unit = result.bw_unit or unit
            continue
        if _LAT_HEADER.search(line):
            table = "lat"
            continue
        tokens = _numbers(line)
        if tokens is not None:
            row = _bw_row(tokens, unit or "") if table == "bw" else _lat_row(tokens) if table == "lat" else None
            if row is not None and (table != "bw" or unit == result.bw_unit):
                _add_row(result, row, seen)
            elif len(tokens) >= 3:
                result.errors.append(f"parse: unrecognised result row: {line[:120]}")
            continue
        pairs = _pairs(line)
        known = any(_KEYS.get(key.strip()) for key, _ in pairs)
        if _WARNING.search(line):
            if line[:300] not in warned:  # a set: `in` on the list would be quadratic in the warnings
                warned.add(line[:300])
                result.warnings.append(line[:300])
        elif _FAILURE.search(line) and not known:
            result.errors.append(line[:300])
            if (status := _WC_STATUS.search(line)) and result.completion_status is None:
                result.completion_status = int(status.group("status"))
        elif known:
            _apply_header(result, pairs)
    if text and text.strip() and not (result.rows or result.latency or result.errors):
        result.errors.append("parse: no perftest result table found")
    return result
