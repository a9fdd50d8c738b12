"""One exception tree for fabricase. The CLI turns any of these into a one-line message and exit 1.

    FabricaseError                  base; .where names the host, collector, item, provider or file at fault
    ├── ConfigError                 bad configuration, unwritable data directory, missing credentials
    ├── TargetError                 empty or malformed nodeset, unknown job, bad --replay directory
    ├── TransportError              a transport could not run at all (not a single host failing)
    ├── CaptureError                a capture stream or capture directory is malformed
    │   ├── CorruptItemError        an item on disk does not match its index (size or sha256)
    │   └── CaptureInterrupted      Ctrl-C during a capture; .where is the partial capture directory, kept
    ├── ParseError                  a parser could not read an item (recorded, not usually raised to the user)
    ├── BundleError                 a bundle cannot be built or read
    │   └── VerifyError             a bundle failed verification; .problems lists each member at fault
    ├── ProviderError               unknown provider, or a provider/desk API call failed
    │   └── UnsupportedError        a provider lacks a capability (declared up front)
    └── TrackerError                the escalation store cannot be opened or updated
        ├── NotFoundError           an escalation id that does not exist
        └── DuplicateError          an open escalation already covers these hosts (`open --force` files anyway)
"""

from __future__ import annotations

__all__ = [
    "BundleError",
    "CaptureError",
    "CaptureInterrupted",
    "ConfigError",
    "CorruptItemError",
    "DuplicateError",
    "FabricaseError",
    "NotFoundError",
    "ParseError",
    "ProviderError",
    "TargetError",
    "TrackerError",
    "TransportError",
    "UnsupportedError",
    "VerifyError",
]


class FabricaseError(Exception):
    """Base of every error fabricase raises on purpose."""

    def __init__(self, message: str, *, where: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class ConfigError(FabricaseError):
    pass


class TargetError(FabricaseError):
    pass


class TransportError(FabricaseError):
    pass


class CaptureError(FabricaseError):
    pass


class CorruptItemError(CaptureError):
    pass


class CaptureInterrupted(CaptureError):
    pass


class ParseError(FabricaseError):
    pass


class BundleError(FabricaseError):
    pass


class VerifyError(BundleError):
    def __init__(self, message: str, *, where: str | None = None, problems: list[str] | None = None) -> None:
        super().__init__(message, where=where)
        self.problems = problems or []


class ProviderError(FabricaseError):
    pass


class UnsupportedError(ProviderError):
    pass


class TrackerError(FabricaseError):
    pass


class NotFoundError(TrackerError):
    pass


class DuplicateError(TrackerError):
    """Open escalations already cover the hosts, instances or shared components of a new one. .duplicates:
    [(escalation id, what it covers in words)]."""

    def __init__(self, message: str, *, where: str | None = None,
                 duplicates: list[tuple[str, tuple[str, ...]]] | None = None) -> None:
        super().__init__(message, where=where)
        self.duplicates = list(duplicates or [])
