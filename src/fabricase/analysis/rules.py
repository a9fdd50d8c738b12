"""Rules: small functions (host capture, its metric samples) -> findings, run in the order of RULES."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from fabricase.analysis._items import by_family, per_samples
from fabricase.analysis.netdev import is_virtual
from fabricase.models import Evidence, Finding, HostCapture, HostStatus, MetricSample, Severity

__all__ = [
    "ERROR_COUNTERS",
    "MAJOR_ERROR_COUNTERS",
    "RULES",
    "Rule",
    "host_unreachable",
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
_FLAP_COUNTERS = ("carrier_changes", "carrier_down_count")
# Every metric the rules read from _by_interface: a rule that reads another metric adds it here.
_RULE_READS = frozenset({*ERROR_COUNTERS, *_FLAP_COUNTERS, "operstate", "carrier"})


def _interval_text(hc: HostCapture) -> str:
    return f"in {hc.interval_s:g} s" if hc.interval_s else "between snapshots"


def _increase_text(sample: MetricSample) -> str:
    rate = f" ({sample.rate:.3g}/s)" if sample.rate is not None else ""
    return f"{sample.metric} +{sample.delta}{rate}"


def _delta_evidence(sample: MetricSample) -> Evidence:
    # value is the increase between snapshot 0 and 1; snapshot 1 names the later reading it ends at.
    return Evidence(f"{sample.metric}.delta", sample.delta, sample.unit, baseline=0, source=sample.source, snapshot=1)


def _by_interface(hc: HostCapture, samples: list[MetricSample]) -> dict[str, dict[str, MetricSample]]:
    return per_samples(hc, "netdev_interfaces", samples, lambda: _group_interfaces(hc, samples))


def _group_interfaces(hc: HostCapture, samples: list[MetricSample]) -> dict[str, dict[str, MetricSample]]:
    """Only the metrics the rules read (_RULE_READS): the netdev family also holds every ethtool counter, ~170 a
    port, so one cheap membership test per sample leaves those out of the per-interface dicts."""
    reads, grouped = _RULE_READS, defaultdict[str, dict[str, MetricSample]](dict)
    for s in [s for s in by_family(hc, samples).get("netdev:", ()) if s.metric in reads]:
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
    for interface, metrics in _by_interface(hc, samples).items():
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
    for interface, metrics in _by_interface(hc, samples).items():
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
    for interface, metrics in _by_interface(hc, samples).items():
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


RULES: list[Rule] = [host_unreachable, netdev_errors, link_flap, link_down]
