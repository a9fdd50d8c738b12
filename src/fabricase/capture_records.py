"""Reading a capture directory back without trusting it: files opened only inside it, read up to the caps of
fabricase.caps, and every JSON record type- and range-checked into the typed records of fabricase.models.

capturedir.load_capture decides what a problem means (a one-line CaptureError, or a host loaded as failed);
this module only checks and reads, and names the file and the record in every error.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

from fabricase.caps import MAX_ITEM_BYTES, MAX_MEMBER_BYTES, MIB
from fabricase.collectors.framing import MAX_SNAPSHOT
from fabricase.errors import CaptureError
from fabricase.models import CaptureItem, HostStatus, SnapshotInfo

STREAM_FILE = "stream.fc1"  # a host's capture stream, byte for byte as the host sent it
SAFE_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")  # a host name that can name its folder

def item_path(source: str, snapshot: int, kind: str) -> str | None:
    """Where an item's bytes are stored inside the host folder; None for a source we refuse to store. Remembered
    for sources of ordinary length: every host of a fleet names the same few thousand (recording and loading a
    GPU host each ask about 2,000 times), and a hostile host's long names are not kept."""
    if len(source) > _REMEMBERED_SOURCE:
        return _item_path(source, snapshot, kind)
    return _remembered_item_path(source, snapshot, kind)


_REMEMBERED_SOURCE = 256  # characters: at most 16,384 entries of this size are remembered (a few MiB)
_CMD_NAME = re.compile(r"[A-Za-z0-9._-]+")


def _item_path(source: str, snapshot: int, kind: str) -> str | None:
    if source.startswith("cmd:"):
        name = source[4:]
        if not _CMD_NAME.fullmatch(name):
            return None
        return f"s{snapshot}/cmd/{name}" + (".stderr" if kind == "stderr" else "")
    # String checks, not pathlib: this runs for every item of every host (3,000 items a GPU host).
    # `/../` in source + "/" is `".." in source.split("/")` for an absolute path, without building the list.
    if not source.startswith("/") or "\n" in source or "/../" in source + "/":
        return None
    return f"s{snapshot}/fs{source}"


_remembered_item_path = functools.lru_cache(maxsize=16384)(_item_path)

ITEM_KINDS = ("file", "command", "stderr")
SHA256 = re.compile(r"[0-9a-f]{64}")
STATUSES = tuple(str(s) for s in HostStatus)


class MissingFile(CaptureError):
    """A file of the capture is not there (an integrity problem where the index lists it)."""


def mib_text(n: int) -> str:
    return f"{n // MIB} MiB"


def open_member(inside: Path, path: Path | str, where: str) -> int:
    """A descriptor open for reading `path`, which must be a plain file under `inside` (resolved) and within
    caps.MAX_MEMBER_BYTES. A symlink out of the capture is refused (a capture must not make fabricase read
    another file of this machine, or /dev/zero), and so are FIFOs and devices, which block or never end."""
    return _open_member(inside, path, where)[0]


def _open_member(inside: Path, path: Path | str, where: str) -> tuple[int, int]:
    """open_member's descriptor and the file's size (one fstat for the check and the caller)."""
    fd = _open_plain(os.fspath(inside), os.fspath(path))
    if fd is None:  # not provably a plain path inside: resolve it, and say what is wrong
        fd = _open_resolved(inside, Path(path), where)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise CaptureError("not a plain file (a directory, FIFO or device; refused)", where=where)
    if st.st_size > MAX_MEMBER_BYTES:
        os.close(fd)
        raise CaptureError(f"{st.st_size:,} bytes, over the {mib_text(MAX_MEMBER_BYTES)} cap on one file", where=where)
    return fd, st.st_size


_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_plain(inside: str, path: str) -> int | None:
    """The common case without resolving (a realpath is an lstat per component from /, 80 us a file): `path`
    spelled as `inside` + plain names, every directory below `inside` a real one (lstat: not a symlink), and
    the file itself opened with O_NOFOLLOW. `inside` is resolved, so the file is inside. None when any of that
    does not hold (a symlink, `..`, a missing file, another spelling): then _open_resolved decides."""
    prefix = inside if inside.endswith("/") else inside + "/"
    try:
        if not path.startswith("/"):
            path = os.path.join(os.getcwd(), path)  # getcwd is a resolved path
        if not path.startswith(prefix):
            return None
        parts = path[len(prefix):].split("/")
        if "" in parts or "." in parts or ".." in parts:
            return None
        at = prefix[:-1]
        for part in parts[:-1]:
            at = f"{at}/{part}"
            if not stat.S_ISDIR(os.lstat(at).st_mode):
                return None
        # O_NONBLOCK: a FIFO swapped in opens at once instead of waiting for a writer; fstat then refuses it.
        return os.open(path, _OPEN_FLAGS)
    except (OSError, ValueError):  # ValueError: a NUL in a name (the resolving path raises it, as it did)
        return None


def _open_resolved(inside: Path, path: Path, where: str) -> int:
    """The careful case: resolve every symlink, refuse a file outside `inside`, and say what is wrong."""
    try:
        real = path.resolve(strict=True)
    except FileNotFoundError as exc:
        raise MissingFile("missing", where=where) from exc
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop, on older Pythons
        raise CaptureError(f"cannot be resolved ({getattr(exc, 'strerror', None) or exc})", where=where) from exc
    if not real.is_relative_to(inside):
        raise CaptureError("a symlink to outside the capture directory (refused)", where=where)
    try:
        return os.open(real, _OPEN_FLAGS)
    except OSError as exc:
        raise CaptureError(f"unreadable ({exc.strerror})", where=where) from exc


def member_size(inside: Path, path: Path | str, where: str) -> int:
    fd, size = _open_member(inside, path, where)
    os.close(fd)
    return size


def read_member(inside: Path, path: Path | str, where: str, cap: int) -> bytes:
    """A whole file of the capture, refused when over `cap` bytes (it is read into memory)."""
    fd, size = _open_member(inside, path, where)
    try:
        # A read allocates what it asks for up front: ask for the size the file has (+1 to see one that grows),
        # and read again only after a short read (the size fstat gave, of a file that does not grow, is all).
        want = min(size, cap) + 1
        data = os.read(fd, want)
        while len(data) < min(want, size) and (more := os.read(fd, want - len(data))):
            data += more
    finally:
        os.close(fd)
    if len(data) > cap:
        raise CaptureError(f"{max(size, len(data)):,} bytes, over the {mib_text(cap)} cap on what is read whole",
                           where=where)
    return data


def read_json(inside: Path, path: Path | str) -> Any:
    """One JSON document of the capture (capture.json, host.json, index.json), strictly: UTF-8, no NaN."""
    where = os.fspath(path)
    data = read_member(inside, path, where, MAX_ITEM_BYTES)
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError as exc:
        raise CaptureError(f"unreadable JSON (not UTF-8 at byte {exc.start})", where=where) from exc
    except RecursionError as exc:
        raise CaptureError("unreadable JSON (nested too deep)", where=where) from exc
    except ValueError as exc:
        reason = "a number of over 4,300 digits" if "digits" in str(exc) else str(exc)
        raise CaptureError(f"unreadable JSON ({reason})", where=where) from exc


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number the capture format allows")


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    return {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number"}.get(
        type(value), type(value).__name__)


def as_object(value: Any, label: str, where: str) -> dict:
    """A JSON object; label names it inside its file ("" for the whole document)."""
    if type(value) is not dict:
        what = f"{label} is {kind_of(value)}" if label else f"holds {kind_of(value)}"
        raise CaptureError(f"{what}, not a JSON object", where=where)
    return value


def bad_field(label: str, key: str, want: str, value: Any, where: str) -> CaptureError:
    return CaptureError(f"{label + ': ' if label else ''}{key} must be {want}, not {kind_of(value)}", where=where)


# Field readers: `default` ... (Ellipsis) means the field is required; None means it may be missing or null.
def text_field(d: dict, key: str, label: str, where: str, default: Any = ...) -> Any:
    value = d.get(key, default)
    if value is ...:
        raise CaptureError(f"{label}: no {key}", where=where)
    if type(value) is str or (value is None and default is None):
        return value
    raise bad_field(label, key, "a string" + (" or null" if default is None else ""), value, where)


def integer_field(d: dict, key: str, label: str, where: str, low: int, high: int, default: Any = ...) -> Any:
    value = d.get(key, default)
    if value is ...:
        raise CaptureError(f"{label}: no {key}", where=where)
    if value is None and default is None:
        return None
    if type(value) is not int:
        raise bad_field(label, key, "an integer", value, where)
    if not low <= value <= high:
        raise CaptureError(f"{label}: {key} is out of range ({low:,} to {high:,})", where=where)
    return value


def number_field(d: dict, key: str, label: str, where: str, default: Any = None) -> float | None:
    value = d.get(key, default)
    if value is None:
        return None
    if type(value) is int and abs(value) <= 2**63:
        return value
    if type(value) is not float or not math.isfinite(value):
        raise bad_field(label, key, "a finite number or null", value, where)
    return value


def item_record(raw: Any, n: int, where: str) -> CaptureItem:
    """One index entry, every field checked. A host has thousands: the common case is one expression
    (well_typed_item); only an entry it refuses goes field by field, to say which field is wrong."""
    item = well_typed_item(raw)
    if item is not None:
        return item
    label = f"item {n}"
    d = as_object(raw, label, where)
    source = text_field(d, "source", label, where)
    snapshot = integer_field(d, "snapshot", label, where, 0, MAX_SNAPSHOT)
    kind = text_field(d, "kind", label, where)
    if kind not in ITEM_KINDS:
        raise CaptureError(f"{label}: kind {kind[:20]!r} is not one of {', '.join(ITEM_KINDS)}", where=where)
    size = integer_field(d, "bytes", label, where, 0, 2**63)
    if size > MAX_ITEM_BYTES:
        raise CaptureError(f"{label} ({source[:200]!r}) is {size:,} bytes, over the {mib_text(MAX_ITEM_BYTES)} cap "
                           "on one item", where=where)
    sha256 = text_field(d, "sha256", label, where)
    if not SHA256.fullmatch(sha256):
        raise CaptureError(f"{label}: sha256 is not 64 hexadecimal digits", where=where)
    path = text_field(d, "path", label, where)
    offset = integer_field(d, "offset", label, where, 0, MAX_MEMBER_BYTES, None)
    logical = item_path(source, snapshot, kind)
    if logical is None:
        raise CaptureError(f"{label}: source {source[:200]!r} cannot be stored (not a path or cmd:<name>)",
                           where=where)
    if offset is None and path != logical:
        raise CaptureError(f"{label}: path {path[:200]!r} does not match its source", where=where)
    if offset is not None and path != STREAM_FILE:
        raise CaptureError(f"{label}: an offset, but the path {path[:200]!r} is not the host's stream", where=where)
    return CaptureItem(
        source=source, snapshot=snapshot, kind=kind, collector=text_field(d, "collector", label, where, ""), path=path,
        bytes=size, sha256=sha256, rc=integer_field(d, "rc", label, where, -(10**18), 10**18, None),
        duration_ms=number_field(d, "duration_ms", label, where), truncated=flag_field(d, "truncated", label, where),
        error=text_field(d, "error", label, where, None), command=text_field(d, "command", label, where, None),
        offset=offset,
    )


def well_typed_item(d: Any) -> CaptureItem | None:
    """The item when every field has the type and range fabricase writes, else None (then item_record says
    what is wrong). Must accept nothing that item_record refuses."""
    if type(d) is not dict:
        return None
    get = d.get
    source, snapshot, kind, size, sha256 = get("source"), get("snapshot"), get("kind"), get("bytes"), get("sha256")
    path, offset, rc, duration = get("path"), get("offset"), get("rc"), get("duration_ms")
    collector, truncated, error, command = get("collector", ""), get("truncated", False), get("error"), get("command")
    if not (type(source) is str and type(snapshot) is int and 0 <= snapshot <= MAX_SNAPSHOT and kind in ITEM_KINDS
            and type(size) is int and 0 <= size <= MAX_ITEM_BYTES and type(sha256) is str and type(path) is str
            and SHA256.fullmatch(sha256) and type(collector) is str and type(truncated) is bool
            and (rc is None or (type(rc) is int and -(10**18) <= rc <= 10**18))
            and (duration is None or (type(duration) is float and math.isfinite(duration))
                 or (type(duration) is int and abs(duration) <= 2**63))
            and (error is None or type(error) is str) and (command is None or type(command) is str)):
        return None
    if offset is None:
        if path != item_path(source, snapshot, kind):
            return None
    elif type(offset) is not int or not 0 <= offset <= MAX_MEMBER_BYTES or path != STREAM_FILE \
            or item_path(source, snapshot, kind) is None:
        return None
    return CaptureItem(source=source, snapshot=snapshot, kind=kind, collector=collector, path=path, bytes=size,
                       sha256=sha256, rc=rc, duration_ms=duration, truncated=truncated, error=error, command=command,
                       offset=offset)


def flag_field(d: dict, key: str, label: str, where: str) -> bool:
    value = d.get(key, False)
    if type(value) is not bool:
        raise bad_field(label, key, "true or false", value, where)
    return value


def snapshot_record(raw: Any, n: int, where: str) -> SnapshotInfo:
    label = f"snapshot {n}"
    d = as_object(raw, label, where)
    return SnapshotInfo(index=integer_field(d, "index", label, where, 0, MAX_SNAPSHOT),
                        epoch=number_field(d, "epoch", label, where),
                        uptime_start=number_field(d, "uptime_start", label, where),
                        uptime_end=number_field(d, "uptime_end", label, where))
