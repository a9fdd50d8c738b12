"""Build a deterministic evidence bundle from a capture directory.

A bundle is a PAX tar inside gzip. The same capture and extras give the same bytes on any machine with
the same zlib, whenever and wherever they are built: members are sorted, owners, modes and times are
pinned, and the gzip header carries the capture's time, never the wall clock. MANIFEST.json comes
first and lists every other member with its size and sha256; its own sha256 is the bundle id.

With a redactor, every member (capture files and extras) is redacted before it is hashed, so the manifest
describes the redacted bytes; the redacted capture is written to a temporary folder beside the output (the
capture directory is only read), and redaction.json, the counts, is added (docs/redaction.md).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from fabricase.bundler.members import DIR_MODE, FILE_MODE, Caps, name_problem, shown
from fabricase.capture_index import INDEX_FILE, INDEX_MAGIC, index_records
from fabricase.errors import BundleError, CaptureError
from fabricase.models import Bundle

if TYPE_CHECKING:
    from fabricase.redact import Redactor

__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_FORMAT_VERSION",
    "CAPTURE_PREFIX",
    "DIR_MODE",
    "FILE_MODE",
    "MANIFEST_NAME",
    "build_bundle",
    "capture_json",
    "capture_mtime",
    "capture_record",
    "capture_record_of",
    "index_commands",
    "manifest_bytes",
    "write_atomically",
]

BUNDLE_FORMAT = "fabricase-bundle"
BUNDLE_FORMAT_VERSION = 1
MANIFEST_NAME = "MANIFEST.json"
CAPTURE_PREFIX = "capture/"
_CHUNK = 1 << 20
_GZIP_MTIME_MAX = 2**32 - 1  # the gzip header stores mtime in 32 bits


@dataclass(frozen=True)
class _Member:
    name: str  # name inside the archive
    size: int
    sha256: str
    source: Path | None = None  # a file under the capture root
    data: bytes | None = None  # an extra given in memory


def build_bundle(capture_root: Path, out: Path, *, extra: dict[str, bytes], mtime: int,
                 redactor: Redactor | None = None) -> Bundle:
    """Write the bundle for `capture_root` (plus top-level `extra` files) to `out`, atomically; with a
    redactor, of the redacted capture and extras, plus redaction.json (the redactor's counts start afresh)."""
    capture_root, out = Path(capture_root), Path(out)
    _check_mtime(mtime)
    if not capture_root.is_dir():
        raise BundleError("capture directory not found", where=str(capture_root))
    if out.resolve().is_relative_to(capture_root.resolve()):
        # the half-written archive would end up bundling itself
        raise BundleError("the bundle cannot be written inside the capture directory", where=str(out))
    extras = _extra_members(extra)
    if redactor is None:
        return _build(capture_root, out, extras, mtime)
    from fabricase.redact import REDACTION_NAME, redaction_json
    from fabricase.redact.capture import redact_capture

    if REDACTION_NAME in extra:
        raise BundleError("an extra member cannot be named like the redaction report", where=REDACTION_NAME)
    files = [rel for rel, _ in _capture_files(capture_root)]
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        scratch = tempfile.TemporaryDirectory(prefix=f".{out.name}.", suffix=".redacting", dir=out.parent)
    except OSError as exc:
        raise BundleError(f"cannot write: {exc.strerror or exc}", where=str(out)) from exc
    with scratch as tmp:
        redactor.reset()
        redacted_root = Path(tmp) / "capture"
        redacted_root.mkdir()
        redact_capture(capture_root, files, redacted_root, redactor, prefix=CAPTURE_PREFIX)
        redacted = {m.name: redactor.redact(m.name, m.data or b"") for m in extras}
        redacted[REDACTION_NAME] = redaction_json(redactor.report())
        return _build(redacted_root, out, _extra_members(redacted), mtime)


def _build(capture_root: Path, out: Path, extras: list[_Member], mtime: int) -> Bundle:
    members = sorted(_capture_members(capture_root) + extras, key=lambda m: m.name)
    _check_caps(members, out)
    manifest = manifest_bytes(members, _capture_format_version(capture_root), capture_record(capture_root),
                              _summary_of(capture_root))
    write_atomically(out, lambda fh: _write_archive(fh, manifest, members, mtime))
    return Bundle(
        path=out,
        bundle_id=hashlib.sha256(manifest).hexdigest(),
        members=len(members),
        size=out.stat().st_size,
    )


def manifest_bytes(members: list[Any], capture_format_version: int | None,
                   capture: dict[str, Any] | None = None, summary: dict[str, Any] | None = None) -> bytes:
    """The MANIFEST.json bytes for members (anything with name, size, sha256), sorted by name; `capture`: what
    the capture ran (capture_record), so a reader sees which collectors and commands, and how each ended,
    without unpacking anything; `summary`: a summary bundle's record (bundler.summary_form), as the bundled
    capture.json carries it, redacted."""
    listing = [{"path": m.name, "size": m.size, "sha256": m.sha256} for m in sorted(members, key=lambda m: m.name)]
    doc = {
        "format": BUNDLE_FORMAT,
        "format_version": BUNDLE_FORMAT_VERSION,
        "capture_format_version": capture_format_version,
        "members": listing,
    }
    if capture is not None:
        doc["capture"] = capture
    if summary is not None:
        doc["summary"] = summary
    return (json.dumps(doc, sort_keys=True, indent=2) + "\n").encode("utf-8")


def capture_record(capture_root: Path) -> dict[str, Any] | None:
    """The collectors with their versions, and every command of every host with its exit code and whether its
    output was truncated, read from the capture's records. Wall-clock durations are left out on purpose: they
    stay in the capture's own index, so the manifest says only what the evidence is."""
    meta = capture_json(capture_root)
    if meta is None:
        return None
    commands: dict[str, list[dict[str, Any]]] = {}
    hosts_dir = capture_root / "hosts"
    indexes = [*hosts_dir.glob("*/index.json"), *hosts_dir.glob(f"*/{INDEX_FILE}")] if hosts_dir.is_dir() else []
    for index_path in sorted(indexes):
        try:
            commands[index_path.parent.name] = index_commands(index_path.read_bytes())
        except (OSError, ValueError) as exc:
            raise BundleError(f"unreadable index ({exc})", where=shown(str(index_path))) from exc
    return capture_record_of(meta, commands)


def index_commands(raw: bytes) -> list[dict[str, Any]]:
    """The command items of one host's index.json as the manifest lists them (command, snapshot, rc, truncated),
    sorted; a ValueError when the index is not a JSON object. `verify` recomputes the list from the bundled
    index with this same function, so the two can only differ where one of them was changed."""
    if raw.startswith(INDEX_MAGIC):  # format 3's binary index
        try:
            items: Any = index_records(raw)
        except CaptureError as exc:
            raise ValueError(exc.message) from exc
    else:
        doc = json.loads(raw)
        if not isinstance(doc, dict):
            raise ValueError("index.json is not a JSON object")
        items = doc.get("items", [])
    ran = [{"command": it.get("source"), "snapshot": it.get("snapshot"), "rc": it.get("rc"),
            "truncated": bool(it.get("truncated"))}
           for it in (items if isinstance(items, list) else []) if isinstance(it, dict) and it.get("kind") == "command"]
    return sorted(ran, key=lambda c: (str(c["command"]), _snapshot_key(c["snapshot"])))


def _snapshot_key(snapshot: Any) -> tuple[int, int, str]:
    # snapshots are small integers; anything else (a hostile index) sorts after them instead of raising
    snapshot = snapshot or 0
    if isinstance(snapshot, int) and not isinstance(snapshot, bool):
        return (0, snapshot, "")
    return (1, 0, str(snapshot))


def capture_record_of(meta: dict[str, Any], commands: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The manifest's `capture` record from capture.json's document and each host's command list (hosts that ran
    no command are left out)."""
    return {"collectors": meta.get("collectors", {}),
            "commands": {host: ran for host, ran in sorted(commands.items()) if ran}}


def capture_mtime(capture_root: Path) -> int:
    """The capture's `created_at` (capture.json) as integer epoch seconds: the bundle's pinned mtime."""
    doc = capture_json(Path(capture_root))
    created = doc.get("created_at") if doc else None
    if not isinstance(created, str):
        raise BundleError("capture.json has no created_at", where=str(Path(capture_root) / "capture.json"))
    try:
        moment = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError as exc:
        raise BundleError(f"created_at {created!r} is not ISO 8601", where=str(capture_root)) from exc
    if moment.tzinfo is None:
        raise BundleError(f"created_at {created!r} has no time zone", where=str(capture_root))
    return int(moment.timestamp())


def _check_mtime(mtime: int) -> None:
    if isinstance(mtime, bool) or not isinstance(mtime, int) or not 0 <= mtime <= _GZIP_MTIME_MAX:
        raise BundleError(f"mtime must be an integer epoch between 0 and {_GZIP_MTIME_MAX}, not {mtime!r}")


def capture_json(capture_root: Path) -> dict[str, Any] | None:
    path = capture_root / "capture.json"
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise BundleError(f"capture.json is unreadable: {exc}", where=str(path)) from exc
    if not isinstance(doc, dict):
        raise BundleError("capture.json is not a JSON object", where=str(path))
    return doc


def _summary_of(capture_root: Path) -> dict[str, Any] | None:
    """The summary-bundle record of the (redacted) capture.json, or None for a full bundle."""
    from fabricase.bundler.summary_form import SUMMARY_KEY

    doc = capture_json(capture_root)
    record = doc.get(SUMMARY_KEY) if doc else None
    return record if isinstance(record, dict) else None


def _capture_format_version(capture_root: Path) -> int | None:
    doc = capture_json(capture_root)
    return None if doc is None else doc.get("format_version")


def _capture_files(capture_root: Path) -> list[tuple[str, Path]]:
    """Every regular file under the capture, as (POSIX path relative to it, path), sorted; links, fifos and
    devices are refused."""
    files = []
    for dirpath, dirnames, filenames in os.walk(capture_root, onerror=_walk_error):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            try:
                mode = path.lstat().st_mode
            except OSError as exc:
                raise BundleError(f"cannot read: {exc.strerror or exc}", where=str(path)) from exc
            if stat.S_ISLNK(mode):
                raise BundleError("symlinks are not bundled (copy the target in instead)", where=shown(str(path)))
            if stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                raise BundleError("not a regular file", where=shown(str(path)))
            rel = path.relative_to(capture_root).as_posix()
            reason = name_problem(CAPTURE_PREFIX + rel, Caps.current().name_bytes)
            if reason is not None:  # verify would refuse the bundle: refuse to build it
                raise BundleError(f"cannot bundle this file: {reason}", where=shown(str(path)))
            files.append((rel, path))
    return files


def _check_caps(members: list[_Member], out: Path) -> None:
    """Refuse to build a bundle that verify and extraction would refuse for its size (fabricase.caps)."""
    caps = Caps.current()
    if len(members) + 1 > caps.members:
        raise BundleError(f"{len(members) + 1} members, over the cap of {caps.members}", where=str(out))
    big = next((m for m in members if m.size > caps.member_bytes), None)
    if big is not None:
        raise BundleError(f"{big.size} bytes, over the {caps.member_bytes}-byte limit per member",
                          where=shown(str(big.source or big.name)))
    total = sum(m.size for m in members)
    if total > caps.total_bytes:
        raise BundleError(f"{total} bytes in all, over the {caps.total_bytes}-byte cap", where=str(out))


def _capture_members(capture_root: Path) -> list[_Member]:
    members = []
    for rel, path in _capture_files(capture_root):
        size, digest = _hash_file(path)
        members.append(_Member(name=CAPTURE_PREFIX + rel, size=size, sha256=digest, source=path))
    return members


def _walk_error(exc: OSError) -> None:
    raise BundleError(f"cannot read: {exc.strerror or exc}", where=shown(str(exc.filename))) from exc


def _extra_members(extra: dict[str, bytes]) -> list[_Member]:
    members = []
    for name, data in extra.items():
        if (not name or "/" in name or name in (".", "..", MANIFEST_NAME, CAPTURE_PREFIX.rstrip("/"))
                or name_problem(name, Caps.current().name_bytes) is not None):
            raise BundleError("an extra member needs a plain file name", where=repr(name))
        if not isinstance(data, bytes | bytearray):
            raise BundleError(f"extra member data must be bytes, not {type(data).__name__}", where=name)
        data = bytes(data)
        members.append(_Member(name=name, size=len(data), sha256=hashlib.sha256(data).hexdigest(), data=data))
    return members


def _hash_file(path: Path) -> tuple[int, str]:
    digest, size = hashlib.sha256(), 0
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                digest.update(chunk)
                size += len(chunk)
    except OSError as exc:
        raise BundleError(f"cannot read: {exc.strerror or exc}", where=str(path)) from exc
    return size, digest.hexdigest()


def _tarinfo(name: str, size: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = mtime
    info.mode = FILE_MODE
    info.type = tarfile.REGTYPE
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _write_archive(fh: BinaryIO, manifest: bytes, members: list[_Member], mtime: int) -> None:
    with (
        gzip.GzipFile(fileobj=fh, mode="wb", mtime=mtime, filename="") as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        tar.addfile(_tarinfo(MANIFEST_NAME, len(manifest), mtime), io.BytesIO(manifest))
        for m in members:
            info = _tarinfo(m.name, m.size, mtime)
            if m.data is not None:
                tar.addfile(info, io.BytesIO(m.data))
                continue
            assert m.source is not None
            try:
                with m.source.open("rb") as src:
                    reader = _HashingReader(src)
                    tar.addfile(info, reader)
            except OSError as exc:  # includes tarfile's "unexpected end of data" when a file shrank
                raise BundleError(f"cannot bundle: {exc}", where=str(m.source)) from exc
            if reader.hexdigest() != m.sha256 or reader.size != m.size:
                raise BundleError("file changed while the bundle was written", where=str(m.source))


class _HashingReader:
    """Hashes what tarfile reads, so a file changing between the manifest and the archive is caught."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._digest = hashlib.sha256()
        self.size = 0

    def read(self, n: int = -1) -> bytes:
        chunk = self._raw.read(n)
        self._digest.update(chunk)
        self.size += len(chunk)
        return chunk

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


def write_atomically(out: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write through a temporary file beside `out`, then rename: readers never see half a bundle."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    except OSError as exc:
        raise BundleError(f"cannot write: {exc.strerror or exc}", where=str(out)) from exc
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, out)
    except OSError as exc:
        raise BundleError(f"cannot write: {exc.strerror or exc}", where=str(out)) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
