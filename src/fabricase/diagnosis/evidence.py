"""A suspect's evidence: three to five lines a person reads, each a value against the fleet's median and 99th
percentile over the comparable components, or against the expected value when there is no fleet to compare."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from fabricase.diagnosis.naming import NOUNS, fmt_number
from fabricase.models import Evidence, Finding, MetricSample

__all__ = ["FleetIndex", "evidence_lines", "key_number"]

MAX_LINES = 5


def _base_metric(metric: str) -> str:
    for suffix in (".delta", ".rate", ".count", ".robust_z", ".q_value"):
        if metric.endswith(suffix):
            return metric[: -len(suffix)]
    return metric


class FleetIndex:
    """Rates of the metrics the suspects' evidence names, per component family, over every host: built in one
    pass over the samples, only for the metrics asked for."""

    def __init__(self, samples: Mapping[str, Sequence[MetricSample]], findings: Iterable[Finding]) -> None:
        wanted = {_base_metric(ev.metric) for f in findings for ev in f.evidence}
        self.rates: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.own: dict[tuple[str, str, str], MetricSample] = {}
        for host, host_samples in samples.items():
            for s in host_samples:
                if s.metric not in wanted or s.rate is None:
                    continue
                self.rates[(s.metric, s.component.split(":", 1)[0])].append(s.rate)
                self.own[(host, s.component, s.metric)] = s
        for values in self.rates.values():
            values.sort()

    def distribution(self, metric: str, family: str) -> tuple[float, float, int] | None:
        """(median, 99th percentile, comparable components) of a metric's rate, or None with fewer than 2."""
        values = self.rates.get((metric, family))
        if not values or len(values) < 2:
            return None
        n = len(values)
        return values[n // 2], values[min(n - 1, int(0.99 * (n - 1) + 0.5))], n


def _per_second(rate: float) -> str:
    if rate and abs(rate) < 0.01:
        return f"{fmt_number(rate * 3600)}/h"
    return f"{fmt_number(rate)}/s"


def _line(f: Finding, ev: Evidence, fleet: FleetIndex) -> str | None:
    if ev.metric.endswith(".p_limit") and isinstance(ev.value, int | float):
        # The exact Poisson test of a counter against a fixed limit (symbol errors against 120/h, ...).
        level = f" at false-alarm level {fmt_number(ev.baseline)}" if isinstance(ev.baseline, int | float) else ""
        name = ev.metric.removesuffix(".p_limit").removeprefix("raw:")
        return f"{name} above its limit: exact Poisson p = {ev.value:.2g}{level}"
    metric = _base_metric(ev.metric)
    family = f.component.split(":", 1)[0]
    short = metric.removeprefix("raw:")
    own = fleet.own.get((f.host or "", f.component, metric)) if f.host else None
    if own is not None and own.rate is not None and ev.metric.endswith(".delta"):
        dist = fleet.distribution(metric, family)
        head = f"{short} +{fmt_number(own.delta)} ({_per_second(own.rate)})"
        if dist is not None:
            median, p99, n = dist
            return (f"{head}; fleet median {_per_second(median)}, p99 {_per_second(p99)} over "
                    f"{n:,} {NOUNS.get(family, 'components')}")
        return f"{head}; expected {fmt_number(ev.baseline) if ev.baseline is not None else 'none'}"
    if ev.value is None:
        return None
    unit = f" {ev.unit}" if ev.unit and ev.unit not in ("state", "flag", "config", "events") else ""
    value = fmt_number(ev.value) if isinstance(ev.value, int | float) else str(ev.value)
    if ev.baseline is not None:
        base = fmt_number(ev.baseline) if isinstance(ev.baseline, int | float) else str(ev.baseline)
        word = "fleet" if f.kind in ("config-drift", "congestion-outlier", "fleet-outlier", "rdma-bw-outlier") \
            else "expected"
        return f"{short} {value}{unit}; {word} {base}"
    return f"{short} {value}{unit}"


def _shared_line(f: Finding) -> str | None:
    """`6 of 8 hosts below it flagged (0.75 expected by chance; 9 of 128 in the fleet)`."""
    ev = {e.metric: e for e in f.evidence}
    flagged, under = ev.get("flagged_under"), ev.get("hosts_under")
    if flagged is None or not isinstance(flagged.value, int | float):
        return None
    line = f"{fmt_number(flagged.value)}"
    if under is not None and isinstance(under.value, int | float):
        line += f" of {fmt_number(under.value)}"
    line += " hosts below it flagged"
    extra = []
    if isinstance(flagged.baseline, int | float):
        extra.append(f"{fmt_number(flagged.baseline)} expected by chance")
    fleet, size = ev.get("flagged_fleet"), ev.get("fleet_size")
    if fleet is not None and size is not None and fleet.value is not None and size.value is not None:
        extra.append(f"{fmt_number(fleet.value)} of {fmt_number(size.value)} in the fleet")
    return line + (f" ({'; '.join(extra)})" if extra else "")


def evidence_lines(findings: Sequence[Finding], fleet: FleetIndex) -> list[str]:
    """Up to five lines from the suspect's findings, strongest first; one line per metric, and the strongest
    q-value last."""
    out: list[str] = []
    seen: set[str] = set()
    q_line: str | None = None
    for f in findings:
        if f.q_value is not None and q_line is None:
            q_line = f"q = {f.q_value:.2g} ({f.kind}; confidence {fmt_number(f.confidence)})"
        if f.kind == "shared-component-fault" and (line := _shared_line(f)) and "shared" not in seen:
            seen.add("shared")
            out.append(line)
            continue
        for ev in f.evidence:
            metric = _base_metric(ev.metric)
            if metric in seen or ev.metric.endswith((".robust_z", ".q_value")) or ev.metric.startswith("fleet."):
                continue
            line = _line(f, ev, fleet)
            if line:
                seen.add(metric)
                out.append(line)
    room = MAX_LINES - (1 if q_line else 0)
    return out[:room] + ([q_line] if q_line else [])


_GENERIC = ("errors", "discards", "drops", "p3", "current", "max", "state")  # last words that say little alone


def _leaf(metric: str) -> str:
    """`ack_timeout` of `rdma.ack_timeout`; a generic last word keeps its prefix (`rx.errors`)."""
    head, _, last = metric.removeprefix("raw:").rpartition(".")
    return f"{head.rsplit('.', 1)[-1]}.{last}" if head and last in _GENERIC else last


def key_number(findings: Sequence[Finding], fleet: FleetIndex) -> str:
    """The one number a terminal line shows, short: `ack_timeout 12/s, fleet p99 0/s` or `speed_gbps 200 Gb/s
    (expected 400)`; "" when no finding has a number."""
    for f in findings:
        for ev in f.evidence:
            if ev.metric.endswith((".robust_z", ".q_value", ".p_limit", ".rate")) or ev.metric.startswith("fleet."):
                continue
            metric = _base_metric(ev.metric)
            own = fleet.own.get((f.host or "", f.component, metric)) if f.host else None
            if own is not None and own.rate is not None and ev.metric.endswith(".delta"):
                dist = fleet.distribution(metric, f.component.split(":", 1)[0])
                tail = f", fleet p99 {_per_second(dist[1])}" if dist else ""
                return f"{_leaf(metric)} {_per_second(own.rate)}{tail}"
            if isinstance(ev.value, int | float) and not isinstance(ev.value, bool):
                unit = f" {ev.unit}" if ev.unit and ev.unit not in ("state", "flag", "config", "events") else ""
                base = f" (expected {fmt_number(ev.baseline)})" if isinstance(ev.baseline, int | float) else ""
                return f"{_leaf(metric)} {fmt_number(ev.value)}{unit}{base}"
            if isinstance(ev.value, str) and ev.value:
                base = f" (expected {ev.baseline})" if ev.baseline not in (None, "") else ""
                return f"{_leaf(metric)} {ev.value}{base}"
    return ""
