"""Fleet outliers: error counters compared across every comparable component of a capture.

Comparable: the same component family (the part of the component before ':', e.g. `rdma`, `netdev`,
`nvlink`) and the same metric. Each component's increase is tested against the rest of the fleet with an exact
upper-tail test (stats.count_test), and the false discovery rate is controlled with Benjamini-Hochberg across
ALL tests of the capture. Method and limits: docs/fleet-statistics.md.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from fabricase.analysis import stats
from fabricase.analysis.fleet_continuous import (
    _NOUN,
    CONTINUOUS_FLOORS,
    CONTINUOUS_PREFIXES,
    Z_MIN,
    _fmt,
    _fmt_q,
    _sig,
    continuous_blocks,
    continuous_findings,
    is_continuous_metric,
)  # fmt: skip
from fabricase.models import Evidence, Finding, MetricSample, Severity

__all__ = [
    "ERROR_TOKENS",
    "EXCLUDE_TOKENS",
    "TRAFFIC_METRICS",
    "TRAFFIC_SCALED_TOKENS",
    "CONTINUOUS_FLOORS",
    "CONTINUOUS_PREFIXES",
    "Z_MIN",
    "fleet_findings",
    "fleet_inputs",
    "PortGroup",
    "port_groups",
    "is_continuous_metric",
    "is_error_metric",
    "is_traffic_scaled",
]

# A counter is an error counter when its metric name contains one of these ...
ERROR_TOKENS: tuple[str, ...] = (
    "error", "err", "discard", "drop", "retrans", "timeout", "flap", "down", "symbol", "crc", "fcs", "replay",
    "recovery", "nak", "overrun", "out_of_sequence", "out_of_buffer", "missed", "fifo", "carrier_changes",
    "aer_", "duplicate", "unreachable", "impaired", "slow_restart",
)  # fmt: skip
# ... and none of these: traffic, congestion signalling and pause time are not faults by themselves.
EXCLUDE_TOKENS: tuple[str, ...] = (
    "bytes", "packets", "pkts", "bits", "cnp", "ecn", "pause", "wait", "_us", "fec_corrected",
)  # fmt: skip
# Errors that scale with the traffic a port carries (transport and buffer events) are normalized per GB
# moved when the whole group's traffic is known; physical-layer errors (symbol, CRC, FEC, flaps) happen on an
# idle link too (idle symbols are on the wire), so they stay per second.
TRAFFIC_SCALED_TOKENS: tuple[str, ...] = (
    "retrans", "timeout", "discard", "drop", "nak", "out_of_sequence", "out_of_buffer", "duplicate", "overrun",
    "missed", "fifo", "cqe",
)  # fmt: skip
TRAFFIC_METRICS: tuple[str, ...] = ("rx.bytes", "tx.bytes", "rx_bytes", "tx_bytes")
IDLE_FLOOR = 0.01  # a component's GB exposure is at least this share of the group's median (idle NICs)
CRITICAL_Q = 1e-6
CRITICAL_RATIO = 100.0


def is_error_metric(metric: str) -> bool:
    m = metric.lower()
    return any(t in m for t in ERROR_TOKENS) and not any(t in m for t in EXCLUDE_TOKENS)


def is_traffic_scaled(metric: str) -> bool:
    m = metric.lower()
    return any(t in m for t in TRAFFIC_SCALED_TOKENS)


def _family(component: str) -> str:
    return component.split(":", 1)[0]


def _host_intervals(hosts_samples: Mapping[str, list[MetricSample]],
                    intervals: Mapping[str, float] | None) -> dict[str, float]:
    """Each host's snapshot interval: given, else delta / rate of its first counter with both positive, else the
    median of the other hosts' intervals."""
    out: dict[str, float] = {}
    for host, samples in hosts_samples.items():
        given = (intervals or {}).get(host)
        if given is not None and given > 0 and math.isfinite(given):
            out[host] = float(given)
            continue
        for s in samples:
            if s.delta and s.rate and s.delta > 0 and s.rate > 0:
                out[host] = s.delta / s.rate
                break
    # A host whose counters all stood still (rate 0 says nothing of the interval) takes the fleet's median.
    if out:
        median = float(np.median(list(out.values())))
        for host in hosts_samples:
            out.setdefault(host, median)
    return out


class GroupKey(NamedTuple):
    """What makes components comparable: family, metric and class ("mlx5 InfiniBand 400 Gb/s"; "" when unknown)."""

    family: str
    metric: str
    cls: str


class _Member(NamedTuple):
    """One component's counter in a comparable group: the sample, its interval and the GB it moved (None: unknown)."""

    sample: MetricSample
    interval: float
    gb: float | None


@dataclass
class _CountBlock:
    """One comparable group's count test: members in order, their counts and exposures, the test and its unit."""

    key: GroupKey
    order: list[tuple[str, str]]
    rows: list[_Member]
    counts: np.ndarray
    exposure: np.ndarray
    test: stats.CountTest
    unit: str  # the exposure's unit: "s", or "GB" for traffic-scaled errors

    @property
    def n(self) -> int:
        return len(self.order)


class _Hit(NamedTuple):
    """One component's counter that stood out: its q and p, its group, the test and where it sits in the block."""

    q: float
    p: float
    key: GroupKey
    test: _Test
    count_test: stats.CountTest
    unit: str
    n: int
    index: int


class _Test:
    __slots__ = ("component", "count", "exposure", "gb", "host", "interval", "sample")

    def __init__(self, host: str, component: str, sample: MetricSample, count: float, interval: float,
                 gb: float | None):
        self.host, self.component, self.sample, self.count = host, component, sample, count
        self.interval, self.gb, self.exposure = interval, gb, interval


@functools.lru_cache(maxsize=4096)
def _group_of(component: str, metric: str) -> tuple[str, str] | None:
    return (_family(component), metric) if is_error_metric(metric) else None


MIN_EVENTS = 5  # events in the interval before one component can be called an outlier


# What makes two components comparable beyond their family: the gauges that say vendor, link layer (role) and
# speed. A 400 Gb/s ConnectX InfiniBand port is not judged against a 100 Gb/s EFA port, nor a 25 GbE management
# NIC against a 400 GbE RoCE one.
CLASS_METRICS: dict[str, tuple[str, ...]] = {
    "rdma": ("port.vendor", "link.layer", "link.speed_gbps"),
    "netdev": ("speed",),
}
_CLASS_UNITS = {"link.speed_gbps": "Gb/s", "speed": "Mb/s"}
_CLASS_NAMES = frozenset(m for metrics in CLASS_METRICS.values() for m in metrics)


_NEVER, _COUNTER, _ALWAYS = 0, 1, 2


@functools.lru_cache(maxsize=1 << 16)  # a fleet's components and metrics repeat from host to host
def _input_kind(component: str, metric: str) -> int:
    """Whether fleet_inputs keeps a sample of this component and metric: a class gauge always (_ALWAYS), a
    traffic, error or continuous counter when it has a delta (_COUNTER), anything else never."""
    if metric in _CLASS_NAMES:
        return _ALWAYS
    if metric in TRAFFIC_METRICS or _group_of(component, metric) is not None or is_continuous_metric(metric):
        return _COUNTER
    return _NEVER


def fleet_inputs(samples: Iterable[MetricSample]) -> list[MetricSample]:
    """The samples fleet statistics read: error and traffic counters that moved, or could have, and the gauges
    that make components comparable (CLASS_METRICS). A raw counter already present under its normalized name
    (same component, same source) is left out: one counter is one test, or Benjamini-Hochberg would pay twice
    for it and the evidence would say it twice."""
    kind = _input_kind
    kept = [s for s in samples if (k := kind(s.component, s.metric)) == _ALWAYS or (k and s.delta is not None)]
    normalized = {(s.component, s.source) for s in kept if not s.metric.startswith("raw:")}
    return [s for s in kept if not s.metric.startswith("raw:") or (s.component, s.source) not in normalized]


def _classes(samples: list[MetricSample]) -> dict[str, str]:
    """component -> its comparable class ("mlx5 InfiniBand 400 Gb/s"; "" when nothing says)."""
    parts: dict[str, dict[str, str]] = defaultdict(dict)
    for s in samples:
        if s.metric in _CLASS_NAMES and s.metric in CLASS_METRICS.get(_family(s.component), ()):
            if s.note:
                parts[s.component][s.metric] = s.note
            elif s.value is not None:
                parts[s.component][s.metric] = f"{s.value:g} {_CLASS_UNITS.get(s.metric, '')}".rstrip()
    return {comp: " ".join(p[m] for m in CLASS_METRICS[_family(comp)] if m in p) for comp, p in parts.items()}


def judgeable_families(hosts_samples: Mapping[str, Iterable[MetricSample]], min_group: int = 8) -> set[str]:
    """Component families (`rdma`, `netdev`, ...) with at least `min_group` components carrying error counters:
    there, a counter that rose without standing out from the fleet is background, not a fault."""
    members: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for host, samples in hosts_samples.items():
        for s in samples:
            if s.delta is not None and _group_of(s.component, s.metric) is not None:
                members[s.component.split(":", 1)[0]].add((host, s.component))
    return {family for family, comps in members.items() if len(comps) >= min_group}


@dataclass
class FleetGroups:
    """The comparable groups of a capture and their count tests, gathered once: fleet_findings and port_groups
    (the shared-component test) read the same ones, and gathering walks every sample of the fleet."""

    continuous: dict[GroupKey, dict[tuple[str, str], MetricSample]]
    blocks: list[_CountBlock]
    small: list[tuple[str, int]]
    judged_families: set[str]
    untested: int
    min_group: int
    judgeable: set[str]  # judgeable_families of the same samples and min_group


def fleet_groups(hosts_samples: Mapping[str, Iterable[MetricSample]], *, min_group: int = 8,
                 intervals: Mapping[str, float] | None = None, inputs: bool = False) -> FleetGroups:
    """Gather and test the capture's comparable groups once, for fleet_findings(prepared=) and
    port_groups(prepared=). `inputs`: the samples are fleet_inputs' output already (analyze's hosts), so they
    are not filtered again (fleet_inputs of its own output is that output)."""
    hosts_samples = {h: v if inputs else fleet_inputs(v) for h, v in sorted(hosts_samples.items())}
    groups, continuous, members = _gather(hosts_samples, intervals)  # type: ignore[arg-type]
    blocks, small, judged_families, untested = _count_blocks(groups, min_group)
    judgeable = {family for family, comps in members.items() if len(comps) >= min_group}
    return FleetGroups(continuous, blocks, small, judged_families, untested, min_group, judgeable)


def fleet_findings(hosts_samples: Mapping[str, Iterable[MetricSample]], *, alpha: float = 0.01,
                   min_group: int = 8, intervals: Mapping[str, float] | None = None,
                   prepared: FleetGroups | None = None) -> list[Finding]:
    """`fleet-outlier` findings (one per component with some error metric at q <= alpha), or one
    `fleet-too-small` info finding when a group could not be judged; deterministic order (host, component).
    `prepared`: fleet_groups of the same samples, intervals and min_group, when the caller has it already."""
    prepared = prepared or fleet_groups(hosts_samples, min_group=min_group, intervals=intervals)
    continuous, blocks, small = prepared.continuous, prepared.blocks, prepared.small
    judged_families, untested = prepared.judged_families, prepared.untested

    zblocks = continuous_blocks(continuous, min_group)
    findings: list[Finding] = []
    if blocks or zblocks:
        all_p = np.concatenate([b.test.pvalues for b in blocks] + [np.ones(untested)] + [b.p for b in zblocks])
        all_q = stats.benjamini_hochberg(all_p)
        efa = stats.expected_false_alarms(all_q, alpha)
        hits: dict[tuple[str, str], list[_Hit]] = defaultdict(list)
        offset = 0
        for b in blocks:
            n = b.n
            q = all_q[offset:offset + n]
            # A handful of events is not enough against one component, however small the fleet's baseline:
            # real fleets are more heterogeneous than any fitted model, and a tiny baseline makes 2 events
            # look impossible. MIN_EVENTS guards against that over-confidence.
            for i in np.flatnonzero((q <= alpha) & (b.counts >= MIN_EVENTS)):
                (host, component), member = b.order[i], b.rows[i]
                t = _Test(host, component, member.sample, float(b.counts[i]), member.interval, member.gb)
                t.exposure = float(b.exposure[i])
                hits[(t.host, t.component)].append(_Hit(float(q[i]), float(b.test.pvalues[i]), b.key, t, b.test,
                                                        b.unit, n, int(i)))
            offset += n
        for (host, component), found in sorted(hits.items()):
            found.sort(key=lambda h: (h.q, h.key))
            findings.append(_finding(host, component, found, efa))
        findings += continuous_findings(zblocks, all_q[offset + untested:], alpha, efa)

    # Said only when some error counter moved in a group too small to judge, of a family that could not be judged
    # at all: a quiet small fleet needs no note, nor does one odd port (a downshifted link) in a large fleet.
    positives = [n for family, n in small if n > 0 and family not in judged_families]
    if positives:
        got = max(positives)
        findings.append(Finding(
            kind="fleet-too-small", severity=Severity.INFO, host=None, component="fleet",
            summary=f"fleet statistics need at least {min_group} comparable components; got {got}",
            evidence=[Evidence(metric="fleet.comparable_components", value=got, unit="components",
                               baseline=min_group)],
        ))
    return findings


_Groups = dict[GroupKey, dict[tuple[str, str], _Member]]


def _gather(hosts_samples: Mapping[str, list[MetricSample]], intervals: Mapping[str, float] | None,
            ) -> tuple[_Groups, dict[GroupKey, dict[tuple[str, str], MetricSample]], dict[str, set[tuple[str, str]]]]:
    """The comparable groups of the capture: error counters (with interval and GB moved) and continuous rates;
    and by family the components with error counters (judgeable_families, in the same pass)."""
    host_interval = _host_intervals(hosts_samples, intervals)
    members: dict[str, set[tuple[str, str]]] = defaultdict(set)

    # group -> (host, component) -> (sample, interval, GB moved); the first sample of a (host, component)
    # wins when a counter was read from two sources.
    groups: dict[GroupKey, dict[tuple[str, str], _Member]] = {}
    continuous: dict[GroupKey, dict[tuple[str, str], MetricSample]] = {}
    keys: dict[tuple[tuple[str, str], str], GroupKey] = {}  # made once each: a fleet has millions of samples
    for host, samples in hosts_samples.items():
        classes = _classes(samples)
        traffic: dict[str, float] = {}
        for s in samples:
            if s.metric in TRAFFIC_METRICS and s.delta is not None:
                traffic[s.component] = traffic.get(s.component, 0.0) + s.delta
        default_interval = host_interval.get(host)
        for s in samples:
            delta = s.delta
            if delta is None:
                continue
            family_metric = _group_of(s.component, s.metric)
            if family_metric is not None:
                members[family_metric[0]].add((host, s.component))
            if delta < 0:
                continue
            if family_metric is None:
                if s.rate is not None and is_continuous_metric(s.metric):
                    ckey = GroupKey(_family(s.component), s.metric, classes.get(s.component, ""))
                    continuous.setdefault(ckey, {}).setdefault((host, s.component), s)
                continue
            cls = classes.get(s.component, "")
            key = keys.get((family_metric, cls))
            if key is None:
                key = keys[(family_metric, cls)] = GroupKey(*family_metric, cls)
            rate = s.rate
            interval = delta / rate if rate and delta > 0 and rate > 0 else default_interval
            if interval is None or not interval > 0:
                continue
            gb = traffic.get(s.component)
            group = groups.get(key)
            if group is None:
                group = groups[key] = {}
            group.setdefault((host, s.component), _Member(s, interval, None if gb is None else gb / 1e9))
    return groups, continuous, members


def _count_blocks(groups: _Groups, min_group: int,
                  ) -> tuple[list[_CountBlock], list[tuple[str, int]], set[str], int]:
    """Each group large enough to judge, tested: (blocks, small groups as (family, +-n), judged families, number
    of components in judged groups where nothing moved)."""
    # Per group: exposure, p-values; then BH over every test of the capture.
    small: list[tuple[str, int]] = []
    judged_families: set[str] = set()
    untested = 0
    blocks: list[_CountBlock] = []
    for key in sorted(groups):
        members = groups[key]
        n = len(members)
        if n < min_group:
            # a small group with nothing to judge is reported only when nothing at all could be judged
            small.append((key.family, n if any(v.sample.delta > 0 for v in members.values()) else -n))
            continue
        judged_families.add(key.family)
        order = sorted(members)
        rows = [members[k] for k in order]
        counts = np.fromiter((round(r.sample.delta) for r in rows), float, n)
        if not counts.any():
            untested += n  # every p-value is 1; they still count in BH's number of tests
            continue
        exposure = np.fromiter((r.interval for r in rows), float, n)
        unit = "s"
        if is_traffic_scaled(key.metric) and all(r.gb is not None for r in rows):
            gbs = np.fromiter((r.gb for r in rows), float, n)
            med = float(np.median(gbs))
            if med > 0:
                exposure = np.maximum(gbs, IDLE_FLOOR * med)
                unit = "GB"
        blocks.append(_CountBlock(key, order, rows, counts, exposure, stats.count_test(counts, exposure), unit))
    return blocks, small, judged_families, untested


@dataclass(frozen=True)
class PortGroup:
    """One comparable group of error counters as the fleet test sees it: its members (host, component) in order,
    their counts and exposures (seconds, or GB moved for traffic-scaled errors) and the robust subset the fleet
    baseline is estimated from (apparent outliers left out)."""

    metric: str
    order: tuple[tuple[str, str], ...]
    counts: np.ndarray
    exposure: np.ndarray
    subset: np.ndarray
    intervals: np.ndarray  # seconds, per member


def port_groups(hosts_samples: Mapping[str, Iterable[MetricSample]], *, min_group: int = 8,
                intervals: Mapping[str, float] | None = None, prepared: FleetGroups | None = None,
                ) -> list[PortGroup]:
    """Every judged group of error counters in which something moved: the per-port evidence the shared-component
    test (analysis.topology.port_switch_tests) compares under one switch with the fleet outside it. Same groups,
    exposures and robust subset as fleet_findings."""
    prepared = prepared or fleet_groups(hosts_samples, min_group=min_group, intervals=intervals)
    return [PortGroup(b.key.metric, tuple(b.order), b.counts, b.exposure, b.test.subset,
                      np.fromiter((r.interval for r in b.rows), float, b.n)) for b in prepared.blocks]


def _finding(host: str, component: str, found: list[_Hit], efa: float) -> Finding:
    evidence: list[Evidence] = []
    best_q = found[0].q
    severity = Severity.MAJOR
    for q, _p, (_fam, metric, _cls), t, ct, unit, _n, i in found:
        rate = t.count / t.exposure
        ratio = rate / ct.rate
        if q < CRITICAL_Q and ratio > CRITICAL_RATIO:
            severity = Severity.CRITICAL
        s = t.sample
        evidence.append(Evidence(metric=f"{metric}.delta", value=t.count, unit=s.unit,
                                 baseline=_sig(float(ct.expected[i])), source=s.source, snapshot=1))
        evidence.append(Evidence(metric=f"{metric}.rate", value=_sig(rate), unit=f"{s.unit}/{unit}",
                                 baseline=_sig(ct.rate), source=s.source, snapshot=1))
        evidence.append(Evidence(metric=f"{metric}.q_value", value=_sig(q), unit="probability", baseline=None))
    q0, _p0, (family, metric, cls), t, ct, unit, n, _i = found[0]
    evidence.append(Evidence(metric="fleet.comparable_components", value=n, unit="components"))
    if cls:
        evidence.append(Evidence(metric="fleet.comparable_class", value=cls, unit="class"))
    evidence.append(Evidence(metric="fleet.expected_false_alarms", value=_sig(efa), unit="findings"))
    rate = t.count / t.exposure
    ratio = rate / ct.rate
    moved = f" ({_fmt(t.gb)} GB moved)" if unit == "GB" and t.gb is not None else ""
    more = f"; {len(found) - 1} more error counter(s) also stand out" if len(found) > 1 else ""
    summary = (
        f"{component} on {host} logged {_fmt(t.count)} {metric} in {_fmt(t.interval)} s{moved}, "
        f"{_fmt(ratio)}x the fleet baseline of {_fmt(ct.rate)}/{unit} across {n:,} "
        f"{f'{cls} ' if cls else ''}{_NOUN.get(family, 'components')}"
        f" (q = {_fmt_q(q0)}){more}"
    )
    return Finding(kind="fleet-outlier", severity=severity, host=host, component=component, summary=summary,
                   evidence=evidence, confidence=_sig(1.0 - best_q, 6), q_value=_sig(best_q))
