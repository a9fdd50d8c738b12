"""The one redaction gate: every text and file that leaves for a desk, and every text the tracker stores.

The bundle and the ticket are redacted when they are made (`Redactor`, with pseudonyms when asked); this gate is
the last step on the way out, run on the exact text a desk is given after fitting and wrapping, whatever its
origin: the ticket, the summary, a comment, a note, the symptom, a faulty-host report's description, a file
to attach. It redacts secrets only (pseudonyms need the escalation's key and the capture's hosts) and is
idempotent: text that passed it once passes again unchanged.

How it is enforced (docs/redaction.md, "The gate"):
- `Provider` and `Desk` subclasses have their outbound methods (file_case, plan_case, comment, attach,
  resolve_case, reopen_case, report_faulty_host; a desk's file, comment, attach, resolve, reopen) wrapped at
  class creation by `gated_methods`: no subclass can be written that receives ungated arguments.
- The tracker's store runs `text` on every field and event it writes, so a team's shared PostgreSQL holds what
  was sent, never the raw text (which stays in the user's own capture directory).
- Files: a fabricase bundle (or a part of one) was redacted member by member when it was built, and passes as
  it is when it verifies and holds redaction.json; a gzip-compressed file (nvidia-bug-report.log.gz) is
  redacted inside and compressed again; any other archive or compressed file is refused, since redacting its
  compressed bytes would find nothing and break it; any other file is redacted as bytes into a temporary copy,
  which is what is sent.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import gzip
import inspect
import tempfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from fabricase import caps
from fabricase.errors import FabricaseError, ProviderError
from fabricase.redact.secrets import redact_secrets

__all__ = ["GATED", "files", "gated_methods", "is_gated", "outbound", "packed_format", "text"]

T = TypeVar("T")
_MARK = "__fabricase_gated__"
_GZIP_MAGIC = b"\x1f\x8b"
# what a file starts with -> the compressed or archive format it is in (tar: "ustar" at byte 257)
_PACKED_MAGIC = {
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
    b"\x04\x22\x4d\x18": "lz4",
    b"PK\x03\x04": "zip",
    b"7z\xbc\xaf\x27\x1c": "7z",
}
_TAR_MAGIC_AT = 257
_BZIP2_LEVELS = tuple(b"%d" % n for n in range(1, 10))
_BZIP2_BLOCKS = (b"1AY&SY", b"\x17rE8P\x90")  # the first block's magic, or the end of an empty stream's


def text(value: str) -> str:
    """`value` with every secret replaced by its marker (idempotent)."""
    if not value:
        return value
    return redact_secrets(value, Counter())


def outbound(value: T) -> T:
    """A value on its way out, with every string in it gated: str, bytes (read as UTF-8 or latin-1, byte for
    byte), a dataclass (a TicketDraft, a Finding), a mapping or a sequence of them. Paths, numbers and None pass
    as they are."""
    return _outbound(value, 0)


def _outbound(value: Any, depth: int) -> Any:
    if depth > 64:  # a structure this deep was not made by fabricase; nothing in it is sent as text
        raise FabricaseError("a value too deeply nested to redact is not sent")
    if isinstance(value, enum.Enum):  # a severity, a state: a name fabricase made, never data
        return value
    if isinstance(value, str):
        return text(value)
    if isinstance(value, bytes | bytearray):
        return _bytes(bytes(value))
    if isinstance(value, Path) or value is None or isinstance(value, bool | int | float):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _outbound(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)
                   if f.init}
        return dataclasses.replace(value, **changes)
    if isinstance(value, Mapping):
        return {k: _outbound(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        out = [_outbound(v, depth + 1) for v in value]
        return out if isinstance(value, list) else tuple(out)
    return value


def _bytes(data: bytes) -> bytes:
    try:
        decoded, codec = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        decoded, codec = data.decode("latin-1"), "latin-1"
    out = text(decoded)
    return data if out == decoded else out.encode(codec)


# -- files --------------------------------------------------------------------------------------------------

def _is_redacted_bundle(path: Path) -> bool:
    """A fabricase bundle (or bundle part) that verifies and whose members were redacted when it was built. A
    bundle that verifies holds exactly what its manifest lists, so the manifest (its first member) says whether
    redaction.json is there: one pass over the archive, not a second one for the member names."""
    from fabricase.bundler.verify import read_manifest, verify_bundle
    from fabricase.redact import REDACTION_NAME

    try:
        with path.open("rb") as fh:
            if fh.read(2) != _GZIP_MAGIC:
                return False
        report = verify_bundle(path)
        if not report.ok:
            return False
        listed = {m["path"] for m in read_manifest(path)["members"]}
    except Exception:  # not a bundle at all: it is redacted as a file
        return False
    return REDACTION_NAME in listed or report.part is not None


@contextmanager
def files(paths: list[Path]) -> Iterator[list[Path]]:
    """The files to send in place of `paths`: redacted bundles as they are, any other file as a redacted copy
    (same name, the name itself gated) in a temporary folder that is removed afterwards."""
    paths = [Path(p) for p in paths]
    # A path that is not a readable file passes as it is: the provider refuses it with its own one-line error.
    as_is = [not p.is_file() or _is_redacted_bundle(p) for p in paths]  # each bundle verified once
    if all(as_is):
        yield paths
        return
    with tempfile.TemporaryDirectory(prefix="fabricase-gate-") as tmp:
        out = []
        for k, (p, keep) in enumerate(zip(paths, as_is, strict=True)):
            if keep:
                out.append(p)
                continue
            name = text(p.name).replace("/", "_") or f"file-{k}"
            dest = Path(tmp) / str(k) / name
            dest.parent.mkdir()
            dest.write_bytes(_redacted_file(p))
            out.append(dest)
        yield out


def packed_format(head: bytes) -> str | None:
    """The compressed or archive format a file starting with `head` (its first 512 bytes) is in, or None."""
    if head.startswith(_GZIP_MAGIC):
        return "gzip"
    if head[_TAR_MAGIC_AT:_TAR_MAGIC_AT + 5] == b"ustar":
        return "tar"
    if head[:3] == b"BZh" and head[3:4] in _BZIP2_LEVELS and head[4:10] in _BZIP2_BLOCKS:
        return "bzip2"  # a text that starts with "BZh" is not one
    return next((kind for magic, kind in _PACKED_MAGIC.items() if head.startswith(magic)), None)


def _redacted_file(path: Path) -> bytes:
    """The bytes to send for a file that is no redacted bundle. Redacting compressed bytes would find no secret
    and break the file (a marker in a stored deflate block): a gzip file of one member is redacted inside and
    compressed again (the original bytes when nothing changed); a tar (a bundle that does not verify, an
    archive of logs) or any other compressed format is refused, in one line, before anything is sent."""
    data = path.read_bytes()
    kind = packed_format(data[:512])
    if kind is None:
        return _bytes(data)
    if kind == "gzip":
        inner = _gunzip(data, path)
        kind = packed_format(inner[:512])
        if kind is None:
            redacted = _bytes(inner)
            return data if redacted == inner else gzip.compress(redacted, mtime=int.from_bytes(data[4:8], "little"))
        kind = f"{kind} inside gzip"
        if kind == "tar inside gzip" and _has_manifest(path):
            raise ProviderError("not sent: a bundle that does not verify or has no redaction.json; build it "
                                "again with `fabricase bundle`", where=path.name)
    raise ProviderError(f"not sent: a {kind} file cannot be checked for secrets; attach the files in it",
                        where=path.name)


def _has_manifest(path: Path) -> bool:
    from fabricase.bundler.verify import read_manifest

    try:
        read_manifest(path)
    except Exception:  # not a bundle: refused as an archive
        return False
    return True


def _gunzip(data: bytes, path: Path) -> bytes:
    """One gzip member, decompressed, within the per-member cap (a small file may hold a huge one)."""
    z = zlib.decompressobj(wbits=31)
    out = bytearray()
    try:
        out += z.decompress(data, caps.MAX_MEMBER_BYTES + 1)
        while z.unconsumed_tail and len(out) <= caps.MAX_MEMBER_BYTES:
            out += z.decompress(z.unconsumed_tail, caps.MAX_MEMBER_BYTES + 1 - len(out))
    except zlib.error as exc:
        raise ProviderError(f"not sent: not a readable gzip file ({exc})", where=path.name) from exc
    if len(out) > caps.MAX_MEMBER_BYTES:
        raise ProviderError(f"not sent: more than {caps.MAX_MEMBER_BYTES} bytes once decompressed",
                            where=path.name)
    if not z.eof or z.unused_data:
        raise ProviderError("not sent: not one whole gzip member (cut short, or data after it)", where=path.name)
    return bytes(out)


# -- the wrapping of outbound methods -----------------------------------------------------------------------

# method name -> the parameters that carry text or files out. "files" parameters are lists of paths.
GATED: dict[str, tuple[str, ...]] = {
    # Provider
    "file_case": ("draft", "bundle_path"),
    "plan_case": ("draft", "bundle_path"),
    "comment": ("text",),
    "attach": ("files", "note"),
    "resolve_case": ("note",),
    "reopen_case": ("note",),
    # the HostReport (its suspects, findings and description); "findings" for a provider still written against
    # the signature before it, so that its arguments are gated too
    "report_faulty_host": ("report", "findings"),
    # Desk (the static provider's)
    "file": ("draft", "bundle_path"),
    "plan": ("draft", "bundle_path"),
    "resolve": ("note",),
    "reopen": ("note",),
}
_FILE_PARAMS = frozenset({"files", "bundle_path"})


def is_gated(fn: Callable[..., Any]) -> bool:
    return bool(getattr(fn, _MARK, False))


def _gate_call(fn: Callable[..., T], params: tuple[str, ...]) -> Callable[..., T]:
    signature = inspect.signature(fn)
    present = tuple(p for p in params if p in signature.parameters)

    @functools.wraps(fn)
    def gated(*args: Any, **kwargs: Any) -> T:
        bound = signature.bind(*args, **kwargs)
        for name in present:
            if name in bound.arguments and name not in _FILE_PARAMS:
                bound.arguments[name] = outbound(bound.arguments[name])
        file_args = [n for n in present if n in _FILE_PARAMS and bound.arguments.get(n) is not None]
        if not file_args:
            return fn(*bound.args, **bound.kwargs)
        return _with_files(fn, bound, file_args)

    setattr(gated, _MARK, True)
    return gated


def _with_files(fn: Callable[..., T], bound: inspect.BoundArguments, names: list[str]) -> T:
    name = names[0]
    value = bound.arguments[name]
    single = not isinstance(value, list | tuple)
    with files([value] if single else list(value)) as sent:
        bound.arguments[name] = sent[0] if single else sent
        if len(names) > 1:
            return _with_files(fn, bound, names[1:])
        return fn(*bound.args, **bound.kwargs)


def gated_methods(cls: type) -> None:
    """Wrap every outbound method `cls` has, its own or from a mixin that is no Provider (a Provider base's
    are wrapped already), on `cls` itself."""
    for name in GATED:
        fn = getattr(cls, name, None)
        if callable(fn) and not is_gated(fn) and not isinstance(inspect.getattr_static(cls, name), staticmethod):
            setattr(cls, name, _gate_call(fn, GATED[name]))
