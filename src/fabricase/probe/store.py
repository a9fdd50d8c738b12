"""Probe results into the capture directory: each test's output becomes items of its hosts (stored as files of
their own, beside the host's packed stream, and listed in its index.json with their sha256), and the plan and
outcomes go to probe.json. The capture then verifies, bundles, redacts and replays like any other.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from fabricase.atomicfile import replace_bytes
from fabricase.capture_index import INDEX_FILE, index_records, records_index
from fabricase.capture_records import item_path
from fabricase.capturedir import host_dir_name
from fabricase.errors import CaptureError
from fabricase.models import CaptureItem
from fabricase.probe.model import PROBE_NAME, ProbeDoc

__all__ = ["NewItem", "append_items", "write_probe_doc"]


@dataclass(frozen=True)
class NewItem:
    source: str  # cmd:perf-probe-<id> or cmd:probe-server-<id>
    data: bytes
    rc: int | None
    command: str
    duration_ms: float | None = None
    error: str | None = None
    stderr: bytes = b""


def _write(path: Path, data: bytes) -> None:
    replace_bytes(path, data)


def _record(hdir: Path, source: str, kind: str, data: bytes, **fields) -> CaptureItem:
    rel = item_path(source, 0, kind)
    if rel is None:
        raise CaptureError(f"probe item name {source!r} cannot be stored", where=str(hdir))
    dest = hdir / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    _write(dest, data)
    return CaptureItem(source=source, snapshot=0, kind=kind, collector="probe", path=rel, bytes=len(data),
                       sha256=hashlib.sha256(data).hexdigest(), **fields)


def append_items(root: Path, host: str, items: list[NewItem]) -> None:
    """Add items (and their stderr) to a stored host; an item already listed is replaced."""
    hdir = Path(root) / "hosts" / host_dir_name(host)
    compact = (hdir / INDEX_FILE).is_file()  # format 3's binary index, else format 2's index.json
    index_path = hdir / (INDEX_FILE if compact else "index.json")
    try:
        listed = (index_records(index_path.read_bytes(), str(index_path)) if compact
                  else json.loads(index_path.read_text())["items"])
    except (OSError, ValueError, KeyError, TypeError, CaptureError) as exc:
        raise CaptureError(f"cannot add probe results: index unreadable ({exc})", where=str(index_path)) from exc
    names = {it.source for it in items}
    kept = [raw for raw in listed if not (isinstance(raw, dict) and raw.get("source") in names)]
    try:
        for it in items:
            kept.append(_record(hdir, it.source, "command", it.data, rc=it.rc, duration_ms=it.duration_ms,
                                error=it.error, command=it.command).to_dict())
            if it.stderr:
                kept.append(_record(hdir, it.source, "stderr", it.stderr).to_dict())
        if compact:
            _write(index_path, records_index(kept))
        else:
            body = json.dumps({"items": kept}, sort_keys=True, separators=(",", ":")) + "\n"
            _write(index_path, body.encode())
    except OSError as exc:
        raise CaptureError(f"cannot write probe results: {exc.strerror}", where=str(hdir)) from exc


def write_probe_doc(root: Path, doc: ProbeDoc) -> Path:
    path = Path(root) / PROBE_NAME
    try:
        _write(path, (json.dumps(doc.to_dict(), indent=2, sort_keys=True) + "\n").encode())
    except OSError as exc:
        raise CaptureError(f"cannot write the probe record: {exc.strerror}", where=str(path)) from exc
    return path
