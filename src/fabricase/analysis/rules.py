"""Rules: small functions (host capture, its metric samples) -> findings, run in the order of RULES."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable

from fabricase.analysis._items import HostItems
from fabricase.analysis.netdev import is_virtual
from fabricase.models import Evidence, Finding, HostCapture, HostStatus, MetricSample, Severity
from fabricase.parsers.kernel_log import KernelEvent, parse_kernel_log

__all__ = [
    "ERROR_COUNTERS",
    "MAJOR_ERROR_COUNTERS",
    "RULES",
    "Rule",
    "host_unreachable",
    "kernel_log_events",
    "link_down",
    "link_flap",
    "netdev_errors",
]

Rule = Callable[[HostCapture, list[MetricSample]], list[Finding]]

# Checked in this order; evidence lists them in this order too. rx_errors/tx_errors are the drivers' totals.
ERROR_COUNTERS = (
    "rx_crc_errors", "rx_frame_errors", "rx_errors", "tx_errors", "rx_missed_errors", "rx_fifo_errors",
    "tx_carrier_errors", "rx_dropped",
)  # fmt: skip
# Bad frames on the wire: cable, transceiver or far-end port. The others can be host-side (ring overruns).
MAJOR_ERROR_COUNTERS = frozenset({"rx_crc_errors", "rx_frame_errors"})
_UNREACHABLE = frozenset({HostStatus.UNREACHABLE, HostStatus.TIMED_OUT, HostStatus.FAILED, HostStatus.AUTH_FAILED})
_DOWN_STATES = frozenset({"down", "lowerlayerdown"})
KERNEL_LOG = "cmd:kernel-log"


def _interval_text(hc: HostCapture) -> str:
    return f"in {hc.interval_s:g} s" if hc.interval_s else "between snapshots"


def _increase_text(sample: MetricSample) -> str:
    rate = f" ({sample.rate:.3g}/s)" if sample.rate is not None else ""
    return f"{sample.metric} +{sample.delta}{rate}"


def _delta_evidence(sample: MetricSample) -> Evidence:
    # value is the increase between snapshot 0 and 1; snapshot 1 names the later reading it ends at.
    return Evidence(f"{sample.metric}.delta", sample.delta, sample.unit, baseline=0, source=sample.source, snapshot=1)


def _by_interface(samples: list[MetricSample]) -> dict[str, dict[str, MetricSample]]:
    grouped: dict[str, dict[str, MetricSample]] = defaultdict(dict)
    for s in samples:
        if s.component.startswith("netdev:"):
            grouped[s.component.removeprefix("netdev:")][s.metric] = s
    return {name: grouped[name] for name in sorted(grouped) if not is_virtual(name)}


def _snapshot_of(hc: HostCapture, sample: MetricSample) -> int:
    """The snapshot a gauge's value was read in: the later one when it was captured there."""
    return 1 if sample.source and hc.item(sample.source, 1) is not None else 0


def _increased(sample: MetricSample | None) -> bool:
    return sample is not None and sample.delta is not None and sample.delta > 0


def host_unreachable(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """A host whose capture did not run: nothing else can be said about it."""
    if hc.status not in _UNREACHABLE:
        return []
    reason = hc.reason or "no reason recorded"
    evidence = Evidence("host_status", str(hc.status), "state", baseline="ok", source="host.json")
    summary = f"{hc.host}: capture {hc.status}: {reason}"
    return [Finding("host-unreachable", Severity.MAJOR, hc.host, "host", summary, [evidence], confidence=0.9)]


def netdev_errors(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """Error counters of a physical interface that increased during the interval; one finding per interface."""
    findings = []
    for interface, metrics in _by_interface(samples).items():
        grown = [metrics[name] for name in ERROR_COUNTERS if _increased(metrics.get(name))]
        if not grown:
            continue
        names = {s.metric for s in grown}
        severity = Severity.MAJOR if names & MAJOR_ERROR_COUNTERS else Severity.MINOR
        if names == {"rx_dropped"}:
            confidence = 0.6  # drops alone are often benign: unknown protocols, frames for no listener
        elif any(s.note == "wrap" for s in grown):
            confidence = 0.8
        else:
            confidence = 0.95
        summary = f"{interface}: " + ", ".join(_increase_text(s) for s in grown) + f" {_interval_text(hc)}"
        evidence = [_delta_evidence(s) for s in grown]
        findings.append(
            Finding("netdev-errors", severity, hc.host, f"netdev:{interface}", summary, evidence, confidence)
        )
    return findings


def link_flap(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """carrier_changes (or carrier_down_count where it is all there is) increased during the interval."""
    findings = []
    for interface, metrics in _by_interface(samples).items():
        sample = metrics.get("carrier_changes")
        if sample is None or sample.delta is None:
            sample = metrics.get("carrier_down_count")
        if sample is None or not _increased(sample):
            continue
        summary = f"{interface}: link flapping, {_increase_text(sample)} {_interval_text(hc)}"
        confidence = 0.8 if sample.note == "wrap" else 0.95
        evidence = [_delta_evidence(sample)]
        findings.append(
            Finding("link-flap", Severity.MAJOR, hc.host, f"netdev:{interface}", summary, evidence, confidence)
        )
    return findings


def link_down(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """A physical interface whose operstate is down at the end of the capture."""
    findings = []
    for interface, metrics in _by_interface(samples).items():
        state = metrics.get("operstate")
        if state is None or state.note not in _DOWN_STATES:
            continue
        evidence = [Evidence("operstate", state.note, "state", "up", state.source, _snapshot_of(hc, state))]
        carrier = metrics.get("carrier")
        carrier_value = carrier.value if carrier is not None else None
        if carrier is not None and carrier_value is not None:
            evidence.append(Evidence("carrier", carrier_value, "flag", 1, carrier.source, _snapshot_of(hc, carrier)))
        if carrier_value == 0:
            # carrier reads 0 only on an interface that is administratively up: the link itself is missing.
            detail, confidence = "no carrier (cable, transceiver or link partner)", 0.9
        elif carrier_value is None:
            # the kernel refuses to read carrier on an interface that is administratively down
            detail, confidence = "carrier unreadable, possibly administratively down", 0.6
        else:
            detail, confidence = f"carrier {carrier_value:g}", 0.6
        summary = f"{interface}: operstate {state.note}, {detail}"
        findings.append(
            Finding("link-down", Severity.MINOR, hc.host, f"netdev:{interface}", summary, evidence, confidence)
        )
    return findings


def _last_seen(events: list[KernelEvent]) -> str:
    stamp = events[-1].timestamp
    return f", last at {stamp}" if stamp else ""


def _kernel_link_findings(hc: HostCapture, events: list[KernelEvent]) -> list[Finding]:
    per_interface: dict[str, list[KernelEvent]] = defaultdict(list)
    for event in events:
        if event.kind in ("link-down", "link-up") and event.interface and not is_virtual(event.interface):
            per_interface[event.interface].append(event)
    findings = []
    for interface in sorted(per_interface):
        downs = [e for e in per_interface[interface] if e.kind == "link-down"]
        if not downs:
            continue
        ups = len(per_interface[interface]) - len(downs)
        back_up = ", came back up" if per_interface[interface][-1].kind == "link-up" else ""
        summary = f"{interface}: {len(downs)} link-down message(s) in the kernel log{_last_seen(downs)}{back_up}"
        evidence = [
            Evidence("kernel_link_down_events", len(downs), "events", None, KERNEL_LOG, 0),
            Evidence("kernel_link_up_events", ups, "events", None, KERNEL_LOG, 0),
        ]
        # The log reaches back before the capture (boot-time downs are normal), hence the lower confidence.
        findings.append(
            Finding("kernel-link-down", Severity.MINOR, hc.host, f"netdev:{interface}", summary, evidence, 0.7)
        )
    return findings


def _xid_findings(hc: HostCapture, events: list[KernelEvent]) -> list[Finding]:
    per_device: dict[str, list[KernelEvent]] = defaultdict(list)
    for event in events:
        if event.kind == "nvidia-xid" and event.device:
            per_device[event.device].append(event)
    findings = []
    for device in sorted(per_device):
        codes = Counter(e.code for e in per_device[device] if e.code is not None)
        listed = ", ".join(f"{code} x{count}" for code, count in sorted(codes.items()))
        summary = f"GPU at PCI {device}: Xid {listed} in the kernel log{_last_seen(per_device[device])}"
        evidence = [
            Evidence(f"xid_{code}", count, "events", None, KERNEL_LOG, 0) for code, count in sorted(codes.items())
        ]
        findings.append(Finding("nvidia-xid", Severity.MAJOR, hc.host, f"pcie:{device}", summary, evidence, 0.9))
    return findings


def kernel_log_events(hc: HostCapture, samples: list[MetricSample]) -> list[Finding]:
    """Network link-down messages (per interface) and NVIDIA Xid errors (per GPU) in the captured kernel log."""
    events = parse_kernel_log(HostItems(hc).text(KERNEL_LOG, 0)).events
    return _kernel_link_findings(hc, events) + _xid_findings(hc, events)


RULES: list[Rule] = [host_unreachable, netdev_errors, link_flap, link_down, kernel_log_events]
