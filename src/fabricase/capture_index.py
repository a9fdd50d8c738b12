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

import numpy as np

from fabricase.caps import MAX_ITEM_BYTES, MAX_MEMBER_BYTES
from fabricase.capture_records import ITEM_KINDS, STREAM_FILE, item_path
from fabricase.collectors.framing import MAX_SNAPSHOT
from fabricase.errors import CaptureError, CorruptItemError
from fabricase.models import CaptureItem

__all__ = ["INDEX_FILE", "INDEX_VERSION", "IndexTable", "decode_index", "encode_index", "index_records",
           "records_index"]

INDEX_FILE = "index.fci"
INDEX_VERSION = 1
_MAGIC = b"FCIX"
INDEX_MAGIC = _MAGIC  # what an index.fci starts with: how a reader tells it from index.json
_HEADER = struct.Struct("<4sHHIIQ")
NONE = 0xFFFFFFFF  # the string id of a missing command or error
_TRUNCATED, _HAS_RC, _HAS_DURATION, _HAS_OFFSET = 1, 2, 4, 8
_FLAGS = _TRUNCATED | _HAS_RC | _HAS_DURATION | _HAS_OFFSET
_RC_LIMIT = 10**18
RECORD = np.dtype([
    ("source", "<u4"), ("collector", "<u4"), ("command", "<u4"), ("error", "<u4"), ("snapshot", "<u2"),
    ("kind", "u1"), ("flags", "u1"), ("rc", "<i8"), ("duration_ms", "<f8"), ("offset", "<u8"), ("bytes", "<u8"),
    ("sha256", "V32"),
])


@dataclass
class IndexTable:
    """A decoded, checked index: the records as one numpy array and the host's distinct strings."""

    records: np.ndarray
    strings: list[str]

    def __len__(self) -> int:
        return len(self.records)

    @property
    def in_stream(self) -> bool:
        """Whether any item points into the host's stream (which must then exist)."""
        return bool(((self.records["flags"] & _HAS_OFFSET) != 0).any())

    def items(self) -> list[CaptureItem]:
        """The CaptureItems, built column by column (tolist is one C call per column, not one per value)."""
        r = self.records
        if not len(r):
            return []
        text = self.strings + [None]  # NONE (the last id + 1 after remapping below) reads as None
        none = len(self.strings)
        command = np.where(r["command"] == NONE, none, r["command"]).tolist()
        error = np.where(r["error"] == NONE, none, r["error"]).tolist()
        flags = r["flags"]
        has_offset = (flags & _HAS_OFFSET).astype(bool).tolist()
        offsets = r["offset"].tolist()
        rcs = r["rc"].tolist()
        has_rc = (flags & _HAS_RC).astype(bool).tolist()
        durations = r["duration_ms"].tolist()
        has_duration = (flags & _HAS_DURATION).astype(bool).tolist()
        truncated = (flags & _TRUNCATED).astype(bool).tolist()
        digests = r["sha256"].tobytes().hex()
        kinds = [ITEM_KINDS[k] for k in r["kind"].tolist()]
        sources, collectors = r["source"].tolist(), r["collector"].tolist()
        snapshots, sizes = r["snapshot"].tolist(), r["bytes"].tolist()
        # Positional, in CaptureItem's field order (about 3x faster than keywords; the round-trip test pins it).
        out = []
        for n in range(len(r)):
            source, snap, kind = text[sources[n]], snapshots[n], kinds[n]
            offset = offsets[n] if has_offset[n] else None
            out.append(CaptureItem(
                source, snap, kind, text[collectors[n]],
                STREAM_FILE if offset is not None else item_path(source, snap, kind),  # type: ignore[arg-type]
                sizes[n], digests[64 * n:64 * n + 64], rcs[n] if has_rc[n] else None,
                durations[n] if has_duration[n] else None, truncated[n], text[error[n]], text[command[n]], offset))
        return out


def encode_index(items: list[CaptureItem]) -> bytes:
    """The index.fci bytes of a host's items (in their order). Items are what fabricase itself indexed, so a
    value out of the format's range is a bug, raised as a CaptureError rather than written."""
    ids: dict[str, int] = {}

    def sid(text: str | None) -> int:
        if text is None:
            return NONE
        n = ids.get(text)
        if n is None:
            n = ids[text] = len(ids)
        return n

    records = np.zeros(len(items), dtype=RECORD)
    try:
        records["source"] = [sid(it.source) for it in items]
        records["collector"] = [sid(it.collector) for it in items]
        records["command"] = [sid(it.command) for it in items]
        records["error"] = [sid(it.error) for it in items]
        records["snapshot"] = [it.snapshot for it in items]
        records["kind"] = [ITEM_KINDS.index(it.kind) for it in items]
        records["flags"] = [(_TRUNCATED if it.truncated else 0) | (_HAS_RC if it.rc is not None else 0)
                            | (_HAS_DURATION if it.duration_ms is not None else 0)
                            | (_HAS_OFFSET if it.offset is not None else 0) for it in items]
        records["rc"] = [it.rc or 0 for it in items]
        records["duration_ms"] = [it.duration_ms or 0.0 for it in items]
        records["offset"] = [it.offset or 0 for it in items]
        records["bytes"] = [it.bytes for it in items]
        records["sha256"] = np.frombuffer(bytes.fromhex("".join(it.sha256 for it in items)), dtype="V32")
    except (ValueError, OverflowError, TypeError) as exc:
        raise CaptureError(f"cannot index the items ({exc})", where=INDEX_FILE) from exc
    encoded = [text.encode("utf-8", "surrogateescape") for text in ids]
    ends = np.cumsum([len(b) for b in encoded], dtype=np.uint64) if encoded else np.zeros(0, np.uint64)
    blob = b"".join(encoded)
    if len(blob) >= NONE:
        raise CaptureError("the index's strings are over 4 GiB", where=INDEX_FILE)
    header = _HEADER.pack(_MAGIC, INDEX_VERSION, RECORD.itemsize, len(items), len(encoded), len(blob))
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
    want = _HEADER.size + 4 * nstrings + nbytes + count * RECORD.itemsize
    if want != len(data):
        raise CaptureError(f"index is {len(data):,} bytes, its header says {want:,} ({count:,} items, "
                           f"{nstrings:,} strings; truncated or corrupt)", where=where)
    at = _HEADER.size
    ends = np.frombuffer(data, dtype="<u4", count=nstrings, offset=at).astype(np.int64)
    at += 4 * nstrings
    blob = data[at:at + nbytes]
    records = np.frombuffer(data, dtype=RECORD, count=count, offset=at + nbytes)
    strings = _strings(blob, ends, where)
    _check_records(records, len(strings), where)
    _check_sources(records, strings, where)
    _check_stream(records, strings, where, stream_bytes)
    return IndexTable(records=records, strings=strings)


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


def _check_records(r: np.ndarray, nstrings: int, where: str) -> None:
    """Every field in range, over whole columns; the first bad item is named."""
    flags = r["flags"]
    has_offset = (flags & _HAS_OFFSET) != 0
    duration = r["duration_ms"]
    checks = (
        (r["source"] >= nstrings, "its source is not a string of the index"),
        (r["collector"] >= nstrings, "its collector is not a string of the index"),
        ((r["command"] >= nstrings) & (r["command"] != NONE), "its command is not a string of the index"),
        ((r["error"] >= nstrings) & (r["error"] != NONE), "its error is not a string of the index"),
        (r["snapshot"] > MAX_SNAPSHOT, f"snapshot is over {MAX_SNAPSHOT:,}"),
        (r["kind"] >= len(ITEM_KINDS), f"kind is not one of {', '.join(ITEM_KINDS)}"),
        ((flags & ~np.uint8(_FLAGS)) != 0, "unknown flags"),
        (r["bytes"] > MAX_ITEM_BYTES, f"over the {MAX_ITEM_BYTES:,}-byte cap on one item"),
        (has_offset & (r["offset"] > MAX_MEMBER_BYTES), "offset is past any stream"),
        (~has_offset & (r["offset"] != 0), "an offset without its flag"),
        (((flags & _HAS_RC) != 0) & ((r["rc"] > _RC_LIMIT) | (r["rc"] < -_RC_LIMIT)), "rc is out of range"),
        (((flags & _HAS_RC) == 0) & (r["rc"] != 0), "an rc without its flag"),
        (((flags & _HAS_DURATION) != 0) & ~np.isfinite(duration), "duration_ms is not a finite number"),
        (((flags & _HAS_DURATION) == 0) & (duration != 0), "a duration_ms without its flag"),
    )
    for bad, what in checks:
        if bad.any():
            raise CaptureError(f"item {_first(bad)}: {what}", where=where)
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


def _check_stream(r: np.ndarray, strings: list[str], where: str, stream_bytes: int | None) -> None:
    """Every item with an offset lies inside the stream. An integrity error (CorruptItemError, as in format 2):
    the index is well formed, the stream was cut or changed after it was written."""
    has_offset = (r["flags"] & _HAS_OFFSET) != 0
    if stream_bytes is None or not has_offset.any():
        return
    stream_where = where.removesuffix(INDEX_FILE) + STREAM_FILE
    end = r["offset"] + r["bytes"]  # both capped by _check_records, so no overflow
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
