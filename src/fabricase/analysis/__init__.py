"""Analysis: metric samples and rules over a capture directory, producing ranked findings.

Pure: the same capture gives the same findings, in the same order, on any machine.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fabricase.analysis import ethernet, gpu, kernel, pcie, perf, rdma, rules
from fabricase.analysis.fleet import FleetGroups, fleet_groups, fleet_inputs
from fabricase.analysis.nccl import nccl_findings
from fabricase.analysis.netdev import netdev_samples
from fabricase.analysis.pool import Outcome, apply_outcome, map_hosts, outcome_of
from fabricase.analysis.rates import note_host, settle_counters
from fabricase.analysis.rules import Rule
from fabricase.errors import CaptureError, ParseError
from fabricase.models import Capture, CaptureItem, Finding, HostCapture, HostStatus, MetricSample, Severity

if TYPE_CHECKING:
    from fabricase.analysis.power import PowerStatement

__all__ = [
    "ANALYZERS",
    "BACKGROUND_KINDS",
    "Analyzer",
    "HostAnalysisError",
    "analyze",
    "analyze_host",
    "findings_from_json",
    "findings_to_json",
    "host_samples",
    "import_fleet_step",
    "prepare_host",
    "share_strings",
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
    """Most severe first, then most certain, then host, component, kind; the summary breaks remaining ties."""
    return sorted(findings, key=lambda f: (f.sort_key, f.summary))


def host_samples(hc: HostCapture) -> list[MetricSample]:
    """Every normalized metric sample of one host, domain by domain."""
    return [s for a in ANALYZERS for s in a.samples(hc)]


@dataclass
class _HostResult:
    """What the fleet-wide step needs from one host, taken while its items are read once."""

    findings: list[Finding]
    samples: list[MetricSample]  # only what fleet statistics read (fleet_inputs)
    config: dict | None  # host_config, for configuration drift; None for a host with no items
    perf: list  # perf.PerfRecord, for perf outliers across hosts
    extra: Any = None  # what analyze's `per_host` hook took from the host's items


class HostAnalysisError(CaptureError):
    """One host's items could not be analyzed: `stage` (the domain, rule or hook) raised `__cause__`; .where is
    the host. analyze() records it on the host (status failed, reason `analysis: ...`) and analyzes the rest;
    analyze_host() raises it, so that a caller sees one line rather than a parser's traceback."""

    def __init__(self, host: str, stage: str, reason: str) -> None:
        super().__init__(f"analysis: {reason}", where=host)
        self.host, self.stage, self.reason = host, stage, reason

    def __reduce__(self) -> tuple:  # crosses the analysis pool's pipe (analysis.pool)
        return type(self), (self.host, self.stage, self.reason)


def _rule_name(rule: Rule) -> str:
    return getattr(rule, "__name__", None) or type(rule).__name__


def _analyze_host(hc: HostCapture, *, fleet: bool = True,
                  per_host: Callable[[HostCapture], Any] | None = None) -> _HostResult:
    """One host's findings (and what the fleet step needs). Whatever its items make a parser, a rule or the
    hook raise becomes HostAnalysisError naming the stage, the item read last and the line that raised."""
    from fabricase.analysis.hostconfig import host_config

    stage = "start"
    try:
        samples: list[MetricSample] = []
        for a in ANALYZERS:
            stage = f"{a.name} samples"
            samples += a.samples(hc)
        stage = "counter resets"
        samples, reset_note = settle_counters(hc, samples)
        if reset_note is not None:  # the terminal, the report and the ticket read the host's status
            note_host(hc, reset_note)
        found: list[Finding] = []
        for a in ANALYZERS:
            for rule in a.rules:
                stage = f"{a.name} rule {_rule_name(rule)}"
                found += rule(hc, samples)
        stage = "sorting findings"
        findings = sort_findings(found)
        if not fleet:
            return _HostResult(findings, [], None, [])
        stage = "fleet inputs"
        inputs = _shared_strings(fleet_inputs(samples))
        stage = "host configuration"
        config = host_config(hc) if hc.items else None
        stage = "perf records"
        records = perf.perf_records(hc)
        stage = "per-host hook"
        extra = per_host(hc) if per_host is not None else None
        return _HostResult(findings, inputs, config, records, extra)
    except Exception as exc:  # any error of this host's data: recorded with it, the fleet goes on (analyze)
        raise HostAnalysisError(hc.host, stage, _failure(stage, exc, hc.cache.get("last_item"))) from exc
    finally:
        hc.release()


def _shared_strings(samples: list[MetricSample]) -> list[MetricSample]:
    """The samples kept for the fleet step, their component, metric, unit and source names interned: every host
    has the same few hundred, and a fleet keeps about a thousand samples per host until the end (an HGX host's
    NVLink and PCIe names were each host's own copies). Shared in this process, and pickled once per chunk of
    hosts by the analysis pool (pickle writes an object it has seen as a reference): one copy per chunk, not per
    host. bench_fleet's 1,024 HGX hosts: the analysis's 167 MiB became 130 MiB."""
    intern = sys.intern
    for s in samples:
        s.component, s.metric, s.unit = intern(s.component), intern(s.metric), intern(s.unit)
        if s.source is not None:
            s.source = intern(s.source)
    return samples


def share_strings(outcome: Outcome) -> Outcome:
    """A prepared host's outcome (prepare_host), its samples' names interned in this process once it arrived
    from another: each arrives with its own copies, 70 KiB an HGX host (bench_fleet's 10,000 hosts: 4.6 GiB of
    which 0.7 were names)."""
    if isinstance(outcome.value, _HostResult):
        _shared_strings(outcome.value.samples)
    return outcome


_REASON_CHARS = 400  # a status reason is one line in a table: the error's own words, cut


def _failure(stage: str, exc: BaseException, item: CaptureItem | None) -> str:
    """`<stage>: <Error>: <message> (after reading <item>; <file>:<line> in <function>)`, one line."""
    message = " ".join(str(exc).split())[:_REASON_CHARS] or "(no message)"
    where = []
    if item is not None:
        where.append(f"after reading {item.source[:200]} (snapshot {item.snapshot})")
    frame = _raising_frame(exc)
    if frame:
        where.append(frame)
    return f"{stage}: {type(exc).__name__}: {message}" + (f" ({'; '.join(where)})" if where else "")


def _raising_frame(exc: BaseException) -> str | None:
    """The innermost fabricase line of the traceback, e.g. `parsers/sysfs.py:41 in parse_counter`."""
    import traceback

    marker = f"{os.sep}fabricase{os.sep}"
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if marker in frame.filename and frame.filename != __file__:  # this module is the boundary, not the cause
            return f"{frame.filename.rsplit(marker, 1)[1]}:{frame.lineno} in {frame.name}"
    return None


def _mark_failed(hc: HostCapture, error: HostAnalysisError) -> None:
    """The host's status becomes failed with `analysis: ...`; what the capture said of it is kept after."""
    if hc.status == HostStatus.FAILED and hc.reason and hc.reason.startswith("analysis: "):
        return  # analyzed again (the bundle, after the terminal): the same failure, said once
    before = "" if hc.status == HostStatus.OK else f"; capture: {hc.status}" + (f": {hc.reason}" if hc.reason else "")
    hc.status, hc.reason = HostStatus.FAILED, f"analysis: {error.reason}{before}"


def prepare_host(hc: HostCapture, per_host: Callable[[HostCapture], Any] | None = None) -> Outcome:
    """One host's part of analyze (with its `per_host` hook), done elsewhere beforehand: the recording worker
    analyzes each host as soon as it is written, while the fan-out waits for slower hosts. Put in
    Capture.analyzed (with the hook in Capture.analyzed_with), analyze then takes it instead of analyzing the
    host again; the results are those analyze would have computed."""
    return outcome_of(hc, functools.partial(_analyze_host, per_host=per_host), (HostAnalysisError,))


def _host_outcomes(capture: Capture, hosts: list[HostCapture],
                   per_host: Callable[[HostCapture], Any] | None) -> list[Outcome]:
    """Every host's outcome, in order: those prepared beforehand for this very hook (taken once: a second
    analysis of the capture computes afresh), the rest through the pool; each host's status and reason as its
    analysis left them (pool.apply_outcome)."""
    prepared = capture.analyzed if capture.analyzed_with is per_host else {}
    capture.analyzed, capture.analyzed_with = {}, None
    todo = [hc for hc in hosts if hc.host not in prepared]
    computed = iter(map_hosts(todo, functools.partial(_analyze_host, per_host=per_host),
                              catch=(HostAnalysisError,)))
    outcomes = []
    for hc in hosts:
        outcome = prepared.get(hc.host)
        if outcome is None:
            outcomes.append(next(computed))
            continue
        apply_outcome(hc, outcome)
        outcomes.append(outcome)
    return outcomes


def import_fleet_step() -> None:
    """Import what the fleet-wide step imports when it first runs (scipy.special for its count tests, the
    drift, power and shared-component modules): about 0.2 s that a caller waiting on the network can pay then
    (collect, while its hosts are captured) rather than after the last host."""
    from fabricase.analysis import drift, power, topology  # noqa: F401
    from fabricase.analysis.stats import scipy_special

    scipy_special()


def analyze_host(hc: HostCapture) -> list[Finding]:
    """Every rule's findings for one host, sorted; HostAnalysisError when its items cannot be analyzed."""
    return _analyze_host(hc, fleet=False).findings


# Rule findings that only say "an error counter rose": in a fleet large enough to judge, one that does not stand
# out from its comparable components is the background every fleet has, and is reported as minor.
BACKGROUND_KINDS = frozenset({
    "netdev-errors", "phy-errors", "nic-discards", "rdma-symbol-errors", "rdma-port-errors",
    "rdma-transport-errors", "nvlink-errors",
})


def _background(findings: list[Finding], fleet: list[Finding], judgeable: set[str]) -> list[Finding]:
    # A component the job's NCCL log blames is not background, whatever its counters look like next to the fleet.
    outliers = {(f.host, f.component) for f in fleet if f.kind == "fleet-outlier"} | _nccl_blamed(findings)
    out = []
    for f in findings:
        family = f.component.split(":", 1)[0]
        if (f.kind in BACKGROUND_KINDS and family in judgeable and (f.host, f.component) not in outliers
                and f.severity.rank < Severity.MINOR.rank):
            f = dataclasses.replace(f, severity=Severity.MINOR,
                                    summary=f"{f.summary}; within the fleet's background (not an outlier)")
        out.append(f)
    return out


# How much the job's own NCCL log, blaming a component, adds to a rule's confidence in it: the two are
# independent witnesses, combined as 1 - (1 - c)(1 - NCCL_WEIGHT).
NCCL_WEIGHT = 0.5


def _nccl_blamed(findings: list[Finding]) -> set[tuple[str | None, str]]:
    return {(f.host, f.component) for f in findings if f.kind.startswith("nccl-") and f.severity != Severity.INFO}


def _nccl_links(findings: list[Finding]) -> list[Finding]:
    """A component that the job's NCCL log blames and a rule also flags: each names the other as related, and the
    rule's confidence rises (NCCL_WEIGHT), so it ranks above findings of the same severity that no job saw."""
    blamed = _nccl_blamed(findings)
    out = []
    for f in findings:
        if (f.host, f.component) in blamed and not f.kind.startswith("nccl-"):
            confidence = None if f.confidence is None else round(1 - (1 - f.confidence) * (1 - NCCL_WEIGHT), 6)
            f = dataclasses.replace(f, related=sorted({*f.related, f"nccl-log:{f.host}/{f.component}"}),
                                    confidence=confidence, summary=f"{f.summary}; the job's NCCL log names it too")
        out.append(f)
    return out


def _fleet_findings(capture: Capture, results: dict[str, _HostResult], prepared: FleetGroups) -> list[Finding]:
    """Findings that need every host at once: fleet statistics, configuration drift, perf outliers across
    hosts, and the job's NCCL logs."""
    from fabricase.analysis.drift import config_drift_findings
    from fabricase.analysis.fleet import fleet_findings
    from fabricase.parsers.nccl_log import parse_nccl_log

    out = fleet_findings({host: r.samples for host, r in results.items()}, prepared=prepared)
    configs = {host: r.config for host, r in results.items() if r.config is not None}
    if len(configs) >= 4:  # drift needs a majority to differ from
        out += config_drift_findings(configs)
    records = [rec for r in results.values() for rec in r.perf]
    logs = [
        parse_nccl_log(capture.read_input(item).decode("utf-8", errors="replace"), source=item.path)
        for item in capture.inputs
        if item.kind == "nccl-log"
    ]
    return out + perf.perf_fleet_findings(records) + (nccl_findings(logs) if logs else []) + _probe_findings(capture)


def _probe_findings(capture: Capture) -> list[Finding]:
    """The active probe's findings when the capture holds probe.json; one info finding when it cannot be used
    (the rest of the capture is analyzed all the same)."""
    from fabricase.analysis.probe import load_probe, probe_findings
    from fabricase.models import Evidence

    doc, why = load_probe(capture.root)
    if why is not None:
        evidence = [Evidence("probe.readable", "no", "state", baseline="yes", source="probe.json")]
        return [Finding("probe-unreadable", Severity.INFO, None, "probe", why, evidence, confidence=1.0)]
    return probe_findings(capture, doc) if doc is not None else []


def analyze(capture: Capture, topology: dict[str, list[str]] | None = None,
            samples_out: dict[str, list[MetricSample]] | None = None,
            per_host: Callable[[HostCapture], Any] | None = None,
            per_host_out: dict[str, Any] | None = None,
            power_out: list[PowerStatement] | None = None) -> list[Finding]:
    """Findings for every host of a capture, then the fleet-wide ones, sorted by Finding.sort_key; deterministic.

    `topology` maps a host to the shared components above it (switch, rack, network node, block). When
    `samples_out` is given, it receives each host's samples that fleet statistics read (error, traffic, pause and
    class gauges), for the report's heat map, so nobody has to read the items again. `per_host(hc)` runs while a
    host's items are read (the diagnosis takes each host's hardware aliases so); `per_host_out` receives its
    results by host. `power_out` receives the diagnosis's power statements of those samples (analysis.power),
    stated from the fleet step's columns before they are dropped, rather than gathered again for them.

    A host whose items make a parser, a rule or `per_host` raise is marked on the capture itself: status
    failed, reason `analysis: <stage>: <error> (after reading <item>; <line>)`, so that every later stage (the
    diagnosis, the terminal, the ticket) shows it; it has no findings and no samples, and the rest of the fleet
    is analyzed as if it had not been captured.

    Hosts are analyzed in a pool of processes when the fleet is large enough (analysis.pool; the results, host
    marks included, are those of a serial run): `per_host`'s results must then pickle."""
    from fabricase.analysis.topology import shared_component_findings

    host_findings: list[Finding] = []
    results: dict[str, _HostResult] = {}
    hosts = list(capture.hosts)
    outcomes = _host_outcomes(capture, hosts, per_host)
    for hc, outcome in zip(hosts, outcomes, strict=True):
        if isinstance(outcome.error, HostAnalysisError):
            # One bad host never stops a fleet: it is marked failed (its findings and samples left out, so
            # fleet statistics skip it) and the others are analyzed.
            _mark_failed(hc, outcome.error)
            continue
        result = outcome.value
        assert result is not None
        results[hc.host] = result
        host_findings += result.findings
        if per_host_out is not None:
            per_host_out[hc.host] = result.extra
    samples = {host: r.samples for host, r in results.items()}
    if samples_out is not None:
        samples_out.update(samples)
    intervals = {hc.host: hc.interval_s or capture.interval_s for hc in hosts}
    # One gathering for the fleet and the switch tests; the samples are fleet_inputs already (_analyze_host).
    prepared = fleet_groups(samples, intervals=intervals, inputs=True)
    if power_out is not None:
        from fabricase.analysis.power import hosts_power

        power_out += hosts_power(samples, hosts, prepared)
    prepared.counters = None  # read by the power statements only: not kept through the rest of the analysis
    fleet = _fleet_findings(capture, results, prepared)
    findings = host_findings + fleet
    shared: list[Finding] = []
    if topology:
        # Before the background downgrade: errors too small to stand out one by one may still pile up under
        # one switch, and that is the signal the switch test looks for.
        from fabricase.analysis.fleet import port_groups

        ports = port_groups(samples, prepared=prepared)
        shared, findings = shared_component_findings(findings, topology, [hc.host for hc in hosts],
                                                     port_groups=ports)
    findings = _background(findings, fleet, prepared.judgeable)  # judgeable_families(samples)
    return sort_findings(_nccl_links(findings) + shared)


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
