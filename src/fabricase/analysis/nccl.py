"""Findings from NCCL debug logs: completion errors, port errors and failed verbs calls attributed to host + NIC,
and collective timeouts per host.

A broken NIC shows up twice in a job log: on its own host (the port error, completion errors on that `hca`) and
on every peer that talked to it (completion errors naming it as the peer). A NIC whose every completion error
names a peer host that has NIC errors of its own, and that logged no port error or failed call itself, is
reported as the far end (minor), so the finding that leads the list is the NIC at fault.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from fabricase.models import Evidence, Finding, Severity
from fabricase.parsers.nccl_log import NcclEvent, NcclLog

__all__ = ["CRITICAL_COMPLETION_ERRORS", "NIC_EVENT_KINDS", "nccl_findings", "nccl_nic_findings",
           "nccl_timeout_findings"]  # fmt: skip

NIC_EVENT_KINDS = frozenset({"ib-completion-error", "port-error", "nic-fatal", "ibv-failed"})
CRITICAL_COMPLETION_ERRORS = 10
_LOCAL_FAULT_KINDS = frozenset({"port-error", "nic-fatal", "ibv-failed"})


@dataclass
class _Nic:
    host: str
    device: str
    events: list[NcclEvent] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    def of(self, kind: str) -> list[NcclEvent]:
        return [e for e in self.events if e.kind == kind]

    @property
    def port(self) -> int | None:
        ports = Counter(e.port for e in self.events if e.port is not None)
        return ports.most_common(1)[0][0] if ports else None

    @property
    def component(self) -> str:
        return f"rdma:{self.device}/{self.port}" if self.port is not None else f"rdma:{self.device}"

    @property
    def ranks(self) -> list[int]:
        return sorted({e.rank for e in self.events if e.rank is not None})


def _counts_text(counter: Counter) -> str:
    return ", ".join(f"{key} x{n}" for key, n in sorted(counter.items()))


def _group(logs: Iterable[NcclLog]) -> dict[tuple[str, str], _Nic]:
    nics: dict[tuple[str, str], _Nic] = {}
    for log in logs:
        for event in log.events:
            if event.kind not in NIC_EVENT_KINDS or event.host is None or event.device is None:
                continue
            nic = nics.setdefault((event.host, event.device), _Nic(event.host, event.device))
            nic.events.append(event)
            if log.source and log.source not in nic.sources:
                nic.sources.append(log.source)
    return dict(sorted(nics.items()))


def _far_end(nic: _Nic, nics: dict[tuple[str, str], _Nic]) -> str | None:
    """The one peer host every completion error of this NIC names, when that host shows a fault of its own: a
    port error, fatal event or failed verbs call on one of its NICs, or more completion errors than this NIC."""
    if any(e.kind in _LOCAL_FAULT_KINDS for e in nic.events):
        return None
    completions = nic.of("ib-completion-error")
    peers = {e.peer_host for e in completions}
    if len(peers) != 1 or None in peers or nic.host in peers:
        return None
    peer = peers.pop()
    peer_nics = [n for n in nics.values() if n.host == peer]
    local_fault = any(e.kind in _LOCAL_FAULT_KINDS for n in peer_nics for e in n.events)
    more_errors = sum(len(n.of("ib-completion-error")) for n in peer_nics) > len(completions)
    return peer if local_fault or more_errors else None


def _evidence(nic: _Nic, far_end: str | None) -> list[Evidence]:
    source = nic.sources[0] if nic.sources else None
    completions = nic.of("ib-completion-error")
    evidence = [Evidence("nccl.completion_errors", len(completions), "events", baseline=0, source=source)]
    for status, n in sorted(Counter(e.status for e in completions if e.status is not None).items()):
        evidence.append(Evidence(f"nccl.completion_status_{status}", n, "events", baseline=0, source=source))
    for vendor, n in sorted(Counter(e.vendor_err for e in completions if e.vendor_err is not None).items()):
        evidence.append(Evidence(f"nccl.vendor_err_{vendor}", n, "events", baseline=0, source=source))
    for kind, metric in (("port-error", "nccl.port_errors"), ("nic-fatal", "nccl.nic_fatal_events"),
                         ("ibv-failed", "nccl.ibv_call_failures")):  # fmt: skip
        if found := nic.of(kind):
            evidence.append(Evidence(metric, len(found), "events", baseline=0, source=source))
    evidence.append(Evidence("nccl.ranks", ",".join(map(str, nic.ranks)) or None, "ranks", source=source))
    peers = Counter(e.peer_host or e.peer for e in completions if e.peer_host or e.peer)
    if peers:
        evidence.append(Evidence("nccl.peers", _counts_text(peers), "hosts", source=source))
    if far_end:
        evidence.append(Evidence("nccl.far_end_of", far_end, "host", source=source))
    first = min(nic.events, key=lambda e: e.line_no)
    evidence.append(Evidence("nccl.first_line", first.line_no, "line", source=source))
    return evidence


def _summary(nic: _Nic, far_end: str | None) -> str:
    completions = nic.of("ib-completion-error")
    parts = []
    if completions:
        statuses = Counter(f"status {e.status}" for e in completions if e.status is not None)
        vendors = Counter(f"vendor err {e.vendor_err}" for e in completions if e.vendor_err is not None)
        detail = "; ".join(t for t in (_counts_text(statuses), _counts_text(vendors)) if t)
        parts.append(f"{len(completions)} NCCL completion errors" + (f" ({detail})" if detail else ""))
    for kind, label in (("port-error", "port error"), ("nic-fatal", "fatal NIC event"),
                        ("ibv-failed", "failed verbs call")):  # fmt: skip
        if n := len(nic.of(kind)):
            parts.append(f"{n} {label}{'s' if n > 1 else ''}")
    where = f"{nic.host} {nic.device}" + (f" port {nic.port}" if nic.port is not None else "")
    ranks = ",".join(map(str, nic.ranks))
    text = f"{where}: {', '.join(parts)}" + (f"; ranks {ranks}" if ranks else "")
    if far_end:
        text += f"; every error names {far_end}, which logged NIC errors itself: likely the far end"
    return text


def nccl_nic_findings(logs: Iterable[NcclLog]) -> list[Finding]:
    """One `nccl-nic-errors` finding per (host, NIC) with completion errors, port errors or failed verbs calls."""
    nics = _group(logs)
    findings = []
    for nic in nics.values():
        far_end = _far_end(nic, nics)
        completions = len(nic.of("ib-completion-error"))
        if far_end:
            severity, confidence = Severity.MINOR, 0.5
        elif completions >= CRITICAL_COMPLETION_ERRORS or nic.of("nic-fatal"):
            severity, confidence = Severity.CRITICAL, 0.9
        else:
            severity, confidence = Severity.MAJOR, 0.9
        if not far_end and all(e.inferred for e in nic.events):
            confidence = 0.7  # no line named the NIC: it is the one NIC the rank's channels use
        findings.append(Finding("nccl-nic-errors", severity, nic.host, nic.component, _summary(nic, far_end),
                                _evidence(nic, far_end), confidence=confidence))  # fmt: skip
    return findings


def nccl_timeout_findings(logs: Iterable[NcclLog]) -> list[Finding]:
    """One `nccl-timeout` finding per host whose ranks logged a collective timeout."""
    by_host: dict[str, list[tuple[NcclEvent, str | None]]] = defaultdict(list)
    for log in logs:
        for event in log.events:
            if event.kind == "timeout" and event.host is not None:
                by_host[event.host].append((event, log.source))
    findings = []
    for host, events in sorted(by_host.items()):
        source = events[0][1]
        ranks = sorted({e.rank for e, _ in events if e.rank is not None})
        rank_text = f" (ranks {','.join(map(str, ranks))})" if ranks else ""
        summary = f"{host}: {len(events)} NCCL collective timeout{'s' if len(events) > 1 else ''}{rank_text}"
        evidence = [
            Evidence("nccl.timeouts", len(events), "events", baseline=0, source=source),
            Evidence("nccl.ranks", ",".join(map(str, ranks)) or None, "ranks", source=source),
            Evidence("nccl.first_line", min(e.line_no for e, _ in events), "line", source=source),
        ]
        # A timeout is where a hang surfaced, often on a healthy rank waiting for a broken one.
        findings.append(Finding("nccl-timeout", Severity.MAJOR, host, "host", summary, evidence, confidence=0.6))
    return findings


def nccl_findings(logs: Iterable[NcclLog]) -> list[Finding]:
    """Every NCCL-log finding, most severe first."""
    logs = list(logs)
    findings = nccl_nic_findings(logs) + nccl_timeout_findings(logs)
    return sorted(findings, key=lambda f: (f.sort_key, f.summary))
