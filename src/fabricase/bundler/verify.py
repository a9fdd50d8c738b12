"""Read, verify and safely extract a bundle.

Every reader streams the archive once (`r|` mode), so a bundle of many GiB is checked in constant
memory. Members are judged on their headers before any byte is written: absolute names, `..`
components, links, devices and fifos are refused, because a bundle may come from anywhere.
"""

from __future__ import annotations

import contextlib
import gzip
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
)
from fabricase.errors import BundleError, VerifyError

__all__ = ["DEFAULT_MAX_MEMBER_BYTES", "VerifyReport", "extract_bundle", "read_manifest", "verify_bundle"]

DEFAULT_MAX_MEMBER_BYTES = 2 * 1024**3
_MAX_MANIFEST_BYTES = 64 * 1024**2
_CHUNK = 1 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")
# what a damaged or foreign file raises while it is decompressed and untarred
_READ_ERRORS = (tarfile.TarError, EOFError, gzip.BadGzipFile, OSError, zlib.error)


@dataclass
class VerifyReport:
    ok: bool
    bundle_id: str | None  # sha256 of MANIFEST.json
    members: int  # members the manifest lists
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Scan:
    manifest_raw: bytes | None = None
    files: dict[str, tuple[int, str]] = field(default_factory=dict)  # name -> (size, sha256)
    duplicates: list[str] = field(default_factory=list)
    unsafe: list[str] = field(default_factory=list)  # "name (reason)"


def read_manifest(path: Path) -> dict[str, Any]:
    """The bundle's manifest, read without decompressing past it when it is the first member."""
    path = Path(path)
    with _reading(path) as tar:
        for member in tar:
            if member.name == MANIFEST_NAME and member.isreg():
                return _parse_manifest(_read_small(tar, member, path), path)
    raise BundleError(f"no {MANIFEST_NAME}: not a fabricase bundle", where=str(path))


def verify_bundle(path: Path) -> VerifyReport:
    """Check every member against the manifest; each problem names the member at fault."""
    path = Path(path)
    report, _ = _judge(_scan(path), path)
    return report


def extract_bundle(path: Path, dest: Path, *, max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES) -> Path:
    """Verify, then extract into `dest` (absent or empty); `dest/capture/` is then a capture directory."""
    path, dest = Path(path), Path(dest)
    report, manifest = _judge(_scan(path, refuse_unsafe=True, max_member_bytes=max_member_bytes), path)
    if not report.ok:
        shown = "; ".join(report.problems[:3]) + (" ..." if len(report.problems) > 3 else "")
        raise VerifyError(
            f"bundle failed verification ({len(report.problems)} problems: {shown})",
            where=str(path),
            problems=report.problems,
        )
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BundleError("extraction target exists and is not an empty folder", where=str(dest))
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    except OSError as exc:
        raise BundleError(f"cannot create: {exc.strerror or exc}", where=str(dest)) from exc
    try:
        _extract_into(path, staging, {m["path"]: m for m in manifest["members"]}, max_member_bytes)
        if dest.exists():
            dest.rmdir()
        staging.rename(dest)  # all or nothing: a failed extraction leaves no half-written tree
    except OSError as exc:
        raise BundleError(f"cannot extract: {exc.strerror or exc}", where=str(dest)) from exc
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return dest


def _judge(scan: _Scan, path: Path) -> tuple[VerifyReport, dict[str, Any]]:
    if scan.manifest_raw is None:
        raise BundleError(f"no {MANIFEST_NAME}: not a fabricase bundle", where=str(path))
    manifest = _parse_manifest(scan.manifest_raw, path)
    problems = [f"unsafe: {u}" for u in scan.unsafe] + [f"duplicate: {d}" for d in scan.duplicates]
    problems += _compare(manifest["members"], scan.files)
    report = VerifyReport(
        ok=not problems,
        bundle_id=hashlib.sha256(scan.manifest_raw).hexdigest(),
        members=len(manifest["members"]),
        problems=problems,
    )
    return report, manifest


@contextlib.contextmanager
def _reading(path: Path, *, to_end: bool = False) -> Iterator[tarfile.TarFile]:
    """Stream the tar inside the gzip; any decoding failure becomes a one-line BundleError."""
    try:
        with (
            path.open("rb") as raw,
            gzip.GzipFile(fileobj=raw, mode="rb") as gz,
            tarfile.open(fileobj=gz, mode="r|") as tar,
        ):
            yield tar
            if to_end:
                # tar stops at its end-of-archive blocks; only reading on to the gzip trailer
                # checks the CRC, which catches damage that still decompresses
                while gz.read(_CHUNK):
                    pass
    except (*_READ_ERRORS, _Damaged) as exc:
        cause = exc.__cause__ if isinstance(exc, _Damaged) and exc.__cause__ else exc
        detail = " ".join(str(cause).split()) or type(cause).__name__
        raise BundleError(f"not a readable bundle (gzip-compressed tar): {detail}", where=str(path)) from cause


def _unsafe_reason(member: tarfile.TarInfo) -> str | None:
    name = member.name
    if name.startswith("/"):
        return "absolute path"
    if ".." in name.split("/"):
        return "'..' path component"
    if member.issym():
        return f"symlink to {member.linkname}"
    if member.islnk():
        return f"hard link to {member.linkname}"
    if member.isdev():
        return "device or fifo"
    if not (member.isreg() or member.isdir()):
        return f"unsupported member type {member.type!r}"
    return None


def _scan(path: Path, *, refuse_unsafe: bool = False, max_member_bytes: int | None = None) -> _Scan:
    """One pass over the archive: the manifest's bytes and every regular member's size and sha256."""
    scan = _Scan()
    with _reading(path, to_end=True) as tar:
        for member in tar:
            reason = _unsafe_reason(member)
            if reason is None and max_member_bytes is not None and member.size > max_member_bytes:
                reason = f"{member.size} bytes, over the {max_member_bytes}-byte limit"
            if reason is not None:
                if refuse_unsafe:
                    raise BundleError(f"refusing member {member.name}: {reason}", where=str(path))
                scan.unsafe.append(f"{member.name} ({reason})")
                continue
            if member.isdir():
                continue
            if member.name == MANIFEST_NAME:
                if scan.manifest_raw is not None:
                    scan.duplicates.append(member.name)
                scan.manifest_raw = _read_small(tar, member, path)
                continue
            if member.name in scan.files:
                scan.duplicates.append(member.name)
            scan.files[member.name] = _hash_member(tar, member)
    return scan


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
        raise BundleError(f"{member.name} is {member.size} bytes: too large for a manifest", where=str(path))
    src = tar.extractfile(member)
    assert src is not None
    return src.read()


def _parse_manifest(raw: bytes, path: Path) -> dict[str, Any]:
    where = f"{path}:{MANIFEST_NAME}"
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise BundleError(f"not JSON: {exc}", where=where) from exc
    if not isinstance(doc, dict) or doc.get("format") != BUNDLE_FORMAT:
        raise BundleError(f"not a {BUNDLE_FORMAT} manifest", where=where)
    if doc.get("format_version") != BUNDLE_FORMAT_VERSION:
        raise BundleError(
            f"bundle format_version {doc.get('format_version')!r} is not supported "
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
            raise BundleError(f"member #{i} is malformed: {m!r:.120}", where=where)
        if m["path"] in seen or m["path"] == MANIFEST_NAME:
            raise BundleError(f"member {m['path']} is listed twice", where=where)
        seen.add(m["path"])
    return doc


def _compare(listed: list[dict[str, Any]], found: dict[str, tuple[int, str]]) -> list[str]:
    problems = []
    expected = {m["path"]: m for m in listed}
    for name in sorted(expected.keys() | found.keys()):
        want, have = expected.get(name), found.get(name)
        if want is None:
            problems.append(f"extra: {name}")
        elif have is None:
            problems.append(f"missing: {name}")
        elif have[0] != want["size"]:
            problems.append(f"size: {name} ({have[0]} bytes, manifest says {want['size']})")
        elif have[1] != want["sha256"]:
            problems.append(f"changed: {name} (sha256 mismatch)")
    return problems


def _extract_into(path: Path, root: Path, expected: dict[str, dict[str, Any]], max_member_bytes: int) -> None:
    with _reading(path, to_end=True) as tar:
        for member in tar:
            # judged again: the file may have been replaced since it was verified
            reason = _unsafe_reason(member)
            if reason is None and member.size > max_member_bytes:
                reason = f"{member.size} bytes, over the {max_member_bytes}-byte limit"
            if reason is not None:
                raise BundleError(f"refusing member {member.name}: {reason}", where=str(path))
            want = expected.get(member.name)
            if member.isreg() and member.name != MANIFEST_NAME and want is None:
                raise BundleError(f"member {member.name} is not in the manifest", where=str(path))
            digest = _write_member(tar, member, root / member.name)
            if want is not None and digest != want["sha256"]:
                raise BundleError(f"member {member.name} changed since it was verified", where=str(path))


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
        raise BundleError(f"cannot write: {exc.strerror or exc}", where=str(target)) from exc
    return digest.hexdigest()


class _Damaged(Exception):
    """An archive read error raised where write errors are also caught; _reading unwraps it."""


def _read_archive(read: Any, n: int) -> bytes:
    try:
        return read(n)
    except _READ_ERRORS as exc:
        raise _Damaged() from exc
