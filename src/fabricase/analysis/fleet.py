"""Fleet outliers: error counters compared across every comparable component of a capture.

Comparable: the same component family (the part of the component before ':', e.g. `rdma`, `netdev`,
`nvlink`) and the same metric. Each component's increase is tested against the rest of the fleet with an exact
upper-tail test (stats.count_test), and the false discovery rate is controlled with Benjamini-Hochberg across
ALL tests of the capture. Method and limits: docs/fleet-statistics.md.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from fabricase.analysis import stats
from fabricase.analysis.fleet_continuous import (
    CONTINUOUS_FLOORS,
    CONTINUOUS_PREFIXES,
    CRITICAL_Q,
    CRITICAL_RATIO,
    Z_MIN,
    ContinuousHit,
    ContinuousTest,
    continuous_blocks,
    continuous_findings,
    is_continuous_metric,
    outlier_finding,
)  # fmt: skip
from fabricase.analysis.fleet_gather import (
    CLASS_METRICS,
    CLASS_NAMES,
    DELTA_OF,
    ERROR_TOKENS,
    EXCLUDE_TOKENS,
    IDLE_FLOOR,
    METRIC_OF,
    TRAFFIC_METRICS,
    TRAFFIC_SCALED_TOKENS,
    CountBlock,
    FleetCounters,
    GroupKey,
    count_blocks,
    gather_counters,
    group_of,
    is_error_metric,
    is_traffic_scaled,
    picker,
)  # fmt: skip
from fabricase.models import Evidence, Finding, MetricSample, Severity

__all__ = [
    "CLASS_METRICS",
    "CONTINUOUS_FLOORS",
    "CONTINUOUS_PREFIXES",
    "CRITICAL_Q",
    "CRITICAL_RATIO",
    "ERROR_TOKENS",
    "EXCLUDE_TOKENS",
    "IDLE_FLOOR",
    "MIN_EVENTS",
    "TRAFFIC_METRICS",
    "TRAFFIC_SCALED_TOKENS",
    "Z_MIN",
    "FleetGroups",
    "GroupKey",
    "PortGroup",
    "fleet_findings",
    "fleet_groups",
    "fleet_inputs",
    "is_continuous_metric",
    "is_error_metric",
    "is_traffic_scaled",
    "judgeable_families",
    "port_groups",
]

MIN_EVENTS = 5  # events in the interval before one component can be called an outlier


class _Plan(NamedTuple):
    """What fleet_inputs keeps of a list of samples with these metrics (what it keeps depends on nothing else but
    the deltas): the candidates, and among them the class gauges (kept with or without a delta) and the raw
    counters (left out when a kept normalized sample has their component and source)."""

    pick: Callable[[list], tuple]
    always: tuple[int, ...]
    raw: tuple[int, ...]
    normalized: tuple[bool, ...]  # per candidate: not a raw counter


@functools.lru_cache(maxsize=256)  # a fleet's hosts repeat a handful of metric lists
def _plan(metrics: tuple[str, ...]) -> _Plan:
    """Class gauges always; traffic, error and continuous counters when they have a delta; nothing else."""
    keep = [i for i, m in enumerate(metrics) if m in CLASS_NAMES or m in TRAFFIC_METRICS or is_error_metric(m)
            or is_continuous_metric(m)]
    raw = tuple(metrics[i].startswith("raw:") for i in keep)
    return _Plan(picker(tuple(keep)), tuple(j for j, i in enumerate(keep) if metrics[i] in CLASS_NAMES),
                 tuple(j for j, r in enumerate(raw) if r), tuple(not r for r in raw))


_COMPONENT_SOURCE = operator.attrgetter("component", "source")


def fleet_inputs(samples: Iterable[MetricSample]) -> list[MetricSample]:
    """The samples fleet statistics read: error and traffic counters that moved, or could have, and the gauges
    that make components comparable (CLASS_METRICS). A raw counter already present under its normalized name
    (same component, same source) is left out: one counter is one test, or Benjamini-Hochberg would pay twice
    for it and the evidence would say it twice. The metrics' plan is cached; a host's own work is C-level maps
    over its samples and a look at its raw counters."""
    samples = samples if isinstance(samples, list | tuple) else list(samples)
    plan = _plan(tuple(map(METRIC_OF, samples)))
    candidates = plan.pick(samples)
    keep = list(map(operator.is_not, map(DELTA_OF, candidates), itertools.repeat(None)))
    for j in plan.always:
        keep[j] = True
    if plan.raw:
        normalized = set(map(_COMPONENT_SOURCE, itertools.compress(candidates, map(operator.and_, keep,
                                                                                   plan.normalized))))
        for j in plan.raw:
            if keep[j] and _COMPONENT_SOURCE(candidates[j]) in normalized:
                keep[j] = False
    return list(itertools.compress(candidates, keep))


def judgeable_families(hosts_samples: Mapping[str, Iterable[MetricSample]], min_group: int = 8) -> set[str]:
    """Component families (`rdma`, `netdev`, ...) with at least `min_group` components carrying error counters:
    there, a counter that rose without standing out from the fleet is background, not a fault."""
    members: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for host, samples in hosts_samples.items():
        for s in samples:
            if s.delta is not None and group_of(s.component, s.metric) is not None:
                members[s.component.split(":", 1)[0]].add((host, s.component))
    return {family for family, comps in members.items() if len(comps) >= min_group}


@dataclass
class FleetGroups:
    """The comparable groups of a capture and their count tests, gathered once: fleet_findings and port_groups
    (the shared-component test) read the same ones, and gathering walks every sample of the fleet."""

    continuous: dict[GroupKey, dict[tuple[str, str], MetricSample]]
    blocks: list[CountBlock]
    small: list[tuple[str, int]]
    judged_families: set[str]
    untested: int
    min_group: int
    judgeable: set[str]  # judgeable_families of the same samples and min_group
    counters: FleetCounters | None = None  # the gathered columns (analysis.power reads them again)


def fleet_groups(hosts_samples: Mapping[str, Iterable[MetricSample]], *, min_group: int = 8,
                 intervals: Mapping[str, float] | None = None, inputs: bool = False) -> FleetGroups:
    """Gather and test the capture's comparable groups once, for fleet_findings(prepared=) and
    port_groups(prepared=). `inputs`: the samples are fleet_inputs' output already (analyze's hosts), so they
    are not filtered again (fleet_inputs of its own output is that output)."""
    hosts_samples = {h: v if inputs else fleet_inputs(v) for h, v in sorted(hosts_samples.items())}
    counters, continuous = gather_counters(hosts_samples, intervals)  # type: ignore[arg-type]
    blocks, small, judged_families, untested, members = count_blocks(counters, min_group)
    judgeable = {family for family, n in members.items() if n >= min_group}
    return FleetGroups(continuous, blocks, small, judged_families, untested, min_group, judgeable, counters)


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
        hits: dict[tuple[str, str], list[ContinuousHit]] = defaultdict(list)
        offset = 0
        for b in blocks:
            n = b.n
            q = all_q[offset:offset + n]
            # A handful of events is not enough against one component, however small the fleet's baseline:
            # real fleets are more heterogeneous than any fitted model, and a tiny baseline makes 2 events
            # look impossible. MIN_EVENTS guards against that over-confidence.
            for i in np.flatnonzero((q <= alpha) & (b.counts >= MIN_EVENTS)):
                host, component = b.order[i]
                t = ContinuousTest(host, component, b.samples[i], float(b.counts[i]), float(b.intervals[i]), b.gbs[i])
                t.exposure = float(b.exposure[i])
                hits[(t.host, t.component)].append(ContinuousHit(float(q[i]), float(b.test.pvalues[i]), b.key, t,
                                                                 b.test, b.unit, n, int(i)))
            offset += n
        for (host, component), found in sorted(hits.items()):
            found.sort(key=lambda h: (h.q, h.key))
            findings.append(outlier_finding(host, component, found, efa))
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


@dataclass(frozen=True)
class PortGroup:
    """One comparable group of error counters as the fleet test sees it: its members (host, component) in order,
    their counts and exposures (seconds, or GB moved for traffic-scaled errors) and the robust subset the fleet
    baseline is estimated from (apparent outliers left out), and each member's fleet-wide p-value."""

    metric: str
    order: tuple[tuple[str, str], ...]
    counts: np.ndarray
    exposure: np.ndarray
    subset: np.ndarray
    intervals: np.ndarray  # seconds, per member
    pvalues: np.ndarray | None = None  # the fleet test's, per member (None: the port test does not calibrate)


def port_groups(hosts_samples: Mapping[str, Iterable[MetricSample]], *, min_group: int = 8,
                intervals: Mapping[str, float] | None = None, prepared: FleetGroups | None = None,
                ) -> list[PortGroup]:
    """Every judged group of error counters in which something moved: the per-port evidence the shared-component
    test (analysis.topology_ports.port_switch_tests) compares under one switch with the fleet outside it. Same groups,
    exposures and robust subset as fleet_findings."""
    prepared = prepared or fleet_groups(hosts_samples, min_group=min_group, intervals=intervals)
    return [PortGroup(b.key.metric, tuple(b.order), b.counts, b.exposure, b.test.subset, b.intervals,
                      b.test.pvalues) for b in prepared.blocks]
