"""For each suspect component, its error rates beside the fleet's: an inline SVG of the fleet distribution
(log-binned histogram, a box over the components whose counter moved, the fleet mean) with the suspect marked.

Only geometry is computed here; the template draws it, so every label passes through autoescaping.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fabricase.analysis import sort_findings
from fabricase.models import Finding
from fabricase.report.rates import ComponentRates, FleetMetric, MetricRate, family

__all__ = ["MAX_SUSPECTS", "METRICS_PER_SUSPECT", "Plot", "Suspect", "fmt_rate", "suspects"]

MAX_SUSPECTS = 24
METRICS_PER_SUSPECT = 3
WIDTH, HEIGHT = 620, 128
ZERO_X0, ZERO_X1 = 8, 48  # the bar of components whose counter did not move
X0, X1 = 72, 604  # the log axis
BAR_TOP, BAR_BASE = 24, 84
BOX_Y, BOX_H = 90, 12
TICK_Y = 120
BINS = 40


def fmt_rate(value: float) -> str:
    """A rate for people: `0`, `0.0123`, `4.56`, `1.2e+04`."""
    if value == 0:
        return "0"
    return f"{value:.3g}"


@dataclass(frozen=True)
class Bar:
    x: float
    width: float
    y: float
    height: float
    count: int


@dataclass(frozen=True)
class Plot:
    metric: str
    unit: str
    rate: str  # the suspect's rate, formatted
    mean: str
    median: str
    p99: str
    n: int  # comparable components in the fleet
    zeros: int  # of those, with no increase
    above: str  # share of the fleet above the suspect, e.g. "0.1%"
    ratio: str | None
    zero_bar: Bar
    bars: tuple[Bar, ...]
    box: tuple[float, ...] | None  # x of p5, p25, p50, p75, p95 of the moved ones
    mean_x: float | None
    marker_x: float
    ticks: tuple[tuple[float, str], ...]
    width: int = WIDTH
    height: int = HEIGHT
    geometry: tuple[int, ...] = (ZERO_X0, ZERO_X1, X0, X1, BAR_TOP, BAR_BASE, BOX_Y, BOX_H, TICK_Y)

    @property
    def box_width(self) -> float:
        return _r(self.box[3] - self.box[1]) if self.box else 0.0

    @property
    def marker_head(self) -> str:
        """SVG path of the triangle above the suspect's line."""
        return f"M{_r(self.marker_x - 5):g} {BAR_TOP - 10}h10l-5 6z"


@dataclass(frozen=True)
class Suspect:
    host: str
    component: str
    severity: str
    kinds: tuple[str, ...]
    plots: tuple[Plot, ...]


def _r(x: float) -> float:
    return round(x, 1)


def _quantile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), on sorted values."""
    pos = (len(values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def _percent(share: float) -> str:
    if share == 0:
        return "0%"
    return f"{share * 100:.2g}%" if share < 0.1 else f"{share * 100:.0f}%"


def plot(rate: MetricRate, fleet: FleetMetric) -> Plot:
    """The fleet's distribution of one metric with one component's rate marked."""
    values = fleet.values
    moved = [v for v in values if v > 0]
    points = moved + [rate.rate]
    lo = math.floor(math.log10(min(points)))
    hi = max(math.ceil(math.log10(max(points))), lo + 1)

    def x(v: float) -> float:
        return X0 + (math.log10(v) - lo) / (hi - lo) * (X1 - X0)

    counts = [0] * BINS
    for v in moved:
        counts[min(int((math.log10(v) - lo) / (hi - lo) * BINS), BINS - 1)] += 1
    zeros = len(values) - len(moved)
    tallest = max([zeros, *counts, 1])

    def height(count: int) -> float:  # square root: one outlier stays visible beside a thousand quiet ports
        return 0.0 if count == 0 else max(_r((BAR_BASE - BAR_TOP) * math.sqrt(count / tallest)), 1.5)

    step = (X1 - X0) / BINS
    bars = tuple(Bar(_r(X0 + i * step), _r(step - 1), _r(BAR_BASE - height(c)), height(c), c)
                 for i, c in enumerate(counts) if c)
    zero_bar = Bar(ZERO_X0, ZERO_X1 - ZERO_X0, _r(BAR_BASE - height(zeros)), height(zeros), zeros)
    box = tuple(_r(x(_quantile(moved, q))) for q in (0.05, 0.25, 0.5, 0.75, 0.95)) if moved else None
    mean = fleet.mean
    return Plot(
        metric=rate.metric, unit=rate.unit, rate=fmt_rate(rate.rate), mean=fmt_rate(mean),
        median=fmt_rate(_quantile(values, 0.5)), p99=fmt_rate(_quantile(values, 0.99)), n=len(values), zeros=zeros,
        above=_percent(fleet.share_above(rate.rate)),
        ratio=f"{rate.ratio:.3g}" if rate.ratio is not None else None,
        zero_bar=zero_bar, bars=bars, box=box,
        mean_x=_r(x(mean)) if mean > 0 else None, marker_x=_r(x(rate.rate)),
        ticks=tuple((_r(x(10.0 ** e)), f"{10.0 ** e:g}/s") for e in range(lo, hi + 1)),
    )


def _suspect_keys(findings: Sequence[Finding]) -> list[tuple[str, str, Finding]]:
    """(host, component, finding) in rank order: a host finding's component, and the host components a shared
    finding names in `related` (`gpu0006/rdma:mlx5_0/1`)."""
    out = []
    for f in sort_findings(findings):
        if f.host is not None:
            if f.component != "host":
                out.append((f.host, f.component, f))
            continue
        for rel in f.related:
            host, sep, component = rel.partition("/")
            if sep and ":" in component and not host.startswith("nccl-log:"):
                out.append((host, component, f))
    return out


def _metrics(rates: ComponentRates, findings: Sequence[Finding]) -> list[MetricRate]:
    """The metrics the findings cite first (their evidence's `<metric>.delta`), then the furthest above the fleet."""
    cited = [e.metric.removesuffix(".delta") for f in findings for e in f.evidence]
    moved = [r for r in rates.rates if r.rate > 0]
    first = sorted((r for r in moved if r.metric in cited), key=lambda r: cited.index(r.metric))
    return (first + [r for r in moved if r not in first])[:METRICS_PER_SUSPECT]


def suspects(findings: Sequence[Finding], rates: Mapping[tuple[str, str], ComponentRates],
             fleet: Mapping[tuple[str, str], FleetMetric]) -> tuple[list[Suspect], int]:
    """Up to MAX_SUSPECTS suspect components in finding rank order, with their plots; and how many more there were."""
    keys = _suspect_keys(findings)
    by_key: dict[tuple[str, str], list[Finding]] = {}
    for host, component, f in keys:
        by_key.setdefault((host, component), []).append(f)
    out = []
    for host, component in by_key:
        if len(out) == MAX_SUSPECTS:
            break
        found = by_key[(host, component)]
        r = rates.get((host, component))
        plots = tuple(plot(m, fleet[(family(component), m.metric)]) for m in (_metrics(r, found) if r else []))
        worst = min(found, key=lambda f: f.severity.rank)
        out.append(Suspect(host, component, str(worst.severity), tuple(sorted({f.kind for f in found})), plots))
    return out, len(by_key) - len(out)
