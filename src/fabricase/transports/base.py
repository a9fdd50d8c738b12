"""A transport reaches hosts and runs the capture script on each, bringing back its stdout bytes.

It never parses or interprets the stream; a host that cannot be reached comes back with a status and a
reason, never as an exception. Only a transport that cannot work at all raises TransportError.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricase.models import HostStatus

__all__ = ["HostRun", "Transport"]


@dataclass
class HostRun:
    host: str
    status: HostStatus
    stdout: bytes = b""
    stderr: bytes = b""
    rc: int | None = None
    reason: str | None = None
    started_at: str | None = None
    finished_at: str | None = None


class Transport(ABC):
    name: str

    @classmethod
    def from_options(cls, **options: Any) -> Transport:
        """Build from the CLI's transport options; each transport takes the ones it understands."""
        return cls()

    @abstractmethod
    def run(
        self,
        hosts: list[str],
        script: str,
        *,
        timeout_s: float,
        on_done: Callable[[HostRun], None] | None = None,
    ) -> list[HostRun]:
        """Run `script` with sh on every host; call on_done as each host finishes."""

    def record_extras(self, root: Path) -> None:
        """Store what this transport learnt about the hosts beside the capture, after run() (k8s: each node's
        providerID, zone and instance type in kubernetes.json, so that locate works without DMI). Most
        transports learn nothing the stream does not carry."""
        return None
