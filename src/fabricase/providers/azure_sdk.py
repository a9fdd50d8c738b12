"""The Azure side of the Azure provider: the profile, the credential, SDK clients, and errors as one line.

Credentials come only from azure-identity's DefaultAzureCredential (environment, workload identity, managed
identity, `az login`, ...); nothing is stored. Every call goes through providers.retry.call_with_retries.
Reads (GET, HEAD) retry inside azure-core, with a RetryPolicy on the policy's transient table (ReadRetryPolicy);
what it gives up on is final. Writes (PUT, POST, PATCH) are never retried by the SDK: providers.retry retries
them, and a ticket's PUT only after looking the ticket up by its name (`reconcile=`).
"""

from __future__ import annotations

import re
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TypeVar

from fabricase.errors import ConfigError, ProviderError
from fabricase.providers.retry import (
    ATTEMPTS,
    BASE_DELAY_S,
    MAX_DELAY_S,
    MAX_RETRY_AFTER_S,
    call_with_retries,
    http_status,
    is_transient,
    mark_sdk_retried,
    retry_after,
)

__all__ = [
    "ARM_ENDPOINT",
    "ARM_SCOPE",
    "READ_METHODS",
    "AzureProfile",
    "call",
    "default_credential",
    "describe_error",
    "read_retry_policy",
    "status_of",
]

T = TypeVar("T")
ARM_ENDPOINT = "https://management.azure.com"
ARM_SCOPE = "https://management.azure.com/.default"
PROVIDER = "azure"
READ_METHODS = frozenset({"GET", "HEAD"})  # what azure-core may send again; every other method is a write
_MESSAGE_MAX = 300
_CONTACT_KEYS = ("first_name", "last_name", "email", "country", "timezone")
CONTACT_METHODS = ("email", "phone")  # ContactProfile.preferred_contact_method (azure-mgmt-support 7.0.0)
_PLAN_WORDS = re.compile(r"support ?plan", re.IGNORECASE)


@dataclass(frozen=True)
class AzureProfile:
    """`[providers.azure]` of config.toml, checked. contact: the ticket's ContactProfile (first_name,
    last_name, email, country as ISO 3166-1 alpha-3, timezone as a Microsoft time-zone name, language,
    method, and phone: required when method is "phone", since Microsoft then has to call a number). The
    contact's email is also every communication's `sender`, which Azure requires when the caller is a service
    principal (an unattended run)."""

    subscription: str | None = None
    resource_group: str | None = None
    endpoint: str = ARM_ENDPOINT
    ca_bundle: str | None = None
    support_plan: str | None = None
    max_severity: str | None = None
    severity: dict[str, str] = field(default_factory=dict)
    service: str = "Virtual Machine running Linux"
    problem_classification: str | None = None
    diagnostic_consent: str = "No"
    contact: dict[str, str] = field(default_factory=dict)
    poll_interval_s: float = 5.0  # between polls of a long-running ticket or message creation

    @classmethod
    def from_dict(cls, raw: dict[str, Any], where: str) -> AzureProfile:
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ConfigError(f"[providers.azure]: unknown key {unknown[0]!r}; valid: {', '.join(sorted(known))}",
                              where=where)
        for key in ("severity", "contact"):
            if not isinstance(raw.get(key, {}), dict):
                raise ConfigError(f"[providers.azure] {key} must be a table", where=where)
        poll = raw.get("poll_interval_s", 5.0)
        if isinstance(poll, bool) or not isinstance(poll, int | float) or not 0 <= poll <= 300:
            raise ConfigError("[providers.azure] poll_interval_s must be a number of seconds, 0 to 300", where=where)
        for key, value in raw.items():
            if key not in ("severity", "contact", "poll_interval_s") and not isinstance(value, str):
                raise ConfigError(f"[providers.azure] {key} must be a string", where=where)
        consent = raw.get("diagnostic_consent", "No")
        if consent not in ("Yes", "No"):
            raise ConfigError("[providers.azure] diagnostic_consent must be \"Yes\" or \"No\"", where=where)
        contact = {k: str(v) for k, v in raw.get("contact", {}).items()}
        _check_contact(contact, where)
        return cls(**{**raw, "endpoint": raw.get("endpoint", ARM_ENDPOINT).rstrip("/"),
                      "severity": dict(raw.get("severity", {})), "poll_interval_s": float(poll),
                      "contact": contact})

    def need_subscription(self) -> str:
        if not self.subscription:
            raise ProviderError("no subscription: set subscription = \"<id>\" in [providers.azure] of config.toml",
                                where=PROVIDER)
        return self.subscription

    def missing_contact(self) -> list[str]:
        return [k for k in _CONTACT_KEYS if not self.contact.get(k)]

    def sender(self) -> str:
        """Who sends a communication: the contact's email (Azure refuses a service principal's message
        without one, so it is never left out)."""
        email = self.contact.get("email")
        if not email:
            raise ConfigError("[providers.azure.contact] email is required: it is the sender of every message "
                              "fabricase posts (Azure requires one when the caller is a service principal)",
                              where=PROVIDER)
        return email

    def client_options(self, sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
        """Keyword arguments for every SDK client: the endpoint, the CA to trust for it, and the retry policy
        (reads only, sleeping with `sleep`)."""
        options: dict[str, Any] = {"retry_policy": read_retry_policy(sleep)}
        if self.endpoint != ARM_ENDPOINT:
            options["base_url"] = self.endpoint
        if self.ca_bundle:
            options["connection_verify"] = self.ca_bundle
        return options

    def ssl_context(self) -> ssl.SSLContext:
        """What httpx trusts for the endpoint (Guest Health Reporting): the system's CAs, or ca_bundle."""
        return ssl.create_default_context(cafile=self.ca_bundle) if self.ca_bundle else ssl.create_default_context()


def _check_contact(contact: dict[str, str], where: str) -> None:
    """The contact method is one Azure knows, and a phone contact has a number to call."""
    method = contact.get("method", "email")
    if method not in CONTACT_METHODS:
        raise ConfigError(f"[providers.azure.contact] method must be one of {', '.join(CONTACT_METHODS)}, "
                          f"not {method!r}", where=where)
    if method == "phone" and not contact.get("phone", "").strip():
        raise ConfigError("[providers.azure.contact] phone is required when method = \"phone\" (the number "
                          "Microsoft calls)", where=where)


def default_credential() -> Any:
    """azure-identity's standard chain. Interactive browser sign-in is excluded: fabricase runs unattended."""
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential(exclude_interactive_browser_credential=True)


status_of = http_status  # the HTTP status behind an SDK or httpx error, None when no response came back


class _Answered(Exception):
    """An HTTP answer seen as the error it will become, for the policy's table."""

    def __init__(self, response: Any) -> None:
        super().__init__(getattr(response, "status_code", None))
        self.response = response


@cache
def _read_retry_policy_class() -> type:
    from azure.core.exceptions import AzureError
    from azure.core.pipeline.policies import RetryPolicy

    class ReadRetryPolicy(RetryPolicy):
        """azure-core's RetryPolicy for reads only: a GET or HEAD is retried while providers.retry's table says
        transient (never an answer that is not the API's, nor a Retry-After over MAX_RETRY_AFTER_S), with at
        least the wait Retry-After asks; a write is sent once. What it gives up on is marked final."""

        def __init__(self, sleep: Callable[[float], None]) -> None:
            super().__init__(retry_total=ATTEMPTS - 1, retry_backoff_factor=BASE_DELAY_S,
                             retry_backoff_max=MAX_DELAY_S)
            self._sleep_with = sleep

        def _is_method_retryable(self, settings: Any, request: Any, response: Any = None) -> bool:
            return request.method.upper() in READ_METHODS

        def is_retry(self, settings: Any, response: Any) -> bool:
            if response.http_request.method.upper() not in READ_METHODS or not settings["total"]:
                return False
            answered = _Answered(response.http_response)
            wait = retry_after(response.http_response.headers)
            return is_transient(answered) and (wait is None or wait <= MAX_RETRY_AFTER_S)

        def sleep(self, settings: Any, transport: Any, response: Any = None) -> None:
            wait = retry_after(response.http_response.headers) if response is not None else None
            self._sleep_with(max(self.get_backoff_time(settings), wait or 0.0))

        def send(self, request: Any) -> Any:
            read = request.http_request.method.upper() in READ_METHODS
            try:
                response = super().send(request)
            except AzureError as err:
                if read:
                    mark_sdk_retried(err)
                raise
            if read and response.http_response.status_code >= 400:
                mark_sdk_retried(response.http_response)  # the HttpResponseError the SDK raises carries it
            return response

    return ReadRetryPolicy


def read_retry_policy(sleep: Callable[[float], None] = time.sleep) -> Any:
    """The azure-core RetryPolicy of every client: reads retried in the SDK, writes left to providers.retry."""
    return _read_retry_policy_class()(sleep)


def _error_code_message(exc: BaseException) -> tuple[str | None, str]:
    error = getattr(exc, "error", None)
    code, message = getattr(error, "code", None), getattr(error, "message", None)
    response = getattr(exc, "response", None)
    if not message and response is not None:
        try:  # httpx (Guest Health Reporting): the ARM error envelope
            body = response.json().get("error", {})
            code, message = code or body.get("code"), body.get("message")
        except Exception:  # noqa: BLE001 - any body that is not the envelope: fall back to the reason
            message = None
    if not message:
        message = getattr(exc, "reason", None) or getattr(exc, "message", None) or str(exc)
    return code, str(message)


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_MAX else text[: _MESSAGE_MAX - 3] + "..."


def describe_error(exc: BaseException) -> str:
    """An SDK, credential or httpx error as one line that says what to do."""
    from azure.core.exceptions import ClientAuthenticationError

    status = status_of(exc)
    code, message = _error_code_message(exc)
    detail = _one_line(f"{code}: {message}" if code else message)
    if isinstance(exc, ClientAuthenticationError) and status is None:
        first = _one_line(message.split("\n")[0])
        return (f"no usable Azure credential ({first}); sign in with `az login`, or set AZURE_CLIENT_ID, "
                "AZURE_TENANT_ID and AZURE_CLIENT_SECRET (DefaultAzureCredential)")
    if _PLAN_WORDS.search(f"{code or ''} {message}"):
        return f"no Azure support plan that can file this ticket ({detail}); technical tickets need a paid plan"
    if status == 401:
        return f"authentication refused (401 {detail})"
    if status == 403:
        return f"permission denied (403 {detail}); see docs/providers/azure.md for the roles needed"
    if status == 404:
        return f"not found (404 {detail})"
    if status == 429:
        return f"throttled (429 {detail})"
    if status is not None:
        return f"{status} {detail}"
    return _one_line(f"{type(exc).__name__}: {message}")


def call(fn: Callable[[], T], operation: str, *, sleep: Callable[[float], None] = time.sleep,
         reconcile: Callable[[], T | None] | None = None) -> T:
    """fn() under providers.retry; any failure is one ProviderError naming the operation. `reconcile` (a
    create): the lookup run before each retry, whose find is returned instead of creating again."""
    return call_with_retries(fn, provider=PROVIDER, operation=operation, describe=describe_error, sleep=sleep,
                             reconcile=reconcile)
