"""The AWS provider's configuration (`[providers.aws]`), its boto3 clients, and how SDK errors read.

Credentials only through boto3's own chain. Reads (Describe*, List*, Get*) retry in botocore's own adaptive
mode (client-side rate limiting after throttling); writes are never retried by botocore, only by providers.retry,
which searches for the case a failed CreateCase may have opened before trying again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import boto3
import botocore.exceptions
import httpx
from botocore.config import Config

from fabricase.errors import ConfigError, ProviderError
from fabricase.providers.aws_support import DEFAULT_SERVICE
from fabricase.providers.retry import (
    ATTEMPTS,
    THROTTLING_CODES,
    http_status,
    is_transient,
    mark_sdk_retried,
    not_an_api_response,
)

__all__ = ["ATTACHMENT_MODES", "READ_PREFIXES", "AwsSettings", "describe_error", "error_code", "http_status",
           "is_read", "is_transient", "make_client", "settings_from"]

ATTACHMENT_MODES = ("auto", "upload-links", "attachment-set")
# Operations that change nothing: botocore's adaptive mode retries them. Every other one is a write.
READ_PREFIXES = ("Describe", "List", "Get")
_DENIED = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedAccess"})
_REJECTED = frozenset({"AuthFailure", "InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch",
                       "ExpiredToken", "ExpiredTokenException"})
_NO_PLAN = "no AWS support plan with API access (Business, Enterprise On-Ramp or Enterprise, or their successors)"


# --- settings ----------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class AwsSettings:
    """`[providers.aws]`, checked. endpoints: service -> URL (private endpoints; the tests' local servers)."""

    regions: tuple[str, ...] = ()
    profile: str | None = None
    endpoints: Mapping[str, str] = dataclasses.field(default_factory=dict)
    support_region: str = "us-east-1"  # every aws-partition region is sent to support.us-east-1
    support_plan: str | None = None
    max_severity: str | None = None
    severity: Mapping[str, str] = dataclasses.field(default_factory=dict)
    service_code: str = DEFAULT_SERVICE
    category_code: str | None = None
    language: str = "en"
    cc: tuple[str, ...] = ()
    attachments: str = "auto"
    codes_ttl_s: float = 86_400.0
    find_case_days: int = 30


def _str(profile: Mapping[str, Any], key: str, where: str) -> str | None:
    value = profile.get(key)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ConfigError(f"[providers.aws] {key} must be a non-empty string", where=where)
    return value.strip() if value else None


def _str_list(profile: Mapping[str, Any], key: str, where: str, max_len: int | None = None) -> tuple[str, ...]:
    value = profile.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"[providers.aws] {key} must be a list of strings", where=where)
    if max_len is not None and len(value) > max_len:
        raise ConfigError(f"[providers.aws] {key} takes at most {max_len} entries", where=where)
    return tuple(v.strip() for v in value)


def _str_table(profile: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    value = profile.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"[providers.aws] {key} must be a table of strings", where=where)
    return {str(k): v for k, v in value.items()}


def _positive(profile: Mapping[str, Any], key: str, where: str, default: float) -> float:
    value = profile.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"[providers.aws] {key} must be a positive number", where=where)
    return value


def settings_from(profile: Mapping[str, Any], where: str = "config.toml") -> AwsSettings:
    """Check a `[providers.aws]` table; a bad value is a one-line ConfigError naming the key."""
    regions = _str_list(profile, "regions", where)
    region = _str(profile, "region", where)
    if region and region not in regions:
        regions = (region, *regions)
    endpoints = _str_table(profile, "endpoints", where)
    if _str(profile, "endpoint_url", where):
        endpoints = {"*": profile["endpoint_url"].strip(), **endpoints}
    attachments = _str(profile, "attachments", where) or "auto"
    if attachments not in ATTACHMENT_MODES:
        raise ConfigError(f"[providers.aws] attachments must be one of {', '.join(ATTACHMENT_MODES)}", where=where)
    return AwsSettings(
        regions=regions, profile=_str(profile, "profile", where), endpoints=endpoints,
        support_region=_str(profile, "support_region", where) or "us-east-1",
        support_plan=_str(profile, "support_plan", where), max_severity=_str(profile, "max_severity", where),
        severity=_str_table(profile, "severity", where),
        service_code=_str(profile, "service_code", where) or DEFAULT_SERVICE,
        category_code=_str(profile, "category_code", where), language=_str(profile, "language", where) or "en",
        cc=_str_list(profile, "cc", where, max_len=10), attachments=attachments,
        codes_ttl_s=float(_positive(profile, "codes_ttl_s", where, 86_400.0)),
        find_case_days=int(_positive(profile, "find_case_days", where, 30)),
    )


# --- clients and errors ------------------------------------------------------------------------------------

def is_read(operation: str) -> bool:
    """A Describe/List/Get operation: it changes nothing, so the SDK may send it again."""
    return operation.startswith(READ_PREFIXES)


def _failed(response: Any) -> botocore.exceptions.ClientError | None:
    """The ClientError a (http_response, parsed) answer will raise, None for a success."""
    if not response or not isinstance(response[1], dict) or getattr(response[0], "status_code", 200) < 300:
        return None
    return botocore.exceptions.ClientError(response[1], "")


def _sdk_retry_gate(operation: Any = None, response: Any = None, **_: Any) -> bool | None:
    """botocore's needs-retry, asked before its own handler: False (no SDK retry) for a write, which
    providers.retry retries after its reconcile, and for an answer that is not the API's; None lets botocore's
    adaptive mode decide for a read."""
    if operation is None or not is_read(operation.name):
        return False
    failed = _failed(response)
    return False if failed is not None and not_an_api_response(failed) else None


def _mark_read_failures(operation: Any = None, response: Any = None, caught_exception: Any = None,
                        **_: Any) -> None:
    """Each failed read is marked as retried by the SDK: when botocore gives up, providers.retry does not start
    again (the mark of the last attempt is what reaches the caller)."""
    if operation is None or not is_read(operation.name):
        return
    if caught_exception is not None:
        mark_sdk_retried(caught_exception)
    elif _failed(response) is not None:
        mark_sdk_retried(response[1])  # the parsed error: it becomes ClientError.response


def make_client(service: str, settings: AwsSettings, region: str | None) -> Any:
    """A boto3 client on the standard credential chain and the configured endpoint, if any. Reads retry in
    botocore's adaptive mode (ATTEMPTS in all); writes are sent once per providers.retry attempt."""
    try:
        session = boto3.session.Session(profile_name=settings.profile)
    except botocore.exceptions.ProfileNotFound as exc:
        raise ProviderError(f"AWS profile {settings.profile!r} not found", where="aws") from exc
    endpoint = settings.endpoints.get(service) or settings.endpoints.get("*")
    config = Config(retries={"mode": "adaptive", "total_max_attempts": ATTEMPTS}, connect_timeout=10,
                    read_timeout=120, user_agent_extra="fabricase")
    client = session.client(service, region_name=region, endpoint_url=endpoint, config=config)
    event = f"needs-retry.{client.meta.service_model.service_id.hyphenize()}"
    client.meta.events.register_first(event, _sdk_retry_gate, unique_id=f"fabricase-gate-{event}")
    client.meta.events.register(event, _mark_read_failures, unique_id=f"fabricase-mark-{event}")
    return client


def error_code(exc: BaseException | None) -> str | None:
    if isinstance(exc, botocore.exceptions.ClientError):
        return str(exc.response.get("Error", {}).get("Code") or "") or None
    return None


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def describe_error(exc: BaseException) -> str:
    """One line for an SDK or HTTP error: what it means for the user first, the service's words after."""
    if isinstance(exc, botocore.exceptions.NoCredentialsError | botocore.exceptions.PartialCredentialsError):
        return ("no AWS credentials found (environment, AWS_PROFILE or `profile`, ~/.aws, SSO, or an instance role)")
    if isinstance(exc, botocore.exceptions.NoRegionError):
        return "no AWS region: set region in [providers.aws] or AWS_DEFAULT_REGION"
    code, status = error_code(exc), http_status(exc)
    if isinstance(exc, botocore.exceptions.ClientError):
        message = _one_line(exc.response.get("Error", {}).get("Message") or "")
        if code == "SubscriptionRequiredException":
            return _NO_PLAN
        if code in _DENIED:
            return f"permission denied ({code}): {message}"
        if code in _REJECTED:
            return f"AWS credentials rejected ({code}): {message}"
        if code in THROTTLING_CODES:
            return f"throttled ({code}): {message}"
        if status is not None and status >= 500:
            return f"AWS server error {status} ({code or 'no code'})"
        return f"{code}: {message}" if message else str(code)
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code} from the upload link"
    if isinstance(exc, httpx.TransportError | botocore.exceptions.BotoCoreError):
        return _one_line(f"{type(exc).__name__}: {exc}")
    return _one_line(f"{type(exc).__name__}: {exc}")
