"""Rules over the captured kernel log (cmd:kernel-log): NVIDIA Xid by catalog class, NVSwitch SXid, network
link-down messages, NIC firmware faults and warnings, PCIe AER and PCIe links trained below capability.

A GPU named by its PCI address is reported as gpu:<index> when nvidia-smi output of the same capture maps the
address to a GPU, else as pcie:<address> as the kernel logged it."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable

from fabricase.analysis._items import HostItems
from fabricase.analysis.gpu import nvidia_smi_report
from fabricase.analysis.netdev import is_virtual
from fabricase.models import Evidence, Finding, HostCapture, MetricSample, Severity
from fabricase.parsers.kernel_log import KernelEvent, parse_kernel_log
from fabricase.parsers.nvidia_smi import normalize_pci
from fabricase.parsers.xid import xid_info

__all__ = ["KERNEL_LOG", "RULES", "gpu_map", "kernel_log_events"]

KERNEL_LOG = "cmd:kernel-log"
REPEATED_LINK_DOWNS = 3  # this many link-down messages for one interface make it a flapping link, not a boot
CORRECTED_AER_BURST = 10  # corrected AER messages from one device before it is worth a look
# Insufficient slot power and unplugged cables show at every boot on some healthy hosts (all twelve NICs of
# the real leptonai-gpud H100 host): classified, not reported.
_NIC_WARNINGS_REPORTED = {"tx-timeout", "module-temperature"}
_CAUSED_BY = re.compile(r"caused by previous Xid (\d+)")


def _severity(name: str) -> Severity:
    return Severity(name)


def gpu_map(hc: HostCapture, samples: list[MetricSample]) -> dict[str, int]:
    """PCI address (with and without the function) -> nvidia-smi GPU index, from the samples or nvidia-smi."""
    pairs = [(s.note, int(s.component[4:])) for s in samples if s.metric == "gpu.pci_address" and s.note]
    if not pairs:
        report, _ = nvidia_smi_report(HostItems(hc))
        pairs = [(g.bus_id, g.index) for g in report.gpus if g.bus_id] if report else []
    out: dict[str, int] = {}
    for address, index in pairs:
        out[address] = index
        out[address.rsplit(".", 1)[0]] = index
    return out


def _component(device: str | None, gpus: dict[str, int]) -> str:
    address = normalize_pci(device) or device or "unknown"
    return f"gpu:{gpus[address]}" if address in gpus else f"pcie:{address}"


def _last(events: list[KernelEvent]) -> str:
    stamp = events[-1].timestamp
    return f", last at {stamp}" if stamp else ""


def _codes(events: list[KernelEvent]) -> tuple[list[tuple[int, int]], Severity, str]:
    """(code, count) ascending, the worst catalog severity, and "79 GPU_HAS_FALLEN... x2" text."""
    counts = Counter(e.code for e in events if e.code is not None)
    worst = Severity.INFO
    parts = []
    for code, count in sorted(counts.items()):
        mine = [e for e in events if e.code == code]
        info = mine[0].xid
        severity = _severity(info.severity) if info else Severity.MAJOR
        if mine[0].kind == "nvswitch-sxid" and severity == Severity.CRITICAL and all(e.fatal is False for e in mine):
            severity = Severity.MAJOR  # the switch itself logged every one of them as non-fatal
        # Xid 45 cleans up after another Xid and takes that one's weight (catalog: "not solo: follow other Xid");
        # the earlier Xid may already have rotated out of the log.
        causes = sorted({int(m.group(1)) for e in mine if (m := _CAUSED_BY.search(e.message))})
        if mine[0].kind == "nvidia-xid" and causes:
            severity = min([severity, *(_severity(xid_info(c).severity) for c in causes)], key=lambda s: s.rank)
        worst = min(worst, severity, key=lambda s: s.rank)
        links = sorted({e.nvlink for e in mine if e.nvlink is not None})
        where = f" link {', '.join(map(str, links))}" if links else ""
        after = f" after Xid {', '.join(map(str, causes))}" if causes and mine[0].kind == "nvidia-xid" else ""
        name = f" {info.name}" if info and info.name else ""
        parts.append(f"{code}{name} x{count}{where}{after}")
    return sorted(counts.items()), worst, "; ".join(parts)


def _per(events: list[KernelEvent], kinds: set[str], key: Callable[[KernelEvent], str]) -> dict[str, list]:
    grouped: dict[str, list[KernelEvent]] = defaultdict(list)
    for event in events:
        if event.kind in kinds:
            grouped[key(event)].append(event)
    return grouped


def _xid_findings(hc: HostCapture, events: list[KernelEvent], gpus: dict[str, int]) -> list[Finding]:
    findings = []
    for comp, mine in sorted(_per(events, {"nvidia-xid"}, lambda e: _component(e.device, gpus)).items()):
        codes, severity, text = _codes(mine)
        where = f"GPU {comp[4:]} ({mine[0].device})" if comp.startswith("gpu:") else f"GPU at PCI {mine[0].device}"
        summary = f"{where}: Xid {text} in the kernel log{_last(mine)}"
        evidence = [Evidence(f"xid_{code}", n, "events", None, KERNEL_LOG, 0) for code, n in codes]
        findings.append(Finding("nvidia-xid", severity, hc.host, comp, summary, evidence, 0.9))
    return findings


def _sxid_findings(hc: HostCapture, events: list[KernelEvent]) -> list[Finding]:
    findings = []
    per_switch = _per(events, {"nvswitch-sxid"}, lambda e: normalize_pci(e.device) or e.device or "unknown")
    for switch, mine in sorted(per_switch.items()):
        codes, severity, text = _codes(mine)
        summary = f"NVSwitch {switch}: SXid {text} in the kernel log{_last(mine)}"
        evidence = [Evidence(f"sxid_{code}", n, "events", None, KERNEL_LOG, 0) for code, n in codes]
        findings.append(Finding("nvswitch-sxid", severity, hc.host, f"nvswitch:{switch}", summary, evidence, 0.9))
    return findings


def _link_findings(hc: HostCapture, events: list[KernelEvent]) -> list[Finding]:
    findings = []
    usable = [e for e in events if e.interface and not is_virtual(e.interface)]
    for interface, mine in sorted(_per(usable, {"link-down", "link-up"}, lambda e: e.interface).items()):
        downs = [e for e in mine if e.kind == "link-down"]
        if not downs:
            continue
        back_up = ", came back up" if mine[-1].kind == "link-up" else ""
        summary = f"{interface}: {len(downs)} link-down message(s) in the kernel log{_last(downs)}{back_up}"
        evidence = [Evidence("kernel_link_down_events", len(downs), "events", None, KERNEL_LOG, 0),
                    Evidence("kernel_link_up_events", len(mine) - len(downs), "events", None, KERNEL_LOG, 0)]
        severity = Severity.MAJOR if len(downs) >= REPEATED_LINK_DOWNS else Severity.MINOR
        # The log reaches back before the capture (boot-time downs are normal), hence the lower confidence.
        findings.append(Finding("kernel-link-down", severity, hc.host, f"netdev:{interface}", summary, evidence, 0.7))
    return findings


def _nic_findings(hc: HostCapture, events: list[KernelEvent]) -> list[Finding]:
    findings = []
    for kind, finding_kind, severity in (("nic-fatal", "nic-firmware-fault", Severity.MAJOR),
                                         ("nic-warning", "nic-driver-warning", Severity.MINOR)):  # fmt: skip
        chosen = [e for e in events if e.kind == kind and (kind == "nic-fatal" or e.category in _NIC_WARNINGS_REPORTED)]
        per_nic = _per(chosen, {kind}, lambda e: f"pcie:{normalize_pci(e.device)}" if e.device
                       else f"netdev:{e.interface}" if e.interface else "host")  # fmt: skip
        for comp, mine in sorted(per_nic.items()):
            counts = Counter(e.category for e in mine)
            listed = ", ".join(f"{c} x{n}" for c, n in sorted(counts.items()))
            summary = f"NIC {comp.split(':', 1)[-1]}: {listed} in the kernel log{_last(mine)}"
            evidence = [Evidence(f"nic_{c.replace('-', '_')}", n, "events", None, KERNEL_LOG, 0)
                        for c, n in sorted(counts.items())]  # fmt: skip
            findings.append(Finding(finding_kind, severity, hc.host, comp, summary, evidence, 0.8))
    return findings


def _pcie_findings(hc: HostCapture, events: list[KernelEvent], gpus: dict[str, int]) -> list[Finding]:
    findings = []
    for comp, mine in sorted(_per(events, {"pcie-aer"}, lambda e: _component(e.device, gpus)).items()):
        counts = Counter(e.category or "unclassified" for e in mine)
        uncorrected = sum(n for c, n in counts.items() if c.startswith("uncorrected"))
        if not uncorrected and counts.get("corrected", 0) < CORRECTED_AER_BURST:
            continue
        severity, confidence = (Severity.MAJOR, 0.8) if uncorrected else (Severity.MINOR, 0.6)
        listed = ", ".join(f"{c} x{n}" for c, n in sorted(counts.items()))
        summary = f"{comp}: PCIe AER {listed} in the kernel log{_last(mine)}"
        evidence = [Evidence(f"aer_{c.replace('-', '_')}", n, "events", 0, KERNEL_LOG, 0)
                    for c, n in sorted(counts.items())]  # fmt: skip
        findings.append(Finding("kernel-pcie-aer", severity, hc.host, comp, summary, evidence, confidence))
    for comp, mine in sorted(_per(events, {"pcie-link-limited"}, lambda e: _component(e.device, gpus)).items()):
        summary = f"{comp}: {mine[-1].message.split(': ', 1)[-1]}"
        evidence = [Evidence("pcie_bandwidth_limited_events", len(mine), "events", 0, KERNEL_LOG, 0)]
        findings.append(Finding("pcie-link-limited", Severity.MINOR, hc.host, comp, summary, evidence, 0.6))
    return findings


def kernel_log_events(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """Findings from the captured kernel log: Xid per GPU, SXid per switch, link-down per interface, NIC
    faults per NIC, AER and limited PCIe links per device."""
    text = HostItems(hc).text(KERNEL_LOG, 0)
    if not text:
        return []
    events = parse_kernel_log(text).events
    if not events:  # the usual quiet log: no rule has anything to group
        return []
    gpus = gpu_map(hc, samples) if any(e.device for e in events) else {}
    return (_link_findings(hc, events) + _xid_findings(hc, events, gpus) + _sxid_findings(hc, events)
            + _nic_findings(hc, events) + _pcie_findings(hc, events, gpus))  # fmt: skip


RULES = [kernel_log_events]
