"""One HTTP API of a desk (Jira Service Management, Zendesk), over httpx, under providers.retry: retried while
the policy says transient (throttling with its Retry-After, 5xx, a reset), never when the answer is not the
desk's API ("not implemented by this endpoint"), a create only after the desk was searched for it (`reconcile=`),
and every failure one line naming the desk and the operation."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from fabricase.providers.retry import call_with_retries, retry_after

__all__ = ["DeskApi", "HttpFailure"]

_MESSAGE_MAX = 200
_CHUNK = 1 << 20


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
    """A response the call did not expect (`response`, which providers.retry reads); `retry_after`: what a 429
    or 503 asked for, in seconds."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.status = response.status_code
        self.message = _api_message(response)
        self.retry_after = retry_after(response.headers)
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
                return f"throttled (HTTP 429){said}"
            if exc.status >= 500:
                return f"server error (HTTP {exc.status}){said}"
            return f"HTTP {exc.status}{said}"
        if isinstance(exc, httpx.TimeoutException):
            return f"no answer from {self.base_url} within {self.timeout_s:g} s"
        if isinstance(exc, httpx.TransportError):
            return f"cannot reach {self.base_url}: {' '.join(str(exc).split()) or type(exc).__name__}"
        return " ".join(str(exc).split()) or type(exc).__name__

    def call(self, operation: str, method: str, path: str, *, params: Mapping[str, Any] | None = None,
             json_body: Any = None, upload: Path | None = None, form_file: Path | None = None,
             headers: Mapping[str, str] | None = None, expect: tuple[int, ...] = (200, 201, 204),
             raw: Callable[[httpx.Response], Any] | None = None,
             reconcile: Callable[[], Any | None] | None = None) -> Any:
        """One API call, retried while transient. The body is `json_body`, or the file `upload` sent raw, or
        `form_file` as multipart field `file`. Returns the decoded JSON ({} when empty), or raw(response).

        `reconcile`, for a create: asked before every retry, and what it finds (the object the failed attempt
        may have created after all) is returned instead of creating again."""

        def attempt() -> Any:
            response = self._send(method, path, params=params, json_body=json_body, upload=upload,
                                  form_file=form_file, headers=headers)
            if response.status_code not in expect:
                raise HttpFailure(response)
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
        return call_with_retries(attempt, provider=self.where, operation=operation, describe=self.describe,
                                 sleep=self.sleep, reconcile=reconcile, **kwargs)

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
