"""Collectors, by name. An explicit registry: adding a collector means adding a line here."""

from __future__ import annotations

from fabricase.collectors.base import Collector, CommandSpec, FileSpec
from fabricase.collectors.ethtool import EthtoolCollector
from fabricase.collectors.fabric_config import FabricConfigCollector
from fabricase.collectors.identity import IdentityCollector
from fabricase.collectors.kernel_log import KernelLogCollector
from fabricase.collectors.netdev import NetdevCollector
from fabricase.collectors.netstat import NetstatCollector
from fabricase.collectors.nvidia import NvidiaCollector
from fabricase.collectors.pcie import PcieCollector
from fabricase.collectors.perf import PerfCollector
from fabricase.collectors.rdma import RdmaCollector
from fabricase.errors import TargetError

__all__ = ["COLLECTORS", "Collector", "CommandSpec", "FileSpec", "select_collectors"]

COLLECTORS: dict[str, type[Collector]] = {
    c.name: c
    for c in (
        IdentityCollector,
        NetdevCollector,
        NetstatCollector,
        RdmaCollector,
        EthtoolCollector,
        PcieCollector,
        FabricConfigCollector,
        NvidiaCollector,
        KernelLogCollector,
        PerfCollector,
    )
}


def select_collectors(names: list[str] | None = None, *, extra: tuple[str, ...] = ()) -> list[type[Collector]]:
    """The collectors to run, in registry order: the named ones, or every default one plus `extra`.

    An unknown name lists the valid ones. Opt-in collectors (perf tests) run only when named.
    """
    unknown = [n for n in (*(names or ()), *extra) if n not in COLLECTORS]
    if unknown:
        raise TargetError(f"unknown collector {unknown[0]!r}; valid: {', '.join(COLLECTORS)}")
    if not names:
        return [c for n, c in COLLECTORS.items() if not c.opt_in or n in extra]
    return [c for n, c in COLLECTORS.items() if n in names or n in extra]
