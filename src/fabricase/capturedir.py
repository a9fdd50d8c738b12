"""Write and read capture directories (formats 1 and 2, docs/capture-format.md).

Everything after capture works on this directory alone: analysis, bundles, drafts and replays. Reading trusts
nothing in it (see "reading a capture directory back"): files are opened only inside it, read up to the caps of
fabricase.caps, item by item, and every record is type-checked.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from fabricase import __version__
from fabricase.caps import MAX_ITEM_BYTES, MIB
from fabricase.capture_records import (
    STATUSES,
    STREAM_FILE,
    MissingFile,
    as_object,
    bad_field,
    flag_field,
    integer_field,
    item_path,
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
from fabricase.collectors.framing import StreamResult
from fabricase.collectors.plan import CapturePlan
from fabricase.errors import CaptureError, CorruptItemError, ParseError, TargetError
from fabricase.models import Capture, CaptureItem, HostCapture, HostStatus, InputFile, Placement, SnapshotInfo

__all__ = [
    "FORMAT_VERSION",
    "READABLE_VERSIONS",
    "STREAM_FILE",
    "INPUT_CAP",
    "PLACEMENTS_FILE",
    "add_inputs",
    "find_capture_root",
    "host_capture_from_stream",
    "load_capture",
    "load_placements",
    "new_capture_dir",
    "placements_bytes",
    "prepare_capture_dir",
    "write_capture_meta",
    "write_host",
    "write_placements",
]

FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
_FORMAT = "fabricase-capture"
_SAFE_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")



def _error_for(kind: str, rc: int | None, timeout_s: float | None, stderr: bytes) -> str | None:
    if rc in (0, None):
        return None
    if kind == "file":
        return "unreadable"
    if rc in (124, 137) and timeout_s is not None:
        return f"timed out after {timeout_s:g}s"
    if rc == 127:
        return "command not found"
    first = stderr.decode("utf-8", "replace").strip().splitlines()
    return f"exit {rc}" + (f": {first[0][:200]}" if first else "")


def host_capture_from_stream(host: str, stream: StreamResult, plan: CapturePlan) -> HostCapture:
    """Index a parsed stream: each item points into the raw stream (stored verbatim as stream.fc1)."""
    stderr = {(i.source, i.snapshot): i.content for i in stream.items if i.kind == "stderr"}
    items: list[CaptureItem] = []
    seen: set[str] = set()
    for fi in stream.items:
        logical = item_path(fi.source, fi.snapshot, fi.kind)
        if logical is None or logical in seen:
            continue  # refused or duplicate (two globs reaching one file): the first read wins
        seen.add(logical)
        cmd = plan.command(fi.source[4:]) if fi.source.startswith("cmd:") else None
        duration = None
        if fi.t0 is not None and fi.t1 is not None:
            duration = round(max(fi.t1 - fi.t0, 0.0) * 1000, 1)
        error = None
        if fi.kind != "stderr":
            error = _error_for(fi.kind, fi.rc, cmd.timeout_s if cmd else None,
                               stderr.get((fi.source, fi.snapshot), b""))
        items.append(CaptureItem(
            source=fi.source, snapshot=fi.snapshot, kind=fi.kind, collector=fi.collector, path=STREAM_FILE,
            bytes=len(fi.content), sha256=hashlib.sha256(fi.content).hexdigest(), rc=fi.rc,
            duration_ms=duration, truncated=fi.truncated, error=error,
            command=cmd.shell if cmd and fi.kind == "command" else None, offset=fi.offset,
        ))
    snaps = [
        SnapshotInfo(index=m.index, epoch=m.epoch_start, uptime_start=m.uptime_start, uptime_end=m.uptime_end)
        for m in sorted(stream.snapshots.values(), key=lambda m: m.index)
    ]
    return HostCapture(host=host, status=HostStatus.OK, transport="", items=items, snapshots=snaps)


def new_capture_dir(parent: Path, label: str) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", label)[:40] or "capture"
    path = parent / f"{stamp}-{safe}-{os.getpid()}"
    return path


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def _write_index(path: Path, items: list[CaptureItem]) -> None:
    # Compact, in one encoder call: json's C encoder (indent=None) is ~10x faster than the indenting one,
    # and a GPU host has thousands of items.
    body = json.dumps({"items": [it.to_dict() for it in items]}, sort_keys=True, separators=(",", ":"))
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(body + "\n")
    tmp.replace(path)


def prepare_capture_dir(root: Path) -> Path:
    """Create the capture directory: it must be new or empty."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CaptureError(f"cannot create capture directory: {exc.strerror}", where=str(root)) from exc
    if any(root.iterdir()):
        # Never mix a new capture into an existing one or into an unrelated folder.
        raise CaptureError("output directory is not empty", where=str(root))
    return root


def write_capture_meta(root: Path, *, plan: CapturePlan, targets: dict, hosts: list[str],
                       created_at: str) -> None:
    _write_json(root / "capture.json", {
        "format": _FORMAT,
        "format_version": FORMAT_VERSION,
        "created_at": created_at,
        "tool_version": __version__,
        "interval_s": plan.interval_s,
        "since_s": plan.since_s,  # the log window: reproduce.sh asks for the same
        "collectors": plan.collector_versions,
        "targets": targets,
        "hosts": hosts,
    })


INPUT_CAP = 256 * 1024 * 1024


def add_inputs(root: Path, kind: str, files: list[Path], cap: int = INPUT_CAP) -> list[InputFile]:
    """Copy files given by the user (e.g. NCCL logs) into inputs/<kind>/ and list them in capture.json."""
    meta_path = root / "capture.json"
    meta = as_object(read_json(root.resolve(), meta_path), "", str(meta_path))
    inputs = list(meta.get("inputs", []))
    added = []
    for n, src in enumerate(files, start=len(inputs)):
        try:
            with open(src, "rb") as fh:
                data = fh.read(cap + 1)
        except OSError as exc:
            raise CaptureError(f"cannot read {kind}: {exc.strerror}", where=str(src)) from exc
        truncated = len(data) > cap
        data = data[:cap]
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", src.name)[:80] or "input"
        rel = f"inputs/{kind}/{n:03d}-{safe}"
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        item = InputFile(kind=kind, source=str(src), path=rel, bytes=len(data),
                         sha256=hashlib.sha256(data).hexdigest(), truncated=truncated)
        inputs.append(vars(item))
        added.append(item)
    meta["inputs"] = inputs
    _write_json(meta_path, meta)
    return added


def host_dir_name(host: str) -> str:
    if not _SAFE_HOST.match(host):
        raise TargetError(f"host name {host!r} cannot name a folder")
    return host


def write_host(root: Path, hc: HostCapture, raw: bytes) -> HostCapture:
    """Store a host: its raw stream verbatim (one file, whatever the number of items), index and record."""
    hdir = root / "hosts" / host_dir_name(hc.host)
    try:
        hdir.mkdir(parents=True, exist_ok=True)
        with open(hdir / STREAM_FILE, "wb") as fh:
            fh.write(raw)
        _write_index(hdir / "index.json", hc.items)
        _write_json(hdir / "host.json", {
            "host": hc.host, "status": str(hc.status), "reason": hc.reason, "transport": hc.transport,
            "started_at": hc.started_at, "finished_at": hc.finished_at,
            "snapshots": [vars(s) for s in hc.snapshots],
        })
    except OSError as exc:
        raise CaptureError(f"cannot write capture: {exc.strerror}", where=str(hdir)) from exc
    hc.root = hdir
    return hc




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

    def read(self, item: CaptureItem) -> bytes:
        self.cache["last_item"] = item  # named when this host's analysis fails (analysis._failure)
        if self.root is None or self.inside is None:
            return super().read(item)
        path, where = self.root / item.path, f"{self.root}/{item.path}"
        if item.offset is None:
            data = self._blobs.get(item.path)
            if data is None:
                data = self._blobs[item.path] = read_member(self.inside, path, where, MAX_ITEM_BYTES)
            return data
        blob = self._blobs.get(item.path)
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


def _load_host(root: Path, inside: Path, name: str, verify: bool) -> HostCapture:
    """One host; when its own records cannot be used, the host marked failed with the reason (the file and
    what is wrong), so that the rest of the fleet is still analyzed. Integrity errors are raised."""
    hdir = root / "hosts" / name
    try:
        return _host_from_records(hdir, inside, name, verify)
    except CorruptItemError:
        raise
    except CaptureError as exc:
        where = (exc.where or "").removeprefix(f"{root}/")
        return StoredHost(host=name, status=HostStatus.FAILED, transport="", root=hdir, inside=inside,
                          reason=f"capture directory: {where}: {exc.message}")


def _host_from_records(hdir: Path, inside: Path, name: str, verify: bool) -> StoredHost:
    where = str(hdir / "host.json")
    meta = as_object(read_json(inside, hdir / "host.json"), "", where)
    if meta.get("host") != name:
        raise CaptureError(f"names host {str(meta.get('host'))[:80]!r}, but its folder is {name!r}", where=where)
    status = text_field(meta, "status", "", where)
    if status not in STATUSES:
        raise CaptureError(f"status {status[:40]!r} is not one of {', '.join(STATUSES)}", where=where)
    snapshots = meta.get("snapshots", [])
    if type(snapshots) is not list:
        raise bad_field("", "snapshots", "a list", snapshots, where)
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
    hc = StoredHost(
        host=name, status=HostStatus(status), transport=text_field(meta, "transport", "", where, ""),
        reason=text_field(meta, "reason", "", where, None), started_at=text_field(meta, "started_at", "", where, None),
        finished_at=text_field(meta, "finished_at", "", where, None), items=items,
        snapshots=[snapshot_record(s, n, where) for n, s in enumerate(snapshots)], root=hdir, inside=inside,
    )
    _check_stream_bounds(hc)
    if verify:
        _check_items(hc)
    return hc


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
        if type(name) is not str or not _SAFE_HOST.match(name):
            shown = repr(name)[:80] if type(name) is str else kind_of(name)
            raise CaptureError(f"hosts: {shown} cannot name a host folder", where=where)
        if name in seen:
            raise CaptureError(f"hosts: {name!r} is listed twice", where=where)
        seen.add(name)
    return hosts


def load_capture(path: Path, *, verify: bool = True) -> Capture:
    """Load a capture directory (or an unpacked bundle), checking every record, and with `verify` every item
    against its sha256 (read item by item). A host whose own records are unusable loads as failed, with the
    reason; anything else wrong is one CaptureError naming the file (see the comment above _WHOLE_READ_BYTES)."""
    root = find_capture_root(path)
    inside = root.resolve()
    where = str(root / "capture.json")
    meta = read_json(inside, root / "capture.json")
    if type(meta) is not dict or meta.get("format") != _FORMAT:
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
    hosts = [_load_host(root, inside, name, verify) for name in _capture_hosts(meta, where)]
    return Capture(
        root=root, format_version=version, created_at=text_field(meta, "created_at", "", where, ""),
        tool_version=text_field(meta, "tool_version", "", where, ""), interval_s=float(interval),
        collectors=dict(collectors), targets=dict(targets), hosts=hosts,
        inputs=_load_inputs(root, inside, meta, verify),
    )


# Placements: where each host sits (provider, instance, zone, shared switches and racks), stored beside the hosts
# so that a bundle re-analyzed anywhere, without the inventory or the provider's API, still names the switch.

PLACEMENTS_FILE = "placements.json"
PLACEMENTS_VERSION = 1
READABLE_PLACEMENTS_VERSIONS = (1,)
_PLACEMENTS_FORMAT = "fabricase-placements"
_PLACEMENT_TEXT_FIELDS = ("instance_id", "instance_type", "region", "zone", "placement_group", "source")


def placements_bytes(placements: list[Placement]) -> bytes:
    """The placements.json document: one record per host, sorted by host, keys sorted (same placements, same
    bytes, so that bundles stay reproducible)."""
    hosts = [p.host for p in placements]
    if len(set(hosts)) != len(hosts):
        twice = sorted({h for h in hosts if hosts.count(h) > 1})
        raise CaptureError(f"more than one placement for host {twice[0]!r}", where=PLACEMENTS_FILE)
    doc = {
        "format": _PLACEMENTS_FORMAT,
        "format_version": PLACEMENTS_VERSION,
        "placements": [dataclasses.asdict(p) for p in sorted(placements, key=lambda p: p.host)],
    }
    # default=str: a provider's raw `extra` may hold a date or a number type json does not know.
    return (json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")


def write_placements(root: Path, placements: list[Placement]) -> Path:
    """Store the placements as root/placements.json. A file that already holds exactly these bytes is left
    alone, so that opening a read-only replay again does not fail."""
    path = root / PLACEMENTS_FILE
    data = placements_bytes(placements)
    tmp = path.with_name(f".{PLACEMENTS_FILE}.tmp")
    try:
        if path.is_file() and path.read_bytes() == data:
            return path
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise CaptureError(f"cannot store placements: {exc.strerror or exc}", where=str(path)) from exc
    return path


def load_placements(root: Path) -> list[Placement] | None:
    """The placements stored in a capture directory; None when it has none. A malformed file is one ParseError
    naming it and what is wrong."""
    path = root / PLACEMENTS_FILE
    try:
        # Like every file of a capture: a plain file inside it (no symlink out, no FIFO), read up to a cap.
        text = read_member(root.resolve(), path, str(path), MAX_ITEM_BYTES).decode("utf-8")
    except MissingFile:
        return None
    except (CaptureError, UnicodeDecodeError) as exc:
        reason = exc.message if isinstance(exc, CaptureError) else str(exc)
        raise ParseError(f"cannot read the placements: {reason}", where=str(path)) from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"not valid JSON: {exc.msg} (line {exc.lineno})", where=str(path)) from exc
    except (ValueError, RecursionError) as exc:  # a number of over 4,300 digits; nesting past the parser's stack
        reason = "nested too deep" if isinstance(exc, RecursionError) else "a number of over 4,300 digits"
        raise ParseError(f"not valid JSON: {reason}", where=str(path)) from exc
    return _placements_from_doc(doc, where=str(path))


def _placements_from_doc(doc: Any, *, where: str) -> list[Placement]:
    """Check a placements document (format 1) and read its records; errors name the record at fault."""
    if not isinstance(doc, dict) or doc.get("format") != _PLACEMENTS_FORMAT:
        raise ParseError(f"not a fabricase placements document (format is not {_PLACEMENTS_FORMAT!r})", where=where)
    version = doc.get("format_version")
    if version not in READABLE_PLACEMENTS_VERSIONS:
        readable = ", ".join(map(str, READABLE_PLACEMENTS_VERSIONS))
        raise ParseError(f"placements format {version!r} is not supported (this fabricase reads {readable})",
                         where=where)
    records = doc.get("placements")
    if not isinstance(records, list):
        raise ParseError("'placements' is not a list", where=where)
    placements: list[Placement] = []
    seen: set[str] = set()
    for n, record in enumerate(records):
        placement = _placement_from_record(record, n, where)
        if placement.host in seen:
            raise ParseError(f"host {placement.host!r} is placed twice", where=where)
        seen.add(placement.host)
        placements.append(placement)
    return placements


def _placement_from_record(record: Any, n: int, where: str) -> Placement:
    if not isinstance(record, dict):
        raise ParseError(f"placement #{n} is not an object", where=where)
    host = record.get("host")
    if not isinstance(host, str) or not host:
        raise ParseError(f"placement #{n} has no host name", where=where)
    label = f"placement #{n} ({host[:80]!r})"
    if not isinstance(record.get("provider"), str) or not record["provider"]:
        raise ParseError(f"{label} has no provider", where=where)
    for key in _PLACEMENT_TEXT_FIELDS:
        if not isinstance(record.get(key), str | None):
            raise ParseError(f"{label}: {key} must be a string or null", where=where)
    topology = record.get("topology", [])
    if not isinstance(topology, list) or not all(isinstance(t, str) and t for t in topology):
        raise ParseError(f"{label}: topology must be a list of component names like \"switch:leaf-3\"",
                         where=where)
    extra = record.get("extra", {})
    if not isinstance(extra, dict):
        raise ParseError(f"{label}: extra must be an object", where=where)
    # Fields this version does not know are ignored, as everywhere in the capture format.
    return Placement(host=host, provider=record["provider"], topology=list(topology), extra=dict(extra),
                     **{key: record.get(key) for key in _PLACEMENT_TEXT_FIELDS})
