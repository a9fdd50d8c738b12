"""One streaming pass over a bundle: the reader that verify, extraction and the joining of parts share
(fabricase.bundler.verify).

Every reader streams the archive once (tarfile's `r|` mode over one gzip member), so a bundle of many GiB is
checked in constant memory: members are hashed in 1 MiB chunks, and only MANIFEST.json, PART.json,
capture.json and each host's index.json (all capped) are read whole. Members are judged on their headers
before any of their bytes are read (bundler/members.py): unsafe names, links, devices, fifos and sizes over
the caps in fabricase.caps are refused, by `verify` and by extraction alike, because a bundle may come from
anywhere.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import tarfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricase.bundler.archive import BUNDLE_FORMAT, BUNDLE_FORMAT_VERSION, MANIFEST_NAME, index_commands
from fabricase.bundler.capture_check import CAPTURE_JSON, index_host
from fabricase.bundler.framing import GzipStream, tar_end_problems
from fabricase.bundler.members import Caps, header_problem, member_problem, shown
from fabricase.errors import BundleError

__all__ = [
    "CHUNK",
    "PART_INFO",
    "SHA256_HEX",
    "Scan",
    "admit",
    "parse_manifest",
    "read_archive",
    "read_small",
    "reading",
    "scan_bundle",
]

_MAX_MANIFEST_BYTES = 64 * 1024**2
CHUNK = 1 << 20  # bytes read at a time
SHA256_HEX = re.compile(r"[0-9a-f]{64}")
PART_INFO = "PART.json"  # a bundle part's record (fabricase.bundler.verify), one of the few read whole
# what a damaged or foreign file raises while it is decompressed and untarred
_READ_ERRORS = (tarfile.TarError, EOFError, OSError, zlib.error)


@dataclass
class Scan:
    """What one pass over the archive found, for verify to judge; extraction keeps only the running count."""

    manifest_raw: bytes | None = None
    files: dict[str, tuple[int, str]] = field(default_factory=dict)  # name -> (size, sha256)
    duplicates: list[str] = field(default_factory=list)
    unsafe: list[str] = field(default_factory=list)  # "name (reason)"
    stopped: bool = False  # a cap was passed: the rest of the archive was not read
    framing: list[str] = field(default_factory=list)  # the tar's end and the gzip member's end
    headers: list[tuple[str, str]] = field(default_factory=list)  # (name, fields that differ from the builder's)
    mtime: int | None = None  # the first member's: every member must carry the same
    count: int = 0
    total: int = 0
    part_raw: bytes | None = None  # PART.json, when the bundle is a part
    capture_doc: dict[str, Any] | str | None = None  # capture/capture.json, or why it is unreadable
    indexes: dict[str, list[dict[str, Any]] | str] = field(default_factory=dict)  # host -> its commands, or why not


@contextlib.contextmanager
def reading(path: Path) -> Iterator[tuple[tarfile.TarFile, GzipStream]]:
    """Stream the tar inside the one gzip member; any decoding failure becomes a one-line BundleError."""
    try:
        with path.open("rb") as raw:
            stream = GzipStream(raw)
            with tarfile.open(fileobj=stream, mode="r|", bufsize=CHUNK) as tar:  # type: ignore[call-overload]
                yield tar, stream
    except (*_READ_ERRORS, _Damaged) as exc:
        cause = exc.__cause__ if isinstance(exc, _Damaged) and exc.__cause__ else exc
        detail = shown(" ".join(str(cause).split()) or type(cause).__name__)
        raise BundleError(f"not a readable bundle (gzip-compressed tar): {detail}", where=shown(str(path))) from cause


def admit(member: tarfile.TarInfo, scan: Scan, caps: Caps) -> str | None:
    """Why the scan refuses this member, from its header and the running count and total; a cap passed stops
    the scan there, so a header that declares 3 GiB is never read on."""
    scan.count += 1
    scan.total += member.size if member.isreg() else 0
    if scan.count > caps.members:
        scan.stopped = True
        return f"member {scan.count}, over the cap of {caps.members} members; verification stopped here"
    if scan.total > caps.total_bytes:
        scan.stopped = True
        return f"{scan.total} bytes so far, over the {caps.total_bytes}-byte cap; verification stopped here"
    reason = member_problem(member, caps)
    if reason is not None and member.size > caps.member_bytes:
        scan.stopped = True
        reason += "; verification stopped here"
    return reason


def scan_bundle(path: Path, caps: Caps, *, refuse_unsafe: bool = False) -> Scan:
    """One pass over the archive: the manifest's bytes and every regular member's size and sha256, the records
    the command list is checked against, the header fields, and the framing after the last member."""
    scan = Scan()
    with reading(path) as (tar, stream):
        for member in tar:
            reason = admit(member, scan, caps)
            if reason is not None:
                if refuse_unsafe:
                    raise BundleError(f"refusing member {shown(member.name)}: {reason}", where=shown(str(path)))
                scan.unsafe.append(f"{shown(member.name)} ({reason})")
                if scan.stopped:
                    break
                continue
            if member.isdir():
                continue  # a directory entry carries nothing (docs/bundles.md, "What verify checks")
            _note_header(member, scan)
            _take(tar, member, scan, path)
        if not scan.stopped:
            scan.framing = tar_end_problems(tar, stream)
    return scan


def _note_header(member: tarfile.TarInfo, scan: Scan) -> None:
    if scan.mtime is None:
        scan.mtime = member.mtime
        if member.name != MANIFEST_NAME:  # the builder writes it first, so it can be read without the rest
            scan.headers.append((MANIFEST_NAME, f"order: {MANIFEST_NAME} is not the first member"))
    differs = header_problem(member, scan.mtime)
    if differs is not None:
        scan.headers.append((member.name, f"header: {shown(member.name)} ({differs})"))


def _take(tar: tarfile.TarFile, member: tarfile.TarInfo, scan: Scan, path: Path) -> None:
    """Hash one regular member; keep the few that verify reads (manifest, PART.json, capture records)."""
    name = member.name
    if name == MANIFEST_NAME:
        if scan.manifest_raw is not None:
            scan.duplicates.append(name)
        scan.manifest_raw = read_small(tar, member, path)
        return
    if name in scan.files:
        scan.duplicates.append(shown(name))
    host = index_host(name)
    if name != PART_INFO and name != CAPTURE_JSON and host is None:
        scan.files[name] = _hash_member(tar, member)
        return
    raw = read_small(tar, member, path)
    scan.files[name] = (len(raw), hashlib.sha256(raw).hexdigest())
    if name == PART_INFO:
        scan.part_raw = raw
    elif name == CAPTURE_JSON:
        scan.capture_doc = _capture_doc(raw)
    elif host is not None:
        try:
            scan.indexes[host] = index_commands(raw)
        except ValueError as exc:
            scan.indexes[host] = shown(" ".join(str(exc).split()))


def _capture_doc(raw: bytes) -> dict[str, Any] | str:
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        return shown(" ".join(str(exc).split()))
    return doc if isinstance(doc, dict) else "not a JSON object"


def _hash_member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> tuple[int, str]:
    src = tar.extractfile(member)
    assert src is not None  # regular members always have data
    digest, size = hashlib.sha256(), 0
    while chunk := src.read(CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return size, digest.hexdigest()


def read_small(tar: tarfile.TarFile, member: tarfile.TarInfo, path: Path) -> bytes:
    """A record that verify reads whole (manifest, PART.json, capture records), refused past 64 MiB."""
    if member.size > _MAX_MANIFEST_BYTES:
        raise BundleError(f"{shown(member.name)} is {member.size} bytes: too large for a record verify reads",
                          where=shown(str(path)))
    src = tar.extractfile(member)
    assert src is not None
    return src.read()


def parse_manifest(raw: bytes, path: Path) -> dict[str, Any]:
    """MANIFEST.json's document, checked for format, version and a well-formed member list."""
    where = f"{shown(str(path))}:{MANIFEST_NAME}"
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise BundleError(f"not JSON: {shown(str(exc))}", where=where) from exc
    if not isinstance(doc, dict) or doc.get("format") != BUNDLE_FORMAT:
        raise BundleError(f"not a {BUNDLE_FORMAT} manifest", where=where)
    if doc.get("format_version") != BUNDLE_FORMAT_VERSION:
        raise BundleError(
            f"bundle format_version {shown(repr(doc.get('format_version')))} is not supported "
            f"(this fabricase reads {BUNDLE_FORMAT_VERSION})",
            where=where,
        )
    members = doc.get("members")
    if not isinstance(members, list):
        raise BundleError("members is not a list", where=where)
    seen: set[str] = set()
    for i, m in enumerate(members):
        if not (
            isinstance(m, dict)
            and isinstance(m.get("path"), str)
            and isinstance(m.get("size"), int)
            and m["size"] >= 0
            and isinstance(m.get("sha256"), str)
            and SHA256_HEX.fullmatch(m["sha256"])
        ):
            raise BundleError(f"member #{i} is malformed: {shown(repr(m)[:120])}", where=where)
        if m["path"] in seen or m["path"] == MANIFEST_NAME:
            raise BundleError(f"member {shown(m['path'])} is listed twice", where=where)
        seen.add(m["path"])
    return doc


class _Damaged(Exception):
    """An archive read error raised where write errors are also caught; `reading` unwraps it."""


def read_archive(read: Any, n: int) -> bytes:
    """`read(n)` on a member's data, where write errors are also caught: a read error comes out of `reading`
    as the damaged archive it is, not as a failed write."""
    try:
        return read(n)
    except _READ_ERRORS as exc:
        raise _Damaged() from exc
