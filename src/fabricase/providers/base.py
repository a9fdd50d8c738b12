"""What every provider offers: locate hosts in its topology, and a desk that takes support cases.

A provider declares up front, in `unsupported`, each feature it lacks and why, so that a command can
refuse before any work starts instead of failing half way through a filing.
"""

from __future__ import annotations

import abc
import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from fabricase.config import Paths
from fabricase.errors import UnsupportedError
from fabricase.models import EscalationState, Placement, TicketDraft

__all__ = ["FilingResult", "Feature", "Provider"]


class Feature(enum.StrEnum):
    LOCATE = "locate"  # host -> instance, zone and network topology
    FILE_CASE = "file-case"  # open a support case
    ATTACH = "attach"  # attach a bundle to a case
    FAULTY_HOST_REPORT = "faulty-host-report"  # the provider's "this host is bad" channel
    COMMENT = "comment"
    SYNC = "sync"  # read back a case's status
    RESOLVE = "resolve"


@dataclass(frozen=True)
class FilingResult:
    """What the desk said when it took the case. location: where it lives (a URL, or the outbox folder)."""

    case_id: str
    raw_status: str
    state: EscalationState
    location: str


class Provider(abc.ABC):
    """Base of every provider. Subclasses set `name` and `unsupported` and stay stateless beyond `paths`."""

    name: ClassVar[str] = ""
    unsupported: ClassVar[dict[Feature, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A missing reason would surface as an empty error message at the worst moment: check at import.
        for feature, reason in cls.unsupported.items():
            if not isinstance(feature, Feature) or not isinstance(reason, str) or not reason.strip():
                raise TypeError(f"{cls.__name__}.unsupported: {feature!r} needs a Feature and a reason")

    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    def supports(self, feature: Feature) -> bool:
        return Feature(feature) not in self.unsupported

    def require(self, feature: Feature) -> None:
        """Raise UnsupportedError, with the declared reason, when this provider lacks `feature`."""
        feature = Feature(feature)
        reason = self.unsupported.get(feature)
        if reason is not None:
            raise UnsupportedError(f"{feature.value} is not supported: {reason}", where=self.name)

    @abc.abstractmethod
    def locate(self, hosts: list[dict[str, Any]]) -> list[Placement]:
        """One Placement per host, in order. hosts: [{"host": name, "identity": {...}}] where identity holds
        what the capture read (DMI fields, instance id where the host exposes one)."""

    @abc.abstractmethod
    def file_case(self, *, escalation_id: str, draft: TicketDraft, bundle_path: Path | None) -> FilingResult:
        """Open (or, when already opened for this escalation, find again) the support case."""

    @abc.abstractmethod
    def resolve_case(self, case_id: str, note: str | None) -> None:
        """Tell the desk that the case is resolved."""
