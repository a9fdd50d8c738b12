"""Parse the framed stream a capture script writes (see plan.py and docs/capture-format.md).

Pure: bytes in, records out. A stream cut short (host hung, connection dropped) yields every complete
item before the cut and says where it stopped; it never raises on bad input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fabricase.caps import MAX_ITEM_BYTES

__all__ = ["MAX_SNAPSHOT", "FramedItem", "SnapshotMark", "StreamResult", "parse_stream"]

_MAGIC = b"@@FC1 "


@dataclass
class FramedItem:
    collector: str
    kind: str  # file | command | stderr
    snapshot: int
    rc: int | None
    truncated: bool
    t0: float | None  # host uptime when a command started and ended
    t1: float | None
    source: str
    content: bytes
    offset: int = 0  # where content starts in the raw stream


@dataclass
class SnapshotMark:
    index: int
    epoch_start: float | None = None
    uptime_start: float | None = None
    epoch_end: float | None = None
    uptime_end: float | None = None


@dataclass
class StreamResult:
    items: list[FramedItem] = field(default_factory=list)
    snapshots: dict[int, SnapshotMark] = field(default_factory=dict)
    began: bool = False
    complete: bool = False  # the END marker was seen
    error: str | None = None  # why parsing stopped early, with the byte offset


MAX_SNAPSHOT = 10_000  # snapshot indexes a stream (and a capture directory's index) may use
_MAX_DIGITS = 18  # sizes, snapshots and exit codes of a real stream; more is not a number this format writes


def _num(text: bytes) -> float | None:
    if len(text) > 64:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _int(text: bytes) -> int | None:
    """A plain decimal (optional minus): int() would also take `1_000`, ` 7 ` and 5,000-digit strings."""
    digits = text[1:] if text[:1] == b"-" else text
    if not digits or len(digits) > _MAX_DIGITS or not digits.isdigit():
        return None
    return int(text)


def _parse_item_header(fields: list[bytes]) -> tuple[FramedItem, int] | None:
    # I <collector> <kind> <snapshot> <rc> <size> <truncated> <t0> <t1> <source...>
    if len(fields) != 10:
        return None
    collector, kind, snap, rc, size, trunc, t0, t1, source = fields[1:]
    n, snapshot = _int(size), _int(snap)
    if (n is None or n < 0 or snapshot is None or not 0 <= snapshot <= MAX_SNAPSHOT
            or kind not in (b"file", b"command", b"stderr")):
        return None
    item = FramedItem(
        collector=collector.decode("ascii", "replace"),
        kind=kind.decode(),
        snapshot=snapshot,
        rc=_int(rc),
        truncated=trunc == b"1",
        t0=_num(t0),
        t1=_num(t1),
        source=source.decode("utf-8", "surrogateescape"),
        content=b"",
    )
    return item, n


def _mark(result: StreamResult, fields: list[bytes]) -> bool:
    idx = _int(fields[1]) if len(fields) == 4 else None
    if idx is None or not 0 <= idx <= MAX_SNAPSHOT:
        return False
    mark = result.snapshots.setdefault(idx, SnapshotMark(idx))
    if fields[0] == b"S":
        mark.epoch_start, mark.uptime_start = _num(fields[2]), _num(fields[3])
    else:
        mark.epoch_end, mark.uptime_end = _num(fields[2]), _num(fields[3])
    return True


def parse_stream(data: bytes) -> StreamResult:
    """Every complete item of a framed stream, in order; never raises (StreamResult.error says where and why
    parsing stopped: a cut, bytes that are no frame, an item over caps.MAX_ITEM_BYTES)."""
    result = StreamResult()
    pos, end = 0, len(data)
    while pos < end:
        nl = data.find(b"\n", pos)
        if nl < 0:
            result.error = f"stream cut inside a frame header at byte {pos}"
            break
        line = data[pos:nl]
        if not line.startswith(_MAGIC):
            result.error = f"unexpected bytes at byte {pos} (not a frame header)"
            break
        fields = line[len(_MAGIC):].split(b" ", 9)
        pos = nl + 1
        tag = fields[0]
        if tag == b"BEGIN":
            result.began = True
        elif tag == b"END":
            result.complete = True
            break
        elif tag in (b"S", b"E"):
            if not _mark(result, fields):
                result.error = f"malformed snapshot marker at byte {pos}"
                break
        elif tag == b"I":
            parsed = _parse_item_header(fields)
            if parsed is None:
                result.error = f"malformed item header at byte {nl - len(line)}"
                break
            item, n = parsed
            if n > MAX_ITEM_BYTES:
                # No collector writes this much (commands are cut at 8 MB): refused here, not when analyzed.
                result.error = (f"item {item.source[:200]} (snapshot {item.snapshot}) is {n:,} bytes, over the "
                                f"{MAX_ITEM_BYTES // 2**20} MiB cap on one item, at byte {nl - len(line)}")
                break
            if pos + n + 1 > end or data[pos + n:pos + n + 1] != b"\n":
                result.error = f"stream cut inside item {item.source} (snapshot {item.snapshot}) at byte {pos}"
                break
            item.content = data[pos:pos + n]
            item.offset = pos
            pos += n + 1
            result.items.append(item)
        else:
            result.error = f"unknown frame {tag[:20]!r} at byte {nl - len(line)}"
            break
    if result.error is None and not result.complete:
        result.error = (
            "stream ended before the END marker (capture cut short)"
            if result.began
            else "empty stream: the capture script printed nothing"
        )
    return result
