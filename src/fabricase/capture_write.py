"""Writing capture directories (docs/capture-format.md): a host's stream verbatim, its index and its record, and
the capture's own record. Split out of fabricase.capturedir, which re-exports every public name here."""

from __future__ import annotations

import hashlib
import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fabricase import __version__
from fabricase.atomicfile import replace_bytes, replace_text
from fabricase.capture_index import INDEX_FILE, encode_index
from fabricase.capture_records import SAFE_HOST, STREAM_FILE, as_object, item_path, read_json
from fabricase.collectors.framing import StreamResult
from fabricase.collectors.plan import CapturePlan
from fabricase.errors import CaptureError, TargetError
from fabricase.models import CaptureItem, HostCapture, HostStatus, InputFile, SnapshotInfo

__all__ = [
    "CAPTURE_FORMAT",
    "FORMAT_VERSION",
    "INPUT_CAP",
    "WRITTEN_VERSION",
    "add_inputs",
    "error_for",
    "host_capture_from_stream",
    "host_dir_name",
    "new_capture_dir",
    "prepare_capture_dir",
    "snapshot_infos",
    "utc_now",
    "write_capture_meta",
    "write_host",
    "write_stream",
]

CAPTURE_FORMAT = "fabricase-capture"
FORMAT_VERSION = 3  # the newest format: a compact binary index per host (capture_index)
# What a capture is written in unless the caller asks for another (read at each call: a benchmark or a test may
# set it). The code that rewrites a host's index in place (redact.capture, probe.store, the bundle manifest's
# command list, verify) reads and writes both index.json and index.fci.
WRITTEN_VERSION = 3


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")



def error_for(kind: str, rc: int | None, timeout_s: float | None, stderr: bytes) -> str | None:
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


def snapshot_infos(stream: StreamResult) -> list[SnapshotInfo]:
    """The stream's snapshot marks as a host record's snapshots, in index order."""
    return [SnapshotInfo(index=m.index, epoch=m.epoch_start, uptime_start=m.uptime_start, uptime_end=m.uptime_end)
            for m in sorted(stream.snapshots.values(), key=lambda m: m.index)]


def host_capture_from_stream(host: str, stream: StreamResult, plan: CapturePlan) -> HostCapture:
    """Index a parsed stream: each item points into the raw stream (stored verbatim as stream.fc1)."""
    stderr = {(i.source, i.snapshot): i.content for i in stream.items if i.kind == "stderr"}
    items: list[CaptureItem] = []
    seen: set[str] = set()
    commands: dict[str, Any] = {}  # plan.command is a search: once per command name, not per item
    sha256 = hashlib.sha256
    for fi in stream.items:
        logical = item_path(fi.source, fi.snapshot, fi.kind)
        if logical is None or logical in seen:
            continue  # refused or duplicate (two globs reaching one file): the first read wins
        seen.add(logical)
        cmd = None
        if fi.source.startswith("cmd:"):
            name = fi.source[4:]
            cmd = commands[name] if name in commands else commands.setdefault(name, plan.command(name))
        duration = None
        if fi.t0 is not None and fi.t1 is not None:
            duration = round(max(fi.t1 - fi.t0, 0.0) * 1000, 1)
        error = None
        if fi.kind != "stderr" and fi.rc not in (0, None):
            error = error_for(fi.kind, fi.rc, cmd.timeout_s if cmd else None,
                              stderr.get((fi.source, fi.snapshot), b""))
        # Positional, in CaptureItem's field order: a GPU host has thousands of items (keywords cost ~3x).
        items.append(CaptureItem(
            fi.source, fi.snapshot, fi.kind, fi.collector, STREAM_FILE, len(fi.content),
            sha256(fi.content).hexdigest(), fi.rc, duration, fi.truncated, error,
            cmd.shell if cmd and fi.kind == "command" else None, fi.offset,
        ))
    return HostCapture(host=host, status=HostStatus.OK, transport="", items=items,
                       snapshots=snapshot_infos(stream))


def new_capture_dir(parent: Path, label: str) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", label)[:40] or "capture"
    path = parent / f"{stamp}-{safe}-{os.getpid()}"
    return path


def _write_json(path: Path, data: Any) -> None:
    replace_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def _write_index(path: Path, items: list[CaptureItem]) -> None:
    # Compact, in one encoder call: json's C encoder (indent=None) is ~10x faster than the indenting one,
    # and a GPU host has thousands of items.
    body = json.dumps({"items": [it.to_dict() for it in items]}, sort_keys=True, separators=(",", ":"))
    replace_text(path, body + "\n")


def _write_bytes(path: Path, data: bytes) -> None:
    replace_bytes(path, data)


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
                       created_at: str, version: int | None = None) -> None:
    """capture.json; `version` (default WRITTEN_VERSION) must be the one every write_host of it is given."""
    version = version or WRITTEN_VERSION
    if version not in (2, FORMAT_VERSION):
        raise CaptureError(f"cannot write capture format {version}", where=str(root))
    _write_json(root / "capture.json", {
        "format": CAPTURE_FORMAT,
        "format_version": version,
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
    if not SAFE_HOST.match(host):
        raise TargetError(f"host name {host!r} cannot name a folder")
    return host


def write_stream(root: Path, host: str, raw: bytes) -> Path:
    """A host's raw stream, stored verbatim where write_host keeps it, before its index and record are written:
    collect hands a stream to a recording worker as this file rather than through a pipe (pipeline._Recorder).
    Returns the file's path; CaptureError when it cannot be written."""
    hdir = root / "hosts" / host_dir_name(host)
    try:
        _store_stream(hdir, raw)
    except OSError as exc:
        raise CaptureError(f"cannot write capture: {exc.strerror}", where=str(hdir)) from exc
    return hdir / STREAM_FILE


def _store_stream(hdir: Path, raw: bytes) -> None:
    hdir.mkdir(parents=True, exist_ok=True)
    with open(hdir / STREAM_FILE, "wb") as fh:
        fh.write(raw)


def write_host(root: Path, hc: HostCapture, raw: bytes | None, version: int | None = None,
               index: bytes | None = None) -> HostCapture:
    """Store a host: its raw stream verbatim (one file, whatever the number of items), index and record.
    `raw` None: the stream is stored already (write_stream). `version`: the capture's format (capture.json), 3
    for the binary index.fci, 2 for index.json; default WRITTEN_VERSION. `index`: format 3's index.fci bytes of
    the stream, when the caller has them in place of hc.items (capture_scan)."""
    version = version or WRITTEN_VERSION
    hdir = root / "hosts" / host_dir_name(hc.host)
    try:
        if raw is None:
            hdir.mkdir(parents=True, exist_ok=True)
        else:
            _store_stream(hdir, raw)
        if version >= 3:
            _write_bytes(hdir / INDEX_FILE, encode_index(hc.items) if index is None else index)
        else:
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
