"""One HTTP API of a desk (Jira Service Management, Zendesk), over httpx: every call retried while the desk
throttles (429, honouring Retry-After up to a bound) or fails on its side (5xx), and every failure one line
naming the desk and the operation."""

from __future__ import annotations

import email.utils
import json
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from fabricase.providers.retry import call_with_retries

__all__ = ["MAX_RETRY_AFTER_S", "DeskApi", "HttpFailure", "retry_after_seconds"]

MAX_RETRY_AFTER_S = 60.0  # a desk asking for a longer wait is answered "try again later", not waited for
_MESSAGE_MAX = 200
_CHUNK = 1 << 20


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """A Retry-After header (seconds, or an HTTP date) as seconds from now; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


def _api_message(response: httpx.Response) -> str:
    """The desk's own words for an error, on one line: Jira's errorMessage(s)/errors, Zendesk's
    error/description, else the start of the body."""
    try:
        doc = response.json()
    except ValueError:
        doc = None
    parts: list[str] = []
    if isinstance(doc, dict):
        for key in ("errorMessage", "description", "message"):
            if isinstance(doc.get(key), str):
                parts.append(doc[key])
        if isinstance(doc.get("errorMessages"), list):
            parts.extend(str(m) for m in doc["errorMessages"])
        if isinstance(doc.get("errors"), dict):
            parts.extend(f"{k}: {v}" for k, v in doc["errors"].items())
        error = doc.get("error")
        if isinstance(error, str) and not parts:
            parts.append(error)
        elif isinstance(error, dict):
            parts.extend(str(error[k]) for k in ("title", "message") if error.get(k))
    text = "; ".join(p for p in parts if p) or response.text
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_MAX else text[: _MESSAGE_MAX - 3] + "..."


class HttpFailure(Exception):
    """A response the call did not expect; `retry_after`: what a 429 or 503 asked for, in seconds."""

    def __init__(self, response: httpx.Response) -> None:
        self.status = response.status_code
        self.message = _api_message(response)
        self.retry_after = retry_after_seconds(response.headers.get("Retry-After"))
        super().__init__(f"HTTP {self.status}: {self.message}")


class DeskApi:
    """Calls to one desk's REST API at `base_url`. `auth_hint` says which variables hold the credentials,
    for the 401 message."""

    def __init__(self, where: str, base_url: str, auth: tuple[str, str], *, auth_hint: str,
                 timeout_s: float = 30.0, sleep: Callable[[float], None], attempts: int | None = None) -> None:
        self.where = where
        self.base_url = base_url.rstrip("/")
        self.auth = auth
        self.auth_hint = auth_hint
        self.timeout_s = timeout_s
        self.sleep = sleep
        self.attempts = attempts

    def describe(self, exc: BaseException) -> str:
        if isinstance(exc, HttpFailure):
            said = f": {exc.message}" if exc.message else ""
            if exc.status == 401:
                return f"authentication failed (HTTP 401): check {self.auth_hint}{said}"
            if exc.status == 403:
                return f"permission denied (HTTP 403){said}"
            if exc.status == 404:
                return f"not found (HTTP 404){said}"
            if exc.status == 413:
                return f"attachment too large for the desk (HTTP 413){said}"
            if exc.status == 429:
                wait = (f"; the desk asks to wait {exc.retry_after:.0f} s, try again later"
                        if exc.retry_after is not None and exc.retry_after > MAX_RETRY_AFTER_S else "")
                return f"throttled (HTTP 429){wait}{said}"
            if exc.status >= 500:
                return f"server error (HTTP {exc.status}){said}"
            return f"HTTP {exc.status}{said}"
        if isinstance(exc, httpx.TimeoutException):
            return f"no answer from {self.base_url} within {self.timeout_s:g} s"
        if isinstance(exc, httpx.TransportError):
            return f"cannot reach {self.base_url}: {' '.join(str(exc).split()) or type(exc).__name__}"
        return " ".join(str(exc).split()) or type(exc).__name__

    @staticmethod
    def transient(exc: BaseException) -> bool:
        if isinstance(exc, HttpFailure):
            if exc.retry_after is not None and exc.retry_after > MAX_RETRY_AFTER_S:
                return False
            return exc.status == 429 or exc.status >= 500
        return isinstance(exc, httpx.TimeoutException | httpx.RemoteProtocolError)

    def call(self, operation: str, method: str, path: str, *, params: Mapping[str, Any] | None = None,
             json_body: Any = None, upload: Path | None = None, form_file: Path | None = None,
             headers: Mapping[str, str] | None = None, expect: tuple[int, ...] = (200, 201, 204),
             raw: Callable[[httpx.Response], Any] | None = None,
             reconcile: Callable[[], Any | None] | None = None) -> Any:
        """One API call, retried while transient. The body is `json_body`, or the file `upload` sent raw, or
        `form_file` as multipart field `file`. Returns the decoded JSON ({} when empty), or raw(response).

        `reconcile`, for a create without an idempotency key: asked before every retry, and what it finds (the
        object the failed attempt may have created after all) is returned instead of creating again."""
        wait: list[float] = []
        tries: list[int] = []

        def attempt() -> Any:
            if wait:
                self.sleep(min(wait.pop(), MAX_RETRY_AFTER_S))
            if tries and reconcile is not None:
                found = reconcile()
                if found is not None:
                    return found
            tries.append(1)
            response = self._send(method, path, params=params, json_body=json_body, upload=upload,
                                  form_file=form_file, headers=headers)
            if response.status_code not in expect:
                failure = HttpFailure(response)
                if failure.retry_after is not None:
                    wait.append(failure.retry_after)
                raise failure
            if raw is not None:
                return raw(response)
            if not response.content:
                return {}
            try:
                return response.json()
            except json.JSONDecodeError as exc:
                raise ValueError(f"the desk answered HTTP {response.status_code} with a body that is not JSON "
                                 f"({response.headers.get('content-type', 'no content type')})") from exc

        kwargs = {"attempts": self.attempts} if self.attempts else {}
        return call_with_retries(attempt, provider=self.where, operation=operation, transient=self.transient,
                                 describe=self.describe, sleep=self.sleep, **kwargs)

    def _send(self, method: str, path: str, *, params, json_body, upload, form_file, headers) -> httpx.Response:
        url = path if path.startswith(("http://", "https://")) else f"{self.base_url}{path}"
        with httpx.Client(auth=self.auth, timeout=self.timeout_s, follow_redirects=False) as client:
            if upload is not None:
                size = upload.stat().st_size
                with upload.open("rb") as fh:
                    hdrs = {"Content-Type": "application/octet-stream", "Content-Length": str(size), **(headers or {})}
                    return client.request(method, url, params=params, headers=hdrs, content=_chunks(fh))
            if form_file is not None:
                with form_file.open("rb") as fh:
                    return client.request(method, url, params=params, headers=headers,
                                          files={"file": (form_file.name, fh, "application/octet-stream")})
            return client.request(method, url, params=params, headers=headers, json=json_body)


def _chunks(fh) -> Iterator[bytes]:
    while chunk := fh.read(_CHUNK):
        yield chunk
