"""Read, verify and safely extract a bundle, and join a bundle's parts.

Every reader streams the archive once (tarfile's `r|` mode over one gzip member), so a bundle of many GiB is
checked in constant memory: members are hashed in 1 MiB chunks, and only MANIFEST.json, PART.json,
capture.json and each host's index.json (all capped) are read whole. Members are judged on their headers
before any of their bytes are read (bundler/members.py): unsafe names, links, devices, fifos and sizes over
the caps in fabricase.caps are refused, by `verify` and by extraction alike, because a bundle may come from
anywhere. What verify checks, and what it leaves out on purpose, is in docs/bundles.md ("What verify checks").

A *part* (fit.split_bundle) is a bundle of two members: PART.json (the parent bundle's name, size, sha256
and id; this part's index and the count; every part's offset, size and sha256) and part.bin (this part's
slice of the parent's bytes). `verify_bundle` checks a part like any bundle, and that its slice is the one
PART.json lists; `join_parts` checks that the parts belong together and rebuilds the parent byte for byte.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fabricase.bundler.archive import (
    BUNDLE_FORMAT,
    BUNDLE_FORMAT_VERSION,
    DIR_MODE,
    FILE_MODE,
    MANIFEST_NAME,
    _write_atomically,  # the one atomic writer: a joined bundle appears whole or not at all
    index_commands,
)
from fabricase.bundler.capture_check import CAPTURE_JSON, capture_problems, form_problem, index_host
from fabricase.bundler.framing import GzipStream, tar_end_problems
from fabricase.bundler.members import Caps, header_problem, member_problem, shown
from fabricase.errors import BundleError, VerifyError

__all__ = [
    "DEFAULT_MAX_MEMBER_BYTES",
    "PART_DATA",
    "PART_FORMAT",
    "PART_FORMAT_VERSION",
    "PART_INFO",
    "VerifyReport",
    "bundle_id_of",
    "extract_bundle",
    "join_parts",
    "read_manifest",
    "verify_bundle",
]

DEFAULT_MAX_MEMBER_BYTES = Caps.current().member_bytes  # caps.MAX_MEMBER_BYTES, read again at each call
_MAX_MANIFEST_BYTES = 64 * 1024**2
_CHUNK = 1 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")
PART_INFO = "PART.json"
PART_DATA = "part.bin"
PART_FORMAT = "fabricase-bundle-part"
PART_FORMAT_VERSION = 1
# what a damaged or foreign file raises while it is decompressed and untarred
_READ_ERRORS = (tarfile.TarError, EOFError, OSError, zlib.error)


@dataclass
class VerifyReport:
    ok: bool
    bundle_id: str | None  # sha256 of MANIFEST.json
    members: int  # members the manifest lists
    problems: list[str] = field(default_factory=list)
    part: dict[str, Any] | None = None  # a bundle part: its PART.json (index, count, parent, parts)
    summary: dict[str, Any] | None = None  # a summary bundle: its record (bundler.summary_form); None: full

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Scan:
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


def read_manifest(path: Path) -> dict[str, Any]:
    """The bundle's manifest, read without decompressing past it when it is the first member."""
    path = Path(path)
    with _reading(path) as (tar, _):
        for member in tar:
            if member.name == MANIFEST_NAME and member.isreg():
                return _parse_manifest(_read_small(tar, member, path), path)
    raise BundleError(f"no {MANIFEST_NAME}: not a fabricase bundle", where=shown(str(path)))


def verify_bundle(path: Path, *, max_member_bytes: int | None = None) -> VerifyReport:
    """Check every member against the manifest, the manifest's command list against the bundled index, and the
    archive's framing (nothing after the tar's end or the gzip stream's); each problem names the member at
    fault. For a bundle part, also that its slice is the one its PART.json lists (`report.part`)."""
    path = Path(path)
    scan = _scan(path, Caps.current(member_bytes=max_member_bytes))
    report, manifest = _judge(scan, path)
    listed = {m["path"]: m for m in manifest["members"]}
    if scan.part_raw is not None or PART_INFO in listed:
        report.part, problems = _judge_part(scan.part_raw, listed)
        report.problems += problems
        report.ok = not report.problems
    return report


def bundle_id_of(path: Path) -> str:
    """The bundle id: the sha256 of its MANIFEST.json, read without decompressing past it."""
    path = Path(path)
    with _reading(path) as (tar, _):
        for member in tar:
            if member.name == MANIFEST_NAME and member.isreg():
                raw = _read_small(tar, member, path)
                _parse_manifest(raw, path)
                return hashlib.sha256(raw).hexdigest()
    raise BundleError(f"no {MANIFEST_NAME}: not a fabricase bundle", where=shown(str(path)))


def extract_bundle(path: Path, dest: Path, *, max_member_bytes: int | None = None) -> Path:
    """Verify, then extract into `dest` (absent or empty); `dest/capture/` is then a capture directory. The caps
    are verify's (fabricase.caps; `max_member_bytes` lowers the per-member one), so what verifies extracts."""
    path, dest = Path(path), Path(dest)
    caps = Caps.current(member_bytes=max_member_bytes)
    report, manifest = _judge(_scan(path, caps, refuse_unsafe=True), path)
    if not report.ok:
        shown_problems = "; ".join(report.problems[:3]) + (" ..." if len(report.problems) > 3 else "")
        raise VerifyError(
            f"bundle failed verification ({len(report.problems)} problems: {shown_problems})",
            where=shown(str(path)),
            problems=report.problems,
        )
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BundleError("extraction target exists and is not an empty folder", where=shown(str(dest)))
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    except OSError as exc:
        raise BundleError(f"cannot create: {exc.strerror or exc}", where=shown(str(dest))) from exc
    try:
        _extract_into(path, staging, {m["path"]: m for m in manifest["members"]}, caps)
        if dest.exists():
            dest.rmdir()
        staging.rename(dest)  # all or nothing: a failed extraction leaves no half-written tree
    except OSError as exc:
        raise BundleError(f"cannot extract: {exc.strerror or exc}", where=shown(str(dest))) from exc
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return dest


def _judge(scan: _Scan, path: Path) -> tuple[VerifyReport, dict[str, Any]]:
    if scan.manifest_raw is None:
        if scan.stopped:
            raise BundleError(f"refusing the bundle: {scan.unsafe[-1]}", where=shown(str(path)))
        raise BundleError(f"no {MANIFEST_NAME}: not a fabricase bundle", where=shown(str(path)))
    manifest = _parse_manifest(scan.manifest_raw, path)
    problems = [f"unsafe: {u}" for u in scan.unsafe] + [f"duplicate: {d}" for d in scan.duplicates]
    if not scan.stopped:  # otherwise the members after the cap were never read: "missing" would be noise
        problems += scan.framing + _header_problems(scan, manifest) + _compare(manifest["members"], scan.files)
        problems += capture_problems(manifest, scan.capture_doc, scan.indexes)
        problems += filter(None, [form_problem(scan.manifest_raw, manifest)])
    report = VerifyReport(
        ok=not problems,
        bundle_id=hashlib.sha256(scan.manifest_raw).hexdigest(),
        members=len(manifest["members"]),
        problems=problems,
        summary=manifest["summary"] if isinstance(manifest.get("summary"), dict) else None,
    )
    return report, manifest


def _header_problems(scan: _Scan, manifest: dict[str, Any]) -> list[str]:
    # one problem per member: an extra or duplicate member is already named as such
    listed = {m["path"] for m in manifest["members"]} | {MANIFEST_NAME}
    twice = set(scan.duplicates)
    return [text for name, text in scan.headers if name in listed and shown(name) not in twice]


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[tuple[tarfile.TarFile, GzipStream]]:
    """Stream the tar inside the one gzip member; any decoding failure becomes a one-line BundleError."""
    try:
        with path.open("rb") as raw:
            stream = GzipStream(raw)
            with tarfile.open(fileobj=stream, mode="r|", bufsize=_CHUNK) as tar:  # type: ignore[call-overload]
                yield tar, stream
    except (*_READ_ERRORS, _Damaged) as exc:
        cause = exc.__cause__ if isinstance(exc, _Damaged) and exc.__cause__ else exc
        detail = shown(" ".join(str(cause).split()) or type(cause).__name__)
        raise BundleError(f"not a readable bundle (gzip-compressed tar): {detail}", where=shown(str(path))) from cause


def _admit(member: tarfile.TarInfo, scan: _Scan, caps: Caps) -> str | None:
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


def _scan(path: Path, caps: Caps, *, refuse_unsafe: bool = False) -> _Scan:
    """One pass over the archive: the manifest's bytes and every regular member's size and sha256, the records
    the command list is checked against, the header fields, and the framing after the last member."""
    scan = _Scan()
    with _reading(path) as (tar, stream):
        for member in tar:
            reason = _admit(member, scan, caps)
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


def _note_header(member: tarfile.TarInfo, scan: _Scan) -> None:
    if scan.mtime is None:
        scan.mtime = member.mtime
        if member.name != MANIFEST_NAME:  # the builder writes it first, so it can be read without the rest
            scan.headers.append((MANIFEST_NAME, f"order: {MANIFEST_NAME} is not the first member"))
    differs = header_problem(member, scan.mtime)
    if differs is not None:
        scan.headers.append((member.name, f"header: {shown(member.name)} ({differs})"))


def _take(tar: tarfile.TarFile, member: tarfile.TarInfo, scan: _Scan, path: Path) -> None:
    """Hash one regular member; keep the few that verify reads (manifest, PART.json, capture records)."""
    name = member.name
    if name == MANIFEST_NAME:
        if scan.manifest_raw is not None:
            scan.duplicates.append(name)
        scan.manifest_raw = _read_small(tar, member, path)
        return
    if name in scan.files:
        scan.duplicates.append(shown(name))
    host = index_host(name)
    if name != PART_INFO and name != CAPTURE_JSON and host is None:
        scan.files[name] = _hash_member(tar, member)
        return
    raw = _read_small(tar, member, path)
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
    while chunk := src.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return size, digest.hexdigest()


def _read_small(tar: tarfile.TarFile, member: tarfile.TarInfo, path: Path) -> bytes:
    if member.size > _MAX_MANIFEST_BYTES:
        raise BundleError(f"{shown(member.name)} is {member.size} bytes: too large for a record verify reads",
                          where=shown(str(path)))
    src = tar.extractfile(member)
    assert src is not None
    return src.read()


def _parse_manifest(raw: bytes, path: Path) -> dict[str, Any]:
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
            and _SHA256.fullmatch(m["sha256"])
        ):
            raise BundleError(f"member #{i} is malformed: {shown(repr(m)[:120])}", where=where)
        if m["path"] in seen or m["path"] == MANIFEST_NAME:
            raise BundleError(f"member {shown(m['path'])} is listed twice", where=where)
        seen.add(m["path"])
    return doc


def _compare(listed: list[dict[str, Any]], found: dict[str, tuple[int, str]]) -> list[str]:
    problems = []
    expected = {m["path"]: m for m in listed}
    for name in sorted(expected.keys() | found.keys()):
        want, have = expected.get(name), found.get(name)
        if want is None:
            problems.append(f"extra: {shown(name)}")
        elif have is None:
            problems.append(f"missing: {shown(name)}")
        elif have[0] != want["size"]:
            problems.append(f"size: {shown(name)} ({have[0]} bytes, manifest says {want['size']})")
        elif have[1] != want["sha256"]:
            problems.append(f"changed: {shown(name)} (sha256 mismatch)")
    return problems


def _extract_into(path: Path, root: Path, expected: dict[str, dict[str, Any]], caps: Caps) -> None:
    scan = _Scan()  # the running count and total, for the caps
    with _reading(path) as (tar, stream):
        for member in tar:
            # judged again: the file may have been replaced since it was verified
            reason = _admit(member, scan, caps)
            if reason is not None:
                raise BundleError(f"refusing member {shown(member.name)}: {reason}", where=shown(str(path)))
            want = expected.get(member.name)
            if member.isreg() and member.name != MANIFEST_NAME and want is None:
                raise BundleError(f"member {shown(member.name)} is not in the manifest", where=shown(str(path)))
            digest = _write_member(tar, member, root / member.name)
            if want is not None and digest != want["sha256"]:
                raise BundleError(f"member {shown(member.name)} changed since it was verified", where=shown(str(path)))
        framing = tar_end_problems(tar, stream)
    if framing:
        raise BundleError(f"changed since it was verified: {framing[0]}", where=shown(str(path)))


def _write_member(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> str | None:
    """Write one directory or regular file; returns the file's sha256."""
    try:
        if member.isdir():
            target.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            return None
        target.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        src = tar.extractfile(member)
        assert src is not None
        digest = hashlib.sha256()
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with os.fdopen(fd, "wb") as out:
            while chunk := _read_archive(src.read, _CHUNK):
                digest.update(chunk)
                out.write(chunk)
        os.utime(target, (member.mtime, member.mtime))
    except OSError as exc:  # only writes land here: archive read errors are wrapped in _Damaged
        raise BundleError(f"cannot write: {exc.strerror or exc}", where=shown(str(target))) from exc
    return digest.hexdigest()


class _Damaged(Exception):
    """An archive read error raised where write errors are also caught; _reading unwraps it."""


def _read_archive(read: Any, n: int) -> bytes:
    try:
        return read(n)
    except _READ_ERRORS as exc:
        raise _Damaged() from exc


# --- bundle parts -----------------------------------------------------------------------------------------


def _part_doc(raw: bytes) -> dict[str, Any]:
    """PART.json, checked for shape and for slices that tile the parent; a ValueError says what is wrong."""
    doc = json.loads(raw)
    if not isinstance(doc, dict) or doc.get("format") != PART_FORMAT:
        raise ValueError(f"not a {PART_FORMAT} record")
    if doc.get("format_version") != PART_FORMAT_VERSION:
        raise ValueError(f"format_version {doc.get('format_version')!r} is not supported")
    parent, parts, count, index = doc.get("parent"), doc.get("parts"), doc.get("count"), doc.get("index")
    if not (isinstance(parent, dict) and isinstance(parent.get("size"), int) and isinstance(parent.get("name"), str)
            and _SHA256.fullmatch(str(parent.get("sha256")))):
        raise ValueError("parent is malformed")
    if not (isinstance(count, int) and isinstance(index, int) and isinstance(parts, list)
            and 1 <= index <= count == len(parts)):
        raise ValueError(f"part {index!r} of {count!r} with {len(parts) if isinstance(parts, list) else 0} listed")
    offset = 0
    for k, p in enumerate(parts, start=1):
        if not (isinstance(p, dict) and p.get("index") == k and p.get("offset") == offset
                and isinstance(p.get("size"), int) and p["size"] > 0 and _SHA256.fullmatch(str(p.get("sha256")))):
            raise ValueError(f"the entry of part {k} is malformed or does not follow part {k - 1}")
        offset += p["size"]
    if offset != parent["size"]:
        raise ValueError(f"the parts hold {offset} bytes, the parent {parent['size']}")
    return doc


def _judge_part(raw: bytes | None, listed: dict[str, dict[str, Any]]) -> tuple[dict[str, Any] | None, list[str]]:
    if raw is None:
        return None, []  # PART.json is listed but absent: already reported as missing
    try:
        doc = _part_doc(raw)
    except ValueError as exc:
        return None, [f"part: {PART_INFO} is malformed: {exc}"]
    entry, data = doc["parts"][doc["index"] - 1], listed.get(PART_DATA)
    if data is None:
        return doc, [f"part: {PART_DATA} is not in the manifest"]
    if (data["size"], data["sha256"]) != (entry["size"], entry["sha256"]):
        return doc, [f"part: {PART_DATA} is not the slice {PART_INFO} lists for part {doc['index']} of {doc['count']}"]
    return doc, []


def join_parts(parts: list[Path], out: Path) -> Path:
    """Rebuild the bundle that `parts` (in any order) were split from, into `out`, atomically. Every part must
    verify, all must describe the same parent, each index must be there once, and the result must have the
    parent's sha256; otherwise a VerifyError lists what is wrong and nothing is written."""
    if not parts:
        raise BundleError("no parts given")
    problems: list[str] = []
    docs: dict[int, tuple[Path, dict[str, Any]]] = {}
    for path in map(Path, parts):
        report = verify_bundle(path)
        if report.part is None:
            problems.append(f"{path}: not a bundle part")
        problems += [f"{path}: {p}" for p in report.problems]
        if report.part is None or not report.ok:
            continue
        index = report.part["index"]
        if index in docs:
            problems.append(f"{path}: part {index} given twice (also {docs[index][0]})")
        docs[index] = (path, report.part)
    listings = {json.dumps([d["parent"], d["parts"]], sort_keys=True) for _, d in docs.values()}
    if len(listings) > 1:
        problems.append("the parts come from different bundles (or one was altered): their PART.json disagree")
    if docs and not problems:
        count = next(iter(docs.values()))[1]["count"]
        problems += [f"part {k} of {count} is missing" for k in range(1, count + 1) if k not in docs]
    if problems:
        raise VerifyError(f"cannot join: {problems[0]}", where=str(out), problems=problems)
    parent = next(iter(docs.values()))[1]["parent"]
    _write_atomically(Path(out), lambda fh: _join_into(fh, [docs[k] for k in sorted(docs)], parent, Path(out)))
    return Path(out)


def _join_into(fh: Any, ordered: list[tuple[Path, dict[str, Any]]], parent: dict[str, Any], out: Path) -> None:
    whole = hashlib.sha256()
    for path, doc in ordered:
        piece = hashlib.sha256()
        with _reading(path) as (tar, _):
            for member in tar:
                if member.name == PART_DATA and member.isreg():
                    src = tar.extractfile(member)
                    assert src is not None
                    while chunk := _read_archive(src.read, _CHUNK):
                        piece.update(chunk)
                        whole.update(chunk)
                        fh.write(chunk)
                    break
        if piece.hexdigest() != doc["parts"][doc["index"] - 1]["sha256"]:
            # the file changed between its verification and this read
            raise VerifyError(f"part {doc['index']} changed while it was joined", where=str(path))
    if whole.hexdigest() != parent["sha256"]:
        raise VerifyError("the joined bytes do not have the parent's sha256", where=str(out))
