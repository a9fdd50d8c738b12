"""Write and read capture directories (format 1, docs/capture-format.md).

Everything after capture works on this directory alone: analysis, bundles, drafts and replays.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from fabricase import __version__
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
STREAM_FILE = "stream.fc1"  # a host's capture stream, byte for byte as the host sent it
_FORMAT = "fabricase-capture"
_SAFE_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _item_path(source: str, snapshot: int, kind: str) -> str | None:
    """Where an item's bytes are stored inside the host folder; None for a source we refuse to store."""
    if source.startswith("cmd:"):
        name = source[4:]
        if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
            return None
        return f"s{snapshot}/cmd/{name}" + (".stderr" if kind == "stderr" else "")
    # String checks, not pathlib: this runs for every item of every host (3,000 items a GPU host).
    if not source.startswith("/") or "\n" in source or ".." in source.split("/"):
        return None
    return f"s{snapshot}/fs{source}"


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
        logical = _item_path(fi.source, fi.snapshot, fi.kind)
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
    meta = _load_json(meta_path)
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


def _load_inputs(root: Path, meta: dict, verify: bool) -> list[InputFile]:
    items = []
    for raw in meta.get("inputs", []):
        try:
            item = InputFile(**raw)
        except TypeError as exc:
            raise CaptureError(f"malformed input record ({exc})", where=str(root / "capture.json")) from exc
        rel = PurePosixPath(item.path)
        if rel.is_absolute() or ".." in rel.parts or rel.parts[:1] != ("inputs",):
            raise CorruptItemError("input path escapes the capture directory", where=f"{root}/{item.path}")
        if verify:
            _check_bytes(root / item.path, item.bytes, item.sha256, f"{root}/{item.path}")
        items.append(item)
    return items


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


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise CaptureError("missing", where=str(path)) from exc
    except (OSError, ValueError) as exc:
        raise CaptureError(f"unreadable JSON ({exc})", where=str(path)) from exc


def _load_host(root: Path, name: str, verify: bool) -> HostCapture:
    hdir = root / "hosts" / host_dir_name(name)
    meta = _load_json(hdir / "host.json")
    index = _load_json(hdir / "index.json")
    try:
        items = [CaptureItem(**it) for it in index["items"]]
        hc = HostCapture(
            host=meta["host"], status=HostStatus(meta["status"]), transport=meta.get("transport", ""),
            reason=meta.get("reason"), started_at=meta.get("started_at"), finished_at=meta.get("finished_at"),
            items=items, snapshots=[SnapshotInfo(**s) for s in meta.get("snapshots", [])], root=hdir,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CaptureError(f"malformed host record ({exc})", where=str(hdir)) from exc
    if verify:
        _check_items(hdir, items)
    return hc


def _check_items(hdir: Path, items: list[CaptureItem]) -> None:
    packs: dict[str, bytes] = {}
    for it in items:
        if it.offset is None:
            _check_item(hdir, it)
            continue
        where = f"{hdir}/{it.path} item {it.source} (snapshot {it.snapshot}, {it.kind})"
        if it.path != STREAM_FILE or it.offset < 0:
            raise CorruptItemError("item does not point into the host's stream", where=where)
        if it.path not in packs:
            try:
                packs[it.path] = (hdir / it.path).read_bytes()
            except OSError as exc:
                raise CorruptItemError(f"stream missing or unreadable ({exc.strerror})",
                                       where=f"{hdir}/{it.path}") from exc
        data = packs[it.path][it.offset:it.offset + it.bytes]
        if len(data) != it.bytes:
            raise CorruptItemError(f"stream ends {it.bytes - len(data)} bytes short of the item (truncated?)",
                                   where=where)
        if hashlib.sha256(data).hexdigest() != it.sha256:
            raise CorruptItemError("item content does not match its sha256 (corrupt or edited)", where=where)


def _check_item(hdir: Path, it: CaptureItem) -> None:
    where = f"{hdir}/{it.path}"
    if _item_path(it.source, it.snapshot, it.kind) != it.path:
        raise CorruptItemError("item path does not match its source", where=where)
    _check_bytes(hdir / it.path, it.bytes, it.sha256, where)


def _check_bytes(path: Path, size: int, sha256: str, where: str) -> None:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CorruptItemError(f"item missing or unreadable ({exc.strerror})", where=where) from exc
    if len(data) != size:
        raise CorruptItemError(f"item is {len(data)} bytes, index says {size} (truncated?)", where=where)
    if hashlib.sha256(data).hexdigest() != sha256:
        raise CorruptItemError("item content does not match its sha256 (corrupt or edited)", where=where)


def load_capture(path: Path, *, verify: bool = True) -> Capture:
    """Load a capture directory (or an unpacked bundle), checking every item against its index."""
    root = find_capture_root(path)
    meta = _load_json(root / "capture.json")
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
        raise CaptureError("not a fabricase capture (format field)", where=str(root / "capture.json"))
    version = meta.get("format_version")
    if version not in READABLE_VERSIONS:
        readable = ", ".join(map(str, READABLE_VERSIONS))
        raise CaptureError(f"capture format {version} is not supported (this fabricase reads {readable})",
                           where=str(root))
    hosts = [_load_host(root, name, verify) for name in meta.get("hosts", [])]
    return Capture(
        root=root, format_version=version, created_at=meta.get("created_at", ""),
        tool_version=meta.get("tool_version", ""), interval_s=float(meta.get("interval_s") or 0),
        collectors=dict(meta.get("collectors", {})), targets=dict(meta.get("targets", {})), hosts=hosts,
        inputs=_load_inputs(root, meta, verify),
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
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ParseError(f"cannot read the placements: {reason}", where=str(path)) from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"not valid JSON: {exc.msg} (line {exc.lineno})", where=str(path)) from exc
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
