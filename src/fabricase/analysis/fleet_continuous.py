"""Fleet outliers of continuous measures (pause and congestion-signalling rates): robust z-scores of log(1 + rate)
within each comparable group, their one-sided p-values (tested with fleet.py's count tests under one
Benjamini-Hochberg), and the `congestion-outlier` findings; also the `fleet-outlier` finding of the count tests
and the number formatting both kinds of fleet finding share. Split from fleet.py, which gathers the groups and
tests them. Method and limits: docs/fleet-statistics.md.
"""

from __future__ import annotations

import math
import operator
from collections import defaultdict
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from fabricase.analysis import stats
from fabricase.models import Evidence, Finding, MetricSample, Severity

if TYPE_CHECKING:
    from fabricase.analysis.fleet import GroupKey

__all__ = ["CONTINUOUS_FLOORS", "CONTINUOUS_PREFIXES", "CRITICAL_Q", "CRITICAL_RATIO", "Z_MIN", "ContinuousHit",
           "ContinuousTest", "continuous_blocks", "continuous_findings", "is_continuous_metric", "outlier_finding"]

_RATE = operator.attrgetter("rate")
_NOUN = {"rdma": "ports", "netdev": "interfaces", "nvlink": "links", "pcie": "devices", "gpu": "GPUs"}


# Continuous measures judged with robust z-scores (median/MAD) instead of a count test: pause and congestion
# signalling rates. They are not faults by themselves; one port far above the fleet is (a PFC storm, a hotspot).
CONTINUOUS_PREFIXES: tuple[str, ...] = ("pause.", "pfc.", "cnp.", "ecn.")
# A robust z (of log(1 + rate)) below this is never reported, whatever its q: fleets are heavier-tailed than
# normal. 3.5 on the log scale is about 100x the fleet's median rate when the fleet spreads like real ones do.
Z_MIN = 3.5
# The least rate (per second) worth reporting, whatever the z: a quiet fleet makes a trickle look extreme, and
# congested but working RoCE fabrics pause a few percent of the time. Pause time: a tenth of the time paused (the
# pfc-storm rule's share). Pause frames: 1,000 a second (one 65,535-quanta pause lasts 84 us at 400 Gb/s, so a
# tenth of the time is about 1,200 frames a second). CNPs and ECN marks: 10,000 a second.
CONTINUOUS_FLOORS: tuple[tuple[str, float], ...] = (
    ("pfc.rx_pause_us", 100_000.0), ("pfc.tx_pause_us", 100_000.0), ("cnp.", 10_000.0), ("ecn.", 10_000.0),
    ("", 1_000.0),
)  # fmt: skip
# Severity by what stood out: time paused stalls the fabric (major); pause frames alone can be many short pauses
# (minor); CNPs and ECN marks are congestion signalling doing its job, context for the engineer (info).
_PAUSE_TIME = ("pfc.rx_pause_us", "pfc.tx_pause_us")
_SIGNALLING = ("cnp.", "ecn.")


# A count-test outlier is critical, not major, when its q is below CRITICAL_Q and its rate over CRITICAL_RATIO
# times the fleet's.
CRITICAL_Q = 1e-6
CRITICAL_RATIO = 100.0


def is_continuous_metric(metric: str) -> bool:
    return metric.startswith(CONTINUOUS_PREFIXES) and "storm" not in metric


def _floor(metric: str) -> float:
    return next(floor for prefix, floor in CONTINUOUS_FLOORS if metric.startswith(prefix))


def _sig(x: float, digits: int = 4) -> float:
    """Rounded to `digits` significant digits: stable, readable JSON."""
    if x == 0 or not math.isfinite(x):
        return float(x)
    return float(f"{x:.{digits - 1}e}")


def _fmt(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 0.01:
        return f"{x:.3g}"
    return f"{x:.2g}"


def _fmt_q(q: float) -> str:
    return f"{q:.1g}" if q < 0.001 else f"{q:.2g}"


class _ZBlock:
    """One group of a continuous measure: its members in order, their rates, robust z and one-sided p."""

    __slots__ = ("key", "median", "order", "p", "rates", "samples", "z")

    def __init__(self, key: GroupKey, order: list[tuple[str, str]], samples: list[MetricSample]):
        self.key, self.order, self.samples = key, order, samples
        self.rates = np.fromiter(map(_RATE, samples), float, len(samples))
        # On a log scale: rates span orders of magnitude across a healthy fleet (a heavy right tail), and a
        # linear MAD would make every busy port an outlier.
        self.z = stats.robust_z(np.log1p(np.maximum(self.rates, 0.0)))
        self.p = stats.normal_upper_tail(self.z)
        self.median = float(np.median(self.rates))


def continuous_blocks(continuous: dict, min_group: int) -> list[_ZBlock]:
    out = []
    for key in sorted(continuous):
        members = continuous[key]
        if len(members) >= min_group:
            order = sorted(members)
            out.append(_ZBlock(key, order, [members[k] for k in order]))
    return out


class _ZHit(NamedTuple):
    q: float
    block: _ZBlock
    index: int


def continuous_findings(zblocks: list[_ZBlock], q_all: np.ndarray, alpha: float, efa: float) -> list[Finding]:
    """`congestion-outlier` findings: a pause or congestion-signalling rate far above the comparable fleet."""
    hits: dict[tuple[str, str], list[_ZHit]] = defaultdict(list)
    offset = 0
    for b in zblocks:
        n = len(b.order)
        q = q_all[offset:offset + n]
        floor = _floor(b.key[1])
        for i in np.flatnonzero((q <= alpha) & (b.z >= Z_MIN) & (b.rates >= floor)):
            hits[b.order[i]].append(_ZHit(float(q[i]), b, int(i)))
        offset += n
    findings = []
    for (host, component), found in sorted(hits.items()):
        found.sort(key=lambda h: (h.q, h.block.key))
        evidence: list[Evidence] = []
        for q, b, i in found:
            s = b.samples[i]
            evidence += [
                Evidence(f"{b.key[1]}.rate", _sig(float(b.rates[i])), f"{s.unit}/s", baseline=_sig(b.median),
                         source=s.source, snapshot=1),
                Evidence(f"{b.key[1]}.robust_z", _sig(float(b.z[i])), "z", baseline=0),
                Evidence(f"{b.key[1]}.q_value", _sig(q), "probability"),
            ]
        q0, b, i = found[0]
        family, metric, cls = b.key
        n = len(b.order)
        evidence.append(Evidence("fleet.comparable_components", n, "components"))
        if cls:
            evidence.append(Evidence("fleet.comparable_class", cls, "class"))
        evidence.append(Evidence("fleet.expected_false_alarms", _sig(efa), "findings"))
        names = [h.block.key.metric for h in found]
        if any(m.startswith(_PAUSE_TIME) for m in names):
            severity = Severity.MAJOR
            why = "; a port paused this long stalls every flow through its switch (PFC storm)"
        elif all(m.startswith(_SIGNALLING) for m in names):
            severity = Severity.INFO
            why = "; a congestion hotspot: congestion control is slowing the flows through this port"
        else:
            severity = Severity.MINOR
            why = "; many pause frames, though not for long: watch for a storm"
        more = f"; {len(found) - 1} more rate(s) also stand out" if len(found) > 1 else ""
        summary = (
            f"{component} on {host}: {metric} at {_fmt(float(b.rates[i]))}/s against a fleet median of "
            f"{_fmt(b.median)}/s across {n:,} {f'{cls} ' if cls else ''}{_NOUN.get(family, 'components')} "
            f"(robust z = {_fmt(float(b.z[i]))}, q = {_fmt_q(q0)}){more}{why}"
        )
        findings.append(Finding(kind="congestion-outlier", severity=severity,
                                host=host, component=component, summary=summary, evidence=evidence,
                                confidence=_sig(1.0 - q0, 6), q_value=_sig(q0)))
    return findings


class ContinuousHit(NamedTuple):
    """One component's counter that stood out: its q and p, its group, the test and where it sits in the block."""

    q: float
    p: float
    key: GroupKey
    test: ContinuousTest
    count_test: stats.CountTest
    unit: str
    n: int
    index: int


class ContinuousTest:
    __slots__ = ("component", "count", "exposure", "gb", "host", "interval", "sample")

    def __init__(self, host: str, component: str, sample: MetricSample, count: float, interval: float,
                 gb: float | None):
        self.host, self.component, self.sample, self.count = host, component, sample, count
        self.interval, self.gb, self.exposure = interval, gb, interval


def outlier_finding(host: str, component: str, found: list[ContinuousHit], efa: float) -> Finding:
    """The `fleet-outlier` finding of one component, from its counters that stood out (most significant first)."""
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
