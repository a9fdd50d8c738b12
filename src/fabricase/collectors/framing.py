"""Parse the framed stream a capture script writes (see plan.py and docs/capture-format.md).

Pure: bytes in, records out. A stream cut short (host hung, connection dropped) yields every complete
item before the cut and says where it stopped; it never raises on bad input.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from fabricase import native
from fabricase.caps import MAX_ITEM_BYTES

__all__ = ["MAX_SNAPSHOT", "FramedItem", "SnapshotMark", "StreamResult", "finish", "item_head", "parse_stream",
           "read_frame", "scan_stream"]

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


def _item_head(fields: list[bytes]) -> tuple[int, tuple] | None:
    """An item header's size and its FramedItem fields up to the source (collector ... t1), None if malformed.
    `fields`: the eight fields, and the source or nothing, last (it is not read)."""
    collector, kind, snap, rc, size, trunc, t0, t1, _ = fields
    n, snapshot, kind_text = _int(size), _int(snap), _KINDS.get(kind)
    if n is None or n < 0 or snapshot is None or not 0 <= snapshot <= MAX_SNAPSHOT or kind_text is None:
        return None
    return n, (collector.decode("ascii", "replace"), kind_text, snapshot, _int(rc), trunc == b"1", _num(t0),
               _num(t1))


_KINDS = {b"file": "file", b"command": "command", b"stderr": "stderr"}
# A whole item header line: its eight fields before the source (each with its space, one group: the memo's key)
# and the source, the rest of the line. No two ways to match a line (a field holds no space): linear time.
_ITEM_HEADER = re.compile(re.escape(_MAGIC) + rb"I ((?:[^ \n]* ){8})([^\n]*)\n")
_MISSING = (-1, ())


def parse_stream(data: bytes) -> StreamResult:
    """Every complete item of a framed stream, in order; never raises (StreamResult.error says where and why
    parsing stopped: a cut, bytes that are no frame, an item over caps.MAX_ITEM_BYTES)."""
    if not isinstance(data, bytes):
        data = bytes(data)  # a bytearray or memoryview: the caches below key on immutable slices
    result = StreamResult()
    append = result.items.append
    for _, (_, known), source, pos, stop in scan_stream(data, result):
        append(FramedItem(*known, source, data[pos:stop], pos))  # positional: FramedItem's field order
    return result


def scan_stream(data: bytes, result: StreamResult) -> Iterator[tuple[bytes, tuple[int, tuple], str, int, int]]:
    """The items of a framed stream as they are met, without building them: each item's header key (the bytes
    of its fields before the source), its converted head (size, and FramedItem's fields up to t1), source, and
    where its content starts and stops in `data`. Fills in result's marks, flags and error (parse_stream's);
    never raises.

    One pass over the headers, each split once. An item header's fields before its source repeat across a GPU
    host's 2,000 file items (`netdev file 0 0 2 0 - -`): they are converted once per distinct text. Linear in
    the stream (the memo holds at most one entry per header). With the C extension (fabricase.native), runs of
    clean items are read in C and every other frame here (read_frame)."""
    heads: dict[bytes, tuple[int, tuple] | None] = {}
    clean_items = native.scan_items
    pos, end = 0, len(data)
    while pos < end:
        if clean_items is not None:  # C: the run of clean items from here; what it stops at is read below
            batch, pos = clean_items(data, pos, MAX_ITEM_BYTES)
            for start, key, source, at, stop in batch:
                head = item_head(key, heads)
                if head is None:
                    result.error = f"malformed item header at byte {start}"
                    return
                yield key, head, source, at, stop
            if pos >= end:
                break
        step = read_frame(data, pos, result, heads)
        if step is None:
            break
        pos, item = step
        if item is not None:
            yield item
    finish(result)


def item_head(key: bytes, heads: dict[bytes, tuple[int, tuple] | None]) -> tuple[int, tuple] | None:
    """An item header's fields before its source (`key`) converted (_item_head), once per distinct key."""
    head = heads.get(key, _MISSING)
    if head is _MISSING:
        head = heads[key] = _item_head(key.split(b" "))
    return head


def read_frame(data: bytes, pos: int, result: StreamResult, heads: dict[bytes, tuple[int, tuple] | None]
               ) -> tuple[int, tuple[bytes, tuple[int, tuple], str, int, int] | None] | None:
    """The frame at `pos`: (where the next one starts, the item as scan_stream yields it or None for a marker),
    or None where reading stops (END, or result.error says why)."""
    m = _ITEM_HEADER.match(data, pos)
    end = len(data)
    if m is not None:
        start, pos = pos, m.end()
        key, raw_source = m.groups()
        head = item_head(key, heads)
        if head is None:
            result.error = f"malformed item header at byte {start}"
            return None
        n, known = head
        source = raw_source.decode("utf-8", "surrogateescape")
        if n > MAX_ITEM_BYTES:
            # No collector writes this much (commands are cut at 8 MB): refused here, not when analyzed.
            result.error = (f"item {source[:200]} (snapshot {known[2]}) is {n:,} bytes, over the "
                            f"{MAX_ITEM_BYTES // 2**20} MiB cap on one item, at byte {start}")
            return None
        stop = pos + n
        if stop >= end or data[stop] != 10:  # 10: the newline that closes an item
            result.error = f"stream cut inside item {source} (snapshot {known[2]}) at byte {pos}"
            return None
        return stop + 1, (key, head, source, pos, stop)
    nl = data.find(b"\n", pos)
    if nl < 0:
        result.error = f"stream cut inside a frame header at byte {pos}"
        return None
    if not data.startswith(_MAGIC, pos):
        result.error = f"unexpected bytes at byte {pos} (not a frame header)"
        return None
    start, pos = pos, nl + 1
    fields = data[start + len(_MAGIC):nl].split(b" ", 9)
    tag = fields[0]
    if tag == b"BEGIN":
        result.began = True
    elif tag == b"END":
        result.complete = True
        return None
    elif tag in (b"S", b"E"):
        if not _mark(result, fields):
            result.error = f"malformed snapshot marker at byte {pos}"
            return None
    elif tag == b"I":  # an item header the pattern above did not match: fewer than its nine fields
        result.error = f"malformed item header at byte {start}"
        return None
    else:
        result.error = f"unknown frame {tag[:20]!r} at byte {start}"
        return None
    return pos, None


def finish(result: StreamResult) -> None:
    """Reading has stopped: without an error or the END marker, say why the stream is incomplete."""
    if result.error is None and not result.complete:
        result.error = (
            "stream ended before the END marker (capture cut short)"
            if result.began
            else "empty stream: the capture script printed nothing"
        )
