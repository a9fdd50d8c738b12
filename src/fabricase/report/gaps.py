"""Collection gaps: what the capture does not hold, so that nobody reads silence as health. Hosts that were
not captured (or only partly), items that failed (a collector's command not found, a file unreadable, a timeout),
items cut at their size cap, hosts with one snapshot only (no rates), and truncated input files."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fabricase.models import Capture, CaptureItem, HostStatus
from fabricase.report.rates import natural_key
from fabricase.templates import hostlist

__all__ = ["MAX_GAP_ROWS", "Gaps", "HostGap", "ItemGap", "collection_gaps"]

MAX_GAP_ROWS = 200  # per table; the rest is counted


@dataclass(frozen=True)
class HostGap:
    status: str
    reason: str
    hosts: str  # folded: gpu[0003,0017]
    count: int


@dataclass(frozen=True)
class ItemGap:
    collector: str
    source: str
    problem: str
    hosts: str
    count: int


@dataclass(frozen=True)
class Gaps:
    hosts: tuple[HostGap, ...]
    failed: tuple[ItemGap, ...]
    truncated: tuple[ItemGap, ...]
    left_out: int  # rows beyond MAX_GAP_ROWS, over the tables
    one_snapshot: str  # folded hosts captured without a second snapshot
    inputs_truncated: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not (self.hosts or self.failed or self.truncated or self.one_snapshot or self.inputs_truncated)


def _fold(groups: dict[tuple[str, ...], list[str]]) -> list[tuple[tuple[str, ...], str, int]]:
    """(key, folded hosts, count), most hosts first, then by key."""
    rows = [(key, hostlist(hosts), len(hosts)) for key, hosts in groups.items()]
    return sorted(rows, key=lambda r: (-r[2], tuple(natural_key(k) for k in r[0])))


def _item_gaps(groups: dict[tuple[str, ...], list[str]]) -> list[ItemGap]:
    return [ItemGap(key[0], key[1], key[2], hosts, n) for key, hosts, n in _fold(groups)]


def _add(groups: dict[tuple[str, ...], list[str]], key: tuple[str, ...], host: str) -> None:
    hosts = groups.setdefault(key, [])
    if not hosts or hosts[-1] != host:
        hosts.append(host)


def collection_gaps(capture: Capture) -> Gaps:
    """Every gap of a capture, grouped so that a fleet-wide gap is one line."""
    host_groups: dict[tuple[str, ...], list[str]] = {}
    failed: dict[tuple[str, ...], list[str]] = {}
    truncated: dict[tuple[str, ...], list[str]] = {}
    one_snapshot = []
    for hc in sorted(capture.hosts, key=lambda h: natural_key(h.host)):
        if hc.status != HostStatus.OK:
            _add(host_groups, (str(hc.status), hc.reason or "no reason recorded"), hc.host)
        if hc.items and hc.interval_s is None:
            one_snapshot.append(hc.host)
        for it in _data_items(hc.items):
            if it.error:
                _add(failed, (it.collector, it.source, it.error), hc.host)
            if it.truncated:
                _add(truncated, (it.collector, it.source, "cut at its size cap"), hc.host)
    hosts = [HostGap(key[0], key[1], folded, n) for key, folded, n in _fold(host_groups)]
    failed_rows, truncated_rows = _item_gaps(failed), _item_gaps(truncated)
    left_out = sum(max(len(rows) - MAX_GAP_ROWS, 0) for rows in (hosts, failed_rows, truncated_rows))
    return Gaps(
        hosts=tuple(hosts[:MAX_GAP_ROWS]),
        failed=tuple(failed_rows[:MAX_GAP_ROWS]),
        truncated=tuple(truncated_rows[:MAX_GAP_ROWS]),
        left_out=left_out,
        one_snapshot=hostlist(one_snapshot) if one_snapshot else "",
        inputs_truncated=tuple(sorted(i.source for i in capture.inputs if i.truncated)),
    )


def _data_items(items: Iterable[CaptureItem]) -> Iterable[CaptureItem]:
    # A command's stderr is its own item; the command item carries the error already.
    return (it for it in items if it.kind != "stderr")
