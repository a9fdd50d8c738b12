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

__all__ = ["FULL", "MAX_SUSPECTS", "METRICS_PER_SUSPECT", "MINI", "Frame", "Plot", "Suspect", "fmt_rate", "plot",
           "suspects"]

MAX_SUSPECTS = 24
METRICS_PER_SUSPECT = 3
WIDTH, HEIGHT = 620, 128
ZERO_X0, ZERO_X1 = 8, 48  # the bar of components whose counter did not move
X0, X1 = 72, 604  # the log axis
BAR_TOP, BAR_BASE = 24, 84
BOX_Y, BOX_H = 90, 12
TICK_Y = 120
BINS = 40


@dataclass(frozen=True)
class Frame:
    """Where a plot's parts sit, in SVG units. `label_px`: the width of one character of a tick label; a tick
    whose label would touch the last one goes unlabelled (0: label every tick)."""

    width: int
    height: int
    zero_x0: int
    zero_x1: int
    x0: int
    x1: int
    bar_top: int
    bar_base: int
    box_y: int
    box_h: int
    tick_y: int
    label_px: float = 0.0
    bins: int = BINS


FULL = Frame(WIDTH, HEIGHT, ZERO_X0, ZERO_X1, X0, X1, BAR_TOP, BAR_BASE, BOX_Y, BOX_H, TICK_Y)
# A suspect card's plot: the same drawing, small enough that eight cards share the first screen.
MINI = Frame(250, 50, 2, 16, 26, 242, 10, 32, 34, 5, 48, label_px=5.5, bins=30)


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
    ticks: tuple[tuple[float, str, str], ...]  # (x, label, text-anchor); label "" where there is no room
    frame: Frame = FULL

    @property
    def width(self) -> int:
        return self.frame.width

    @property
    def height(self) -> int:
        return self.frame.height

    @property
    def geometry(self) -> tuple[int, ...]:
        f = self.frame
        return (f.zero_x0, f.zero_x1, f.x0, f.x1, f.bar_top, f.bar_base, f.box_y, f.box_h, f.tick_y)

    @property
    def box_width(self) -> float:
        return _r(self.box[3] - self.box[1]) if self.box else 0.0

    @property
    def marker_head(self) -> str:
        """SVG path of the triangle above the suspect's line."""
        return f"M{_r(self.marker_x - 5):g} {self.frame.bar_top - 10}h10l-5 6z"


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


def _labelled(ticks: list[tuple[float, str]], frame: Frame) -> tuple[tuple[float, str, str], ...]:
    """(x, label, text-anchor) per tick. A label near the right edge ends at its tick; with `frame.label_px`, a
    label that would come within a few units of the last one shown (or of the `0` under the zero bar) is left
    out."""
    px = frame.label_px
    out: list[tuple[float, str, str]] = []
    right = (frame.zero_x0 + frame.zero_x1) / 2 + px / 2  # where the `0` label ends
    for x, label in ticks:
        anchor = "end" if x > frame.width - 16 else "middle"
        left = x - px * len(label) if anchor == "end" else x - px * len(label) / 2
        keep = px == 0 or left >= right + 4
        out.append((x, label if keep else "", anchor))
        if keep:
            right = x if anchor == "end" else x + px * len(label) / 2
    return tuple(out)


def plot(rate: MetricRate, fleet: FleetMetric, frame: Frame = FULL) -> Plot:
    """The fleet's distribution of one metric with one component's rate marked, drawn in `frame`."""
    values = fleet.values
    moved = [v for v in values if v > 0]
    points = moved + [rate.rate]
    lo = math.floor(math.log10(min(points)))
    hi = max(math.ceil(math.log10(max(points))), lo + 1)
    x0, x1, bins = frame.x0, frame.x1, frame.bins

    def x(v: float) -> float:
        return x0 + (math.log10(v) - lo) / (hi - lo) * (x1 - x0)

    counts = [0] * bins
    for v in moved:
        counts[min(int((math.log10(v) - lo) / (hi - lo) * bins), bins - 1)] += 1
    zeros = len(values) - len(moved)
    tallest = max([zeros, *counts, 1])
    base = frame.bar_base

    def height(count: int) -> float:  # square root: one outlier stays visible beside a thousand quiet ports
        return 0.0 if count == 0 else max(_r((base - frame.bar_top) * math.sqrt(count / tallest)), 1.5)

    step = (x1 - x0) / bins
    bars = tuple(Bar(_r(x0 + i * step), _r(step - 1), _r(base - height(c)), height(c), c)
                 for i, c in enumerate(counts) if c)
    zero_bar = Bar(frame.zero_x0, frame.zero_x1 - frame.zero_x0, _r(base - height(zeros)), height(zeros), zeros)
    box = tuple(_r(x(_quantile(moved, q))) for q in (0.05, 0.25, 0.5, 0.75, 0.95)) if moved else None
    mean = fleet.mean
    ticks = [(_r(x(10.0 ** e)), f"{10.0 ** e:g}/s") for e in range(lo, hi + 1)]
    return Plot(
        metric=rate.metric, unit=rate.unit, rate=fmt_rate(rate.rate), mean=fmt_rate(mean),
        median=fmt_rate(_quantile(values, 0.5)), p99=fmt_rate(_quantile(values, 0.99)), n=len(values), zeros=zeros,
        above=_percent(fleet.share_above(rate.rate)),
        ratio=f"{rate.ratio:.3g}" if rate.ratio is not None else None,
        zero_bar=zero_bar, bars=bars, box=box,
        mean_x=_r(x(mean)) if mean > 0 else None, marker_x=_r(x(rate.rate)),
        ticks=_labelled(ticks, frame), frame=frame,
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
