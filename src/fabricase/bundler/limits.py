"""What each desk accepts: ticket body length, attachment size and count, file names. Pure: an explicit registry.

Every number comes from ../shared/reference/cloud-apis.md (line numbers below are that file's). Where a
limit is not documented, the value is None ("no documented limit": nothing is cut or split for it) or, where
a number is needed to stay safe, the smallest reading of what is documented; `desk_limits(desk, **overrides)`
takes the value a desk reports at run time (Jira's `uploadLimit`, an SMTP server's `SIZE`). "5 MB" is read
as 5,000,000 bytes wherever the source does not say which megabyte it means: the smaller reading fits both.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass
from typing import Literal

from fabricase.errors import ConfigError

__all__ = [
    "DESK_LIMITS",
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

DESK_LIMITS: dict[str, DeskLimits] = {
    "aws": DeskLimits(
        "aws",
        body_max_chars=8000,  # :105 create_case `communicationBody` (1-8000 chars); :787
        attachment_max_bytes=5 * MB,  # :110 add_attachments_to_set "Up to 3 attachments per set, 5 MB each"; :785
        large_upload_max_bytes=157_286_400,  # :111 get_attachment_upload_links `fileSizeBytes` 1-157,286,400; :786
        max_attachments=3,  # :110 per attachment set (the upload-link path takes 10 `uploadIds`, :105 and :127)
        file_name_max=None,  # not documented
    ),
    "gcp": DeskLimits(
        "gcp",
        body_max_chars=12_800,  # :410 "Comment body is at most 12,800 characters"
        # :419 and :788: the attachment limit "is not documented [UNVERIFIED]"; the strictest documented size
        # keeps an upload safe until the real one is configured (desk_limits("gcp", attachment_max_bytes=...))
        attachment_max_bytes=5 * MB,
        max_attachments=None,  # :788 "not documented"
    ),
    "azure": DeskLimits(
        "azure",
        body_max_chars=None,  # `description`: no length in cloud-apis.md (:585)
        attachment_max_bytes=5_242_880,  # :615 "size between 1 and 5,242,880 bytes"; :612; :789
        max_attachments=None,  # :789 "not documented"
        file_name_max=110,  # :616 "file name <= 110 characters"
        # :617-618 blocked extensions (Azure CLI's validators): the HTML report cannot go to this desk as is
        blocked_extensions=frozenset({
            ".bat", ".cmd", ".exe", ".ps1", ".js", ".vbs", ".com", ".lnk", ".reg", ".bin", ".cpl", ".inf", ".ins",
            ".isu", ".job", ".jse", ".msi", ".msp", ".paf", ".pif", ".rgs", ".scr", ".sct", ".svg", ".vbe", ".vb",
            ".ws", ".wsf", ".wsh", ".htm", ".html",
        }),
    ),
    "jira": DeskLimits(
        "jira",
        # not in cloud-apis.md: a Jira Cloud text field (the request's `description`) holds 32,767 characters
        body_max_chars=32_767,
        # :748 and :792 "set per instance by the admin": read GET /rest/api/3/attachment/meta `uploadLimit`
        # and pass it as desk_limits("jira", attachment_max_bytes=upload_limit)
        attachment_max_bytes=None,
    ),
    "zendesk": DeskLimits(
        "zendesk",
        body_max_chars=None,  # comment body: no length in cloud-apis.md
        attachment_max_bytes=50 * MB,  # :732 "50 MB per file"; :791
        max_attachments=500,  # :732-733 "up to 500 files per ticket for authenticated users"; :791
    ),
    "email": DeskLimits(
        "email",
        body_max_chars=None,  # SMTP has no body length of its own; SIZE (below) covers the whole message
        # :756-757 "the receiving server advertises SIZE"; "Common provider caps are around 25 MB [UNVERIFIED]":
        # the attachment bytes a 25 MiB message holds; pass smtp_attachment_bytes(server SIZE) when known
        attachment_max_bytes=None,  # set below from the 25 MiB default
    ),
    # The outbox is a folder: nothing to fit. An engineer sends it on by hand, to a desk of their choosing.
    "outbox": DeskLimits("outbox", body_max_chars=None, attachment_max_bytes=None),
    "generic": DeskLimits("generic", **_STRICTEST),  # an unknown desk: the strictest of the documented ones
}


def smtp_attachment_bytes(size: int, *, headroom: int = 256 * 1024) -> int:
    """The attachment bytes that fit a message of `size` bytes (the server's ESMTP SIZE, cloud-apis.md :756):
    base64 writes 57 bytes as a 76-character line plus CRLF (:757 "about 33%"); `headroom` keeps room for
    the headers, the body and the MIME boundaries."""
    if isinstance(size, bool) or not isinstance(size, int) or size <= headroom:
        raise ConfigError(f"SMTP SIZE {size!r} leaves no room for an attachment (needs more than {headroom} bytes)")
    return (size - headroom) * 57 // 78


DESK_LIMITS["email"] = dataclasses.replace(DESK_LIMITS["email"], attachment_max_bytes=smtp_attachment_bytes(25 * MIB))

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
