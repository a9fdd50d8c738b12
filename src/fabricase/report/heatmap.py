"""The hosts x components heat map: one row per host, one column per component. The fill says how far the
component's worst error-counter rate stands above the fleet mean (rates.LEVEL_BOUNDS, a light scale); a critical
or major finding on the component overrides it with the severity's colour, a minor one outlines it. Rows are
grouped by topology path (or in runs of GROUP_SIZE hosts) so that 1,024 hosts stay readable: a group starts
folded unless it holds a critical or major finding, a host not captured in full, or sits under a shared component
with a critical or major finding.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from fabricase.models import Finding, HostCapture, HostStatus, Placement, Severity
from fabricase.report.rates import ComponentRates, family, natural_key

__all__ = [
    "FAMILY_ORDER",
    "GROUP_SIZE",
    "MAX_FAMILY_COLUMNS",
    "Cell",
    "Column",
    "Group",
    "HeatMap",
    "Row",
    "heat_map",
    "host_groups",
]

FAMILY_ORDER: tuple[str, ...] = ("rdma", "netdev", "nvlink", "nvswitch", "gpu", "pcie")
MAX_FAMILY_COLUMNS = 16  # more columns than this in one family: per-parent columns, then the hottest only
GROUP_SIZE = 64  # hosts per folded group at most
SERIOUS = frozenset({"critical", "major"})
NOT_PLACED = "not placed"
_NO_CELL = ("n", None, None)


@dataclass(frozen=True)
class Column:
    family: str
    label: str  # `mlx5_3/1`; `3/*` for every NVLink of GPU 3
    members: tuple[str, ...]  # the components it stands for


@dataclass(frozen=True)
class Cell:
    level: str  # "n" (no such component on the host) or "0".."4" (rates.level_of)
    severity: str | None  # of the worst finding on it
    title: str | None  # hover text; None for a quiet or absent cell

    @property
    def hot(self) -> bool:
        return self.severity in SERIOUS


@dataclass(frozen=True)
class Row:
    host: str
    status: str | None  # the capture status when it is not ok
    severity: str | None  # of the worst finding on the host as a whole (component `host`)
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class Group:
    label: str
    path: tuple[str, ...]  # the shared components above every host of the group; () when not placed
    rows: tuple[Row, ...]
    hot: int  # cells with a critical or major finding, plus hosts not captured or with a host finding
    shared: str | None  # the worst severity of a finding on a shared component of the path
    overview: tuple[Cell, ...]  # per column, the group's worst cell: seen even while the group is folded

    @property
    def open(self) -> bool:
        return self.hot > 0 or self.shared in SERIOUS

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(r.host for r in self.rows)


@dataclass(frozen=True)
class HeatMap:
    spans: tuple[tuple[str, int, int], ...]  # (family, columns shown, columns left out)
    columns: tuple[Column, ...]
    groups: tuple[Group, ...]

    @property
    def cells(self) -> int:
        return sum(len(g.rows) for g in self.groups) * len(self.columns)


def _family_rank(name: str) -> tuple:
    return (FAMILY_ORDER.index(name) if name in FAMILY_ORDER else len(FAMILY_ORDER), name)


def _worst(severities: Iterable[Severity]) -> Severity | None:
    return min(severities, key=lambda s: s.rank, default=None)


class _Cells:
    """Cell contents for (host, components), from the rates and the findings."""

    def __init__(self, rates: Mapping[tuple[str, str], ComponentRates], findings: Sequence[Finding]) -> None:
        self.rates = rates
        self.found: dict[tuple[str, str], list[Finding]] = {}
        for f in findings:
            if f.host is not None:
                self.found.setdefault((f.host, f.component), []).append(f)

    def level(self, host: str, component: str) -> int | None:
        """The rate level; 0 for a component known only from a finding; None when the host has neither."""
        r = self.rates.get((host, component))
        if r is None:
            return 0 if (host, component) in self.found else None
        return r.level

    def cell(self, host: str, members: Sequence[str]) -> Cell:
        levels = [(lvl, c) for c in members if (lvl := self.level(host, c)) is not None]
        if not levels:
            return Cell(*_NO_CELL)
        found = [f for c in members for f in self.found.get((host, c), ())]
        worst = _worst(f.severity for f in found)
        level, component = max(levels, key=lambda lc: lc[0])  # the first in natural order among equals
        if worst is not None:  # the title names the component the worst finding is on
            component = next(c for c in members for f in self.found.get((host, c), ()) if f.severity == worst)
        if level == 0 and worst is None:
            return Cell("0", None, None)
        return Cell(str(level), str(worst) if worst else None, self._title(host, component, found))

    def _title(self, host: str, component: str, found: list[Finding]) -> str:
        parts = [f"{host} {component}"]
        r = self.rates.get((host, component))
        if r and r.worst and r.worst.rate > 0:
            w = r.worst
            times = f", {w.ratio:.3g}x the fleet mean" if w.ratio is not None else ""
            parts.append(f"{w.metric} {w.rate:.3g}/s{times}")
        parts += [f"{f.severity} {f.kind}" + ("" if f.component == component else f" on {f.component}")
                  for f in sorted(found, key=lambda f: (f.severity.rank, f.kind, f.component))]
        return "; ".join(parts)


def _cell_rank(c: Cell) -> tuple[int, int]:
    severity = Severity(c.severity).rank if c.severity else len(Severity)
    return (-severity, -1 if c.level == "n" else int(c.level))


def _worst_cell(cells: Iterable[Cell]) -> Cell:
    worst = max(cells, key=_cell_rank, default=Cell(*_NO_CELL))
    return Cell(worst.level, worst.severity, None)


def _columns(components: Iterable[str], hosts: Sequence[str], cells: _Cells) -> tuple[list[Column], list[tuple]]:
    by_family: dict[str, set[str]] = {}
    for c in components:
        by_family.setdefault(family(c), set()).add(c)
    columns: list[Column] = []
    spans = []
    for fam in sorted(by_family, key=_family_rank):
        names = sorted(by_family[fam], key=natural_key)
        cols = [Column(fam, c.split(":", 1)[-1], (c,)) for c in names]
        if len(cols) > MAX_FAMILY_COLUMNS and any("/" in c for c in names):
            parents: dict[str, list[str]] = {}
            for c in names:
                parents.setdefault(c.rsplit("/", 1)[0] if "/" in c else c, []).append(c)
            if len(parents) < len(cols):
                cols = [Column(fam, p.split(":", 1)[-1] + ("/*" if len(m) > 1 or m[0] != p else ""), tuple(m))
                        for p, m in sorted(parents.items(), key=lambda kv: natural_key(kv[0]))]
        hidden = 0
        if len(cols) > MAX_FAMILY_COLUMNS:
            heat = {col: _column_heat(col, hosts, cells) for col in cols}
            keep = set(sorted(cols, key=lambda col: (tuple(-h for h in heat[col]), natural_key(col.label)))
                       [:MAX_FAMILY_COLUMNS])
            hidden = len(cols) - len(keep)
            cols = [col for col in cols if col in keep]
        columns += cols
        spans.append((fam, len(cols), hidden))
    return columns, spans


def _column_heat(col: Column, hosts: Sequence[str], cells: _Cells) -> tuple[int, int, int]:
    """(findings on it, highest rate level, components whose counters moved): the hottest columns are kept."""
    found = sum(len(cells.found.get((h, c), ())) for h in hosts for c in col.members)
    levels = [lvl for h in hosts for c in col.members if (lvl := cells.level(h, c))]
    return (found, max(levels, default=0), len(levels))


def host_groups(hosts: Sequence[str], placements: Sequence[Placement]
                ) -> list[tuple[str, tuple[str, ...], list[str]]]:
    """(label, topology path, hosts): hosts grouped by topology path (outermost first), naturally sorted; runs of
    GROUP_SIZE hosts when none is placed. A group larger than GROUP_SIZE is cut into numbered parts."""
    path = {p.host: tuple(p.topology) for p in placements if p.topology}
    ordered = sorted(hosts, key=natural_key)
    if not any(h in path for h in ordered):
        return [("", (), ordered[i:i + GROUP_SIZE]) for i in range(0, len(ordered), GROUP_SIZE)]
    by_path: dict[tuple[str, ...], list[str]] = {}
    for h in ordered:
        by_path.setdefault(path.get(h, ()), []).append(h)
    out = []
    for steps in sorted(by_path, key=lambda t: (not t, tuple(natural_key(s) for s in t))):
        members = by_path[steps]
        label = " > ".join(steps) or NOT_PLACED
        parts = [members[i:i + GROUP_SIZE] for i in range(0, len(members), GROUP_SIZE)]
        for n, part in enumerate(parts, 1):
            out.append((f"{label} ({n}/{len(parts)})" if len(parts) > 1 else label, steps, part))
    return out


def heat_map(hosts: Sequence[HostCapture], rates: Mapping[tuple[str, str], ComponentRates],
             findings: Sequence[Finding], placements: Sequence[Placement]) -> HeatMap:
    """The heat map of every captured host: components with error counters or findings as columns."""
    names = [hc.host for hc in hosts]
    known = set(names)
    cells = _Cells(rates, findings)
    components = {c for (h, c) in rates if h in known}
    components |= {f.component for f in findings if f.host in known and f.component != "host"}
    columns, spans = _columns(components, names, cells)
    status = {hc.host: hc.status for hc in hosts}
    host_finding = {h: _worst(f.severity for f in cells.found.get((h, "host"), ())) for h in names}
    shared: dict[str, list[Severity]] = {}
    for f in findings:
        if f.host is None:
            shared.setdefault(f.component, []).append(f.severity)
    groups = []
    for label, path, members in host_groups(names, placements):
        rows = []
        for h in members:
            worst = host_finding[h]
            rows.append(Row(h, None if status[h] == HostStatus.OK else str(status[h]), str(worst) if worst else None,
                            tuple(cells.cell(h, col.members) for col in columns)))
        hot = sum(c.hot for r in rows for c in r.cells) + sum(r.status is not None or r.severity in SERIOUS
                                                              for r in rows)
        above = _worst(s for step in path for s in shared.get(step, ()))
        overview = tuple(_worst_cell(r.cells[i] for r in rows) for i in range(len(columns)))
        groups.append(Group(label, path, tuple(rows), hot, str(above) if above else None, overview))
    return HeatMap(tuple(spans), tuple(columns), tuple(groups))
