"""Read, verify and safely extract a bundle, and join a bundle's parts.

The archive is read in one streaming pass (bundler/scan.py), in constant memory whatever its size, and its members
are judged on their headers before any of their bytes are read. What verify checks, and what it leaves out on
purpose, is in docs/bundles.md ("What verify checks").

A *part* (fit.split_bundle) is a bundle of two members: PART.json (the parent bundle's name, size, sha256
and id; this part's index and the count; every part's offset, size and sha256) and part.bin (this part's
slice of the parent's bytes). `verify_bundle` checks a part like any bundle, and that its slice is the one
PART.json lists; `join_parts` checks that the parts belong together and rebuilds the parent byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fabricase.bundler.archive import (
    DIR_MODE,
    FILE_MODE,
    MANIFEST_NAME,
    write_atomically,  # the one atomic writer: a joined bundle appears whole or not at all
)
from fabricase.bundler.capture_check import capture_problems, form_problem
from fabricase.bundler.framing import tar_end_problems
from fabricase.bundler.members import Caps, shown
from fabricase.bundler.scan import (  # PART_INFO re-exported: the scan reads it, callers import it from here
    CHUNK,
    PART_INFO,
    SHA256_HEX,
    Scan,
    admit,
    parse_manifest,
    read_archive,
    read_small,
    reading,
    scan_bundle,
)
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
PART_DATA = "part.bin"
PART_FORMAT = "fabricase-bundle-part"
PART_FORMAT_VERSION = 1


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


def read_manifest(path: Path) -> dict[str, Any]:
    """The bundle's manifest, read without decompressing past it when it is the first member."""
    path = Path(path)
    with reading(path) as (tar, _):
        for member in tar:
            if member.name == MANIFEST_NAME and member.isreg():
                return parse_manifest(read_small(tar, member, path), path)
    raise BundleError(f"no {MANIFEST_NAME}: not a fabricase bundle", where=shown(str(path)))


def verify_bundle(path: Path, *, max_member_bytes: int | None = None) -> VerifyReport:
    """Check every member against the manifest, the manifest's command list against the bundled index, and the
    archive's framing (nothing after the tar's end or the gzip stream's); each problem names the member at
    fault. For a bundle part, also that its slice is the one its PART.json lists (`report.part`)."""
    path = Path(path)
    scan = scan_bundle(path, Caps.current(member_bytes=max_member_bytes))
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
    with reading(path) as (tar, _):
        for member in tar:
            if member.name == MANIFEST_NAME and member.isreg():
                raw = read_small(tar, member, path)
                parse_manifest(raw, path)
                return hashlib.sha256(raw).hexdigest()
    raise BundleError(f"no {MANIFEST_NAME}: not a fabricase bundle", where=shown(str(path)))


def extract_bundle(path: Path, dest: Path, *, max_member_bytes: int | None = None) -> Path:
    """Verify, then extract into `dest` (absent or empty); `dest/capture/` is then a capture directory. The caps
    are verify's (fabricase.caps; `max_member_bytes` lowers the per-member one), so what verifies extracts."""
    path, dest = Path(path), Path(dest)
    caps = Caps.current(member_bytes=max_member_bytes)
    report, manifest = _judge(scan_bundle(path, caps, refuse_unsafe=True), path)
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


def _judge(scan: Scan, path: Path) -> tuple[VerifyReport, dict[str, Any]]:
    if scan.manifest_raw is None:
        if scan.stopped:
            raise BundleError(f"refusing the bundle: {scan.unsafe[-1]}", where=shown(str(path)))
        raise BundleError(f"no {MANIFEST_NAME}: not a fabricase bundle", where=shown(str(path)))
    manifest = parse_manifest(scan.manifest_raw, path)
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


def _header_problems(scan: Scan, manifest: dict[str, Any]) -> list[str]:
    # one problem per member: an extra or duplicate member is already named as such
    listed = {m["path"] for m in manifest["members"]} | {MANIFEST_NAME}
    twice = set(scan.duplicates)
    return [text for name, text in scan.headers if name in listed and shown(name) not in twice]


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
    scan = Scan()  # the running count and total, for the caps
    with reading(path) as (tar, stream):
        for member in tar:
            # judged again: the file may have been replaced since it was verified
            reason = admit(member, scan, caps)
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
            while chunk := read_archive(src.read, CHUNK):
                digest.update(chunk)
                out.write(chunk)
        os.utime(target, (member.mtime, member.mtime))
    except OSError as exc:  # only writes land here: read_archive keeps archive read errors apart
        raise BundleError(f"cannot write: {exc.strerror or exc}", where=shown(str(target))) from exc
    return digest.hexdigest()


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
            and SHA256_HEX.fullmatch(str(parent.get("sha256")))):
        raise ValueError("parent is malformed")
    if not (isinstance(count, int) and isinstance(index, int) and isinstance(parts, list)
            and 1 <= index <= count == len(parts)):
        raise ValueError(f"part {index!r} of {count!r} with {len(parts) if isinstance(parts, list) else 0} listed")
    offset = 0
    for k, p in enumerate(parts, start=1):
        if not (isinstance(p, dict) and p.get("index") == k and p.get("offset") == offset
                and isinstance(p.get("size"), int) and p["size"] > 0 and SHA256_HEX.fullmatch(str(p.get("sha256")))):
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
    write_atomically(Path(out), lambda fh: _join_into(fh, [docs[k] for k in sorted(docs)], parent, Path(out)))
    return Path(out)


def _join_into(fh: Any, ordered: list[tuple[Path, dict[str, Any]]], parent: dict[str, Any], out: Path) -> None:
    whole = hashlib.sha256()
    for path, doc in ordered:
        piece = hashlib.sha256()
        with reading(path) as (tar, _):
            for member in tar:
                if member.name == PART_DATA and member.isreg():
                    src = tar.extractfile(member)
                    assert src is not None
                    while chunk := read_archive(src.read, CHUNK):
                        piece.update(chunk)
                        whole.update(chunk)
                        fh.write(chunk)
                    break
        if piece.hexdigest() != doc["parts"][doc["index"] - 1]["sha256"]:
            # the file changed between its verification and this read
            raise VerifyError(f"part {doc['index']} changed while it was joined", where=str(path))
    if whole.hexdigest() != parent["sha256"]:
        raise VerifyError("the joined bytes do not have the parent's sha256", where=str(out))
