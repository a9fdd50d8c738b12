"""The fleet step's vocabulary and its gathering: which counters are errors, what makes components comparable,
and the capture's error counters gathered into numpy columns by comparable group (one pass over the samples,
per-layout work cached), with the count tests of the groups where something moved. Split from analysis.fleet,
which tests and reports them and re-exports these names; method: docs/fleet-statistics.md."""

from __future__ import annotations

import functools
import math
import operator
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from fabricase.analysis import stats
from fabricase.analysis.fleet_continuous import is_continuous_metric
from fabricase.models import MetricSample

__all__ = [
    "CLASS_METRICS",
    "CLASS_NAMES",
    "DELTA_OF",
    "ERROR_TOKENS",
    "EXCLUDE_TOKENS",
    "IDLE_FLOOR",
    "TRAFFIC_METRICS",
    "TRAFFIC_SCALED_TOKENS",
    "METRIC_OF",
    "CountBlock",
    "GroupKey",
    "SampleLayout",
    "classes_of",
    "count_blocks",
    "first_reads",
    "FleetCounters",
    "gather_counters",
    "group_of",
    "host_intervals",
    "is_error_metric",
    "is_traffic_scaled",
    "layout_of",
    "picker",
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


def is_error_metric(metric: str) -> bool:
    m = metric.lower()
    return any(t in m for t in ERROR_TOKENS) and not any(t in m for t in EXCLUDE_TOKENS)


def is_traffic_scaled(metric: str) -> bool:
    m = metric.lower()
    return any(t in m for t in TRAFFIC_SCALED_TOKENS)


def _family(component: str) -> str:
    return component.split(":", 1)[0]


def host_intervals(hosts_samples: Mapping[str, list[MetricSample]],
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


@dataclass
class CountBlock:
    """One comparable group's count test: members in order, their counts and exposures, the test and its unit."""

    key: GroupKey
    order: list[tuple[str, str]]
    samples: list[MetricSample]
    intervals: np.ndarray  # seconds
    gbs: list[float | None]  # GB moved (None: unknown)
    counts: np.ndarray
    exposure: np.ndarray
    test: stats.CountTest
    unit: str  # the exposure's unit: "s", or "GB" for traffic-scaled errors

    @property
    def n(self) -> int:
        return len(self.order)


@functools.lru_cache(maxsize=4096)
def group_of(component: str, metric: str) -> tuple[str, str] | None:
    return (_family(component), metric) if is_error_metric(metric) else None


# What makes two components comparable beyond their family: the gauges that say vendor, link layer (role) and
# speed. A 400 Gb/s ConnectX InfiniBand port is not judged against a 100 Gb/s EFA port, nor a 25 GbE management
# NIC against a 400 GbE RoCE one.
CLASS_METRICS: dict[str, tuple[str, ...]] = {
    "rdma": ("port.vendor", "link.layer", "link.speed_gbps"),
    "netdev": ("speed",),
}
_CLASS_UNITS = {"link.speed_gbps": "Gb/s", "speed": "Mb/s"}
CLASS_NAMES = frozenset(m for metrics in CLASS_METRICS.values() for m in metrics)


_COMPONENT, METRIC_OF = operator.attrgetter("component"), operator.attrgetter("metric")
_NOTE_VALUE = operator.attrgetter("note", "value")
DELTA_OF, _RATE = operator.attrgetter("delta"), operator.attrgetter("rate")


class SampleLayout(NamedTuple):
    """Where the samples of one layout (the same components and metrics in the same order) sit, by what the fleet
    step reads of them, with their names: a fleet's hosts share a handful of layouts, so this is worked out once
    per layout rather than once per sample."""

    err: tuple[int, ...]  # error counters: positions and (component, family, metric)
    err_names: tuple[tuple[str, str, str], ...]
    dups: bool  # an error counter's (component, metric) repeats: "the first wins" then needs a pass of its own
    members: tuple[tuple[str, int], ...]  # (family, number of components with error counters)
    cont: tuple[int, ...]  # continuous rates: positions and (component, family, metric)
    cont_names: tuple[tuple[str, str, str], ...]
    traffic: tuple[tuple[int, str], ...]  # traffic counters: (position, component)
    cls: tuple[tuple[int, str, str, str], ...]  # class gauges of their family: (position, component, metric, unit)


@functools.lru_cache(maxsize=256)
def _layout(comps: tuple[str, ...], metrics: tuple[str, ...]) -> SampleLayout:
    err, cont, traffic, cls = [], [], [], []
    for i, (comp, metric) in enumerate(zip(comps, metrics, strict=True)):
        family = _family(comp)
        if group_of(comp, metric) is not None:
            err.append(i)
        elif is_continuous_metric(metric):
            cont.append(i)
        if metric in TRAFFIC_METRICS:
            traffic.append((i, comp))
        if metric in CLASS_NAMES and metric in CLASS_METRICS.get(family, ()):
            cls.append((i, comp, metric, _CLASS_UNITS.get(metric, "")))
    pairs = [(comps[i], metrics[i]) for i in err]
    members: dict[str, set[str]] = defaultdict(set)
    for comp, _metric in pairs:
        members[_family(comp)].add(comp)
    return SampleLayout(tuple(err), tuple((c, _family(c), m) for c, m in pairs), len(set(pairs)) < len(pairs),
                   tuple((f, len(c)) for f, c in members.items()), tuple(cont),
                   tuple((comps[i], _family(comps[i]), metrics[i]) for i in cont), tuple(traffic), tuple(cls))


def layout_of(samples: list[MetricSample]) -> SampleLayout:
    return _layout(tuple(map(_COMPONENT, samples)), tuple(map(METRIC_OF, samples)))


def _parts(samples: list[MetricSample], lay: SampleLayout) -> tuple[str | None, ...]:
    """What each class gauge of a host says (its note, else its value and unit; None: nothing): with the layout,
    all that makes the host's classes."""
    return tuple(note if note else None if value is None else f"{value:g} {unit}".rstrip()
                 for (note, value), unit in ((_NOTE_VALUE(samples[i]), u) for i, _c, _m, u in lay.cls))


def _class_strings(lay: SampleLayout, parts: tuple[str | None, ...]) -> dict[str, str]:
    """component -> its comparable class, from what its class gauges say."""
    by_comp: dict[str, dict[str, str]] = defaultdict(dict)
    for (_i, comp, metric, _unit), part in zip(lay.cls, parts, strict=True):
        if part is not None:
            by_comp[comp][metric] = part
    return {comp: " ".join(p[m] for m in CLASS_METRICS[_family(comp)] if m in p) for comp, p in by_comp.items()}


def classes_of(samples: list[MetricSample], lay: SampleLayout) -> dict[str, str]:
    """component -> its comparable class, for a host's samples and their layout_of (the fleet step and the
    switch-power estimate group components by it)."""
    return _class_strings(lay, _parts(samples, lay))


def _classes(samples: list[MetricSample]) -> dict[str, str]:
    """component -> its comparable class ("mlx5 InfiniBand 400 Gb/s"; "" when nothing says)."""
    return classes_of(samples, layout_of(samples))


class FleetCounters(NamedTuple):
    """The fleet's error counters, as columns (one row per sample, hosts in order), names by number in hosts,
    comps and keys: filtering, counting and ordering them is numpy's work, not a loop's."""

    samples: list[MetricSample]
    host: np.ndarray  # index into hosts
    comp: np.ndarray  # index into comps
    group: np.ndarray  # index into keys
    delta: np.ndarray  # NaN where None (see known)
    known: np.ndarray  # the delta is not None
    interval: np.ndarray  # seconds: delta / rate, else the host's interval; NaN when neither
    hosts: list[str]
    comps: list[str]
    keys: list[GroupKey]
    traffic: list[dict[str, float]]  # per host: bytes moved by component
    dups: bool
    members: dict[str, int]  # by family, the (host, component) with error counters (when every delta is known)
    host_interval: dict[str, float]  # host_intervals: each host's snapshot interval, where known


def gather_counters(hosts_samples: Mapping[str, list[MetricSample]], intervals: Mapping[str, float] | None,
            ) -> tuple[FleetCounters, dict[GroupKey, dict[tuple[str, str], MetricSample]]]:
    """The capture's error counters (columns) and continuous rates by comparable group. Per host, the work is
    a cached layout's, a few C-level maps and the handful of class gauges, traffic counters and rates."""
    host_interval = host_intervals(hosts_samples, intervals)
    gid: dict[GroupKey, int] = {}
    cid: dict[str, int] = {}
    by_layout: dict[int, tuple[SampleLayout, np.ndarray, Callable]] = {}  # id(layout) -> (layout, comp numbers, rows)
    by_class: dict[tuple[int, tuple], tuple[np.ndarray, list[GroupKey]]] = {}
    continuous: dict[GroupKey, dict[tuple[str, str], MetricSample]] = {}
    rows: list[MetricSample] = []
    groups: list[np.ndarray] = []
    comps: list[np.ndarray] = []
    per_host: list[int] = []
    traffic_by_host: list[dict[str, float]] = []
    members: dict[str, int] = defaultdict(int)
    dups = False
    for host, samples in hosts_samples.items():
        lay = layout_of(samples)
        numbered = by_layout.get(id(lay))
        if numbered is None or numbered[0] is not lay:
            numbered = by_layout[id(lay)] = (lay, np.fromiter(
                (cid.setdefault(c, len(cid)) for c, _f, _m in lay.err_names), np.intp, len(lay.err)), picker(lay.err))
        parts = _parts(samples, lay)
        classed = by_class.get((id(lay), parts))
        if classed is None:
            cls = _class_strings(lay, parts)
            classed = by_class[(id(lay), parts)] = (
                np.fromiter((gid.setdefault(GroupKey(f, m, cls.get(c, "")), len(gid)) for c, f, m in lay.err_names),
                            np.intp, len(lay.err)),
                [GroupKey(f, m, cls.get(c, "")) for c, f, m in lay.cont_names])
        rows += numbered[2](samples)
        groups.append(classed[0])
        comps.append(numbered[1])
        per_host.append(len(lay.err))
        dups = dups or lay.dups
        for family, n in lay.members:
            members[family] += n
        traffic: dict[str, float] = {}
        for i, comp in lay.traffic:
            if (delta := samples[i].delta) is not None:
                traffic[comp] = traffic.get(comp, 0.0) + delta
        traffic_by_host.append(traffic)
        for i, ckey, (comp, _f, _m) in zip(lay.cont, classed[1], lay.cont_names, strict=True):
            s = samples[i]
            if s.delta is not None and not s.delta < 0 and s.rate is not None:
                continuous.setdefault(ckey, {}).setdefault((host, comp), s)
    hosts = list(hosts_samples)
    host = np.repeat(np.arange(len(hosts)), per_host)
    delta, known, interval = _intervals(rows, host, np.array([host_interval.get(h, math.nan) for h in hosts], float))
    return FleetCounters(rows, host, _concat(comps), _concat(groups), delta, known, interval, hosts, list(cid),
                     list(gid), traffic_by_host, dups, dict(members), host_interval), continuous


def picker(positions: tuple[int, ...]) -> Callable[[list], tuple]:
    """The items at `positions`, as a tuple, in one C call (itemgetter returns a bare item for one position)."""
    if len(positions) > 1:
        return operator.itemgetter(*positions)
    return (lambda items: (items[positions[0]],)) if positions else (lambda items: ())


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, np.intp)


def _intervals(rows: list[MetricSample], host: np.ndarray,
               default: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's delta, whether it has one (None is not NaN) and its interval: delta / rate when both are
    positive, else its host's (NaN when none)."""
    delta = np.array(list(map(DELTA_OF, rows)), float)
    known = ~np.isnan(delta)
    if not known.all():  # only a delta of None is left out; one of NaN goes on as it always did
        known = np.fromiter((s.delta is not None for s in rows), bool, len(rows))
    interval = default[host]
    moved = np.flatnonzero(delta > 0)  # a rate is read only where it can give the interval
    rate = np.array([rows[i].rate for i in moved.tolist()], float)
    with np.errstate(divide="ignore", invalid="ignore"):
        direct = rate > 0
        interval[moved[direct]] = delta[moved[direct]] / rate[direct]
    return delta, known, interval


def first_reads(c: FleetCounters, rows: np.ndarray) -> np.ndarray:
    """`rows` (positions in c, ascending) less the later reads of a counter read from two sources: the first row
    of each (host, component, group) wins."""
    if not c.dups:
        return rows
    place = (c.group[rows] * len(c.hosts) + c.host[rows]) * len(c.comps) + c.comp[rows]
    return np.sort(rows[np.unique(place, return_index=True)[1]])


def count_blocks(c: FleetCounters, min_group: int,
                  ) -> tuple[list[CountBlock], list[tuple[str, int]], set[str], int, dict[str, int]]:
    """Each group large enough to judge, tested: (blocks, small groups as (family, +-n), judged families, number
    of components in judged groups where nothing moved, and by family the number of components with error
    counters). A group is sized and checked with bincounts; only one where something moved is ordered."""
    with np.errstate(invalid="ignore"):
        ok = first_reads(c, np.flatnonzero(c.known & ~(c.delta < 0) & (c.interval > 0)))
    group, delta = c.group[ok], c.delta[ok]
    size = np.bincount(group, minlength=len(c.keys)).tolist()
    with np.errstate(invalid="ignore"):
        positive = np.bincount(group[delta > 0], minlength=len(c.keys)).tolist()
        moved = np.bincount(group[np.rint(delta) != 0], minlength=len(c.keys)).tolist()  # NaN and inf too
    small: list[tuple[str, int]] = []
    judged_families: set[str] = set()
    untested = 0
    blocks: list[CountBlock] = []
    comp_rank = None
    for g in sorted(range(len(c.keys)), key=c.keys.__getitem__):
        key, n = c.keys[g], size[g]
        if n == 0:
            continue
        if n < min_group:
            # a small group with nothing to judge is reported only when nothing at all could be judged
            small.append((key.family, n if positive[g] else -n))
            continue
        judged_families.add(key.family)
        if not moved[g]:
            untested += n  # every p-value is 1; they still count in BH's number of tests
            continue
        sel = ok[group == g]
        comp_rank = _ranks(c.comps) if comp_rank is None else comp_rank
        sel = sel[np.lexsort((comp_rank[c.comp[sel]], c.host[sel]))]  # by (host, component)
        # round() as before: it raises on NaN and infinity, where numpy's rint would not
        counts = np.rint(c.delta[sel])
        if not np.isfinite(counts).all():
            counts = np.array([round(d) for d in c.delta[sel].tolist()], float)
        blocks.append(_count_block(c, key, sel, counts))
    return blocks, small, judged_families, untested, _family_members(c)


def _count_block(c: FleetCounters, key: GroupKey, sel: np.ndarray, counts: np.ndarray) -> CountBlock:
    """One judged group where something moved: its members by name, exposures and count test."""
    where = list(zip(c.host[sel].tolist(), c.comp[sel].tolist(), strict=True))
    order = [(c.hosts[h], c.comps[k]) for h, k in where]
    gbs = [None if (gb := c.traffic[h].get(c.comps[k])) is None else gb / 1e9 for h, k in where]
    intervals = c.interval[sel]
    exposure, unit = intervals, "s"
    if is_traffic_scaled(key.metric) and all(gb is not None for gb in gbs):
        gb_moved = np.fromiter(gbs, float, len(gbs))
        med = float(np.median(gb_moved))
        if med > 0:
            exposure, unit = np.maximum(gb_moved, IDLE_FLOOR * med), "GB"
    return CountBlock(key, order, [c.samples[i] for i in sel.tolist()], intervals, gbs, counts, exposure,
                       stats.count_test(counts, exposure), unit)


def _ranks(names: list) -> np.ndarray:
    """Each name's place in sorted order, by its number."""
    out = np.empty(len(names), np.intp)
    out[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    return out


def _family_members(c: FleetCounters) -> dict[str, int]:
    """By family, the number of (host, component) with some error counter that has a delta: the layouts' sums
    when every delta is known (always, for fleet_inputs' samples), else counted."""
    if c.known.all():
        return c.members
    families = sorted({k.family for k in c.keys})
    number = {f: i for i, f in enumerate(families)}
    family = np.array([number[k.family] for k in c.keys], np.intp)[c.group[c.known]]
    place = (family * len(c.hosts) + c.host[c.known]) * len(c.comps) + c.comp[c.known]
    per_family = np.bincount(np.unique(place) // (len(c.hosts) * len(c.comps)), minlength=len(families))
    return {f: n for f, n in zip(families, per_family.tolist(), strict=True) if n}
