"""The report's first screen: one card per suspect of the diagnosis, each with a mini-plot of its key metric
against the fleet's distribution (plots.MINI).

The key metric is the first metric the suspect's findings cite as evidence that has a rate on one of its
components (an error counter, PFC pause, ...), drawn against that metric's rate on every component of the same
family. Without one, the error counter furthest above the fleet mean, if it stands at least KEY_RATIO times above
it (a weaker one would draw the background, not the fault). A suspect whose evidence is a state, a log line or a
setting gets no plot.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from fabricase.analysis.netdev import is_virtual
from fabricase.diagnosis import Diagnosis, Suspect, finding_ids
from fabricase.models import Finding, MetricSample
from fabricase.report.plots import MINI, Plot, plot
from fabricase.report.rates import LEVEL_BOUNDS, ComponentRates, FleetMetric, MetricRate, family, natural_key
from fabricase.templates import hostlist

__all__ = ["IDENTITY_ORDER", "KEY_RATIO", "MAX_CARDS", "Card", "Cited", "card", "cards", "cited_rates",
           "key_rate"]

MAX_CARDS = 100  # the rest are counted; the diagnosis in the bundle lists them all
KEY_RATIO = LEVEL_BOUNDS[1]  # an uncited counter is drawn only this far above the fleet mean
# What the owner looks a part up by comes first; anything else follows in name order.
IDENTITY_ORDER = ("instance_id", "serial", "pci", "netdev", "mac", "node_guid", "port_guid", "uuid")
_SUFFIXES = (".delta", ".rate", ".count", ".robust_z", ".q_value")


@dataclass(frozen=True)
class Card:
    suspect: Suspect
    severity: str
    certainty: str  # `q = 6e-142; confidence 1`, or "" when the suspect has neither
    identity: tuple[tuple[str, str], ...]
    below: str  # a shared component: the hosts below it, folded; "" otherwise
    plot: Plot | None
    plotted: str  # what the plot marks: `gpu0016 rdma:mlx5_2/1`; "" without a plot


def _base_metric(metric: str) -> str:
    for suffix in _SUFFIXES:
        if metric.endswith(suffix):
            return metric[: -len(suffix)]
    return metric


def _places(s: Suspect, found: Sequence[Finding]) -> list[tuple[str, str]]:
    """(host, component) the suspect stands for: its own components, then those of its findings and the host
    components a shared finding names in `related` (`gpu0006/rdma:mlx5_0/1`)."""
    out = [(s.host, c) for c in s.components] if s.host else []
    for f in found:
        if f.host is not None:
            out.append((f.host, f.component))
        for rel in f.related:
            host, sep, component = rel.partition("/")
            if sep and ":" in component and not host.startswith("nccl-log:"):
                out.append((host, component))
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class Cited:
    """The rates of the metrics the suspects cite: each component's own, and each family's over the fleet."""

    own: Mapping[tuple[str, str, str], MetricSample]  # (host, component, metric)
    fleet: Mapping[tuple[str, str], FleetMetric]  # (family, metric)


def _is_software(component: str) -> bool:
    return component.startswith("netdev:") and is_virtual(component[len("netdev:"):])


def _cited(found: Iterable[Finding]) -> list[str]:
    return list(dict.fromkeys(_base_metric(e.metric) for f in found for e in f.evidence))


def cited_rates(samples: Mapping[str, Iterable[MetricSample]], metrics: Iterable[str]) -> Cited:
    """One pass over the samples for the cited metrics only. A counter that went backwards (a reset) is left out,
    and so is a second reading of one counter from another source: the first wins, as in fleet statistics."""
    wanted = set(metrics)
    own: dict[tuple[str, str, str], MetricSample] = {}
    for host in sorted(samples, key=natural_key):
        for s in samples[host]:
            if s.metric in wanted and s.rate is not None and s.rate >= 0 and not _is_software(s.component):
                own.setdefault((host, s.component, s.metric), s)
    values: dict[tuple[str, str], list[float]] = {}
    units: dict[tuple[str, str], str] = {}
    for (_, component, metric), s in own.items():
        key = (family(component), metric)
        values.setdefault(key, []).append(float(s.rate))
        units.setdefault(key, s.unit)
    fleet = {key: FleetMetric(key[0], key[1], units[key], tuple(sorted(v))) for key, v in sorted(values.items())}
    return Cited(own, fleet)


def key_rate(s: Suspect, found: Sequence[Finding], cited: Cited, rates: Mapping[tuple[str, str], ComponentRates],
             errors: Mapping[tuple[str, str], FleetMetric]) -> tuple[str, str, MetricRate, FleetMetric] | None:
    """(host, component, its rate, the fleet's) of the suspect's key metric, or None when no rate tells.
    `rates` and `errors`: the error counters of rates.fleet_rates, for a suspect whose findings cite none."""
    places = _places(s, found)
    for metric in _cited(found):
        for host, component in places:  # the suspect's own component first
            own = cited.own.get((host, component, metric))
            if own is not None and own.rate:
                fleet = cited.fleet[(family(component), metric)]
                ratio = own.rate / fleet.mean if fleet.mean > 0 else None
                return host, component, MetricRate(metric, own.unit, float(own.rate), fleet.mean, ratio), fleet
    strong = [(h, c, r) for h, c in places if (cr := rates.get((h, c)))
              for r in cr.rates if r.rate > 0 and r.ratio is not None and r.ratio >= KEY_RATIO]
    if not strong:
        return None
    host, component, rate = max(strong, key=lambda m: m[2].ratio)  # the first among equals
    return host, component, rate, errors[(family(component), rate.metric)]


def _identity(identity: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    rank = {k: i for i, k in enumerate(IDENTITY_ORDER)}
    return tuple((k, str(v)) for k, v in sorted(identity.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0]))
                 if v not in (None, ""))


def _certainty(s: Suspect) -> str:
    """`q = 1e-09; confidence 0.999`, unless an evidence line says it already."""
    if any("q = " in line or "confidence" in line for line in s.evidence):
        return ""
    parts = []
    if s.q_value is not None:
        parts.append(f"q = {s.q_value:.2g}")
    if s.confidence is not None:
        parts.append(f"confidence {s.confidence:.4g}")
    return "; ".join(parts)


def card(s: Suspect, found: Sequence[Finding], cited: Cited, rates: Mapping[tuple[str, str], ComponentRates],
         errors: Mapping[tuple[str, str], FleetMetric]) -> Card:
    key = key_rate(s, found, cited, rates, errors)
    shown = plot(key[2], key[3], MINI) if key else None
    return Card(s, str(s.severity), _certainty(s), _identity(s.identity), hostlist(s.hosts) if s.hosts else "",
                shown, f"{key[0]} {key[1]}" if key else "")


def cards(diagnosis: Diagnosis, findings: Sequence[Finding], samples: Mapping[str, Iterable[MetricSample]],
          rates: Mapping[tuple[str, str], ComponentRates], errors: Mapping[tuple[str, str], FleetMetric]
          ) -> tuple[list[Card], int]:
    """Up to MAX_CARDS cards in the diagnosis's order (most severe first), and how many more suspects there are.
    `findings` in the order the diagnosis was made from, so that its finding ids name them; `samples`: host ->
    its samples, of the captured hosts only; `rates`, `errors`: rates.fleet_rates of the same samples."""
    by_id = dict(zip(finding_ids(findings), findings, strict=True))
    shown = diagnosis.suspects[:MAX_CARDS]
    found = [[by_id[i] for i in s.findings if i in by_id] for s in shown]
    cited = cited_rates(samples, {m for fs in found for m in _cited(fs)})
    out = [card(s, fs, cited, rates, errors) for s, fs in zip(shown, found, strict=True)]
    return out, len(diagnosis.suspects) - len(shown)
