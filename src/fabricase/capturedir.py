"""Write and read capture directories (formats 1, 2 and 3, docs/capture-format.md).

Everything after capture works on this directory alone: analysis, bundles, drafts and replays. Reading trusts
nothing in it (see "reading a capture directory back"): files are opened only inside it, read up to the caps of
fabricase.caps, item by item, and every record is type-checked.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from fabricase.caps import MAX_ITEM_BYTES, MIB
from fabricase.capture_index import INDEX_FILE, IndexTable, decode_index
from fabricase.capture_placements import (
    PLACEMENTS_FILE,
    load_placements,
    placements_bytes,
    write_placements,
)
from fabricase.capture_records import (
    SAFE_HOST,
    STATUSES,
    STREAM_FILE,
    MissingFile,
    as_object,
    bad_field,
    flag_field,
    integer_field,
    item_record,
    kind_of,
    member_size,
    number_field,
    open_member,
    read_json,
    read_member,
    snapshot_record,
    text_field,
)
from fabricase.capture_write import (
    CAPTURE_FORMAT,
    FORMAT_VERSION,
    INPUT_CAP,
    WRITTEN_VERSION,
    add_inputs,
    host_capture_from_stream,
    host_dir_name,
    new_capture_dir,
    prepare_capture_dir,
    utc_now,
    write_capture_meta,
    write_host,
    write_stream,
)
from fabricase.errors import CaptureError, CorruptItemError, TargetError
from fabricase.models import Capture, CaptureItem, HostCapture, HostStatus, InputFile

__all__ = [
    "CAPTURE_FORMAT",
    "FORMAT_VERSION",
    "READABLE_VERSIONS",
    "WRITTEN_VERSION",
    "STREAM_FILE",
    "INPUT_CAP",
    "PLACEMENTS_FILE",
    "add_inputs",
    "load_host",
    "find_capture_root",
    "host_capture_from_stream",
    "host_dir_name",
    "load_capture",
    "load_placements",
    "new_capture_dir",
    "placements_bytes",
    "prepare_capture_dir",
    "utc_now",
    "write_capture_meta",
    "write_host",
    "write_placements",
    "write_stream",
]

READABLE_VERSIONS = (1, 2, 3)
# Writing lives in fabricase.capture_write (re-exported here); WRITTEN_VERSION above is a copy taken at import:
# to change what collect writes, set capture_write.WRITTEN_VERSION.


# -- reading a capture directory back ----------------------------------------------------------------------
# Nothing in a capture directory is trusted: it may be an unpacked bundle from elsewhere, cut short by a full
# disk, or edited. A file is opened only when it is a plain file inside the capture, and read up to a cap; every
# JSON record is checked field by field. What is wrong is said in one line:
# - capture.json or an input unusable: a CaptureError naming the file (there is nothing to go on);
# - one host's records (host.json, index.json) unusable, or its stream refused: that host loads as failed with
#   the reason, and the other hosts are intact;
# - an item whose bytes do not match its index (stream missing, short, another sha256): CorruptItemError naming
#   the item, as `verify` would: the capture was damaged or edited after it was written.

_WHOLE_READ_BYTES = 32 * MIB  # a host stream up to this is read once and sliced; a larger one, item by item
_CHUNK = MIB  # sha256 is computed over reads of this size: memory stays flat whatever the item size
def find_capture_root(path: Path) -> Path:
    """The capture directory at `path`, or inside an unpacked bundle (path/capture)."""
    if not path.exists():
        raise TargetError("no such directory", where=str(path))
    if not path.is_dir():
        raise TargetError("not a directory (give a capture directory or a bundle file)", where=str(path))
    for candidate in (path, path / "capture"):
        if (candidate / "capture.json").is_file():
            return candidate
    raise TargetError("not a capture directory (no capture.json)", where=str(path))



@dataclass
class StoredHost(HostCapture):
    """A host loaded from a capture directory. An item is read by its offset and size: a small stream is read
    once and sliced (one read for thousands of items), a large one item by item, so that a host's stream is
    never held whole (1 GiB of zeros after the END marker costs nothing). Reads stay inside the capture."""

    inside: Path | None = field(default=None, repr=False, compare=False)  # the capture directory, resolved
    stream_bytes: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    # Format 3: the items are decoded from index.fci when first used and dropped by release(), so that a host not
    # being analyzed holds no item objects (a GPU host has thousands). None: items given as a list.
    index_file: Path | None = field(default=None, repr=False, compare=False)
    _item_list = None  # not a field: HostCapture's __init__ sets `items` through the property below
    _pinned = False  # items assigned by a caller: kept by release(), never decoded again over them
    _table = None  # format 3: the checked index kept from loading (within the load's budget), else read again
    _indexed_count = 0  # format 3: the number of items index.fci holds (checked when loaded)
    _live: tuple[IndexTable, list[CaptureItem]] | None = None  # format 3: the table the items were decoded from

    @property  # type: ignore[override]
    def items(self) -> list[CaptureItem]:
        if self._item_list is None:
            self._item_list = self._decode_items() if self.index_file is not None else []
        return self._item_list

    @items.setter
    def items(self, value: list[CaptureItem]) -> None:
        self._item_list = value
        self._pinned = value is not None and self.index_file is not None  # __init__ assigns before index_file

    @property
    def item_count(self) -> int:
        """len(items), without decoding a format 3 index that is not decoded yet (the terminal's host list)."""
        return len(self._item_list) if self._item_list is not None else self._indexed_count

    def _decode_items(self) -> list[CaptureItem]:
        table = self._table
        if table is None:
            assert self.index_file is not None and self.inside is not None
            where = str(self.index_file)
            try:
                data = read_member(self.inside, self.index_file, where, MAX_ITEM_BYTES)
                table = decode_index(data, where, self.stream_bytes.get(STREAM_FILE))
            except CaptureError as exc:  # it was checked when loaded: it changed since
                raise CorruptItemError(f"index changed since the capture was loaded: {exc.message}",
                                       where=exc.where) from exc
        items = table.items()
        self._live = (table, items)
        return items

    def release(self) -> None:
        """Also drops format 3's decoded items (decoded again on next use)."""
        super().release()
        if self.index_file is not None and not self._pinned:
            self._item_list = None
        self._live = None

    def read(self, item: CaptureItem) -> bytes:
        self.cache["last_item"] = item  # named when this host's analysis fails (analysis._failure)
        offset = item.offset
        if offset is not None:  # the common case, first: a slice of the stream read once
            blob = self._blobs.get(item.path)
            if blob is not None:
                data = blob[offset:offset + item.bytes]
                if len(data) == item.bytes:
                    return data
        return self._read_stored(item)

    def texts(self, prefix: str, kind: str = "file") -> dict[tuple[str, int], str]:
        """HostCapture.texts without a Python step per item: the rows are selected once per index layout, and
        cut from the stream read once (one decode when ASCII). Items not decoded from the index (assigned), or
        not all in a stream read whole, go item by item (read() says what is wrong)."""
        items, live = self.items, self._live
        picked = live[0].select(prefix, kind) if live is not None and live[1] is items else None
        if picked is None or not picked[1]:
            return HostCapture.texts(self, prefix, kind) if picked is None else {}
        rows, keys = picked
        if STREAM_FILE not in self._blobs:
            self.read(items[int(rows[0])])  # reads the stream once, or raises as the item by item way would
        stream = self._blobs.get(STREAM_FILE)
        texts = live[0].texts(rows, stream) if stream is not None else None  # type: ignore[index]
        if texts is None:
            return HostCapture.texts(self, prefix, kind)
        self.cache["last_item"] = items[int(rows[-1])]  # as after read() of each, in order
        return dict(zip(keys, texts, strict=True))

    def _read_stored(self, item: CaptureItem) -> bytes:
        """read() past its common case: the first item of a stream, a file of its own, a large stream."""
        if self.root is None or self.inside is None:
            return super().read(item)
        blob = self._blobs.get(item.path)
        path, where = self.root / item.path, f"{self.root}/{item.path}"
        if item.offset is None:
            data = blob
            if data is None:
                data = self._blobs[item.path] = read_member(self.inside, path, where, MAX_ITEM_BYTES)
            return data
        if blob is None and self.stream_bytes.get(item.path, _WHOLE_READ_BYTES + 1) <= _WHOLE_READ_BYTES:
            blob = self._blobs[item.path] = read_member(self.inside, path, where, _WHOLE_READ_BYTES)
        if blob is not None:
            data = blob[item.offset:item.offset + item.bytes]
        else:
            fd = open_member(self.inside, path, where)
            try:
                data = os.pread(fd, item.bytes, item.offset)
            finally:
                os.close(fd)
        if len(data) != item.bytes:
            raise CorruptItemError("stream ends short of the item (changed since it was loaded?)",
                                   where=f"{where} item {item.source}")
        return data


# Format 3 indexes kept in memory by one load_capture, checked, so that a host's first use decodes no file again;
# past this many bytes of index (about 250 HGX hosts, 2,500 hosts of 8 ports), the rest are read again on first
# use: memory stays flat whatever the fleet (the kept strings cost about as much again).
_KEEP_INDEX_BYTES = 64 * MIB


def _load_host(root: Path, inside: Path, name: str, verify: bool, version: int, keep: list[int]) -> HostCapture:
    """One host; when its own records cannot be used, the host marked failed with the reason (the file and
    what is wrong), so that the rest of the fleet is still analyzed. Integrity errors are raised."""
    hdir = root / "hosts" / name
    try:
        return _host_from_records(hdir, inside, name, verify, version, keep)
    except CorruptItemError:
        raise
    except CaptureError as exc:
        where = (exc.where or "").removeprefix(f"{root}/")
        return StoredHost(host=name, status=HostStatus.FAILED, transport="", root=hdir, inside=inside,
                          reason=f"capture directory: {where}: {exc.message}")


def _host_from_records(hdir: Path, inside: Path, name: str, verify: bool, version: int,
                       keep: list[int]) -> StoredHost:
    where = f"{hdir}/host.json"  # strings, not Paths: this runs for every host of the fleet
    meta = as_object(read_json(inside, where), "", where)
    if meta.get("host") != name:
        raise CaptureError(f"names host {str(meta.get('host'))[:80]!r}, but its folder is {name!r}", where=where)
    status = text_field(meta, "status", "", where)
    if status not in STATUSES:
        raise CaptureError(f"status {status[:40]!r} is not one of {', '.join(STATUSES)}", where=where)
    snapshots = meta.get("snapshots", [])
    if type(snapshots) is not list:
        raise bad_field("", "snapshots", "a list", snapshots, where)
    host = StoredHost(
        host=name, status=HostStatus(status), transport=text_field(meta, "transport", "", where, ""),
        reason=text_field(meta, "reason", "", where, None), started_at=text_field(meta, "started_at", "", where, None),
        finished_at=text_field(meta, "finished_at", "", where, None),
        snapshots=[snapshot_record(s, n, where) for n, s in enumerate(snapshots)], root=hdir, inside=inside,
    )
    if version >= 3:
        _index_v3(host, keep)
    else:
        host.items = _index_v2(hdir, inside)
        _check_stream_bounds(host)
    if verify:
        _check_items(host)
        host.release()
    return host


def _index_v3(hc: StoredHost, keep: list[int]) -> None:
    """Check index.fci whole (bounds against the stream's size, a stat), then leave the items to be decoded on
    first use: loading a fleet builds no item objects. keep[0]: index bytes this load may still keep."""
    assert hc.root is not None and hc.inside is not None
    path, stream = f"{hc.root}/{INDEX_FILE}", f"{hc.root}/{STREAM_FILE}"
    data = read_member(hc.inside, path, path, MAX_ITEM_BYTES)
    try:
        size: int | None = member_size(hc.inside, stream, stream)
    except MissingFile:
        size = None
    table = decode_index(data, path, size)
    if size is None and table.in_stream:
        raise CorruptItemError("stream missing or unreadable", where=stream)
    hc._indexed_count = len(table)
    if len(data) <= keep[0]:
        keep[0] -= len(data)
        hc._table = table
    if size is not None:
        hc.stream_bytes[STREAM_FILE] = size
    hc.index_file = hc.root / INDEX_FILE
    hc.items = None  # type: ignore[assignment]  # decoded from index_file on first use


def _index_v2(hdir: Path, inside: Path) -> list[CaptureItem]:
    index_where = str(hdir / "index.json")
    index = as_object(read_json(inside, hdir / "index.json"), "", index_where)
    raw_items = index.get("items")
    if type(raw_items) is not list:
        raise bad_field("", "items", "a list", raw_items, index_where)
    items = [item_record(raw, n, index_where) for n, raw in enumerate(raw_items)]
    seen: set[tuple[str, int, str]] = set()
    for it in items:
        key = (it.source, it.snapshot, it.kind)
        if key in seen:
            raise CaptureError(f"lists {it.source[:200]!r} (snapshot {it.snapshot}, {it.kind}) twice",
                               where=index_where)
        seen.add(key)
    return items


def _item_where(hc: StoredHost, it: CaptureItem) -> str:
    return f"{hc.root}/{it.path} item {it.source} (snapshot {it.snapshot}, {it.kind})"


def _check_stream_bounds(hc: StoredHost) -> None:
    """Every stream item lies inside the stream (a stat, not a read: this runs with verify=False too)."""
    assert hc.root is not None and hc.inside is not None
    for it in hc.items:
        if it.offset is None:
            continue
        size = hc.stream_bytes.get(it.path)
        if size is None:
            where = f"{hc.root}/{it.path}"
            try:
                size = hc.stream_bytes[it.path] = member_size(hc.inside, hc.root / it.path, where)
            except MissingFile as exc:
                raise CorruptItemError("stream missing or unreadable", where=where) from exc
        if it.offset + it.bytes > size:
            raise CorruptItemError(f"stream ends {it.offset + it.bytes - size} bytes short of the item (truncated?)",
                                   where=_item_where(hc, it))


def _check_items(hc: StoredHost) -> None:
    """Each item's bytes against its sha256, read item by item (a small stream at once): never the whole of a
    large stream, never more than _CHUNK of one item at a time."""
    assert hc.root is not None and hc.inside is not None
    streams: dict[str, list[CaptureItem]] = {}
    for it in hc.items:
        if it.offset is None:
            path = hc.root / it.path
            try:
                data = read_member(hc.inside, path, str(path), MAX_ITEM_BYTES)
            except MissingFile as exc:
                raise CorruptItemError("item missing or unreadable", where=str(path)) from exc
            _check_digest(data, it, str(path))
        else:
            streams.setdefault(it.path, []).append(it)
    for rel, items in streams.items():
        where = f"{hc.root}/{rel}"
        fd = open_member(hc.inside, hc.root / rel, where)
        try:
            size = os.fstat(fd).st_size
            whole = memoryview(os.pread(fd, size, 0)) if size <= _WHOLE_READ_BYTES else None
            for it in sorted(items, key=lambda it: it.offset or 0):
                digest = hashlib.sha256()
                for pos in range(it.offset or 0, (it.offset or 0) + it.bytes, _CHUNK):
                    n = min(_CHUNK, (it.offset or 0) + it.bytes - pos)
                    digest.update(whole[pos:pos + n] if whole is not None else os.pread(fd, n, pos))
                if digest.hexdigest() != it.sha256:
                    raise CorruptItemError("item content does not match its sha256 (corrupt or edited)",
                                           where=_item_where(hc, it))
        finally:
            os.close(fd)


def _check_digest(data: bytes, it: CaptureItem | InputFile, where: str) -> None:
    if len(data) != it.bytes:
        raise CorruptItemError(f"item is {len(data)} bytes, index says {it.bytes} (truncated?)", where=where)
    if hashlib.sha256(data).hexdigest() != it.sha256:
        raise CorruptItemError("item content does not match its sha256 (corrupt or edited)", where=where)


def _load_inputs(root: Path, inside: Path, meta: dict, verify: bool) -> list[InputFile]:
    """The files given to fabricase (NCCL logs): each must be a plain file under inputs/ of the size its
    record says (it is read whole by the analysis), and with verify, of its sha256."""
    where = str(root / "capture.json")
    raw_inputs = meta.get("inputs", [])
    if type(raw_inputs) is not list:
        raise bad_field("", "inputs", "a list", raw_inputs, where)
    items = []
    for n, raw in enumerate(raw_inputs):
        label = f"input {n}"
        d = as_object(raw, label, where)
        item = InputFile(kind=text_field(d, "kind", label, where),
                         source=text_field(d, "source", label, where, ""),
                         path=text_field(d, "path", label, where),
                         bytes=integer_field(d, "bytes", label, where, 0, 2**63),
                         sha256=text_field(d, "sha256", label, where),
                         truncated=flag_field(d, "truncated", label, where))
        rel = PurePosixPath(item.path)
        if rel.is_absolute() or ".." in rel.parts or rel.parts[:1] != ("inputs",) or len(rel.parts) < 2:
            raise CorruptItemError("input path escapes the capture directory", where=f"{root}/{item.path}")
        path, at = root / item.path, f"{root}/{item.path}"
        try:
            size = member_size(inside, path, at)
        except MissingFile as exc:
            raise CorruptItemError("input missing", where=at) from exc
        if size != item.bytes:
            raise CorruptItemError(f"input is {size} bytes, capture.json says {item.bytes} (truncated?)", where=at)
        if verify:
            _check_input_digest(inside, path, at, item)
        items.append(item)
    return items


def _check_input_digest(inside: Path, path: Path, where: str, item: InputFile) -> None:
    digest = hashlib.sha256()
    fd = open_member(inside, path, where)
    with os.fdopen(fd, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != item.sha256:
        raise CorruptItemError("item content does not match its sha256 (corrupt or edited)", where=where)


def _capture_hosts(meta: dict, where: str) -> list[str]:
    hosts = meta.get("hosts", [])
    if type(hosts) is not list:
        raise bad_field("", "hosts", "a list of host names", hosts, where)
    seen: set[str] = set()
    for name in hosts:
        if type(name) is not str or not SAFE_HOST.match(name):
            shown = repr(name)[:80] if type(name) is str else kind_of(name)
            raise CaptureError(f"hosts: {shown} cannot name a host folder", where=where)
        if name in seen:
            raise CaptureError(f"hosts: {name!r} is listed twice", where=where)
        seen.add(name)
    return hosts


def load_host(root: Path, name: str, version: int) -> HostCapture:
    """One host of a capture directory, unverified, exactly as load_capture(root, verify=False) loads it: for the
    recording worker that analyzes each host as soon as it is written (pipeline.collect)."""
    root = find_capture_root(root)
    return _load_host(root, root.resolve(), name, False, version, [_KEEP_INDEX_BYTES])


def load_capture(path: Path, *, verify: bool = True) -> Capture:
    """Load a capture directory (or an unpacked bundle), checking every record, and with `verify` every item
    against its sha256 (read item by item). A host whose own records are unusable loads as failed, with the
    reason; anything else wrong is one CaptureError naming the file (see the comment above _WHOLE_READ_BYTES)."""
    root = find_capture_root(path)
    inside = root.resolve()
    where = str(root / "capture.json")
    meta = read_json(inside, root / "capture.json")
    if type(meta) is not dict or meta.get("format") != CAPTURE_FORMAT:
        raise CaptureError("not a fabricase capture (format field)", where=where)
    version = meta.get("format_version")
    if type(version) is not int or version not in READABLE_VERSIONS:
        readable = ", ".join(map(str, READABLE_VERSIONS))
        shown = repr(version)[:40] if type(version) in (int, str) else kind_of(version)
        raise CaptureError(f"capture format {shown} is not supported (this fabricase reads {readable})",
                           where=str(root))
    collectors = meta.get("collectors", {})
    if type(collectors) is not dict:
        raise bad_field("", "collectors", "an object of collector versions", collectors, where)
    for name, number in collectors.items():
        if type(number) is not int or abs(number) >= 2**31:
            raise bad_field("collectors", f"the version of {name[:80]!r}", "an integer", number, where)
    targets = meta.get("targets", {})
    if type(targets) is not dict:
        raise bad_field("", "targets", "an object", targets, where)
    interval = number_field(meta, "interval_s", "", where) or 0.0
    if interval < 0:
        raise CaptureError("interval_s is negative", where=where)
    keep = [_KEEP_INDEX_BYTES]
    hosts = [_load_host(root, inside, name, verify, version, keep) for name in _capture_hosts(meta, where)]
    return Capture(
        root=root, format_version=version, created_at=text_field(meta, "created_at", "", where, ""),
        tool_version=text_field(meta, "tool_version", "", where, ""), interval_s=float(interval),
        collectors=dict(collectors), targets=dict(targets), hosts=hosts,
        inputs=_load_inputs(root, inside, meta, verify),
    )
