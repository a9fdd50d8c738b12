"""GCP Cloud Support v2, the parts without the SDK: case state mapping, the case subject with its marker, comment
chunks, comments as CaseComment, and the attachment upload, which the SDK lacks (REST media upload:
`POST {endpoint}/upload/v2/{case}/attachments?attachment.filename=NAME`, the raw bytes as the body).

Sources: ../shared/reference/cloud-apis.md 2.2 (states, priorities, the 12,800-character comment body, media
upload); google-cloud-support 0.5.4 `types/case.py` and `services/*/transports/rest_base.py`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fabricase.models import EscalationState
from fabricase.providers.base import CaseComment

__all__ = [
    "CASE_STATES", "COMMENT_MAX_CHARS", "DEFAULT_CLASSIFICATION_QUERY", "ESCALATION_REASONS", "UploadError",
    "case_state", "case_subject", "choose_classification", "comment_chunks", "comments_from", "upload_attachment",
]  # fmt: skip

COMMENT_MAX_CHARS = 12_800  # cloud-apis.md 2.2 "Comment body is at most 12,800 characters"
# caseClassifications.search matches a quoted value against the whole display name ("Technical Issue > Compute >
# Compute Engine > GPU"): without wildcards "Compute Engine" matches nothing. cloud-apis.md 2.2 uses these.
DEFAULT_CLASSIFICATION_QUERY = 'display_name:"*Compute Engine*"'
ESCALATION_REASONS = ("RESOLUTION_TIME", "TECHNICAL_EXPERTISE", "BUSINESS_IMPACT")

# Case.State -> the escalation's state. SOLUTION_PROVIDED: Google thinks it is solved, the case is not closed yet.
CASE_STATES: dict[str, EscalationState] = {
    "STATE_UNSPECIFIED": EscalationState.FILED,
    "NEW": EscalationState.FILED,
    "IN_PROGRESS_GOOGLE_SUPPORT": EscalationState.WAITING_PROVIDER,
    "ACTION_REQUIRED": EscalationState.WAITING_US,
    "SOLUTION_PROVIDED": EscalationState.RESOLVED,
    "CLOSED": EscalationState.CLOSED,
}
_UPLOAD_CHUNK = 1 << 20


class UploadError(Exception):
    """The upload endpoint answered with an error status (`status` None: it could not be reached, and the
    httpx error is the cause). `response`: the answer, which providers.retry reads (Retry-After, an HTML page)."""

    def __init__(self, message: str, status: int | None, response: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.response = response


def case_state(raw: str | None) -> EscalationState:
    """The escalation state for a raw `Case.State` name (an unknown name reads as filed: still open)."""
    return CASE_STATES.get(raw or "STATE_UNSPECIFIED", EscalationState.FILED)


def case_subject(marker: str, title: str) -> str:
    """The case's display name: the title with the escalation's marker in place of the bare `[fabricase]` tag
    (the marker is what find_case searches for, so it leads, where no cut can drop it)."""
    title = " ".join(title.split())
    if title.startswith("[fabricase]"):
        title = title.removeprefix("[fabricase]").strip()
    return f"{marker} {title}".strip()


def comment_chunks(text: str, limit: int = COMMENT_MAX_CHARS) -> list[str]:
    """`text` as comments of at most `limit` characters, cut at line ends where possible, numbered `(i/n)` when
    more than one: nothing is dropped."""
    if len(text) <= limit:
        return [text]
    room = limit - len(" (99/99)\n")
    chunks, rest = [], text
    while rest:
        if len(rest) <= room:
            chunks.append(rest)
            break
        cut = rest.rfind("\n", 0, room)
        cut = cut + 1 if cut > room // 2 else room
        chunks.append(rest[:cut])
        rest = rest[cut:]
    return [f"({i}/{len(chunks)})\n{chunk}" for i, chunk in enumerate(chunks, 1)]


def comments_from(items: list[Mapping[str, Any]]) -> tuple[CaseComment, ...]:
    """`Comment` dicts as CaseComments, oldest first; `creator.google_support` marks Google's people."""
    out = []
    for c in items:
        creator = c.get("creator") or {}
        out.append(CaseComment(
            at=str(c.get("create_time") or ""),
            author=str(creator.get("display_name") or creator.get("username") or creator.get("email") or ""),
            body=str(c.get("body") or c.get("plain_text_body") or ""),
            from_provider=bool(creator.get("google_support")),
        ))
    return tuple(sorted(out, key=lambda c: c.at))


def choose_classification(found: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The classification to file under: the first whose name mentions GPUs, else the first found."""
    gpu = [c for c in found if "gpu" in str(c.get("display_name", "")).lower()]
    return (gpu or found or [None])[0]


def _chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        while chunk := fh.read(_UPLOAD_CHUNK):
            yield chunk


def upload_attachment(endpoint: str, case_name: str, path: Path, *, headers: Mapping[str, str],
                      timeout_s: float, name: str | None = None) -> dict[str, Any]:
    """Upload one file to a case by the media-upload endpoint, streamed; the `Attachment` the API returns."""
    import httpx

    url = f"{endpoint.rstrip('/')}/upload/v2/{case_name}/attachments"
    size = path.stat().st_size
    send = {**headers, "Content-Type": "application/octet-stream", "Content-Length": str(size)}
    try:
        response = httpx.post(url, params={"attachment.filename": name or path.name}, content=_chunks(path),
                              headers=send, timeout=timeout_s)
    except httpx.TransportError as exc:
        raise UploadError(f"cannot reach {url}: {exc}", None) from exc
    if response.status_code >= 400:
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text[:200]
        raise UploadError(f"{response.status_code} {' '.join(str(message).split())}", response.status_code,
                          response)
    try:
        return response.json()
    except ValueError:
        return {}
