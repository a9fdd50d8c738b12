"""GCP plumbing shared by the provider's parts: Application Default Credentials, one REST client per API (with
the profile's private endpoints), and every call through providers.retry, each SDK error as one line naming the
operation (and, on 403, the role it needs). Reads pass `**self._read_kw()`: google-api-core's own Retry, on the
policy's transient table; writes pass `**self._kw()` (no SDK retry) and are retried by providers.retry, a
cases.create only after a search for its marker (`reconcile=`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import google.auth
import google.auth.exceptions
from google.api_core import exceptions as api_exceptions
from google.api_core.client_options import ClientOptions
from google.api_core.retry import Retry
from google.cloud import compute_v1, support_v2

from fabricase.config import Paths
from fabricase.errors import ConfigError, ProviderError
from fabricase.providers.retry import BASE_DELAY_S, MAX_DELAY_S, call_with_retries, is_transient

__all__ = ["NO_CREDENTIALS", "SUPPORT_ENDPOINT", "GcpApi", "as_dict", "not_found"]

T = TypeVar("T")
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
SUPPORT_ENDPOINT = "https://cloudsupport.googleapis.com"
NO_CREDENTIALS = ("no Google credentials found (Application Default Credentials): run `gcloud auth "
                  "application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS")
# What a 403 on each API family needs (cloud-apis.md 2.2; Compute Engine's predefined roles).
_PERMISSION_HINTS = {
    "compute": "needs roles/compute.viewer on the project (compute.instances.get, compute.reservations.get)",
    "faulty": "needs admin rights on the instance or reservation (e.g. roles/compute.instanceAdmin.v1)",
    "support": "needs roles/cloudsupport.techSupportEditor (and a paid Customer Care offering) on the support parent",
}
_REQUEST_PREFIX = re.compile(r"^(?:GET|POST|PUT|PATCH|DELETE) \S+: ")


def as_dict(message: Any) -> dict[str, Any]:
    """A proto-plus message as a dict: snake_case names, enums by name."""
    return type(message).to_dict(message, use_integers_for_enums=False)


def _describer(family: str) -> Callable[[BaseException], str]:
    def describe(exc: BaseException) -> str:
        if isinstance(exc, api_exceptions.RetryError) and isinstance(exc.cause, Exception):
            return f"{describe(exc.cause)} (the SDK's retries ran out)"
        if isinstance(exc, google.auth.exceptions.RefreshError):
            return f"credentials were refused: {' '.join(str(exc).split())[:200]}"
        code = getattr(exc, "code", None) or getattr(exc, "status", None)
        message = " ".join(str(getattr(exc, "message", None) or exc).split())
        message = _REQUEST_PREFIX.sub("", message)[:300]  # the REST transport leads with "POST <url>: "
        if code in (401, 403):
            return f"permission denied ({code}): {message}; {_PERMISSION_HINTS[family]}"
        if code == 429:
            return f"throttled (429): {message}"
        return f"{code} {message}" if code and not message.startswith(str(code)) else message

    return describe


def not_found(exc: ProviderError) -> bool:
    return isinstance(exc.__cause__, api_exceptions.NotFound)



class GcpApi:
    """Credentials, clients and calls; the provider's mixins build on it. Set by the provider's __init__:
    paths, profile, name, _credentials, _adc_project, _sleep, _clients."""

    paths: Paths
    profile: dict[str, Any]
    name: str
    _credentials: Any
    _adc_project: str | None
    _sleep: Callable[[float], None]
    _clients: dict[str, Any]

    def _credentials_or_fail(self) -> Any:
        if self._credentials is None:
            try:
                self._credentials, self._adc_project = google.auth.default(scopes=SCOPES)
            except google.auth.exceptions.DefaultCredentialsError as exc:
                raise ProviderError(NO_CREDENTIALS, where=self.name) from exc
        return self._credentials

    def _project(self, hint: str | None = None) -> str:
        project = self.profile.get("project") or hint
        if not project:
            self._credentials_or_fail()
            project = self._adc_project
        if not project:
            raise ConfigError("no GCP project: set project in [providers.gcp] of config.toml", where=self.name)
        return str(project)

    def _parent(self) -> str:
        return str(self.profile.get("support_parent") or f"projects/{self._project()}")

    def _endpoint(self, api: str) -> str | None:
        endpoints = self.profile.get("endpoints") or {}
        if not isinstance(endpoints, dict):
            raise ConfigError("[providers.gcp] endpoints must be a table like {compute = \"https://...\"}")
        return endpoints.get(api)

    @property
    def _timeout(self) -> float:
        return float(self.profile.get("timeout_s", 60))

    def _client(self, module: Any, cls: str, api: str) -> Any:
        if cls not in self._clients:
            endpoint = self._endpoint(api)
            options = ClientOptions(api_endpoint=endpoint) if endpoint else None
            self._clients[cls] = getattr(module, cls)(credentials=self._credentials_or_fail(), transport="rest",
                                                      client_options=options)
        return self._clients[cls]

    def _compute(self, cls: str) -> Any:
        return self._client(compute_v1, cls, "compute")

    def _support(self, cls: str) -> Any:
        return self._client(support_v2, cls, "support")

    def _call(self, operation: str, fn: Callable[[], T], family: str,
              reconcile: Callable[[], T | None] | None = None) -> T:
        """fn() under providers.retry; `reconcile` (for a create): the search run before each retry, whose find
        is returned instead of creating again."""
        try:
            return call_with_retries(fn, provider=self.name, operation=operation, describe=_describer(family),
                                     sleep=self._sleep, reconcile=reconcile)
        except ProviderError as exc:
            if isinstance(exc.__cause__, google.auth.exceptions.DefaultCredentialsError):
                raise ProviderError(NO_CREDENTIALS, where=self.name) from exc
            raise

    def _kw(self) -> dict[str, Any]:
        """Keyword arguments of a write: no SDK retry (providers.retry retries it, reconciling a create)."""
        return {"retry": None, "timeout": self._timeout}

    def _read_kw(self) -> dict[str, Any]:
        """Keyword arguments of a read: google-api-core's Retry on the policy's transient table (never an answer
        that is not the API's), with its backoff, within timeout_s; what it gives up on (a RetryError) is final."""
        retry = Retry(predicate=is_transient, initial=BASE_DELAY_S, maximum=MAX_DELAY_S, multiplier=2.0,
                      timeout=self._timeout)
        return {"retry": retry, "timeout": self._timeout}

