"""What the capture ruled out: checks that ran on the hosts and found nothing ("no Xid on any of the 64 hosts").

A provider's engineer asks first what was already excluded. A check counts as run on a host when the host
captured data the check reads (an item of one of its sources, with content, no error); it is ruled out when
nothing of its topic fired anywhere: no finding of its kinds, no evidence of its metrics, no suspect of its
verdicts. When what fired sits only on the suspects' hosts, it is ruled out "on the other N hosts"; a line
never says "no PHY errors" beside a suspect with symbol errors. A check that could not run anywhere is listed
as not checked, so that absence of evidence is never passed off as evidence of absence.

Pure: `checks_run` reads only the capture index (no item content), `ruled_out` only names, findings and
suspects.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fabricase.models import Finding, HostCapture

if TYPE_CHECKING:
    from fabricase.analysis.power import PowerStatement
    from fabricase.diagnosis import Suspect

__all__ = ["CHECKS", "Check", "CheckResult", "checks_run", "fired_on", "power_caveats", "ruled_out"]

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
    `metrics`: evidence metric prefixes of its topic (a fleet outlier on `phy.symbol_errors_uncorrected` is a
    PHY error, whatever its kind). `verdicts`: suspect verdicts of its topic (Xid 74 is an NVLink error).
    `opt_in`: a test that runs only when asked for (the probe): not run on any host is no gap worth a line.
    """

    name: str
    topic: str
    what: str
    kinds: frozenset[str]
    needs: tuple[tuple[str, ...], ...]
    min_hosts: int = 1
    unjudged_by: frozenset[str] = frozenset()
    metrics: tuple[str, ...] = ()
    verdicts: frozenset[str] = frozenset()
    opt_in: bool = False


def _check(name: str, topic: str, what: str, kinds: str, *needs: tuple[str, ...], metrics: str = "",
           verdicts: str = "", **kw) -> Check:
    return Check(name, topic, what, frozenset(kinds.split()), needs, metrics=tuple(metrics.split()),
                 verdicts=frozenset(verdicts.split()), **kw)


# Registry order is the order of the ticket's lines: the physical layer first, then GPUs, then the fleet view.
# name, topic, what (the negative statement), the kinds that fire it, the sources it needs; then the evidence
# metrics and suspect verdicts of its topic, so that no line denies what a suspect shows.
CHECKS: tuple[Check, ...] = (
    _check("link-flap", "link flaps", "no link flap",
           "link-flap rdma-link-flap kernel-link-down", _NETDEV + _RDMA,
           metrics="link.down_events link.error_recovery carrier_changes carrier_down", verdicts="link-flapping"),
    _check("port-down", "port state", "no port down",
           "link-down rdma-port-down", _NETDEV + _RDMA,
           metrics="link.state link.phys_state operstate", verdicts="link-down"),
    _check("speed", "link speed", "no link speed downshift",
           "link-speed-downshift rdma-speed-downshift", ("cmd:ethtool-link",) + _RDMA,
           metrics="link.speed link.width link.lanes", verdicts="speed-downshift"),
    _check("phy", "PHY, FEC and FCS errors", "no PHY, FEC or FCS errors",
           "phy-errors rdma-symbol-errors", _ETHTOOL,
           metrics="phy. rx_crc_errors rx_frame_errors symbol_error", verdicts="bad-link"),
    _check("netdev-errors", "interface errors", "no interface receive or transmit errors",
           "netdev-errors", _NETDEV,
           metrics="rx_errors tx_errors rx_crc_errors rx_frame_errors rx.errors tx.errors", verdicts="bad-link"),
    _check("rdma-errors", "RDMA port and transport errors", "no RDMA symbol, port or transport errors",
           "rdma-symbol-errors rdma-port-errors rdma-transport-errors", _RDMA,
           metrics="rdma. phy.symbol_errors link.integrity_errors rx.remote_physical_errors",
           verdicts="bad-link rdma-transport-errors"),
    _check("discards", "NIC discards", "no NIC discards",
           "nic-discards", _ETHTOOL + _RDMA,
           metrics="rx.discards tx.discards", verdicts="congestion-victim"),
    _check("pfc", "PFC pause", "no PFC pause storm",
           "pfc-storm", _ETHTOOL,
           metrics="pfc.pause_storm", verdicts="pfc-storm-source"),
    _check("pcie-link", "PCIe link width and speed", "no PCIe downgrade",
           "pcie-downgraded gpu-pcie-downgraded pcie-link-limited",
           ("/sys/bus/pci/devices/", "cmd:lspci") + _NVIDIA_SMI,
           metrics="pcie.link_", verdicts="pcie-degraded"),
    _check("pcie-aer", "PCIe AER", "no PCIe AER errors",
           "pcie-aer kernel-pcie-aer", ("/sys/bus/pci/devices/",) + _KERNEL_LOG,
           metrics="pcie.aer pcie.replays", verdicts="pcie-degraded"),
    _check("nic-firmware", "NIC firmware and driver", "no NIC firmware fault or driver warning",
           "nic-firmware-fault nic-driver-warning", _KERNEL_LOG, verdicts="nic-fault"),
    _check("xid", "GPU Xid", "no Xid",
           "nvidia-xid", _KERNEL_LOG, ("/proc/driver/nvidia/",) + _NVIDIA_SMI,
           metrics="xid_", verdicts="gpu-off-bus gpu-memory-errors gpu-fault application-error"),
    _check("sxid", "NVSwitch SXid", "no NVSwitch SXid or Fabric Manager switch error",
           "nvswitch-sxid nvswitch-fm-errors", _KERNEL_LOG, ("/proc/driver/nvidia-nvswitch/devices/",),
           metrics="sxid_", verdicts="nvswitch-errors"),
    _check("nvlink", "NVLink", "no NVLink errors or inactive links",
           "nvlink-errors nvlink-inactive", ("cmd:nvlink-errors", "cmd:nvlink-status"),
           metrics="nvlink.", verdicts="nvlink-errors nvlink-down"),
    _check("gpu-fabric", "GPU fabric, Fabric Manager and IMEX", "no GPU fabric, Fabric Manager or IMEX fault",
           "gpu-fabric-unhealthy fabric-manager-down imex-unhealthy", _NVIDIA_SMI,
           verdicts="gpu-fabric-not-ready fabric-manager-down imex-down"),
    _check("gpu-memory", "GPU memory row remap", "no GPU row-remap failure",
           "gpu-memory-remap", _NVIDIA_SMI, verdicts="gpu-memory-errors"),
    _check("dcgm", "DCGM health", "no DCGM health warning",
           "dcgm-health", ("cmd:dcgm-health",), verdicts="gpu-fault"),
    _check("config-drift", "configuration drift", "no configuration drift (PFC, ECN, trust, MTU, versions)",
           "config-drift", ("cmd:mlnx-qos", "cmd:dcb", "cmd:dcbtool", "/sys/module/"), min_hosts=4,
           verdicts="configuration-drift"),
    _check("congestion", "fleet comparison of pause and congestion rates",
           "no pause or congestion-notification rate stands out from the fleet",
           "congestion-outlier", _ETHTOOL + _RDMA, unjudged_by=frozenset({"fleet-too-small"}),
           verdicts="pfc-storm-source congestion-victim"),
    _check("fleet", "fleet comparison of error counters", "no error counter stands out from the fleet",
           "fleet-outlier", _NETDEV + _RDMA + _ETHTOOL, unjudged_by=frozenset({"fleet-too-small"})),
    _check("nccl-tests", "nccl-tests", "no nccl-tests bandwidth shortfall or wrong result",
           "nccl-wrong-results nccl-busbw-low nccl-busbw-collapse", ("cmd:perf-all_reduce_perf",),
           verdicts="wrong-results"),
    _check("rdma-bw", "perftest RDMA bandwidth", "no perftest RDMA bandwidth below link rate",
           "rdma-bw-low rdma-bw-outlier", ("cmd:perf-ib_write_bw",)),
    _check("probe", "the probe's active tests", "no slow host, NIC or path in the probe's pair tests and bisection",
           "probe-slow-host probe-slow-nic probe-slow-path probe-below-expected probe-collective-slow",
           ("cmd:perf-probe-",), opt_in=True),
)


@dataclass(frozen=True)
class CheckResult:
    """A check ruled out on `hosts_checked` of `hosts_total` hosts; `excluded` of them (the suspects' hosts, where
    its topic fired) are left out of the statement."""

    check: Check
    hosts_checked: int
    hosts_total: int
    excluded: int = 0
    caveats: tuple[str, ...] = ()  # what the check could not rule out (analysis.power): said after the negative

    @property
    def text(self) -> str:
        """`no Xid on any of the 64 hosts`, `... on 60 of 64 hosts (4 without the data)`, or, beside suspects of
        its topic, `... on the other 62 hosts`; then `; not ruled out: ...` for each caveat."""
        return "".join([self._negative(), *(f"; not ruled out: {c}" for c in self.caveats)])

    def _negative(self) -> str:
        if self.excluded:
            others = self.hosts_total - self.excluded
            if self.hosts_checked == others:
                return f"{self.check.what} on the other {'host' if others == 1 else f'{others} hosts'}"
            missing = others - self.hosts_checked
            return f"{self.check.what} on {self.hosts_checked} of the other {others} hosts ({missing} without the data)"
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


def _metric_of_topic(metric: str, prefixes: Sequence[str]) -> bool:
    return bool(prefixes) and metric.removeprefix("raw:").startswith(tuple(prefixes))


def fired_on(check: Check, findings: Iterable[Finding], suspects: Iterable[Suspect] = ()) -> set[str | None]:
    """The hosts (None: a shared component) where the check's topic fired: a finding of its kinds or with
    evidence of its metrics, or a suspect of its verdicts."""
    hosts: set[str | None] = set()
    for f in findings:
        if f.kind in check.kinds or any(_metric_of_topic(ev.metric, check.metrics) for ev in f.evidence):
            hosts.add(f.host)
    for s in suspects:
        if s.verdict in check.verdicts:
            hosts.update([s.host] if s.host else s.hosts or [None])
    return hosts


def power_caveats(statements: Sequence[PowerStatement]) -> dict[str, tuple[str, ...]]:
    """Check name -> the sentences of the power statements (Diagnosis.power) that qualify it, merged as the report
    says them (analysis.power.power_sentences)."""
    from fabricase.analysis.power import power_sentences

    checks = sorted({s.check for s in statements})
    return {c: tuple(power_sentences([s for s in statements if s.check == c])) for c in checks}


def ruled_out(
    run: Mapping[str, Collection[str]], findings: Iterable[Finding], checks: Iterable[Check] = CHECKS, *,
    suspects: Sequence[Suspect] = (), caveats: Mapping[str, Sequence[str]] | None = None,
) -> tuple[list[CheckResult], list[Check]]:
    """(checks that ran and found nothing, checks that could not run on any host), in registry order.

    `run` maps each captured host to the checks it ran (`checks_run`). A check whose topic fired only on the
    hosts of `suspects` (any owner) is ruled out on the other hosts; one that fired anywhere else (a shared
    component, a host no suspect names) is in neither list: its findings say more than a negative could.
    `caveats`: check name -> what it could not rule out (`power_caveats(diagnosis.power)`), said on its line: a
    clean 3 s capture rules out less than a clean 60 s one.
    """
    caveats = caveats or {}
    findings = list(findings)
    fired_kinds = {f.kind for f in findings}
    suspect_hosts = {h for s in suspects for h in ([s.host] if s.host else s.hosts)}
    total = len(run)
    clear, not_run = [], []
    for check in checks:
        hit = fired_on(check, findings, suspects)
        if hit and not hit <= suspect_hosts:
            continue
        others = [names for host, names in run.items() if host not in hit]
        n = sum(1 for names in others if check.name in names)
        if hit:
            if n:  # it judged (it fired on the suspects): no fleet-size or min_hosts question left
                clear.append(CheckResult(check, n, total, excluded=len(hit & set(run)),
                                         caveats=tuple(caveats.get(check.name, ()))))
            continue
        if n == 0 and check.opt_in:
            continue
        if n < check.min_hosts or check.unjudged_by & fired_kinds:
            not_run.append(check)
        else:
            clear.append(CheckResult(check, n, total, caveats=tuple(caveats.get(check.name, ()))))
    return clear, not_run
