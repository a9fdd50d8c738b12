"""Support side of the AWS provider: case states, valid codes (cached), attachments and communications.

Operations and limits are botocore's support model (support/2013-04-15; ../shared/reference/cloud-apis.md 1.1):
attachment sets hold 3 files of 5 MB and expire after an hour; upload links take one file of up to 157,286,400
bytes in parts of `partSizeBytes`, PUT to presigned URLs, and are attached by `uploadIds` (10 a request).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from fabricase.atomicfile import replace_text
from fabricase.bundler.limits import DeskLimits
from fabricase.errors import BundleError, ProviderError
from fabricase.models import EscalationState
from fabricase.providers.base import CaseComment
from fabricase.templates.severity import DeskSeverity, scale_for

__all__ = [
    "CASE_STATES",
    "DEFAULT_SERVICE",
    "UPLOAD_IDS_MAX",
    "CaseCodes",
    "UploadGroup",
    "case_state",
    "comments_of",
    "console_url",
    "fetch_codes",
    "load_codes",
    "pick_category",
    "pick_severity",
    "plan_uploads",
    "read_cache",
    "read_part",
    "split_to",
    "upload_by_links",
    "upload_set",
]  # fmt: skip

# AWS case status (DescribeCases `status`) -> fabricase state. A status not listed stays open: waiting-provider.
CASE_STATES: dict[str, EscalationState] = {
    "unassigned": EscalationState.FILED,
    "opened": EscalationState.WAITING_PROVIDER,
    "work-in-progress": EscalationState.WAITING_PROVIDER,
    "customer-action-completed": EscalationState.WAITING_PROVIDER,
    "reopened": EscalationState.WAITING_PROVIDER,
    "pending-customer-action": EscalationState.WAITING_US,
    "resolved": EscalationState.RESOLVED,
}


def case_state(raw_status: str | None) -> EscalationState:
    return CASE_STATES.get((raw_status or "").strip().lower(), EscalationState.WAITING_PROVIDER)


def console_url(display_id: str | None, case_id: str) -> str:
    """Where a person opens the case in the AWS Support Center."""
    if display_id:
        return f"https://support.console.aws.amazon.com/support/home#/case/?displayId={display_id}"
    return f"https://support.console.aws.amazon.com/support/home#/case/?caseId={case_id}"


# AWS Support's own people sign communications "Amazon Web Services"; ours carry the caller's IAM ARN or e-mail.
_PROVIDER_SIGNATURES = ("amazon web services", "aws support")


def comments_of(communications: Sequence[Mapping[str, Any]]) -> tuple[CaseComment, ...]:
    """DescribeCommunications records as comments, oldest first (the API lists the newest first)."""
    comments = [
        CaseComment(
            at=str(c.get("timeCreated") or ""),
            author=str(c.get("submittedBy") or ""),
            body=str(c.get("body") or ""),
            from_provider=str(c.get("submittedBy") or "").strip().lower().startswith(_PROVIDER_SIGNATURES),
        )
        for c in communications
    ]
    return tuple(sorted(comments, key=lambda c: c.at))


# --- valid codes -------------------------------------------------------------------------------------------

DEFAULT_SERVICE = "amazon-elastic-compute-cloud-linux"
# Categories a fabric fault belongs in, best first; the service's first category when none of these is offered.
PREFERRED_CATEGORIES = ("instance-issue", "performance", "other", "general-guidance")


@dataclass(frozen=True)
class CaseCodes:
    """What DescribeServices and DescribeSeverityLevels said, for one service and language."""

    service_code: str
    language: str
    categories: tuple[str, ...]
    severity_levels: tuple[str, ...]
    fetched_at: float  # epoch seconds

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True) + "\n"


def read_cache(path: Path) -> CaseCodes | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return CaseCodes(service_code=str(doc["service_code"]), language=str(doc["language"]),
                         categories=tuple(doc["categories"]), severity_levels=tuple(doc["severity_levels"]),
                         fetched_at=float(doc["fetched_at"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # no cache, or one we cannot read: ask the API again


def _write_cache(path: Path, codes: CaseCodes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_text(path, codes.to_json())
    except OSError:
        pass  # the cache saves calls; filing does not depend on it


def load_codes(path: Path, *, service_code: str, language: str, ttl_s: float, now: float,
               fetch: Callable[[], CaseCodes]) -> CaseCodes:
    """The cached codes when fresh (younger than ttl_s, same service and language), else fetched and cached."""
    cached = read_cache(path)
    if (cached is not None and cached.service_code == service_code and cached.language == language
            and 0 <= now - cached.fetched_at < ttl_s):
        return cached
    codes = fetch()
    _write_cache(path, codes)
    return codes


def fetch_codes(call: Callable[[str, Callable[[], Any]], Any], support: Any, *, service_code: str,
                language: str, now: float) -> CaseCodes:
    services = call("DescribeServices", lambda: support.describe_services(
        serviceCodeList=[service_code], language=language)).get("services", [])
    service = next((s for s in services if s.get("code") == service_code), None)
    if service is None:
        raise ProviderError(f"DescribeServices: service code {service_code!r} is not offered; set service_code in "
                            "[providers.aws]", where="aws")
    levels = call("DescribeSeverityLevels", lambda: support.describe_severity_levels(language=language))
    return CaseCodes(service_code=service_code, language=language,
                     categories=tuple(c["code"] for c in service.get("categories", []) if c.get("code")),
                     severity_levels=tuple(lv["code"] for lv in levels.get("severityLevels", []) if lv.get("code")),
                     fetched_at=now)


def pick_category(categories: Sequence[str], wanted: str | None) -> str | None:
    """The configured category when the service offers it, else the best of PREFERRED_CATEGORIES."""
    if wanted:
        if wanted not in categories:
            raise ProviderError(f"category_code {wanted!r} is not a category of this service (offered: "
                                f"{', '.join(categories) or 'none'})", where="aws")
        return wanted
    return next((c for c in PREFERRED_CATEGORIES if c in categories), categories[0] if categories else None)


def pick_severity(desk: DeskSeverity, available: Sequence[str]) -> str:
    """The mapped severityCode when the account's plan offers it, else the highest offered one below it (the
    lowest offered when none is below)."""
    if not available or desk.code in available:
        return desk.code
    scale = scale_for("aws")
    known = [code for code in available if code in {lv.code for lv in scale.levels}]
    if not known:
        return desk.code
    below = [code for code in known if scale.rank(code) <= scale.rank(desk.code)]
    return max(below, key=scale.rank) if below else min(known, key=scale.rank)


# --- attachments -------------------------------------------------------------------------------------------

UPLOAD_IDS_MAX = 10  # CreateCase / AddCommunicationToCase `uploadIds` (0-10)
Via = Literal["set", "links"]


@dataclass(frozen=True)
class UploadGroup:
    """Files that go to the desk in one request: one attachment set, or up to 10 upload ids."""

    via: Via
    files: tuple[Path, ...]


def plan_uploads(sizes: Sequence[tuple[Path, int]], limits: DeskLimits, mode: str) -> list[UploadGroup]:
    """How files already within the desk's per-file limits reach it. mode: "attachment-set" (every file by
    AddAttachmentsToSet), "upload-links" (every file by GetAttachmentUploadLinks), "auto" (one attachment set when
    every file fits one, else upload links for all)."""
    small = limits.attachment_max_bytes or 0
    per_set = limits.max_attachments or 3
    fits_set = len(sizes) <= per_set and all(size <= small for _, size in sizes)
    via: Via = "set" if mode == "attachment-set" or (mode == "auto" and fits_set) else "links"
    chunk = per_set if via == "set" else UPLOAD_IDS_MAX
    files = [path for path, _ in sizes]
    return [UploadGroup(via, tuple(files[i:i + chunk])) for i in range(0, len(files), chunk)]


def upload_set(call: Callable[[str, Callable[[], Any]], Any], support: Any, files: Sequence[Path]) -> str:
    """One attachment set holding the files (each within 5 MB, 3 at most): its attachmentSetId."""
    attachments = [{"fileName": path.name, "data": path.read_bytes()} for path in files]
    return call("AddAttachmentsToSet", lambda: support.add_attachments_to_set(attachments=attachments))[
        "attachmentSetId"]


def read_part(path: Path, offset: int, size: int, chunk: int = 1 << 20) -> Iterator[bytes]:
    with path.open("rb") as fh:
        fh.seek(offset)
        left = size
        while left > 0:
            data = fh.read(min(chunk, left))
            if not data:
                break
            left -= len(data)
            yield data


READY = "attachment-ready"
STATUS_POLLS = 30
STATUS_POLL_S = 2.0


def upload_by_links(call: Callable[[str, Callable[[], Any]], Any], support: Any, path: Path, *,
                    put: Callable[[str, Path, int, int], str], sleep: Callable[[float], None] = time.sleep) -> str:
    """Upload one file by presigned links: its uploadId, once attachment-ready. `put(url, path, offset, size)`
    PUTs one part and returns its ETag."""
    size = path.stat().st_size
    links = call("GetAttachmentUploadLinks", lambda: support.get_attachment_upload_links(
        fileName=path.name, fileSizeBytes=size))
    upload_id, part_bytes, total = links["uploadId"], int(links["partSizeBytes"]), int(links["totalParts"])
    done: list[dict[str, Any]] = []
    while True:
        for link in links.get("uploadUrls", []):
            index = int(link["partIndex"])  # part indexes start at 1 (uploadRange.startIndex, min 1)
            offset = (index - 1) * part_bytes
            done.append({"partIndex": index, "eTag": put(link["url"], path, offset, min(part_bytes, size - offset))})
        next_index = links.get("nextIndex")
        if next_index is None or len(done) >= total:
            break
        # fileName is required by the model on every call, the continuing ones too
        links = call("GetAttachmentUploadLinks", lambda start=next_index: support.get_attachment_upload_links(
            fileName=path.name, uploadId=upload_id, uploadRange={"startIndex": start}))
    if len(done) != total:
        raise ProviderError(f"GetAttachmentUploadLinks: {path.name}: got links for {len(done)} of {total} parts",
                            where="aws")
    status = call("CompleteAttachmentUpload", lambda: support.complete_attachment_upload(
        uploadId=upload_id, completedUploads=done)).get("uploadStatus")
    for _ in range(STATUS_POLLS):
        if status == READY:
            return upload_id
        if status == "failed":
            break
        sleep(STATUS_POLL_S)
        status = call("DescribeAttachmentUploadStatus", lambda: support.describe_attachment_upload_status(
            uploadId=upload_id)).get("uploadStatus")
    if status == READY:
        return upload_id
    raise ProviderError(f"CompleteAttachmentUpload: {path.name} is {status or 'not ready'} (upload {upload_id})",
                        where="aws")


def split_to(path: Path, part_bytes: int, out_dir: Path) -> list[Path]:
    """The bundle in parts of at most part_bytes (bundler.parts.split_bundle); a file that is not a bundle
    cannot be split, which is said in one line."""
    from fabricase.bundler.parts import split_bundle

    try:
        return split_bundle(path, part_bytes, out_dir=out_dir)
    except BundleError as exc:
        raise ProviderError(f"{path.name} is larger than {part_bytes} bytes and cannot be split: {exc.message}",
                            where="aws") from exc
