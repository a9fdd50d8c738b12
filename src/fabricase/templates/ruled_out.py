"""What the capture ruled out: checks that ran on the hosts and found nothing ("no Xid on any of the 64 hosts").

A provider's engineer asks first what was already excluded. A check counts as run on a host when the host
captured data the check reads (an item of one of its sources, with content, no error); it is ruled out when
no finding of its kinds fired anywhere. A check that could not run anywhere is listed as not checked, so
that absence of evidence is never passed off as evidence of absence.

Pure: `checks_run` reads only the capture index (no item content), `ruled_out` only names and findings.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from fabricase.models import Finding, HostCapture

__all__ = ["CHECKS", "Check", "CheckResult", "checks_run", "ruled_out"]

_KERNEL_LOG = ("cmd:kernel-log",)
_NETDEV = ("/sys/class/net/",)
_RDMA = ("/sys/class/infiniband/",)
_ETHTOOL = ("cmd:ethtool-stats",)
_NVIDIA_SMI = ("cmd:nvidia-smi-q", "cmd:nvidia-smi-xml")


@dataclass(frozen=True)
class Check:
    """One thing the capture can exclude.

    `topic`: what is checked, in a few words. `what`: the negative statement, as an engineer would write it.
    `kinds`: the finding kinds that mean it fired. `needs`: groups of source prefixes; a host ran the check
    when it has an item under one prefix of every group. `min_hosts`: a fleet comparison needs this many
    hosts. `unjudged_by`: finding kinds that say the check could not judge (a fleet too small to compare).
    """

    name: str
    topic: str
    what: str
    kinds: frozenset[str]
    needs: tuple[tuple[str, ...], ...]
    min_hosts: int = 1
    unjudged_by: frozenset[str] = frozenset()


def _check(name: str, topic: str, what: str, kinds: str, *needs: tuple[str, ...], **kw) -> Check:
    return Check(name, topic, what, frozenset(kinds.split()), needs, **kw)


# Registry order is the order of the ticket's lines: the physical layer first, then GPUs, then the fleet view.
# name, topic, what (the negative statement), the kinds that fire it, the sources it needs
CHECKS: tuple[Check, ...] = (
    _check("link-flap", "link flaps", "no link flap",
           "link-flap rdma-link-flap kernel-link-down", _NETDEV + _RDMA),
    _check("port-down", "port state", "no port down",
           "link-down rdma-port-down", _NETDEV + _RDMA),
    _check("speed", "link speed", "no link speed downshift",
           "link-speed-downshift rdma-speed-downshift", ("cmd:ethtool-link",) + _RDMA),
    _check("phy", "PHY, FEC and FCS errors", "no PHY, FEC or FCS errors",
           "phy-errors", _ETHTOOL),
    _check("netdev-errors", "interface errors", "no interface receive or transmit errors",
           "netdev-errors", _NETDEV),
    _check("rdma-errors", "RDMA port and transport errors", "no RDMA symbol, port or transport errors",
           "rdma-symbol-errors rdma-port-errors rdma-transport-errors", _RDMA),
    _check("discards", "NIC discards", "no NIC discards",
           "nic-discards", _ETHTOOL + _RDMA),
    _check("pfc", "PFC pause", "no PFC pause storm",
           "pfc-storm", _ETHTOOL),
    _check("pcie-link", "PCIe link width and speed", "no PCIe downgrade",
           "pcie-downgraded gpu-pcie-downgraded pcie-link-limited",
           ("/sys/bus/pci/devices/", "cmd:lspci") + _NVIDIA_SMI),
    _check("pcie-aer", "PCIe AER", "no PCIe AER errors",
           "pcie-aer kernel-pcie-aer", ("/sys/bus/pci/devices/",) + _KERNEL_LOG),
    _check("nic-firmware", "NIC firmware and driver", "no NIC firmware fault or driver warning",
           "nic-firmware-fault nic-driver-warning", _KERNEL_LOG),
    _check("xid", "GPU Xid", "no Xid",
           "nvidia-xid", _KERNEL_LOG, ("/proc/driver/nvidia/",) + _NVIDIA_SMI),
    _check("sxid", "NVSwitch SXid", "no NVSwitch SXid or Fabric Manager switch error",
           "nvswitch-sxid nvswitch-fm-errors", _KERNEL_LOG, ("/proc/driver/nvidia-nvswitch/devices/",)),
    _check("nvlink", "NVLink", "no NVLink errors or inactive links",
           "nvlink-errors nvlink-inactive", ("cmd:nvlink-errors", "cmd:nvlink-status")),
    _check("gpu-fabric", "GPU fabric, Fabric Manager and IMEX", "no GPU fabric, Fabric Manager or IMEX fault",
           "gpu-fabric-unhealthy fabric-manager-down imex-unhealthy", _NVIDIA_SMI),
    _check("gpu-memory", "GPU memory row remap", "no GPU row-remap failure",
           "gpu-memory-remap", _NVIDIA_SMI),
    _check("dcgm", "DCGM health", "no DCGM health warning",
           "dcgm-health", ("cmd:dcgm-health",)),
    _check("config-drift", "configuration drift", "no configuration drift (PFC, ECN, trust, MTU, versions)",
           "config-drift", ("cmd:mlnx-qos", "cmd:dcb", "cmd:dcbtool", "/sys/module/"), min_hosts=4),
    _check("congestion", "fleet comparison of pause and congestion rates",
           "no pause or congestion-notification rate stands out from the fleet",
           "congestion-outlier", _ETHTOOL + _RDMA, unjudged_by=frozenset({"fleet-too-small"})),
    _check("fleet", "fleet comparison of error counters", "no error counter stands out from the fleet",
           "fleet-outlier", _NETDEV + _RDMA + _ETHTOOL, unjudged_by=frozenset({"fleet-too-small"})),
    _check("nccl-tests", "nccl-tests", "no nccl-tests bandwidth shortfall or wrong result",
           "nccl-wrong-results nccl-busbw-low nccl-busbw-collapse", ("cmd:perf-all_reduce_perf",)),
    _check("rdma-bw", "perftest RDMA bandwidth", "no perftest RDMA bandwidth below link rate",
           "rdma-bw-low rdma-bw-outlier", ("cmd:perf-ib_write_bw",)),
)


@dataclass(frozen=True)
class CheckResult:
    check: Check
    hosts_checked: int
    hosts_total: int

    @property
    def text(self) -> str:
        """`no Xid on any of the 64 hosts`, or `... on 60 of 64 hosts (4 without the data)`."""
        if self.hosts_checked == self.hosts_total:
            n = self.hosts_total
            return f"{self.check.what} on {'the only host' if n == 1 else f'any of the {n} hosts'}"
        missing = self.hosts_total - self.hosts_checked
        return f"{self.check.what} on {self.hosts_checked} of {self.hosts_total} hosts ({missing} without the data)"


def checks_run(hosts: Iterable[HostCapture], checks: Iterable[Check] = CHECKS) -> dict[str, frozenset[str]]:
    """Per host, the names of the checks its capture holds data for."""
    checks = tuple(checks)
    prefixes = sorted({p for c in checks for group in c.needs for p in group})
    out = {}
    for hc in hosts:
        # A GPU host has ~4,000 items: one sort, then a binary search per prefix, instead of a scan per check.
        # `command -v tool || exit 0` leaves an empty, successful item when the tool is missing: that is no data.
        sources = sorted({it.source for it in hc.items
                          if it.bytes and not it.error and it.rc in (0, None) and it.kind != "stderr"})
        present = {p for p in prefixes if _has_prefix(sources, p)}
        out[hc.host] = frozenset(c.name for c in checks if all(present.intersection(g) for g in c.needs))
    return out


def _has_prefix(sorted_sources: list[str], prefix: str) -> bool:
    i = bisect.bisect_left(sorted_sources, prefix)
    return i < len(sorted_sources) and sorted_sources[i].startswith(prefix)


def ruled_out(
    run: Mapping[str, Collection[str]], findings: Iterable[Finding], checks: Iterable[Check] = CHECKS
) -> tuple[list[CheckResult], list[Check]]:
    """(checks that ran and found nothing, checks that could not run on any host), in registry order.

    `run` maps each captured host to the checks it ran (`checks_run`); a check that fired is in neither list:
    its findings say more than a negative could.
    """
    fired = {f.kind for f in findings}
    total = len(run)
    clear, not_run = [], []
    for check in checks:
        if check.kinds & fired:
            continue
        n = sum(1 for names in run.values() if check.name in names)
        if n < check.min_hosts or check.unjudged_by & fired:
            not_run.append(check)
        else:
            clear.append(CheckResult(check, n, total))
    return clear, not_run
