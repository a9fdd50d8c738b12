"""A suspect's evidence: three to five lines a person reads, each a value against the fleet's median and 99th
percentile over the comparable components, or against the expected value when there is no fleet to compare."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from fabricase.diagnosis.naming import fmt_number
from fabricase.models import Evidence, Finding, MetricSample

__all__ = ["FleetIndex", "evidence_lines"]

MAX_LINES = 5
_NOUN = {"rdma": "ports", "netdev": "interfaces", "nvlink": "links", "pcie": "devices", "gpu": "GPUs"}


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
                    f"{n:,} {_NOUN.get(family, 'components')}")
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


def evidence_lines(findings: Sequence[Finding], fleet: FleetIndex) -> list[str]:
    """Up to five lines from the suspect's findings, strongest first; one line per metric."""
    out: list[str] = []
    seen: set[str] = set()
    for f in findings:
        for ev in f.evidence:
            metric = _base_metric(ev.metric)
            if metric in seen or ev.metric.endswith((".robust_z", ".q_value")) or ev.metric.startswith("fleet."):
                continue
            line = _line(f, ev, fleet)
            if line:
                seen.add(metric)
                out.append(line)
            if len(out) >= MAX_LINES:
                return out
        if f.q_value is not None and not any(line.startswith("q = ") for line in out) and len(out) < MAX_LINES:
            out.append(f"q = {f.q_value:.2g} ({f.kind}; confidence {fmt_number(f.confidence)})")
    return out
