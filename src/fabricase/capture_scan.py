"""Recording a host's stream straight into format 3's index, without building its items.

capture_write.host_capture_from_stream turns parse_stream's FramedItems into CaptureItems, and encode_index then
takes them apart again into columns: three objects and a dozen attribute reads per item, for the 2,000 items of a
GPU host, on every host of a fleet. scan_host reads the same stream once (framing.scan_stream) into the index's
columns. Its index is encode_index(host_capture_from_stream(...).items) byte for byte
(tests/capture/test_capture_scan.py holds the two paths equal over real, generated and hostile streams); the
slow path stays for format 2's index.json and for callers that want the items.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from fabricase import native
from fabricase.caps import MAX_ITEM_BYTES
from fabricase.capture_index import FLAG_DURATION, FLAG_OFFSET, FLAG_RC, FLAG_TRUNCATED, encode_columns
from fabricase.capture_records import ITEM_KINDS, item_path
from fabricase.capture_write import error_for, snapshot_infos
from fabricase.collectors.framing import StreamResult, finish, item_head, read_frame, scan_stream
from fabricase.collectors.plan import CapturePlan, CommandSpec
from fabricase.models import SnapshotInfo
from fabricase.trace import debug

__all__ = ["ScannedStream", "scan_host"]


@dataclass
class ScannedStream:
    """A stream read for recording: parse_stream's result without its items, how many items it held (duplicates
    and refused sources included, as len(parse_stream(...).items)), and the host's index.fci bytes."""

    result: StreamResult
    items: int
    index: bytes

    @property
    def snapshots(self) -> list[SnapshotInfo]:
        """The stream's snapshot marks as the host record's snapshots."""
        return snapshot_infos(self.result)


def _head_values(n: int, known: tuple) -> tuple[str, int, int, int, int, float, int]:
    """What an item header's fields before its source decide in the index: the collector, snapshot, kind's code,
    flags (every stream item has an offset), the rc column's value, the duration column's
    (host_capture_from_stream's rounding) and the size."""
    collector, kind, snapshot, rc, truncated, t0, t1 = known
    flags = FLAG_OFFSET | (FLAG_TRUNCATED if truncated else 0) | (FLAG_RC if rc is not None else 0)
    duration = 0.0
    if t0 is not None and t1 is not None:
        flags |= FLAG_DURATION
        duration = round(max(t1 - t0, 0.0) * 1000, 1)
    return collector, snapshot, ITEM_KINDS.index(kind), flags, rc or 0, duration, n


def scan_host(data: bytes, plan: CapturePlan) -> ScannedStream:
    """Read a host's stream into its index; never raises on the stream's bytes (the result's error says where
    parsing stopped). `plan`: the commands' shell text and timeouts, as host_capture_from_stream reads them.
    With the C extension (fabricase.native) the loop over the items runs in C (_scan_native)."""
    if not isinstance(data, bytes):
        data = bytes(data)
    if native.index_items is not None:
        scanned = _scan_native(data, plan)
        if scanned is not None:
            return scanned
    return _scan_python(data, plan)


def _scan_python(data: bytes, plan: CapturePlan) -> ScannedStream:
    result = StreamResult()
    sources: list[str] = []
    rows: list[tuple] = []  # per item, its header's _head_values (one tuple shared by the items of a header)
    offsets: list[int] = []
    digests: list[bytes] = []
    shells: dict[int, str] = {}  # row -> the command's shell text (command items of the plan's commands)
    failed: list[tuple[int, str, int, float | None, tuple[str, int]]] = []  # errors to word after the scan
    stderr: dict[tuple[str, int], tuple[int, int]] = {}  # (source, snapshot) -> its stderr's span, the last wins
    seen: set[str] = set()
    heads: dict[bytes, tuple] = {}
    specs: dict[str, CommandSpec | None] = {}
    view, sha256, count = memoryview(data), hashlib.sha256, 0
    for key, (n, known), source, pos, stop in scan_stream(data, result):
        count += 1
        kind, snapshot = known[1], known[2]
        if kind == "stderr":
            stderr[(source, snapshot)] = (pos, stop)
        logical = item_path(source, snapshot, kind)
        if logical is None or logical in seen:
            continue  # refused or duplicate (two globs reaching one file): the first read wins
        seen.add(logical)
        values = heads.get(key)
        if values is None:
            values = heads[key] = _head_values(n, known)
        if source.startswith("cmd:"):
            name = source[4:]
            cmd = specs[name] if name in specs else specs.setdefault(name, plan.command(name))
            if cmd and kind == "command":
                shells[len(sources)] = cmd.shell
            if kind != "stderr" and known[3] not in (0, None):
                failed.append((len(sources), kind, known[3], cmd.timeout_s if cmd else None, (source, snapshot)))
        elif kind != "stderr" and known[3] not in (0, None):
            failed.append((len(sources), kind, known[3], None, (source, snapshot)))
        sources.append(source)
        rows.append(values)
        offsets.append(pos)
        digests.append(sha256(view[pos:stop]).digest())
    return _scanned(data, result, count, sources, rows, offsets, b"".join(digests), failed, stderr, shells)


def _scanned(data: bytes, result: StreamResult, count: int, sources: list[str], rows: list[tuple],
             offsets: list[int], digests: bytes, failed: list[tuple], stderr: dict[tuple[str, int], tuple[int, int]],
             shells: dict[int, str]) -> ScannedStream:
    """The index of the items read: the failed ones' errors worded from their stderr, the commands' shell text."""
    errors: list[str | None] = [None] * len(sources)
    for row, kind, rc, timeout, at in failed:
        span = stderr.get(at)
        errors[row] = error_for(kind, rc, timeout, data[span[0]:span[1]] if span else b"")
    commands: list[str | None] = [None] * len(sources)
    for row, shell in shells.items():
        commands[row] = shell
    collectors, snapshots, kinds, flags, rcs, durations, sizes = zip(*rows, strict=True) if rows else ((),) * 7
    index = encode_columns(sources, list(collectors), commands, errors, list(snapshots), list(kinds), list(flags),
                           list(rcs), list(durations), offsets, list(sizes), digests)
    return ScannedStream(result, count, index)


def _scan_native(data: bytes, plan: CapturePlan) -> ScannedStream | None:
    """_scan_python's result with the loop over clean items in C (native.index_items) and every other frame read by
    framing.read_frame; None in the one case C leaves an item to Python (it does not: tests/test_native.py), for
    _scan_python to read the stream whole."""
    result = StreamResult()
    frame_heads: dict[bytes, tuple[int, tuple] | None] = {}
    heads: dict[bytes, tuple | None] = {}  # key -> (size, known, the index's values), or None when malformed

    def head_of(key: bytes) -> tuple | None:
        head = item_head(key, frame_heads)
        entry = heads[key] = None if head is None else (head[0], head[1], _head_values(*head))
        return entry

    sources: list[str] = []
    rows: list[tuple] = []
    offsets: list[int] = []
    special: list[int] = []  # rows of commands' items and of failed reads
    stderr_items: list[tuple[str, int, int, int]] = []
    seen: set[str] = set()
    digests = bytearray() if native.HASHES else None
    count, pos, end = 0, 0, len(data)
    while pos < end:
        status, pos, n = native.index_items(data, pos, MAX_ITEM_BYTES, heads, head_of, seen, sources, rows,
                                            offsets, digests, special, stderr_items)
        count += n
        if status:
            result.error = f"malformed item header at byte {pos}"
            break
        if pos >= end:
            break
        step = read_frame(data, pos, result, frame_heads)
        if step is None:
            break
        pos, item = step
        if item is not None:
            debug("recording: the C extension left an item at byte %d to Python; the stream is read in Python", pos)
            return None
    if result.error is None:
        finish(result)
    if digests is None:
        view, sha256 = memoryview(data), hashlib.sha256
        digests = b"".join(sha256(view[at:at + row[6]]).digest() for at, row in zip(offsets, rows, strict=True))
    stderr = {(source, snapshot): (start, stop) for source, snapshot, start, stop in stderr_items}
    failed, shells = _special_rows(special, sources, rows, plan)
    return _scanned(data, result, count, sources, rows, offsets, bytes(digests), failed, stderr, shells)


def _special_rows(special: list[int], sources: list[str], rows: list[tuple], plan: CapturePlan
                  ) -> tuple[list[tuple], dict[int, str]]:
    """The failed reads to word and the commands' shell text, of the rows index_items marked (commands' items and
    failed reads), as _scan_python's loop finds them: a row's values are _head_values (kind code, rc or 0)."""
    failed: list[tuple] = []
    shells: dict[int, str] = {}
    specs: dict[str, CommandSpec | None] = {}
    for row in special:
        source, (_, snapshot, kind_code, _, rc, _, _) = sources[row], rows[row]
        kind, timeout = ITEM_KINDS[kind_code], None
        if source.startswith("cmd:"):
            name = source[4:]
            cmd = specs[name] if name in specs else specs.setdefault(name, plan.command(name))
            if cmd and kind == "command":
                shells[row] = cmd.shell
            timeout = cmd.timeout_s if cmd else None
        if kind != "stderr" and rc != 0:
            failed.append((row, kind, rc, timeout, (source, snapshot)))
    return failed, shells
