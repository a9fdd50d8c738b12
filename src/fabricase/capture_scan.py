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

from fabricase.capture_index import FLAG_DURATION, FLAG_OFFSET, FLAG_RC, FLAG_TRUNCATED, encode_columns
from fabricase.capture_records import ITEM_KINDS, item_path
from fabricase.capture_write import error_for, snapshot_infos
from fabricase.collectors.framing import StreamResult, scan_stream
from fabricase.collectors.plan import CapturePlan, CommandSpec
from fabricase.models import SnapshotInfo

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
    parsing stopped). `plan`: the commands' shell text and timeouts, as host_capture_from_stream reads them."""
    if not isinstance(data, bytes):
        data = bytes(data)
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
    errors: list[str | None] = [None] * len(sources)
    for row, kind, rc, timeout, at in failed:
        span = stderr.get(at)
        errors[row] = error_for(kind, rc, timeout, data[span[0]:span[1]] if span else b"")
    commands: list[str | None] = [None] * len(sources)
    for row, shell in shells.items():
        commands[row] = shell
    collectors, snapshots, kinds, flags, rcs, durations, sizes = zip(*rows, strict=True) if rows else ((),) * 7
    index = encode_columns(sources, list(collectors), commands, errors, list(snapshots), list(kinds), list(flags),
                           list(rcs), list(durations), offsets, list(sizes), b"".join(digests))
    return ScannedStream(result, count, index)
