"""The topology path of each host (the provider's list in Placement.topology, outermost first: network nodes,
block / sub-block, switch, rack), with hosts sharing a path folded together and the shared components that a
finding names marked with its severity."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fabricase.models import Finding, Placement
from fabricase.report.rates import natural_key
from fabricase.templates import hostlist

__all__ = ["PathRow", "PathStep", "Placed", "Topology", "topology"]


@dataclass(frozen=True)
class PathStep:
    name: str  # `switch:leaf-003`
    severity: str | None  # the worst finding on this shared component


@dataclass(frozen=True)
class PathRow:
    steps: tuple[PathStep, ...]
    providers: str
    hosts: str  # folded
    count: int
    flagged: str  # folded hosts under this path with a finding; "" when none


@dataclass(frozen=True)
class Placed:
    """Where a host with a finding sits, in full: what the provider's support engineer asks for first."""

    host: str
    provider: str
    instance_id: str | None
    instance_type: str | None
    zone: str | None
    placement_group: str | None
    path: str
    source: str | None


@dataclass(frozen=True)
class Topology:
    rows: tuple[PathRow, ...]
    unplaced: str  # folded hosts with no topology
    unplaced_count: int
    placed: tuple[Placed, ...]


def topology(hosts: Sequence[str], placements: Sequence[Placement], findings: Sequence[Finding]) -> Topology:
    """Topology rows for the captured hosts."""
    known = set(hosts)
    where = {p.host: p for p in placements if p.host in known}
    shared: dict[str, str] = {}
    for f in sorted(findings, key=lambda f: f.severity.rank, reverse=True):
        if f.host is None:
            shared[f.component] = str(f.severity)  # the worst one is written last
    flagged = {f.host for f in findings if f.host is not None}
    by_path: dict[tuple[str, ...], list[str]] = {}
    unplaced = []
    for h in sorted(hosts, key=natural_key):
        p = where.get(h)
        if p and p.topology:
            by_path.setdefault(tuple(p.topology), []).append(h)
        else:
            unplaced.append(h)
    rows = []
    for path in sorted(by_path, key=lambda t: tuple(natural_key(s) for s in t)):
        members = by_path[path]
        rows.append(PathRow(
            steps=tuple(PathStep(s, shared.get(s)) for s in path),
            providers=", ".join(sorted({where[h].provider for h in members})),
            hosts=hostlist(members), count=len(members),
            flagged=hostlist([h for h in members if h in flagged]) if flagged.intersection(members) else "",
        ))
    placed = tuple(
        Placed(h, p.provider, p.instance_id, p.instance_type, p.zone, p.placement_group, " > ".join(p.topology),
               p.source)
        for h in sorted(flagged & known, key=natural_key) if (p := where.get(h)) is not None
    )
    return Topology(tuple(rows), hostlist(unplaced) if unplaced else "", len(unplaced), placed)
