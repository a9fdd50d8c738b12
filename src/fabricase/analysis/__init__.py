"""Analysis: metric samples and rules over a capture directory, producing ranked findings.

Pure: the same capture gives the same findings, in the same order, on any machine.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from fabricase.analysis import ethernet, gpu, kernel, pcie, perf, rdma, rules
from fabricase.analysis.nccl import nccl_findings
from fabricase.analysis.netdev import netdev_samples
from fabricase.analysis.rules import Rule
from fabricase.errors import ParseError
from fabricase.models import Capture, Finding, HostCapture, MetricSample

__all__ = [
    "ANALYZERS",
    "Analyzer",
    "analyze",
    "analyze_host",
    "findings_from_json",
    "findings_to_json",
    "host_samples",
    "sort_findings",
]


@dataclass(frozen=True)
class Analyzer:
    """One domain: how to turn a host's items into metric samples, and the rules that read them."""

    name: str
    samples: Callable[[HostCapture], list[MetricSample]]
    rules: tuple[Rule, ...]


# An explicit registry, in the flow's order. Every rule sees every domain's samples, so a rule may
# correlate (an RDMA port and its netdev) without importing another domain.
ANALYZERS: tuple[Analyzer, ...] = (
    Analyzer("netdev", netdev_samples, tuple(rules.RULES)),
    Analyzer("rdma", rdma.samples, tuple(rdma.RULES)),
    Analyzer("ethernet", ethernet.samples, tuple(ethernet.RULES)),
    Analyzer("pcie", pcie.samples, tuple(pcie.RULES)),
    Analyzer("gpu", gpu.samples, tuple(gpu.RULES)),
    Analyzer("kernel", lambda hc: [], tuple(kernel.RULES)),
    Analyzer("perf", perf.samples, tuple(perf.RULES)),
)


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first, then host, component, kind; the summary breaks remaining ties."""
    return sorted(findings, key=lambda f: (f.sort_key, f.summary))


def host_samples(hc: HostCapture) -> list[MetricSample]:
    """Every normalized metric sample of one host, domain by domain."""
    return [s for a in ANALYZERS for s in a.samples(hc)]


def analyze_host(hc: HostCapture) -> list[Finding]:
    """Every rule's findings for one host, sorted."""
    try:
        samples = host_samples(hc)
        return sort_findings(finding for a in ANALYZERS for rule in a.rules for finding in rule(hc, samples))
    finally:
        hc.release()


def _fleet_findings(capture: Capture) -> list[Finding]:
    """Findings that need every host at once: perf outliers across hosts, and the job's NCCL logs."""
    from fabricase.parsers.nccl_log import parse_nccl_log

    records = [r for hc in capture.hosts for r in perf.perf_records(hc)]
    logs = [
        parse_nccl_log(capture.read_input(item).decode("utf-8", errors="replace"), source=item.path)
        for item in capture.inputs
        if item.kind == "nccl-log"
    ]
    return perf.perf_fleet_findings(records) + (nccl_findings(logs) if logs else [])


def analyze(capture: Capture, topology: dict[str, list[str]] | None = None) -> list[Finding]:
    """Findings for every host of a capture, then the fleet-wide ones, sorted by Finding.sort_key; deterministic.

    `topology` maps a host to the shared components above it (switch, rack, network node, block)."""
    per_host = [f for hc in capture.hosts for f in analyze_host(hc)]
    return sort_findings(per_host + _fleet_findings(capture))


def findings_to_json(findings: Iterable[Finding]) -> str:
    """A JSON array of findings (docs/findings.md), keys sorted, two-space indent, trailing newline."""
    return json.dumps([f.to_dict() for f in findings], sort_keys=True, indent=2, allow_nan=False) + "\n"


def findings_from_json(text: str) -> list[Finding]:
    """Findings from findings_to_json's output (also accepts {"findings": [...]})."""
    try:
        data = json.loads(text)
        if isinstance(data, dict):
            data = data["findings"]
        if not isinstance(data, list):
            raise TypeError(f"expected a list of findings, got {type(data).__name__}")
        return [Finding.from_dict(d) for d in data]
    except (ValueError, KeyError, TypeError) as exc:
        raise ParseError(f"not a findings document: {exc}", where="findings JSON") from exc
