"""Stated power: what a capture too short, or a fleet too small, could not tell from noise.

A clean report of a 3 s capture says less than a clean report of a 60 s one: fleet statistics
(analysis.fleet) flag a port only when its count over the interval clears the fleet's threshold, and a port
with a real but low error rate rarely logs that many events in 3 s. This module says, in the fabric engineer's
words, what stayed out of reach:

- **Detectable rate**, per component family (`rdma` ports, `netdev` interfaces, ...): the threshold count k* is
  the least count with at least `fleet.MIN_EVENTS` events and an exact Poisson tail P(X >= k* | background x
  interval) <= alpha / m, where alpha is the fleet's q threshold (0.01) and m the capture's number of count tests:
  for a lone outlier Benjamini-Hochberg's q is its p times m. The detectable rate is k* / interval, the rate whose
  expected count over the interval reaches the threshold (a port at that rate is flagged about half the time);
  below it a single port cannot be told from background. The family's statement takes its lowest rate over its
  counters and classes, so "below X" holds for every counter. Said only when the interval is shorter than
  ADVISED_INTERVAL_S, with the rate that interval would reach.
- **Fleet size**: a family with error counters none of whose comparable groups (same family, class and counter)
  reach `min_group` components was not compared at all; the statement says how many it had and how many hosts
  would give enough.

The background is the pooled rate (sum of counts + 0.5) / (sum of seconds) of the whole group, not the fleet's
leave-one-out, trimmed baseline, and the continuous tests' p-values are left out of m: both make k* a little
lower than the fleet's, so the stated rate is never above what the fleet statistics could detect. Pure.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from fabricase.analysis.fleet import MIN_EVENTS, FleetGroups, fleet_inputs
from fabricase.analysis.fleet_gather import FleetCounters, first_reads, gather_counters, host_intervals
from fabricase.analysis.stats import scipy_special
from fabricase.models import MetricSample

__all__ = [
    "ADVISED_INTERVAL_S",
    "DetectableRate",
    "FleetSize",
    "PowerStatement",
    "detectable_rates",
    "fleet_sizes",
    "fmt_rate",
    "hosts_power",
    "power_sentences",
    "power_short",
    "power_statements",
    "threshold_count",
]

ADVISED_INTERVAL_S = 60.0  # `--interval 60`: a port at a few hundred errors an hour shows in one capture
_ALPHA = 0.01  # fleet_findings' default q threshold
_MIN_GROUP = 8  # fleet_findings' default least comparable components
_NOUN = {"rdma": ("RDMA port", "RDMA ports"), "netdev": ("interface", "interfaces"),
         "nvlink": ("NVLink", "NVLinks"), "pcie": ("PCIe device", "PCIe devices"), "gpu": ("GPU", "GPUs")}


def _noun(family: str, n: int = 1) -> str:
    one, many = _NOUN.get(family, ("component", "components"))
    return one if n == 1 else many


def _round_down(x: float, digits: int = 2) -> float:
    """`x` cut (never rounded up) to `digits` significant digits: "below X" must stay true."""
    if x <= 0 or not math.isfinite(x):
        return x
    scale = 10 ** (math.floor(math.log10(x)) - digits + 1)
    return math.floor(x / scale + 1e-9) * scale


def fmt_rate(per_s: float) -> str:
    """A rate as a fabric engineer writes it: `500/h`, `6,000/h`, `12/s`; per hour below 100,000/h."""
    per_h = per_s * 3600
    if per_h < 100_000:
        value, unit = _round_down(per_h), "h"
    else:
        value, unit = _round_down(per_s), "s"
    return f"{value:,.0f}/{unit}" if value >= 10 else f"{value:.2g}/{unit}"


def fmt_seconds(s: float) -> str:
    return f"{s:,.0f} s" if s >= 10 else f"{s:.2g} s"


def threshold_count(background_per_s: float, interval_s: float, tests: int, *, alpha: float = _ALPHA,
                    min_events: int = MIN_EVENTS) -> int:
    """The least count one component must log over `interval_s` to be flagged among `tests` count tests: at
    least `min_events`, and Poisson P(X >= k | background x interval) <= alpha / tests (BH's q of a lone
    outlier)."""
    mu = max(background_per_s, 0.0) * interval_s
    cut = alpha / max(tests, 1)
    k = max(min_events, 1)
    pdtrc = scipy_special().pdtrc
    if pdtrc(k - 1, mu) <= cut:
        return k
    # The tail falls monotonically in k: double until below the cut, then bisect.
    hi = k * 2
    while pdtrc(hi - 1, mu) > cut:
        hi *= 2
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if pdtrc(mid - 1, mu) <= cut else (mid, hi)
    return hi


@dataclass(frozen=True)
class DetectableRate:
    """The lowest error rate one component of `family` can show over the capture's interval and still be told
    from background (`text` says it, with the rate ADVISED_INTERVAL_S would reach)."""

    family: str
    metric: str  # the counter with the lowest detectable rate
    cls: str  # its comparable class ("" when nothing says)
    interval_s: float  # the capture's (median) interval
    components: int  # comparable components in that counter's group
    tests: int  # count tests in the capture (BH's m)
    background_per_s: float  # the group's pooled rate
    threshold: int  # k*: the count it takes over the interval
    rate_per_s: float  # k* / interval
    advised_interval_s: float
    advised_rate_per_s: float  # the same at the advised interval
    kind: str = "detectable-rate"
    check: str = "fleet"  # the ruled-out check it qualifies (templates.ruled_out.CHECKS)

    @property
    def text(self) -> str:
        return (f"an error rate below {fmt_rate(self.rate_per_s)} on a single {_noun(self.family)} cannot be told "
                f"from background in a {fmt_seconds(self.interval_s)} interval: capture with "
                f"`--interval {self.advised_interval_s:g}` to see rates down to {fmt_rate(self.advised_rate_per_s)}")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "text": self.text}


@dataclass(frozen=True)
class FleetSize:
    """A component family with error counters that fleet statistics could not compare: too few of a class."""

    family: str
    hosts: int  # hosts in the capture
    components: int  # components in the family's largest comparable group
    per_host: int  # of those, the most on one host
    needed: int  # min_group
    hosts_needed: int  # hosts with `per_host` each that would reach `needed`
    cls: str = ""
    kind: str = "fleet-size"
    check: str = "fleet"

    @property
    def text(self) -> str:
        cls = f" {self.cls}" if self.cls else ""
        return (f"{self.hosts:,} host{'s' if self.hosts != 1 else ''}: fleet statistics need at least "
                f"{self.needed} comparable components; {self.components:,}{cls} "
                f"{_noun(self.family, self.components)} ({self.per_host:,} per host) are too few to tell a faulty "
                f"one from noise: that takes at least {self.hosts_needed:,} hosts")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "text": self.text}


PowerStatement = DetectableRate | FleetSize


def _families(rates: Sequence[DetectableRate]) -> str:
    nouns = [_noun(r.family) for r in rates]
    return nouns[0] if len(nouns) == 1 else f"{', '.join(nouns[:-1])} or {nouns[-1]}"


def _merged(rates: Sequence[DetectableRate]) -> tuple[DetectableRate, str]:
    """One statement for every family's detectable rate: the lowest rate (below it no family can tell), the
    highest rate the advised interval reaches (it reaches at least that everywhere), and the families' nouns."""
    low = min(rates, key=lambda r: (r.rate_per_s, r.family))
    high = max(r.advised_rate_per_s for r in rates)
    return DetectableRate(**{**asdict(low), "advised_rate_per_s": high}), _families(rates)


def power_sentences(statements: Sequence[PowerStatement]) -> list[str]:
    """The sentences a report or ticket prints: each fleet-size line, then one line for all detectable rates
    (families at one interval read the same; three near-identical lines would bury the point)."""
    sizes = [s.text for s in statements if isinstance(s, FleetSize)]
    rates = [s for s in statements if isinstance(s, DetectableRate)]
    if not rates:
        return sizes
    rate, nouns = _merged(rates)
    return [*sizes, rate.text.replace(f"a single {_noun(rate.family)}", f"a single {nouns}", 1)]


def power_short(statements: Sequence[PowerStatement]) -> list[str]:
    """The same in a terminal's few words, one line each at 80 columns: `6 hosts, 6 comparable RDMA ports:
    fleet statistics need 8`; `a port's errors below 3,600/h in 5 s; --interval 60 sees 360/h`."""
    out = [f"{s.hosts:,} host{'s' if s.hosts != 1 else ''}, {s.components:,} comparable "
           f"{_noun(s.family, s.components)}: fleet statistics need {s.needed}"
           for s in statements if isinstance(s, FleetSize)]
    rates = [s for s in statements if isinstance(s, DetectableRate)]
    if rates:
        rate, _ = _merged(rates)
        out.append(f"a port's errors below {fmt_rate(rate.rate_per_s)} in {fmt_seconds(rate.interval_s)}; "
                   f"--interval {rate.advised_interval_s:g} sees {fmt_rate(rate.advised_rate_per_s)}")
    return out


@dataclass
class _Group:
    counts: list[float]
    seconds: list[float]
    hosts: dict[str, int]  # host -> components of the group on it


def _groups(hosts_samples: Mapping[str, list[MetricSample]], intervals: Mapping[str, float] | None,
            gathered: FleetCounters | None = None) -> tuple[dict[tuple[str, str, str], _Group], dict[str, float]]:
    """(family, class, metric) -> counts, seconds and hosts of its components, as fleet_findings groups them
    (per-second exposure); and each host's interval. The fleet step's columns (gather_counters) are read: a
    counter with a delta of 0 or more, the first of its (host, component, metric), with an interval.
    `gathered`: those columns as the fleet step gathered them from these very samples, taken when they have
    the same hosts and host intervals, else gathered again."""
    c = gathered
    if c is None or c.hosts != list(hosts_samples) or c.host_interval != host_intervals(hosts_samples, intervals):
        c, _ = gather_counters(hosts_samples, intervals)
    with np.errstate(invalid="ignore"):
        ok = first_reads(c, np.flatnonzero(c.known & ~(c.delta < 0)))  # the first read with a delta wins
        ok = ok[c.interval[ok] > 0]
    if not len(ok):
        return {}, c.host_interval
    rows = ok[np.argsort(c.group[ok], kind="stable")]  # by group, each in the fleet's order
    group = c.group[rows]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    counts, seconds, hosts = np.round(c.delta[rows]).tolist(), c.interval[rows].tolist(), c.host[rows]
    groups: dict[tuple[str, str, str], _Group] = {}
    for start, end in zip(starts.tolist(), [*starts[1:].tolist(), len(rows)], strict=True):
        key = c.keys[int(group[start])]
        on = np.bincount(hosts[start:end])
        groups[(key.family, key.cls, key.metric)] = _Group(
            counts[start:end], seconds[start:end], {c.hosts[h]: int(on[h]) for h in np.flatnonzero(on).tolist()})
    return groups, c.host_interval


def detectable_rates(groups: Mapping[tuple[str, str, str], _Group], *, alpha: float = _ALPHA,
                     min_group: int = _MIN_GROUP, advised_interval_s: float = ADVISED_INTERVAL_S
                     ) -> list[DetectableRate]:
    """Per family, its lowest detectable rate over the judged groups (those of at least min_group components)."""
    judged = {k: g for k, g in groups.items() if len(g.counts) >= min_group}
    tests = sum(len(g.counts) for g in judged.values())
    best: dict[str, DetectableRate] = {}
    for (family, cls, metric), g in sorted(judged.items()):
        background = (sum(g.counts) + 0.5) / sum(g.seconds)
        interval = float(np.median(g.seconds))
        k = threshold_count(background, interval, tests, alpha=alpha)
        k_advised = threshold_count(background, advised_interval_s, tests, alpha=alpha)
        rate = DetectableRate(family, metric, cls, interval, len(g.counts), tests, background, k, k / interval,
                              advised_interval_s, k_advised / advised_interval_s)
        if family not in best or rate.rate_per_s < best[family].rate_per_s:
            best[family] = rate
    return [best[f] for f in sorted(best)]


def fleet_sizes(groups: Mapping[tuple[str, str, str], _Group], hosts: int, *,
                min_group: int = _MIN_GROUP) -> list[FleetSize]:
    """Families with error counters none of whose groups reach min_group components."""
    by_family: dict[str, list[tuple[tuple[str, str, str], _Group]]] = defaultdict(list)
    for key, g in groups.items():
        by_family[key[0]].append((key, g))
    out = []
    for family in sorted(by_family):
        members = by_family[family]
        if any(len(g.counts) >= min_group for _, g in members):
            continue
        (_, cls, _), g = max(members, key=lambda kg: (len(kg[1].counts), kg[0]))
        per_host = max(g.hosts.values())
        out.append(FleetSize(family, hosts, len(g.counts), per_host, min_group, math.ceil(min_group / per_host),
                             cls))
    return out


def power_statements(hosts_samples: Mapping[str, Iterable[MetricSample]], *,
                     intervals: Mapping[str, float] | None = None, alpha: float = _ALPHA,
                     min_group: int = _MIN_GROUP, advised_interval_s: float = ADVISED_INTERVAL_S,
                     prepared: FleetGroups | None = None) -> list[PowerStatement]:
    """What the capture could not rule out: the fleet-size lines, then the detectable rates of the families that
    were judged, the latter only when the capture's interval is shorter than `advised_interval_s`.

    hosts_samples: host -> its samples (analysis.analyze's samples_out, or host_samples: the selection fleet
    statistics read is made again, as they make it); intervals: host -> its snapshot interval, when known.
    prepared: the fleet step's groups of these very samples (analyze's fleet_out): the samples are then
    fleet_inputs' output already, and its columns are read rather than gathered again (1,024 HGX hosts: 0.4 s)."""
    samples = {h: v if prepared is not None else fleet_inputs(v)  # type: ignore[misc]
               for h, v in sorted(hosts_samples.items())}
    groups, host_interval = _groups(samples, intervals, prepared.counters if prepared is not None else None)
    if not groups:
        return []
    out: list[PowerStatement] = list(fleet_sizes(groups, len(samples), min_group=min_group))
    interval = float(np.median(list(host_interval.values()))) if host_interval else None
    if interval is not None and interval < advised_interval_s:
        out += detectable_rates(groups, alpha=alpha, min_group=min_group, advised_interval_s=advised_interval_s)
    return out


def hosts_power(hosts_samples: Mapping[str, Iterable[MetricSample]], hosts: Iterable[Any],
                prepared: FleetGroups | None = None) -> list[PowerStatement]:
    """power_statements over the hosts' own intervals where they are known (each host's `interval_s`, when a
    positive number): what the diagnosis states of a capture. `prepared` as power_statements takes it."""
    if not hosts_samples:
        return []
    intervals = {h.host: float(i) for h in hosts
                 if isinstance(i := getattr(h, "interval_s", None), (int, float)) and i > 0}
    return power_statements(hosts_samples, intervals=intervals, prepared=prepared)
