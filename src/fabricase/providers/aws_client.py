"""The AWS provider's configuration (`[providers.aws]`), its boto3 clients, and how SDK errors read.

Credentials only through boto3's own chain; botocore's retries are off because providers.retry retries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import boto3
import botocore.exceptions
import httpx
from botocore.config import Config
from botocore.parsers import ResponseParserError

from fabricase.errors import ConfigError, ProviderError
from fabricase.providers.aws_support import DEFAULT_SERVICE

__all__ = ["ATTACHMENT_MODES", "AwsSettings", "describe_error", "error_code", "http_status", "is_transient",
           "make_client", "settings_from"]

ATTACHMENT_MODES = ("auto", "upload-links", "attachment-set")

_THROTTLED = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestLimitExceeded", "TooManyRequestsException",
    "RequestThrottled", "RequestThrottledException", "SlowDown", "EC2ThrottledException", "PriorRequestNotComplete",
})
_SERVER = frozenset({"InternalServerError", "InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable"})
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

def make_client(service: str, settings: AwsSettings, region: str | None) -> Any:
    """A boto3 client on the standard credential chain, with botocore's own retries off (providers.retry
    retries) and the configured endpoint, if any."""
    try:
        session = boto3.session.Session(profile_name=settings.profile)
    except botocore.exceptions.ProfileNotFound as exc:
        raise ProviderError(f"AWS profile {settings.profile!r} not found", where="aws") from exc
    endpoint = settings.endpoints.get(service) or settings.endpoints.get("*")
    config = Config(retries={"total_max_attempts": 1}, connect_timeout=10, read_timeout=120,
                    user_agent_extra="fabricase")
    return session.client(service, region_name=region, endpoint_url=endpoint, config=config)


def error_code(exc: BaseException | None) -> str | None:
    if isinstance(exc, botocore.exceptions.ClientError):
        return str(exc.response.get("Error", {}).get("Code") or "") or None
    return None


def http_status(exc: BaseException) -> int | None:
    if isinstance(exc, botocore.exceptions.ClientError):
        return exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code
    return None


def is_transient(exc: BaseException) -> bool:
    """Throttling, a 5xx, or a connection that failed or timed out: worth another try."""
    code, status = error_code(exc), http_status(exc)
    if code in _THROTTLED or code in _SERVER or (status is not None and (status >= 500 or status == 429)):
        return True
    return isinstance(exc, botocore.exceptions.ConnectionError | botocore.exceptions.HTTPClientError
                      | ResponseParserError | httpx.TransportError)


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
        if code in _THROTTLED:
            return f"throttled ({code}): {message}"
        if status is not None and status >= 500:
            return f"AWS server error {status} ({code or 'no code'})"
        return f"{code}: {message}" if message else str(code)
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code} from the upload link"
    if isinstance(exc, httpx.TransportError | botocore.exceptions.BotoCoreError):
        return _one_line(f"{type(exc).__name__}: {exc}")
    return _one_line(f"{type(exc).__name__}: {exc}")
