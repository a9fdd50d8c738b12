"""Transports by name. `ssh` and `slurm` come with the fleet fan-out issue; the seam is here."""

from __future__ import annotations

from fabricase.errors import TransportError
from fabricase.transports.base import HostRun, Transport
from fabricase.transports.local import LocalTransport, is_local_name

__all__ = ["TRANSPORTS", "HostRun", "Transport", "get_transport", "is_local_name"]

TRANSPORTS: dict[str, type[Transport] | None] = {
    "local": LocalTransport,
    "ssh": None,
    "slurm": None,
}


def get_transport(name: str) -> Transport:
    if name not in TRANSPORTS:
        raise TransportError(f"unknown transport {name!r}; valid: {', '.join(TRANSPORTS)}")
    cls = TRANSPORTS[name]
    if cls is None:
        raise TransportError(f"the {name} transport is not available in this version yet; use --via local")
    return cls()
