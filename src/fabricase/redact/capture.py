"""A redacted copy of a capture directory that is still a valid capture.

Redaction changes lengths, and a capture addresses its items by length: a host's stream.fc1 frames each item
with its size, and its index.json gives each item's offset, size and sha256 (docs/capture-format.md). So each
host is rewritten whole: every frame of the stream around its redacted content, and the index with the new
offsets, sizes and digests; capture.json's inputs likewise. Every other file is redacted as it is. The copy
loads with `load_capture(verify=True)` and analyzes like the original; the original is only read.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from fabricase.capture_index import INDEX_FILE, index_records, records_index
from fabricase.capturedir import STREAM_FILE
from fabricase.collectors.framing import parse_stream
from fabricase.errors import BundleError, CaptureError
from fabricase.redact import Redactor

__all__ = ["redact_capture", "reframe_stream"]

_MAGIC = b"@@FC1 "
_ITEM = b"@@FC1 I "
_CAPTURE_JSON = "capture.json"
_KEEP = frozenset({"sha256"})  # digests: never text to redact
_PATHS = frozenset({"path", "source"})  # paths inside the capture: pseudonymized like member names


class _Writer:
    """Writes the redacted files under `dest` and remembers what each became (path, size, sha256)."""

    def __init__(self, dest: Path) -> None:
        self.dest = dest
        self.written: dict[str, tuple[str, int, str]] = {}  # original rel -> (redacted rel, size, sha256)
        self._taken: dict[str, str] = {}

    def put(self, rel: str, new_rel: str, data: bytes) -> tuple[str, int, str]:
        if self._taken.setdefault(new_rel, rel) != rel:
            raise BundleError(f"two files would be bundled as one after redaction: {new_rel!r}")
        path = self.dest / new_rel
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        except OSError as exc:
            raise BundleError(f"cannot write the redacted capture: {exc.strerror or exc}", where=str(path)) from exc
        self.written[rel] = (new_rel, len(data), hashlib.sha256(data).hexdigest())
        return self.written[rel]


def redact_capture(root: Path, files: list[str], dest: Path, redactor: Redactor, prefix: str = "") -> None:
    """Write the redacted copy of the capture at `root` (its regular files `files`, POSIX paths relative to
    root) under the new directory `dest`. `prefix` + a path is the member name counts are reported under."""
    root, dest = Path(root), Path(dest)
    _check_hosts(root, files, redactor)
    out = _Writer(dest)
    present = set(files)
    host_dirs = sorted({rel.rsplit("/", 1)[0] for rel in files if _is_host_index(rel)})
    done: set[str] = set()
    for hdir in host_dirs:
        done |= _redact_host(root, hdir, present, out, redactor, prefix)
    for rel in files:
        if rel not in done and rel != _CAPTURE_JSON:
            out.put(rel, redactor.redact_path(rel), redactor.redact(prefix + rel, _read(root / rel)))
    if _CAPTURE_JSON in present:
        _redact_capture_json(root, out, redactor, prefix)


def _is_host_index(rel: str) -> bool:
    parts = rel.split("/")
    return len(parts) == 3 and parts[0] == "hosts" and parts[2] in ("index.json", INDEX_FILE)


def _check_hosts(root: Path, files: list[str], redactor: Redactor) -> None:
    if not redactor.pseudonymize:
        return
    folders = {rel.split("/")[1] for rel in files if rel.startswith("hosts/") and rel.count("/") >= 2}
    known = {h.lower() for h in redactor.hosts}
    for host in sorted(folders):
        if host.lower() not in known or redactor.redact_path(f"hosts/{host}/") == f"hosts/{host}/":
            raise BundleError("this host is not among the hosts given for pseudonymization, so its name would "
                              "stay in the bundle", where=str(root / "hosts" / host))


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise BundleError(f"cannot read: {exc.strerror or exc}", where=str(path)) from exc


def _load_json(root: Path, rel: str) -> Any:
    try:
        return json.loads(_read(root / rel))
    except ValueError as exc:
        raise BundleError(f"cannot redact: not valid JSON ({exc})", where=str(root / rel)) from exc


def _load_index(root: Path, rel: str) -> dict:
    """A format-3 index as format 2's document ({"items": [records]}), for the same rewriting."""
    try:
        return {"items": index_records(_read(root / rel), str(root / rel))}
    except CaptureError as exc:
        raise BundleError(f"cannot redact: {exc.message}", where=str(root / rel)) from exc


def _redact_host(root: Path, hdir: str, present: set[str], out: _Writer, redactor: Redactor,
                 prefix: str) -> set[str]:
    """A host folder: its stream re-framed, its own-file items (format 1) redacted, and its index pointed at
    the new bytes. Returns the files handled."""
    compact = f"{hdir}/{INDEX_FILE}" in present  # format 3: a binary index, rewritten as one
    index_rel = f"{hdir}/{INDEX_FILE}" if compact else f"{hdir}/index.json"
    doc = _load_index(root, index_rel) if compact else _load_json(root, index_rel)
    if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
        raise BundleError("cannot redact: index.json has no item list", where=str(root / index_rel))
    stream_rel = f"{hdir}/{STREAM_FILE}"
    handled = {index_rel}
    moved: dict[int, tuple[int, bytes]] = {}
    old_sizes: dict[int, int] = {}
    if stream_rel in present:
        raw = _read(root / stream_rel)
        new, moved, old_sizes = reframe_stream(raw, prefix + stream_rel, redactor)
        out.put(stream_rel, redactor.redact_path(stream_rel), new)
        handled.add(stream_rel)
    for item in doc["items"]:
        if not isinstance(item, dict):
            raise BundleError("cannot redact: an index item is not an object", where=str(root / index_rel))
        old_path, source = item.get("path"), item.get("source")
        _redact_fields(item, prefix + index_rel, redactor)
        if item.get("offset") is not None:
            offset = item["offset"]
            if old_path != STREAM_FILE or offset not in moved or old_sizes[offset] != item.get("bytes"):
                raise BundleError("cannot redact: the index item does not point at an item of the stream",
                                  where=f"{root / index_rel}: item {source}")
            new_offset, content = moved[offset]
            item.update(offset=new_offset, bytes=len(content), sha256=hashlib.sha256(content).hexdigest())
            continue
        rel = f"{hdir}/{old_path}"
        if rel not in present:
            raise BundleError("cannot redact: the index item's file is missing", where=f"{root / index_rel}: item "
                                                                                        f"{source}")
        if rel not in out.written:
            out.put(rel, redactor.redact_path(rel), redactor.redact(prefix + rel, _read(root / rel)))
        new_rel, size, digest = out.written[rel]
        item.update(path=new_rel.split("/", 2)[2], bytes=size, sha256=digest)
        handled.add(rel)
    if compact:
        try:
            data = records_index(doc["items"])
        except CaptureError as exc:
            raise BundleError(f"cannot redact: {exc.message}", where=str(root / index_rel)) from exc
        out.put(index_rel, redactor.redact_path(index_rel), data)
        return handled
    # The compact style capturedir writes indexes in (a GPU host has thousands of items).
    body = json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n"
    out.put(index_rel, redactor.redact_path(index_rel), body.encode("utf-8"))
    return handled


def _redact_fields(value: Any, member: str, redactor: Redactor, key: str | None = None) -> Any:
    """Every string in a JSON value redacted (paths pseudonymized only, digests kept), in place."""
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, str):  # inline: an index has a dozen fields for each of thousands of items
                if k not in _KEEP:
                    value[k] = redactor.redact_path(v) if k in _PATHS else redactor.redact_text(member, v)
            elif isinstance(v, dict | list):
                value[k] = _redact_fields(v, member, redactor, k)
    elif isinstance(value, list):
        value[:] = [_redact_fields(v, member, redactor, key) for v in value]
    elif isinstance(value, str) and key not in _KEEP:
        return redactor.redact_path(value) if key in _PATHS else redactor.redact_text(member, value)
    return value


def reframe_stream(raw: bytes, member: str, redactor: Redactor) -> tuple[bytes, dict[int, tuple[int, bytes]],
                                                                          dict[int, int]]:
    """A host's capture stream with every item's content redacted and its frame header resized.

    Returns the new stream; old content offset -> (new offset, new content); old offset -> old size. Marker
    lines are copied as they are. What follows the last complete item (a stream cut short) is redacted too,
    and a cut item stays cut, so the copy parses to the same items as the original."""
    parsed = parse_stream(raw)
    out = bytearray()
    moved: dict[int, tuple[int, bytes]] = {}
    sizes: dict[int, int] = {}
    pos = 0
    for item in parsed.items:
        header_start = raw.rfind(b"\n", 0, item.offset - 1) + 1
        out += raw[pos:header_start]
        # @@FC1 I <collector> <kind> <snapshot> <rc> <size> <truncated> <t0> <t1> <source to end of line>
        fields = raw[header_start:item.offset - 1].split(b" ", 10)
        content = redactor.redact(member, item.content)
        fields[6], fields[10] = str(len(content)).encode(), _redact_source(fields[10], redactor)
        out += b" ".join(fields) + b"\n"
        moved[item.offset] = (len(out), content)
        sizes[item.offset] = len(item.content)
        out += content + b"\n"
        pos = item.offset + len(item.content) + 1
    out += _redact_tail(raw[pos:], member, redactor)
    return bytes(out), moved, sizes


def _redact_source(source: bytes, redactor: Redactor) -> bytes:
    return redactor.redact_path(source.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


def _redact_tail(tail: bytes, member: str, redactor: Redactor) -> bytes:
    """The end of a stream after its last complete item: marker lines kept, a cut item's header resized to
    nothing it could complete, anything else redacted as text."""
    out = bytearray()
    while tail.startswith(_MAGIC) and b"\n" in tail:
        line, tail = tail.split(b"\n", 1)
        if not line.startswith(_ITEM):
            out += line + b"\n"
            continue
        fields = line.split(b" ", 10)
        if len(fields) != 11 or not fields[6].isdigit():
            out += redactor.redact(member, line + b"\n")
            continue
        declared = int(fields[6])
        content = redactor.redact(member, tail)
        fields[10] = _redact_source(fields[10], redactor)
        # The original stopped before this item's end; so must the copy, whatever redaction did to its length.
        return bytes(out) + b" ".join(fields) + b"\n" + content[:declared]
    return bytes(out) + redactor.redact(member, tail)


def _redact_capture_json(root: Path, out: _Writer, redactor: Redactor, prefix: str) -> None:
    """capture.json: strings redacted, host names pseudonymized, and each input's record following its
    redacted file (path, size, sha256)."""
    try:
        doc = json.loads(_read(root / _CAPTURE_JSON))
    except ValueError:
        doc = None
    if not isinstance(doc, dict):  # not a capture fabricase can load anyway: redacted as any file
        out.put(_CAPTURE_JSON, _CAPTURE_JSON, redactor.redact(prefix + _CAPTURE_JSON, _read(root / _CAPTURE_JSON)))
        return
    member = prefix + _CAPTURE_JSON
    if redactor.pseudonymize:
        listed = doc.get("hosts") if isinstance(doc.get("hosts"), list) else []
        _check_hosts(root, [f"hosts/{h}/host.json" for h in listed if isinstance(h, str)], redactor)
    targets = doc.get("targets")
    if isinstance(targets, dict) and isinstance(targets.get("nodeset"), str):
        targets["nodeset"] = redactor.redact_nodeset(member, targets["nodeset"])
    inputs = doc.get("inputs") if isinstance(doc.get("inputs"), list) else []
    old_paths = [rec.get("path") if isinstance(rec, dict) else None for rec in inputs]
    _redact_fields(doc, member, redactor)
    for rec, old in zip(inputs, old_paths, strict=True):
        if isinstance(old, str) and old in out.written:
            new_rel, size, digest = out.written[old]
            rec.update(path=new_rel, bytes=size, sha256=digest)
    body = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    out.put(_CAPTURE_JSON, _CAPTURE_JSON, body.encode("utf-8"))
