"""Each component's error counters as rates, next to the fleet's: the numbers the heat map colours and the
distribution plots draw.

A component's error rate for one metric is compared with the fleet mean of that metric over every component of
the same family (`rdma`, `netdev`, `nvlink`, ...) that has it: the pooled rate a Poisson test would expect
(docs/report.md). Computed from `fabricase.analysis.host_samples`; nothing here changes what analysis found.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fabricase.analysis.fleet import fleet_inputs, is_error_metric
from fabricase.analysis.netdev import is_virtual
from fabricase.models import MetricSample

__all__ = [
    "LEVEL_BOUNDS",
    "ComponentRates",
    "FleetMetric",
    "MetricRate",
    "family",
    "fleet_rates",
    "level_of",
    "natural_key",
]

# Ratio to the fleet mean at which a component's colour steps up: <1, 1-10, 10-100, >=100 (levels 1-4).
# Level 0 is "no error counter moved".
LEVEL_BOUNDS: tuple[float, ...] = (1.0, 10.0, 100.0)


@functools.lru_cache(maxsize=65536)
def family(component: str) -> str:
    """`rdma` of `rdma:mlx5_3/1`; a component without a colon (`fabric-manager`) is its own family."""
    return component.split(":", 1)[0]


def natural_key(name: str) -> tuple:
    """Sort key that puts eth2 before eth10 and gpu0002 before gpu0010."""
    parts = re.split(r"(\d+)", name)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts))


@dataclass(frozen=True)
class MetricRate:
    metric: str
    unit: str
    rate: float  # per second over the capture interval
    mean: float  # the fleet mean of this family and metric
    ratio: float | None  # rate / mean; None when the fleet mean is 0 (then the rate is 0 too)


@dataclass(frozen=True)
class ComponentRates:
    host: str
    component: str
    rates: tuple[MetricRate, ...]  # error metrics, furthest above the fleet first

    @property
    def worst(self) -> MetricRate | None:
        return self.rates[0] if self.rates else None

    @property
    def level(self) -> int:
        worst = self.worst
        return 0 if worst is None or worst.rate <= 0 else level_of(worst.ratio)


@dataclass(frozen=True)
class FleetMetric:
    """Every comparable component's rate of one family and metric, sorted ascending."""

    family: str
    metric: str
    unit: str
    values: tuple[float, ...]

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values) if self.values else 0.0

    def share_above(self, value: float) -> float:
        """Share of the fleet's components with a rate strictly above `value`."""
        if not self.values:
            return 0.0
        return (len(self.values) - bisect.bisect_right(self.values, value)) / len(self.values)


def level_of(ratio: float | None) -> int:
    """1-4 for a component whose counters moved, from its ratio to the fleet mean (LEVEL_BOUNDS)."""
    if ratio is None:
        return 1
    return 1 + sum(ratio >= bound for bound in LEVEL_BOUNDS)


_is_error = functools.lru_cache(maxsize=4096)(is_error_metric)


@functools.lru_cache(maxsize=65536)
def _is_software(component: str) -> bool:
    return component.startswith("netdev:") and is_virtual(component[len("netdev:"):])


def _error_rates(samples: Iterable[MetricSample]) -> Iterable[MetricSample]:
    """Error counters with a rate over the interval; software interfaces and counter resets left out.
    fleet_inputs drops a raw counter already read under its normalized name."""
    for s in fleet_inputs(samples):
        if s.rate is not None and s.rate >= 0 and _is_error(s.metric) and not _is_software(s.component):
            yield s


def fleet_rates(samples_by_host: Mapping[str, Iterable[MetricSample]]
                ) -> tuple[dict[tuple[str, str], ComponentRates], dict[tuple[str, str], FleetMetric]]:
    """(host, component) -> its error rates against the fleet, and (family, metric) -> the fleet's rates."""
    per_metric: dict[tuple[str, str], list[float]] = {}
    units: dict[tuple[str, str], str] = {}
    cells: dict[tuple[str, str], dict[str, MetricSample]] = {}
    for host in sorted(samples_by_host, key=natural_key):
        for s in _error_rates(samples_by_host[host]):
            mine = cells.setdefault((host, s.component), {})
            if s.metric in mine:
                continue  # one counter read from two sources: the first wins, as in fleet statistics
            mine[s.metric] = s
            key = (family(s.component), s.metric)
            per_metric.setdefault(key, []).append(float(s.rate))
            units.setdefault(key, s.unit)
    fleet = {key: FleetMetric(key[0], key[1], units[key], tuple(sorted(values)))
             for key, values in sorted(per_metric.items())}
    means = {key: fm.mean for key, fm in fleet.items()}
    out: dict[tuple[str, str], ComponentRates] = {}
    for (host, component), metrics in cells.items():
        rates = []
        for metric, s in sorted(metrics.items()):
            mean = means[(family(component), metric)]
            rates.append(MetricRate(metric, s.unit, float(s.rate), mean, float(s.rate) / mean if mean > 0 else None))
        rates.sort(key=lambda r: (-(r.ratio or 0.0), -r.rate, r.metric))
        out[(host, component)] = ComponentRates(host, component, tuple(rates))
    return out, fleet
