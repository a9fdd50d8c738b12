"""Azure support tickets, the pure part: the ticket's chosen name, upload names and chunks within the file
workspace's limits, and the normalized state of a ticket from its status and messages."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from fabricase.bundler.limits import DeskLimits, file_name_problem, fit_file_name
from fabricase.models import EscalationState
from fabricase.providers.base import CaseComment

__all__ = ["CHUNK_BYTES", "FILE_MAX", "LIMITS", "communication_name", "ticket_comment", "ticket_name",
           "ticket_state", "upload_chunks", "upload_name"]

# AzureProvider.limits; from ../shared/reference/cloud-apis.md, by line
LIMITS = DeskLimits(
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
)
FILE_MAX = LIMITS.attachment_max_bytes or 5_242_880  # files.create: file_size <= 5 MB
CHUNK_BYTES = FILE_MAX // 2  # files.upload: chunks of <= 2.5 MB, at most 2
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def ticket_name(escalation_id: str, bundle_id: str | None) -> str:
    """The ticket's (and its file workspace's) name: the same escalation and bundle always give the same
    name, so filing again finds the ticket; the bundle id keeps two trackers' FC-1 apart."""
    base = _NAME_UNSAFE.sub("-", escalation_id).strip("-") or "case"
    return f"fabricase-{base}" + (f"-{bundle_id[:12]}" if bundle_id else "")


def communication_name(case_id: str, text: str, at: datetime) -> str:
    """A communication's name: the time of the post (to the microsecond, UTC) and a hash of the ticket and text.
    Azure keeps one communication per name, so the same text posted twice needs two names; a retry of one post
    reuses the name its caller chose once, and stays one communication."""
    stamp = at.astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    digest = hashlib.sha256(f"{case_id}\n{text}".encode()).hexdigest()[:16]
    return f"fabricase-{stamp}-{digest}"


def upload_name(name: str) -> str:
    """A file name the desk takes: a blocked extension (report.html) gets `.txt` appended (the content is
    unchanged: a reader renames it back), and the name is cut to the desk's length keeping its suffix."""
    if file_name_problem(name, LIMITS) and any(name.lower().endswith(e) for e in LIMITS.blocked_extensions):
        name += ".txt"
    m = re.search(r"(\.tar\.gz.*|\.[A-Za-z0-9]+)$", name)
    return fit_file_name(name, LIMITS.file_name_max, keep_suffix=m.group(1) if m else "")


def ticket_state(raw_status: str, comments: Sequence[CaseComment]) -> EscalationState:
    """Azure has two statuses, Open and Closed: an open ticket waits on us when Microsoft wrote last."""
    if raw_status.strip().lower() == "closed":
        return EscalationState.CLOSED
    if comments and comments[-1].from_provider:
        return EscalationState.WAITING_US
    return EscalationState.WAITING_PROVIDER


def ticket_comment(c: Any) -> CaseComment:
    at = c.created_date.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if c.created_date else ""
    # inbound: from the customer to Microsoft; outbound: Microsoft's engineer to the customer
    return CaseComment(at=at, author=c.sender or "", body=c.body or "",
                       from_provider=str(c.communication_direction or "").lower() == "outbound")


def upload_chunks(size: int) -> tuple[int, int]:
    """(chunk size, number of chunks) for a file of `size` bytes."""
    chunk = min(CHUNK_BYTES, size)
    return chunk, math.ceil(size / chunk)
