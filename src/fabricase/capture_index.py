"""The compact per-host capture index of format 3 (`hosts/<host>/index.fci`, docs/capture-format.md).

Format 2's index.json held one JSON object per item, about as large as the stream it indexes, and loading a
fleet spent most of its time parsing it. Format 3 packs the same fields into a little-endian binary file:

    header   "FCIX", version u16, record size u16, items u32, strings u32, string bytes u64     (24 bytes)
    ends     u32 x strings: where each string ends in the string bytes (cumulative)
    strings  UTF-8, every distinct source, collector, command and error text of the host once
    records  items x RECORD (84 bytes): string ids, snapshot, kind, flags, rc, duration, offset, size, sha256

Binary rather than columnar JSON because every check then runs over whole arrays at once (numpy), and a type is
a property of the layout, not something to test value by value: decoding a 3,000-item host costs about as much
as reading 250 KiB. An item's `path` is not stored: it is the host's stream when the item has an offset, else
capture_records.item_path of its source, exactly what format 2 required it to be.

Decoding trusts nothing: the file's length must match its header exactly (a huge count cannot allocate), string
ids and kinds are bounds checked, strings are UTF-8 (bytes that are not, such as a file name in another encoding,
read back as surrogate escapes, exactly as the stream parser reads that source), and each item's offset + size
must lie inside the stream. What is wrong is one CaptureError naming the
file and, where there is one, the item.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from fabricase.caps import MAX_ITEM_BYTES, MAX_MEMBER_BYTES
from fabricase.capture_records import ITEM_KINDS, STREAM_FILE, item_path
from fabricase.collectors.framing import MAX_SNAPSHOT
from fabricase.errors import CaptureError, CorruptItemError
from fabricase.models import CaptureItem

__all__ = [
    "FLAG_DURATION",
    "FLAG_OFFSET",
    "FLAG_RC",
    "FLAG_TRUNCATED",
    "INDEX_FILE",
    "INDEX_MAGIC",
    "INDEX_VERSION",
    "IndexTable",
    "decode_index",
    "encode_columns",
    "encode_index",
    "index_records",
    "records_index",
]

INDEX_FILE = "index.fci"
INDEX_VERSION = 1
_MAGIC = b"FCIX"
INDEX_MAGIC = _MAGIC  # what an index.fci starts with: how a reader tells it from index.json
_HEADER = struct.Struct("<4sHHIIQ")
NONE = 0xFFFFFFFF  # the string id of a missing command or error
FLAG_TRUNCATED, FLAG_RC, FLAG_DURATION, FLAG_OFFSET = 1, 2, 4, 8
_FLAGS = FLAG_TRUNCATED | FLAG_RC | FLAG_DURATION | FLAG_OFFSET
_RC_LIMIT = 10**18
RECORD = np.dtype([
    ("source", "<u4"), ("collector", "<u4"), ("command", "<u4"), ("error", "<u4"), ("snapshot", "<u2"),
    ("kind", "u1"), ("flags", "u1"), ("rc", "<i8"), ("duration_ms", "<f8"), ("offset", "<u8"), ("bytes", "<u8"),
    ("sha256", "V32"),
])


_LAYOUT = np.dtype([(name, RECORD.fields[name][0])
                    for name in ("source", "collector", "command", "error", "snapshot", "kind", "flags")])
assert RECORD.fields["flags"][1] + 1 == _LAYOUT.itemsize  # the first fields of a record, packed


class _Layout:
    """What an index's string table and the first 20 bytes of its records (string ids, snapshot, kind, flags)
    decide, worked out once per distinct layout: the hosts of a fleet share a few (their values differ, their
    sources do not). `ok`: every check of the layout alone passes; the columns CaptureItems are built from."""

    def __init__(self, strings: list[str] | None, fields: np.ndarray, ok: bool) -> None:
        self.strings, self.fields, self.ok = strings, fields, ok
        flags = fields["flags"]
        self.has_offset, self.has_rc = (flags & FLAG_OFFSET) != 0, (flags & FLAG_RC) != 0
        self.has_duration = (flags & FLAG_DURATION) != 0
        self.offset_rows, self.rc_rows = _rows(self.has_offset), _rows(self.has_rc)
        self.duration_rows = _rows(self.has_duration)
        self.in_stream = bool(self.has_offset.any())
        self._columns: tuple[list, ...] | None = None
        self._selected: dict[tuple[str, str], tuple[np.ndarray, list[tuple[str, int]]] | None] = {}

    def select(self, prefix: str, kind: str) -> tuple[np.ndarray, list[tuple[str, int]]] | None:
        """IndexTable.select, memoized: a fleet's hosts ask for the same few prefixes."""
        key = (prefix, kind)
        if key not in self._selected:
            if len(self._selected) >= 64:  # a caller asking for many: memory stays bounded
                self._selected.clear()
            self._selected[key] = self._select(prefix, kind)
        return self._selected[key]

    def _select(self, prefix: str, kind: str) -> tuple[np.ndarray, list[tuple[str, int]]] | None:
        assert self.strings is not None
        f, strings = self.fields, self.strings
        wanted = np.fromiter((s.startswith(prefix) for s in strings), dtype=bool, count=len(strings))
        kinds = f["kind"] == (ITEM_KINDS.index(kind) if kind in ITEM_KINDS else len(ITEM_KINDS))
        rows = np.flatnonzero(wanted[f["source"]] & kinds) if len(strings) else np.zeros(0, np.intp)
        if not self.has_offset[rows].all():
            return None
        keys = [(strings[n], snap) for n, snap in zip(f["source"][rows].tolist(), f["snapshot"][rows].tolist(),
                                                      strict=True)]
        return rows, keys

    def columns(self) -> tuple[list, ...]:
        """sources, snapshots, kinds, collectors, paths, truncated, errors, commands, and the offset, rc and
        duration flags as lists: shared by every host of the layout (the strings are the same objects)."""
        if self._columns is None:
            assert self.strings is not None
            f, text = self.fields, [*self.strings, None]  # NONE (remapped to the last id + 1) reads as None
            none = len(self.strings)
            sources = [text[n] for n in f["source"].tolist()]
            snapshots = f["snapshot"].tolist()
            kinds = [ITEM_KINDS[k] for k in f["kind"].tolist()]
            has_offset = self.has_offset.tolist()
            paths = [STREAM_FILE if at else item_path(source, snap, kind)
                     for source, snap, kind, at in zip(sources, snapshots, kinds, has_offset, strict=True)]
            self._columns = (
                sources, snapshots, kinds, [text[n] for n in f["collector"].tolist()], paths,
                ((f["flags"] & FLAG_TRUNCATED) != 0).tolist(),
                [text[n] for n in np.where(f["error"] == NONE, none, f["error"]).tolist()],
                [text[n] for n in np.where(f["command"] == NONE, none, f["command"]).tolist()],
                has_offset, self.has_rc.tolist(), self.has_duration.tolist(),
            )
        return self._columns


_Rows = tuple[np.ndarray | slice | None, np.ndarray | slice | None]


def _rows(flag: np.ndarray) -> _Rows:
    """The rows with the flag and those without, as indexes into a column (a slice when all; None when none)."""
    if flag.all():
        return slice(None), None
    if not flag.any():
        return None, slice(None)
    return np.flatnonzero(flag), np.flatnonzero(~flag)


@lru_cache(maxsize=32)  # a few MiB at most: a layout of a GPU host (3,000 items) holds about 300 KiB
def _cached_layout(nstrings: int, head: bytes, fields: bytes) -> _Layout:
    """The layout of an index whose string table (ends, then bytes) is `head` and whose records start with
    `fields`. Nothing raises here: a layout that fails a check is not ok, and decode_index then runs every
    check in order to say which (the first error of the file, as ever)."""
    records = np.frombuffer(fields, dtype=_LAYOUT)
    try:
        strings = _strings(head[4 * nstrings:], np.frombuffer(head, "<u4", nstrings).astype(np.int64), "")
    except CaptureError:
        return _Layout(None, records, ok=False)
    try:
        _check_layout(records, len(strings), "")
        _check_sources(records, strings, "")
    except CaptureError:
        return _Layout(strings, records, ok=False)
    return _Layout(strings, records, ok=True)


@dataclass
class IndexTable:
    """A decoded, checked index: the records as one numpy array and the host's distinct strings."""

    records: np.ndarray
    strings: list[str]
    layout: _Layout | None = None  # None: worked out from the records when first needed

    def __len__(self) -> int:
        return len(self.records)

    def _shape(self) -> _Layout:
        if self.layout is None:
            self.layout = _Layout(self.strings, self.records, ok=True)
        return self.layout

    @property
    def in_stream(self) -> bool:
        """Whether any item points into the host's stream (which must then exist)."""
        return self._shape().in_stream

    def select(self, prefix: str, kind: str) -> tuple[np.ndarray, list[tuple[str, int]]] | None:
        """The rows of the items of `kind` whose source starts with `prefix`, in order, and their (source,
        snapshot) keys (each once: the index lists no item twice); None when one is not in the stream."""
        return self._shape().select(prefix, kind)

    def texts(self, rows: np.ndarray, stream: bytes) -> list[str] | None:
        """The text (undecodable bytes replaced) of these rows' items in the stream's bytes: one decode of the
        span they cover when it is ASCII (byte offsets are then character offsets). None when one lies past
        the stream's end (read() then says which)."""
        if not len(rows):
            return []
        starts = self.records["offset"][rows]
        ends = starts + self.records["bytes"][rows]
        low, high = int(starts.min()), int(ends.max())
        if high > len(stream):
            return None
        span = stream[low:high]
        if span.isascii():
            text = span.decode("ascii")
            return [text[a:b] for a, b in zip((starts - low).tolist(), (ends - low).tolist(), strict=True)]
        return [stream[a:b].decode("utf-8", errors="replace")
                for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]

    def items(self) -> list[CaptureItem]:
        """The CaptureItems: the layout's shared columns, this host's values (tolist is one C call per column),
        and one map() over CaptureItem, positional in its field order (the round-trip test pins it)."""
        r = self.records
        if not len(r):
            return []
        (sources, snapshots, kinds, collectors, paths, truncated, errors, commands,
         has_offset, has_rc, has_duration) = self._shape().columns()
        offsets = _flagged(r["offset"].tolist(), has_offset)
        rcs = _flagged(r["rc"].tolist(), has_rc)
        durations = _flagged(r["duration_ms"].tolist(), has_duration)
        return list(map(CaptureItem, sources, snapshots, kinds, collectors, paths, r["bytes"].tolist(),
                        _hex_digests(r["sha256"]), rcs, durations, truncated, errors, commands, offsets))


def _flagged(values: list, flags: list[bool]) -> list:
    """values where their flag is set, else None (an absent rc, duration or offset)."""
    if all(flags):
        return values
    return [v if flag else None for v, flag in zip(values, flags, strict=True)]


def _hex_digests(digests: np.ndarray) -> list[str]:
    """The 32-byte digests as 64 hex digits each: one hex() and one split in C (a UTF-32 view as 64-character
    numpy strings), not a slice per item."""
    text = digests.tobytes().hex()
    return np.frombuffer(text.encode("utf-32-le"), dtype="<U64").tolist()


def encode_index(items: list[CaptureItem]) -> bytes:
    """The index.fci bytes of a host's items (in their order). Items are what fabricase itself indexed, so a
    value out of the format's range is a bug, raised as a CaptureError rather than written."""
    try:
        columns = (
            [it.source for it in items], [it.collector for it in items], [it.command for it in items],
            [it.error for it in items], [it.snapshot for it in items], [ITEM_KINDS.index(it.kind) for it in items],
            [(FLAG_TRUNCATED if it.truncated else 0) | (FLAG_RC if it.rc is not None else 0)
             | (FLAG_DURATION if it.duration_ms is not None else 0) | (FLAG_OFFSET if it.offset is not None else 0)
             for it in items],
            [it.rc or 0 for it in items], [it.duration_ms or 0.0 for it in items], [it.offset or 0 for it in items],
            [it.bytes for it in items], bytes.fromhex("".join(it.sha256 for it in items)))
    except (ValueError, TypeError) as exc:
        raise CaptureError(f"cannot index the items ({exc})", where=INDEX_FILE) from exc
    return encode_columns(*columns)


def encode_columns(sources: list[str], collectors: list[str], commands: list[str | None],
                   errors: list[str | None], snapshots: list[int], kinds: list[int], flags: list[int],
                   rcs: list[int], durations: list[float], offsets: list[int], sizes: list[int],
                   digests: bytes) -> bytes:
    """encode_index of items given as columns, one value per item in each (kinds as ITEM_KINDS indexes, flags
    as the record's bits, an absent rc, duration or offset as 0 with its flag clear, the sha256 digests
    concatenated): what recording a stream builds without building its items (capture_scan)."""
    ids: dict[str, int] = {}
    add = ids.setdefault
    records = np.zeros(len(sources), dtype=RECORD)
    try:
        # String ids in order of first use, sources first, then collectors, commands and errors.
        records["source"] = [add(text, len(ids)) for text in sources]
        records["collector"] = [add(text, len(ids)) for text in collectors]
        records["command"] = [NONE if text is None else add(text, len(ids)) for text in commands]
        records["error"] = [NONE if text is None else add(text, len(ids)) for text in errors]
        records["snapshot"] = snapshots
        records["kind"] = kinds
        records["flags"] = flags
        records["rc"] = rcs
        records["duration_ms"] = durations
        records["offset"] = offsets
        records["bytes"] = sizes
        records["sha256"] = np.frombuffer(digests, dtype="V32")
    except (ValueError, OverflowError, TypeError) as exc:
        raise CaptureError(f"cannot index the items ({exc})", where=INDEX_FILE) from exc
    encoded = [text.encode("utf-8", "surrogateescape") for text in ids]
    ends = np.cumsum([len(b) for b in encoded], dtype=np.uint64) if encoded else np.zeros(0, np.uint64)
    blob = b"".join(encoded)
    if len(blob) >= NONE:
        raise CaptureError("the index's strings are over 4 GiB", where=INDEX_FILE)
    header = _HEADER.pack(_MAGIC, INDEX_VERSION, RECORD.itemsize, len(sources), len(encoded), len(blob))
    return header + ends.astype("<u4").tobytes() + blob + records.tobytes()


def decode_index(data: bytes, where: str, stream_bytes: int | None = None) -> IndexTable:
    """Check and decode index.fci bytes. `stream_bytes`: the size of the host's stream, which every item with an
    offset must lie inside (None: not checked, for a reader of the index alone). Linear in the file's size;
    raises one CaptureError (CorruptItemError for an item past the end of the stream)."""
    if len(data) < _HEADER.size:
        raise CaptureError(f"index is {len(data)} bytes, shorter than its {_HEADER.size}-byte header", where=where)
    magic, version, size, count, nstrings, nbytes = _HEADER.unpack_from(data)
    if magic != _MAGIC:
        raise CaptureError("not a fabricase index (no FCIX header)", where=where)
    if version != INDEX_VERSION or size != RECORD.itemsize:
        raise CaptureError(f"index version {version} with {size}-byte records is not supported (this fabricase "
                           f"reads version {INDEX_VERSION}, {RECORD.itemsize}-byte records)", where=where)
    at = _HEADER.size + 4 * nstrings + nbytes  # where the records start
    if at + count * RECORD.itemsize != len(data):
        raise CaptureError(f"index is {len(data):,} bytes, its header says {at + count * RECORD.itemsize:,} "
                           f"({count:,} items, {nstrings:,} strings; truncated or corrupt)", where=where)
    records = np.frombuffer(data, dtype=RECORD, count=count, offset=at)
    fields = np.frombuffer(data, np.uint8, count * RECORD.itemsize, at).reshape(count, RECORD.itemsize)
    layout = _cached_layout(nstrings, bytes(data[_HEADER.size:at]), fields[:, :_LAYOUT.itemsize].tobytes())
    if not (layout.ok and _values_ok(records, layout)):  # something is wrong: every check in order says what
        ends = np.frombuffer(data, dtype="<u4", count=nstrings, offset=_HEADER.size).astype(np.int64)
        strings = _strings(data[_HEADER.size + 4 * nstrings:at], ends, where)
        _check_records(records, len(strings), where)
        _check_sources(records, strings, where)
    assert layout.strings is not None  # the checks above raised otherwise
    _check_stream(records, layout.strings, where, stream_bytes, layout.has_offset)
    return IndexTable(records=records, strings=layout.strings, layout=layout)


def _strings(blob: bytes, ends: np.ndarray, where: str) -> list[str]:
    starts = np.concatenate(([0], ends[:-1])) if len(ends) else ends
    if len(ends) and (ends[-1] != len(blob) or np.any(ends < starts)):
        raise CaptureError("index string table is inconsistent (ends out of order or past its bytes)", where=where)
    spans = list(zip(starts.tolist(), ends.tolist(), strict=True))
    if blob.isascii():  # the common case: one decode, and byte offsets are character offsets
        text = blob.decode("ascii")
        strings = [text[a:b] for a, b in spans]
    else:  # bytes that are not UTF-8 read back as the stream parser reads them (surrogate escapes)
        strings = [blob[a:b].decode("utf-8", "surrogateescape") for a, b in spans]
    if len(set(strings)) != len(strings):
        raise CaptureError("index string table lists a string twice", where=where)
    return strings


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _raise_first(checks: tuple[tuple[np.ndarray, str], ...], where: str) -> None:
    for bad, what in checks:
        if bad.any():
            raise CaptureError(f"item {_first(bad)}: {what}", where=where)


def _check_records(r: np.ndarray, nstrings: int, where: str) -> None:
    """Every field in range, over whole columns; the first bad item is named."""
    _check_fields(r, nstrings, where)
    _check_values(r, where)
    _check_twins(r, where)


def _check_layout(r: np.ndarray, nstrings: int, where: str) -> None:
    """The checks of _check_records that read only the layout's fields (string ids, snapshot, kind, flags)."""
    _check_fields(r, nstrings, where)
    _check_twins(r, where)


def _check_fields(r: np.ndarray, nstrings: int, where: str) -> None:
    _raise_first((
        (r["source"] >= nstrings, "its source is not a string of the index"),
        (r["collector"] >= nstrings, "its collector is not a string of the index"),
        ((r["command"] >= nstrings) & (r["command"] != NONE), "its command is not a string of the index"),
        ((r["error"] >= nstrings) & (r["error"] != NONE), "its error is not a string of the index"),
        (r["snapshot"] > MAX_SNAPSHOT, f"snapshot is over {MAX_SNAPSHOT:,}"),
        (r["kind"] >= len(ITEM_KINDS), f"kind is not one of {', '.join(ITEM_KINDS)}"),
        ((r["flags"] & ~np.uint8(_FLAGS)) != 0, "unknown flags"),
    ), where)


def _check_values(r: np.ndarray, where: str) -> None:
    flags = r["flags"]
    has_offset = (flags & FLAG_OFFSET) != 0
    duration = r["duration_ms"]
    _raise_first((
        (r["bytes"] > MAX_ITEM_BYTES, f"over the {MAX_ITEM_BYTES:,}-byte cap on one item"),
        (has_offset & (r["offset"] > MAX_MEMBER_BYTES), "offset is past any stream"),
        (~has_offset & (r["offset"] != 0), "an offset without its flag"),
        (((flags & FLAG_RC) != 0) & ((r["rc"] > _RC_LIMIT) | (r["rc"] < -_RC_LIMIT)), "rc is out of range"),
        (((flags & FLAG_RC) == 0) & (r["rc"] != 0), "an rc without its flag"),
        (((flags & FLAG_DURATION) != 0) & ~np.isfinite(duration), "duration_ms is not a finite number"),
        (((flags & FLAG_DURATION) == 0) & (duration != 0), "a duration_ms without its flag"),
    ), where)


def _values_ok(r: np.ndarray, layout: _Layout) -> bool:
    """Whether _check_values would pass, in a few reductions over the rows with and without each flag (known
    from the layout): the common case, so that the checks one by one run only to name what is wrong."""
    if not len(r):
        return True
    if int(r["bytes"].max()) > MAX_ITEM_BYTES:
        return False
    offset, rc, duration = r["offset"], r["rc"], r["duration_ms"]
    (on, off) = layout.offset_rows
    if (on is not None and int(offset[on].max()) > MAX_MEMBER_BYTES) or (off is not None and offset[off].any()):
        return False
    (on, off) = layout.rc_rows
    if on is not None and (int(rc[on].max()) > _RC_LIMIT or int(rc[on].min()) < -_RC_LIMIT):
        return False
    if off is not None and rc[off].any():
        return False
    (on, off) = layout.duration_rows  # NaN is true: a NaN without its flag is refused too
    return not ((on is not None and not np.isfinite(duration[on]).all()) or (off is not None and duration[off].any()))


def _check_twins(r: np.ndarray, where: str) -> None:
    key = (r["source"].astype(np.int64) * (MAX_SNAPSHOT + 1) + r["snapshot"]) * len(ITEM_KINDS) + r["kind"]
    if len(np.unique(key)) != len(key):
        raise CaptureError("lists an item (source, snapshot, kind) twice", where=where)


_COMMAND_NAME = re.compile(r"[A-Za-z0-9._-]+")


def _storable(source: str) -> bool:
    """capture_records.item_path's test, without building the path (it runs for every distinct source)."""
    if source.startswith("/"):
        return "\n" not in source and ("/.." not in source or "/../" not in source + "/")
    return source.startswith("cmd:") and _COMMAND_NAME.fullmatch(source, 4) is not None


def _check_sources(r: np.ndarray, strings: list[str], where: str) -> None:
    """Each source names a path or cmd:<name> that can be stored, checked once per distinct source."""
    for sid in np.unique(r["source"]).tolist():
        if not _storable(strings[sid]):
            raise CaptureError(f"source {strings[sid][:200]!r} cannot be stored (not a path or cmd:<name>)",
                               where=where)


def _check_stream(r: np.ndarray, strings: list[str], where: str, stream_bytes: int | None,
                  has_offset: np.ndarray | None = None) -> None:
    """Every item with an offset lies inside the stream. An integrity error (CorruptItemError, as in format 2):
    the index is well formed, the stream was cut or changed after it was written."""
    if has_offset is None:
        has_offset = (r["flags"] & FLAG_OFFSET) != 0
    if stream_bytes is None or not has_offset.any():
        return
    end = r["offset"] + r["bytes"]  # both capped by _check_records, so no overflow
    if int(end.max()) <= stream_bytes:  # the common case: nothing ends past the stream (with an offset or not)
        return
    stream_where = where.removesuffix(INDEX_FILE) + STREAM_FILE
    past = has_offset & (end > stream_bytes)
    if past.any():
        n = _first(past)
        what = f"{strings[r['source'][n]][:200]} (snapshot {r['snapshot'][n]}, {ITEM_KINDS[r['kind'][n]]})"
        raise CorruptItemError(f"stream ends {int(end[n]) - stream_bytes:,} bytes short of the item (truncated?)",
                               where=f"{stream_where} item {what}")


def index_records(data: bytes, where: str = INDEX_FILE) -> list[dict]:
    """The items of index.fci bytes as format 2's index.json records (CaptureItem.to_dict): for the code that
    rewrites an index (redaction, probe results) and for the manifest's command list."""
    return [it.to_dict() for it in decode_index(data, where).items()]


def records_index(records: list[dict]) -> bytes:
    """index.fci bytes of index.json-style records (index_records' inverse, after they were edited)."""
    try:
        items = [CaptureItem(**record) for record in records]
    except TypeError as exc:
        raise CaptureError(f"cannot index the items ({exc})", where=INDEX_FILE) from exc
    return encode_index(items)
