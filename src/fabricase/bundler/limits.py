"""What each desk accepts: ticket body length, attachment size and count, file names. Pure: the types, the
generic limits and the rules; no SDK is imported here.

Each desk's numbers are declared on its class (`limits`: AwsProvider, JiraDesk, ...), each from
../shared/reference/cloud-apis.md (line numbers there are that file's); DESK_LIMITS reads them through the
provider registry. Where a limit is not documented, the value is None ("no documented limit": nothing is cut
or split for it) or, where a number is needed to stay safe, the smallest reading of what is documented;
`desk_limits(desk, **overrides)` takes the value a desk reports at run time (Jira's `uploadLimit`, an SMTP
server's `SIZE`). "5 MB" is read as 5,000,000 bytes wherever the source does not say which megabyte it means:
the smaller reading fits both.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from fabricase.declared import DeclaredTable
from fabricase.errors import ConfigError

__all__ = [
    "DESK_LIMITS",
    "GENERIC",
    "MB",
    "MIB",
    "DeskLimits",
    "Delivery",
    "bundle_delivery",
    "desk_limits",
    "file_name_problem",
    "fit_file_name",
    "smtp_attachment_bytes",
]

MB = 1000 * 1000
MIB = 1024 * 1024


@dataclass(frozen=True)
class DeskLimits:
    """One desk's limits; None: not documented (no cut, no split on its account).

    attachment_max_bytes: the ordinary attachment path, per file. large_upload_max_bytes: a second path for
    big files (AWS upload links), None where the desk has none. max_attachments: files per case or reply on
    the ordinary path. blocked_extensions: lower-case, with the dot.
    """

    desk: str
    body_max_chars: int | None
    attachment_max_bytes: int | None
    large_upload_max_bytes: int | None = None
    max_attachments: int | None = None
    file_name_max: int | None = None
    blocked_extensions: frozenset[str] = frozenset()

    @property
    def per_file_max(self) -> int | None:
        """The largest single file the desk takes by any path (None: no documented limit)."""
        if self.attachment_max_bytes is None or self.large_upload_max_bytes is None:
            return self.attachment_max_bytes if self.large_upload_max_bytes is None else None
        return max(self.attachment_max_bytes, self.large_upload_max_bytes)


# The strictest documented value of every limit: a ticket fitted to `generic` fits every desk.
_STRICTEST = dict(body_max_chars=8000, attachment_max_bytes=5 * MB, max_attachments=3, file_name_max=110)
GENERIC = DeskLimits("generic", **_STRICTEST)  # an unknown desk, or one whose SDK is not installed here


def smtp_attachment_bytes(size: int, *, headroom: int = 256 * 1024) -> int:
    """The attachment bytes that fit a message of `size` bytes (the server's ESMTP SIZE, cloud-apis.md :756):
    base64 writes 57 bytes as a 76-character line plus CRLF (:757 "about 33%"); `headroom` keeps room for
    the headers, the body and the MIME boundaries."""
    if isinstance(size, bool) or not isinstance(size, int) or size <= headroom:
        raise ConfigError(f"SMTP SIZE {size!r} leaves no room for an attachment (needs more than {headroom} bytes)")
    return (size - headroom) * 57 // 78


# Each registered desk's limits as its class declares them (`limits`; a cloud provider is its own desk, the static
# provider has none of its own), and `generic`: read from the registry at each look-up (fabricase.declared).
DESK_LIMITS: Mapping[str, DeskLimits] = DeclaredTable("limits", DeskLimits, GENERIC)

_FIELDS = {f.name for f in dataclasses.fields(DeskLimits)} - {"desk"}


def desk_limits(desk: str, **overrides: int | None) -> DeskLimits:
    """The desk's limits, with values the desk reported at run time (or the user configured) in `overrides`.

    An unknown desk or field is a ConfigError listing the valid ones; a limit must be a positive integer or None.
    """
    if desk not in DESK_LIMITS:
        raise ConfigError(f"unknown desk {desk!r}; valid: {', '.join(DESK_LIMITS)}")
    unknown = sorted(set(overrides) - _FIELDS)
    if unknown:
        raise ConfigError(f"unknown desk limit {unknown[0]!r}; valid: {', '.join(sorted(_FIELDS))}")
    for name, value in overrides.items():
        if name == "blocked_extensions":
            continue
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise ConfigError(f"desk limit {name} must be a positive integer or None, not {value!r}", where=desk)
    return dataclasses.replace(DESK_LIMITS[desk], **overrides)


Kind = Literal["attach", "large-upload", "split"]


@dataclass(frozen=True)
class Delivery:
    """How a file of `size` bytes reaches the desk: as one attachment, through the large-upload path, or split
    into `parts` files of at most `part_bytes` (fit.split_bundle)."""

    kind: Kind
    size: int
    parts: int = 1
    part_bytes: int | None = None


def bundle_delivery(size: int, limits: DeskLimits, *, other_attachments: int = 1) -> Delivery:
    """Choose the path for a bundle of `size` bytes. `other_attachments` (the summary, ...) share the desk's
    attachment count with the parts. A bundle needing more parts than the desk takes is a ConfigError that
    says so: upload it somewhere the provider can fetch it and link it in the ticket instead."""
    if limits.attachment_max_bytes is None or size <= limits.attachment_max_bytes:
        return Delivery("attach", size)
    if limits.large_upload_max_bytes is not None and size <= limits.large_upload_max_bytes:
        return Delivery("large-upload", size)
    parts = math.ceil(size / limits.attachment_max_bytes)
    if limits.max_attachments is not None and parts + other_attachments > limits.max_attachments:
        raise ConfigError(
            f"the bundle ({size} bytes) needs {parts} parts of at most {limits.attachment_max_bytes} bytes, but "
            f"{limits.desk} takes {limits.max_attachments} attachments; upload it where the provider can fetch it "
            "and link it in the ticket",
            where=limits.desk,
        )
    # parts are a little larger than their slice of the bundle (each is a small bundle of its own): the part
    # count above is a lower bound, fit.split_bundle gives the exact one
    return Delivery("split", size, parts=parts, part_bytes=limits.attachment_max_bytes)


def file_name_problem(name: str, limits: DeskLimits) -> str | None:
    """Why the desk would refuse a file of this name (too long, a blocked extension), or None."""
    if limits.file_name_max is not None and len(name) > limits.file_name_max:
        return f"{limits.desk} takes file names of at most {limits.file_name_max} characters ({len(name)} given)"
    lower = name.lower()
    blocked = next((ext for ext in sorted(limits.blocked_extensions) if lower.endswith(ext)), None)
    if blocked is not None:
        return f"{limits.desk} refuses files ending in {blocked}"
    return None


def fit_file_name(name: str, limit: int | None, *, keep_suffix: str = "") -> str:
    """`name` cut to `limit` characters, keeping `keep_suffix` (e.g. `.tar.gz.part001-of-003`) whole and a short
    hash of the full name, so that two long names cut to the same prefix stay distinct. Deterministic."""
    if limit is None or len(name) <= limit:
        return name
    if keep_suffix and not name.endswith(keep_suffix):
        raise ConfigError(f"file name {name!r} does not end in {keep_suffix!r}")
    stem = name[: len(name) - len(keep_suffix)] if keep_suffix else name
    tag = "-" + hashlib.sha256(name.encode()).hexdigest()[:8]
    room = limit - len(tag) - len(keep_suffix)
    if room < 1:
        raise ConfigError(f"a {limit}-character file name cannot hold {keep_suffix!r} and a distinguishing hash")
    return stem[:room] + tag + keep_suffix
