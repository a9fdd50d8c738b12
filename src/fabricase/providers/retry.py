"""THE retry and reconcile policy of every provider and desk (docs/providers.md, "Retries and reconcile").

    is_transient(exc or status)    the one table of what may pass with time: 408/425/429/500/502/503/504,
                                   throttling codes, connection resets and timeouts (botocore, httpx, requests,
                                   google-api-core DeadlineExceeded, azure-core ServiceRequestError...)
    retry_after(headers or value)  the one Retry-After parser: delta seconds or an HTTP date, as seconds from now
    not_an_api_response(exc)       an answer that is not the API's (an HTML 500, an HTML 404/405, any 501): the
                                   endpoint lacks the operation, so it is never retried
    call_with_retries(fn, ...)     bounded backoff with full jitter, at least what Retry-After asks for (a wait
                                   over MAX_RETRY_AFTER_S is not waited: "try again later")
    create_with_reconcile(...)     a create is never retried blind: after a transient failure the provider's own
                                   find-by-marker runs first, and the case it finds is adopted
    mark_sdk_retried(...)          reads go through the SDKs' own retry modes; what they give up on is final

The SDKs are optional, so nothing here imports one: exceptions are read by their attributes (status, response,
headers) and the transient exception types are named in TRANSIENT_ERRORS, resolved when first needed.
"""

from __future__ import annotations

import contextlib
import email.utils
import importlib
import math
import random
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import cache
from typing import Any, TypeVar

from fabricase.errors import ProviderError

__all__ = [
    "ATTEMPTS",
    "BASE_DELAY_S",
    "MAX_DELAY_S",
    "MAX_RETRY_AFTER_S",
    "NOT_IMPLEMENTED",
    "THROTTLING_CODES",
    "TRANSIENT_CODES",
    "TRANSIENT_ERRORS",
    "TRANSIENT_STATUSES",
    "call_with_retries",
    "create_with_reconcile",
    "headers_of",
    "http_status",
    "is_transient",
    "mark_sdk_retried",
    "not_an_api_response",
    "retry_after",
    "sdk_retried",
]  # fmt: skip

T = TypeVar("T")
ATTEMPTS = 5
BASE_DELAY_S = 0.5
MAX_DELAY_S = 8.0
MAX_RETRY_AFTER_S = 60.0  # a service asking for a longer wait is down, not throttling: "try again later"
NOT_IMPLEMENTED = "not implemented by this endpoint"

TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
# botocore error codes that mean "throttled" or "the service failed", whatever the status (AWS sends some as 400).
THROTTLING_CODES = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestLimitExceeded", "TooManyRequestsException",
    "RequestThrottled", "RequestThrottledException", "SlowDown", "EC2ThrottledException", "PriorRequestNotComplete",
})
TRANSIENT_CODES = THROTTLING_CODES | {"RequestTimeout", "RequestTimeoutException", "InternalServerError",
                                      "InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable"}
# Exceptions raised when no answer came back (a reset, a timeout): module -> class names, subclasses included.
TRANSIENT_ERRORS: dict[str, tuple[str, ...]] = {
    "builtins": ("ConnectionError", "TimeoutError"),
    "botocore.exceptions": ("ConnectionError", "HTTPClientError"),  # EndpointConnection, ReadTimeout, ...Closed
    "urllib3.exceptions": ("ProtocolError", "TimeoutError"),
    "requests.exceptions": ("ConnectionError", "Timeout", "ChunkedEncodingError"),
    "httpx": ("TimeoutException", "NetworkError", "RemoteProtocolError"),
    "google.auth.exceptions": ("TransportError",),
    "google.api_core.exceptions": ("DeadlineExceeded",),
    "azure.core.exceptions": ("ServiceRequestError", "ServiceResponseError"),
}
SDK_RETRIED = "fabricase_sdk_retried"  # set on an error (or its response) that the SDK's own retry gave up on
_FOREIGN_STATUSES = frozenset({404, 405})  # with a body that is not the API's: the endpoint lacks the operation


# --- reading an error ----------------------------------------------------------------------------------------

def _boto_response(exc: BaseException) -> Mapping[str, Any] | None:
    response = getattr(exc, "response", None)
    return response if isinstance(response, Mapping) else None  # botocore ClientError: the parsed error


def _as_status(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599 else None


def http_status(exc_or_status: BaseException | int | None) -> int | None:
    """The HTTP status behind an error: ours (`status`), azure-core's (`status_code`), a response's, botocore's
    ResponseMetadata, google-api-core's `code`; None when no answer came back."""
    if exc_or_status is None or isinstance(exc_or_status, int):
        return _as_status(exc_or_status)
    exc = exc_or_status
    boto = _boto_response(exc)
    if boto is not None:
        return _as_status((boto.get("ResponseMetadata") or {}).get("HTTPStatusCode"))
    for value in (getattr(exc, "status", None), getattr(exc, "status_code", None),
                  getattr(getattr(exc, "response", None), "status_code", None), getattr(exc, "code", None)):
        if (status := _as_status(value)) is not None:
            return status
    return None


def headers_of(exc: BaseException) -> Mapping[str, str]:
    """The response headers behind an error ({} when there are none)."""
    boto = _boto_response(exc)
    if boto is not None:
        return (boto.get("ResponseMetadata") or {}).get("HTTPHeaders") or {}
    for holder in (getattr(exc, "response", None), exc):
        headers = getattr(holder, "headers", None)
        if isinstance(headers, Mapping) or hasattr(headers, "get"):
            return headers  # type: ignore[return-value]
    return {}


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    value = headers.get(name) or headers.get(name.lower())  # httpx, requests, azure-core: case-insensitive already
    if value is None and isinstance(headers, Mapping):
        value = next((v for k, v in headers.items() if str(k).lower() == name.lower()), None)
    return None if value is None else str(value)


def _body_head(exc: BaseException) -> bytes:
    """The start of the error's response body, when the response has been read (b"" otherwise)."""
    response = getattr(exc, "response", None)
    if response is None or isinstance(response, Mapping):
        return b""
    for attr in ("content", "body", "text"):
        try:
            value = getattr(response, attr, None)
            value = value() if callable(value) else value
        except Exception:  # noqa: BLE001 - a streamed body not read yet: nothing to judge by
            continue
        if isinstance(value, str):
            value = value.encode("utf-8", "replace")
        if isinstance(value, bytes | bytearray):
            return bytes(value[:512])
    return b""


def _is_html(exc: BaseException) -> bool:
    if "html" in (_header(headers_of(exc), "Content-Type") or "").lower():
        return True
    return _body_head(exc).lstrip()[:14].lower().startswith((b"<!doctype html", b"<html"))


def _generic_boto_error(exc: BaseException) -> bool:
    """botocore could not find the service's error in the body (its generic parse names the status as the code)."""
    boto = _boto_response(exc)
    return boto is not None and str((boto.get("Error") or {}).get("Code") or "") == str(http_status(exc))


def not_an_api_response(exc: BaseException) -> str | None:
    """Why this answer is not the API's, ending in "not implemented by this endpoint"; None when it is the API's.
    A 501 always; a 404 or 405 whose body is an HTML page or holds no API error; a 500 that is an HTML page (a
    stand-in or private endpoint without the operation). Gateway statuses (502/503/504) stay transient: their
    HTML is the proxy's, and the API may well be behind it."""
    status = http_status(exc)
    if status == 501:
        return f"HTTP 501: {NOT_IMPLEMENTED}"
    html = status in (*_FOREIGN_STATUSES, 500) and _is_html(exc)
    if html:
        return f"HTTP {status} with an HTML page instead of the API's answer: {NOT_IMPLEMENTED}"
    if status in _FOREIGN_STATUSES and _generic_boto_error(exc):
        return f"HTTP {status} without the API's error in the body: {NOT_IMPLEMENTED}"
    return None


@cache
def _transient_types() -> tuple[type[BaseException], ...]:
    found: list[type[BaseException]] = []
    for module_name, names in TRANSIENT_ERRORS.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # that SDK is not installed: nothing of it can be raised
            continue
        found += [cls for name in names if isinstance(cls := getattr(module, name, None), type)]
    return tuple(found)


def mark_sdk_retried(target: Any) -> None:
    """Mark an error, a response object or a botocore parsed response as the SDK's last word: the SDK's own
    retry mode had its tries (reads), so call_with_retries does not try again."""
    if isinstance(target, dict):
        target[SDK_RETRIED] = True
    else:  # a response type with __slots__ cannot carry the mark: its error is then retried by us, still bounded
        with contextlib.suppress(AttributeError):
            setattr(target, SDK_RETRIED, True)


def sdk_retried(exc: BaseException) -> bool:
    """The SDK's own retry already gave up on this error (a mark, or google-api-core's RetryError)."""
    response = getattr(exc, "response", None)
    if getattr(exc, SDK_RETRIED, False) or getattr(response, SDK_RETRIED, False):
        return True
    if isinstance(response, Mapping) and response.get(SDK_RETRIED):
        return True
    return any(c.__name__ == "RetryError" and c.__module__.startswith("google.api_core") for c in type(exc).__mro__)


def is_transient(exc_or_status: BaseException | int) -> bool:
    """Whether another try may succeed: a status in TRANSIENT_STATUSES, a throttling or server error code, or no
    answer at all (a reset, a timeout). Never for an answer that is not the API's, nor for an error the SDK's
    own retry already gave up on."""
    if isinstance(exc_or_status, int):
        return exc_or_status in TRANSIENT_STATUSES
    exc = exc_or_status
    if sdk_retried(exc) or not_an_api_response(exc) is not None:
        return False
    boto = _boto_response(exc)
    if boto is not None and (boto.get("Error") or {}).get("Code") in TRANSIENT_CODES:
        return True
    status = http_status(exc)
    if status is not None:
        return status in TRANSIENT_STATUSES
    if isinstance(exc, _transient_types()):
        return True
    # our own wrappers say `status = None` when no answer came back (an UploadError "cannot reach ..."): the cause
    return hasattr(exc, "status") and exc.status is None and isinstance(exc.__cause__, _transient_types())


# --- Retry-After ---------------------------------------------------------------------------------------------

def retry_after(source: Mapping[str, str] | str | bytes | float | None, *,
                now: datetime | None = None) -> float | None:
    """Seconds a Retry-After asks to wait: from a header mapping (any case) or the value itself, as delta
    seconds or an HTTP date (a past date is 0). None when absent or unreadable. The policy waits at most
    MAX_RETRY_AFTER_S: call_with_retries gives up on a longer wait instead of waiting it out."""
    if source is None or isinstance(source, bool):
        return None
    if isinstance(source, int | float):
        value: str = str(source)
    elif isinstance(source, bytes):
        value = source.decode("latin-1")
    elif isinstance(source, str):
        value = source
    else:
        found = _header(source, "Retry-After")
        if found is None:
            return None
        value = found
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


# --- the calls -----------------------------------------------------------------------------------------------

def call_with_retries(fn: Callable[[], T], *, provider: str, operation: str,
                      transient: Callable[[BaseException], bool] = is_transient,
                      describe: Callable[[BaseException], str] = str, attempts: int = ATTEMPTS,
                      sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None,
                      reconcile: Callable[[], T | None] | None = None) -> T:
    """fn(), tried up to `attempts` times in all while `transient(exc)` says the error may pass. The delay doubles
    from BASE_DELAY_S up to MAX_DELAY_S with full jitter, and is at least what the answer's Retry-After asks.

    `reconcile`, for a create without an idempotency key: run after each transient failure, before the next
    try; what it finds (the object the failed try created after all) is returned instead of creating again.
    If it fails, nothing is sent again.

    Every failure is one ProviderError(f"{operation}: ...", where=provider): an answer that is not the API's
    at once ("... not implemented by this endpoint"), else describe(exc), with the number of attempts."""
    rng = rng or random.Random()
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except ProviderError:
            raise
        except Exception as exc:  # noqa: BLE001 - every SDK has its own error tree; the table sorts them
            foreign = not_an_api_response(exc)
            if foreign is not None:
                raise ProviderError(f"{operation}: {foreign}", where=provider) from exc
            tries = f" (after {attempt} attempts)" if attempt > 1 else ""
            if attempt == attempts or sdk_retried(exc) or not transient(exc):
                raise ProviderError(f"{operation}: {describe(exc)}{tries}", where=provider) from exc
            wait = retry_after(headers_of(exc))
            if wait is not None and wait > MAX_RETRY_AFTER_S:
                raise ProviderError(f"{operation}: {describe(exc)}; the service asks to wait {wait:.0f} s, try "
                                    f"again later{tries}", where=provider) from exc
            sleep(max(rng.uniform(0, min(MAX_DELAY_S, BASE_DELAY_S * 2 ** (attempt - 1))), wait or 0.0))
            if reconcile is not None:
                try:
                    found = reconcile()
                except ProviderError as lost:
                    raise ProviderError(f"{operation}: {describe(exc)}; not sent again, since looking for what "
                                        f"it may have created failed: {lost.message}", where=provider) from exc
                if found is not None:
                    return found
    raise AssertionError("unreachable")


def create_with_reconcile(create: Callable[[], T], find: Callable[[], T | None], *, provider: str, operation: str,
                          **options: Any) -> T:
    """create(), retried only after find() (the provider's search by the case marker) found nothing: a create
    whose answer was lost (a 504 after the case was made, a reset) adopts the case it made."""
    return call_with_retries(create, provider=provider, operation=operation, reconcile=find, **options)
