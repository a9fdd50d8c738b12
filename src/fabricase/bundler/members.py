"""What a bundle member may be: its name, type, size and header fields, judged the same way by the builder,
`verify` and extraction (docs/bundles.md, "What verify checks" and "Caps").

A bundle may come from anywhere, and its member names end up in terminals, tickets and file systems. A name is
refused when it carries a control character (C0, DEL, C1), a bidi override or isolate, a line or paragraph
separator, a backslash, an absolute path, a `..`, `.` or empty component, bytes that are not UTF-8, or more
than caps.MAX_NAME_BYTES. Every name or text from a bundle that goes into a message passes through `shown`,
so a member named `x\\n verify: OK` can never print a line of its own.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass

__all__ = ["DIR_MODE", "FILE_MODE", "Caps", "header_problem", "member_problem", "name_problem", "shown"]

FILE_MODE = 0o644
DIR_MODE = 0o755
_SHOWN_MAX = 200  # characters of one name quoted in a message; the rest is counted
# code points that reorder or break the text around them (beyond C0, DEL and C1): bidi embeddings and overrides,
# bidi isolates, the bidi marks, and the Unicode line and paragraph separators
_INVISIBLE = frozenset(
    [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C, 0x2028, 0x2029]
)
_MEMBER_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE)  # what verify accepts (DIRTYPE: see docs)
_PAX_KEYS = frozenset({"path"})  # the only PAX record the builder writes (a name over 100 bytes or non-ASCII)


@dataclass(frozen=True)
class Caps:
    """The size caps in force (fabricase.caps), read when a bundle is opened so a test can lower them."""

    member_bytes: int
    total_bytes: int
    members: int
    name_bytes: int

    @classmethod
    def current(cls, *, member_bytes: int | None = None) -> Caps:
        from fabricase import caps

        return cls(
            member_bytes=caps.MAX_MEMBER_BYTES if member_bytes is None else member_bytes,
            total_bytes=caps.MAX_TOTAL_BYTES,
            members=caps.MAX_MEMBERS,
            name_bytes=caps.MAX_NAME_BYTES,
        )


def shown(text: str) -> str:
    """`text` as it may appear in a message: bare when every character is printable (and no backslash), else
    quoted with repr-style escapes; long texts are cut and counted. Never holds a control character."""
    cut = text[:_SHOWN_MAX]
    out = cut if cut.isprintable() and "\\" not in cut else repr(cut)
    return out if len(text) <= _SHOWN_MAX else f"{out}... ({len(text)} characters)"


def _control(ch: str) -> bool:
    code = ord(ch)
    return code < 0x20 or 0x7F <= code <= 0x9F or code in _INVISIBLE


def name_problem(name: str, max_bytes: int) -> str | None:
    """Why `name` may not be a bundle member's name (a phrase), or None when it may."""
    try:
        encoded = name.encode("utf-8")  # tarfile decodes with surrogateescape: undecodable bytes fail here
    except UnicodeEncodeError:
        return "a name that is not UTF-8"
    bad = next((ch for ch in name if _control(ch)), None)
    if bad is not None:
        return f"control character U+{ord(bad):04X} in the name"
    if "\\" in name:
        return "backslash in the name"
    if len(encoded) > max_bytes:
        return f"a name of {len(encoded)} bytes, over the {max_bytes}-byte cap"
    if name.startswith("/"):
        return "absolute path"
    parts = name.split("/")
    if ".." in parts:
        return "'..' path component"
    if any(p in ("", ".") for p in parts):
        return "empty or '.' path component"
    return None


def member_problem(member: tarfile.TarInfo, caps: Caps) -> str | None:
    """Why verify and extraction refuse this member, judged on its header alone (before any data is read)."""
    if member.size > caps.member_bytes:
        return f"{member.size} bytes, over the {caps.member_bytes}-byte limit"
    reason = name_problem(member.name, caps.name_bytes)
    if reason is not None:
        return reason
    if member.issym():
        return f"symlink to {shown(member.linkname)}"
    if member.islnk():
        return f"hard link to {shown(member.linkname)}"
    if member.isdev():
        return "device or fifo"
    if member.sparse is not None:
        return "sparse member"
    if member.type not in _MEMBER_TYPES:
        return f"unsupported member type {member.type!r}"
    return None


def header_problem(member: tarfile.TarInfo, mtime: int) -> str | None:
    """The header fields of a regular member that differ from what the builder pins (mode, owner, names, the
    archive's one mtime, link name, PAX records), as one phrase; None when all are as built."""
    differs = []
    if member.type != tarfile.REGTYPE:
        differs.append(f"type {member.type!r}, not {tarfile.REGTYPE!r}")
    if member.mode != FILE_MODE:
        differs.append(f"mode {member.mode:#o}, not {FILE_MODE:#o}")
    if (member.uid, member.gid) != (0, 0) or member.uname or member.gname:
        differs.append(f"owner {member.uid}:{member.gid} {shown(member.uname)}:{shown(member.gname)}, not 0:0")
    if member.mtime != mtime:
        differs.append(f"mtime {member.mtime}, not the archive's {mtime}")
    if member.linkname or member.devmajor or member.devminor:
        differs.append("a link name or device numbers")
    extra = sorted(set(member.pax_headers) - _PAX_KEYS)
    if extra:
        differs.append("PAX records " + ", ".join(shown(k) for k in extra))
    return "; ".join(differs) or None
