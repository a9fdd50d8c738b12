"""Providers' track records, from the tracker's history: how fast each provider (and each desk) answers and
resolves, how many of its cases are open and how old they are, how often a resolved case is reopened, and the
repeat offenders, the same host, port or switch escalated again within N days of a resolution.

Everything is computed from each escalation's events (tracker.get(id).events), so it needs no schema of its own:

- filed: the "filed" event; a draft never filed is no case and counts in no number below;
- first reply: the first "comment" event whose data says from_provider (its time is the desk's);
- resolved: a "state" event to resolved or closed; reopened: a "state" event from resolved or closed back to an
  open state, or a "reopen" event;
- desk: for a cloud provider its own name; for the static provider the desk named in the "filing" or "filed"
  event's data when it names one (source "filing"), else the desk configured now (source "config").

Pure, except `load_cases` and `repeat_history`, which read a Tracker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from fabricase.models import Escalation, EscalationState
from fabricase.tracker.records import component_label, iso, parse_iso

if TYPE_CHECKING:
    from fabricase.tracker.store import Tracker

__all__ = [
    "AGE_BUCKETS", "DEFAULT_REPEAT_DAYS", "CaseTimes", "EarlierCase", "GroupStats", "Quantiles", "RepeatHistory",
    "RepeatOffender", "TrackRecord", "case_times", "escalated_keys", "group_stats", "history_line", "history_lines",
    "key_host_component", "key_kind", "load_cases", "quantile", "repeat_history", "repeat_history_of",
    "repeat_offenders", "track_record",
]  # fmt: skip

DEFAULT_REPEAT_DAYS = 30
# Open cases by age since filing: (label, lower bound inclusive); the last bucket has no upper bound.
AGE_BUCKETS: tuple[tuple[str, timedelta], ...] = (
    ("<1d", timedelta(0)), ("1-7d", timedelta(days=1)), ("7-30d", timedelta(days=7)), (">30d", timedelta(days=30)),
)  # fmt: skip
_CLOSED = frozenset({EscalationState.RESOLVED.value, EscalationState.CLOSED.value})
# A shared component's family as the ticket names it ("third escalation for this switch").
_SHARED_WORDS = {"switch": "switch", "network-node": "network node", "block": "block", "subblock": "sub-block",
                 "rack": "rack"}  # fmt: skip
_PORT_WORDS = {"rdma": "port", "netdev": "port", "nvlink": "NVLink", "gpu": "GPU", "pcie": "PCIe device",
               "nvswitch": "NVSwitch"}  # fmt: skip
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


# -- one escalation's timeline ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseTimes:
    """One escalation's moments, read from its events: what every number here is computed from."""

    id: str
    seq: int
    provider: str
    desk: str
    desk_source: str  # "provider" (a cloud's own desk), "filing" (named when filed) or "config" (configured now)
    state: str
    case_id: str | None
    created_at: datetime
    filed_at: datetime | None
    first_reply_at: datetime | None
    resolutions: tuple[datetime, ...]  # every move to resolved or closed, in order
    reopened: bool
    keys: tuple[str, ...]  # what it escalated: hosts ("gpu001"), ports ("gpu001/rdma:mlx5_3/1"), "switch:leaf-3"

    @property
    def is_open(self) -> bool:
        return self.state not in _CLOSED

    @property
    def resolved_at(self) -> datetime | None:
        """When it was last resolved, for one resolved (or closed) now; None while it is open."""
        return self.resolutions[-1] if self.resolutions and not self.is_open else None

    def resolved_before(self, moment: datetime) -> datetime | None:
        """Its last resolution at or before `moment` (None: none by then)."""
        done = [r for r in self.resolutions if r <= moment]
        return done[-1] if done else None


def _seq(esc_id: str) -> int:
    digits = "".join(ch for ch in esc_id if ch.isdigit())
    return int(digits) if digits else 0


def escalated_keys(hosts: Iterable[str], components: Iterable[str]) -> tuple[str, ...]:
    """What an escalation escalated, by component labels (Escalation.components): each port ("gpu001/rdma:...")
    and shared component ("switch:leaf-3"), and each host with a component named; an escalation naming no
    component (a symptom alone, on every captured host) escalated each of its hosts."""
    labels = list(dict.fromkeys(components))
    named_hosts = {label.partition("/")[0] for label in labels if _label_host(label)}
    hosts = [h for h in dict.fromkeys(hosts) if h in named_hosts or not labels]
    return (*hosts, *labels)


def _label_host(label: str) -> str | None:
    """The host of a component label ("gpu001/rdma:mlx5_3/1"), None for a shared one ("switch:leaf-3")."""
    head, sep, _ = label.partition("/")
    return head if sep and ":" not in head else None


def _desk(esc: Escalation, desks: Mapping[str, str]) -> tuple[str, str]:
    if esc.provider != "static":
        return esc.provider, "provider"
    for event in reversed(esc.events):
        if event.kind in ("filed", "filing") and event.data.get("desk"):
            return str(event.data["desk"]), "filing"
    return desks.get(esc.provider, "outbox"), "config"


def case_times(esc: Escalation, *, desks: Mapping[str, str] | None = None) -> CaseTimes:
    """An escalation (with its events) as the moments its track record needs. desks: provider -> the desk
    configured now, for a static escalation whose filing did not name one (default: the outbox)."""
    filed = first_reply = None
    resolutions: list[datetime] = []
    reopened = False
    for event in esc.events:
        at = parse_iso(event.at)
        if at is None:
            continue
        if event.kind == "filed" and filed is None:
            filed = at
        elif event.kind == "comment" and event.data.get("from_provider") and filed is not None:
            first_reply = at if first_reply is None else min(first_reply, at)
        elif event.kind == "state":
            before, after = event.data.get("from"), event.data.get("to")
            if after in _CLOSED and before not in _CLOSED:
                resolutions.append(at)
            elif before in _CLOSED and after not in _CLOSED:
                reopened = True
        elif event.kind == "reopen":
            reopened = True
    desk, source = _desk(esc, desks or {})
    created = parse_iso(esc.created_at)
    if created is None:
        raise ValueError(f"{esc.id}: created_at {esc.created_at!r} is not a timestamp")
    if first_reply is not None and filed is not None:
        first_reply = max(first_reply, filed)  # a desk clock behind ours is no negative reply time
    return CaseTimes(
        id=esc.id, seq=_seq(esc.id), provider=esc.provider, desk=desk, desk_source=source, state=str(esc.state),
        case_id=esc.provider_case_id, created_at=created, filed_at=filed, first_reply_at=first_reply,
        resolutions=tuple(sorted(resolutions)), reopened=reopened, keys=escalated_keys(esc.hosts, esc.components),
    )  # fmt: skip


def load_cases(tracker: Tracker, *, desks: Mapping[str, str] | None = None) -> list[CaseTimes]:
    """Every escalation of the tracker, oldest first, as CaseTimes (one read of its history each)."""
    return [case_times(esc, desks=desks) for esc in tracker.list(state="all", events=True)]


# -- numbers ------------------------------------------------------------------------------------------------


def quantile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile by linear interpolation between the closest ranks (numpy's default, and
    statistics.quantiles(method="inclusive")): the median of 1, 2, 3, 10 is 2.5, its 0.9-quantile 7.9.
    None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass(frozen=True)
class Quantiles:
    """The median and 90th percentile of some durations, in seconds (None when there is none)."""

    count: int
    median_s: float | None
    p90_s: float | None

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Quantiles:
        return cls(len(seconds), quantile(seconds, 0.5), quantile(seconds, 0.9))

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "median_s": self.median_s, "p90_s": self.p90_s}


@dataclass(frozen=True)
class GroupStats:
    """One provider's (desk None) or one desk's track record."""

    provider: str
    desk: str | None
    escalations: int  # created in the window, filed or not
    cases: int  # of those, filed with the desk
    first_reply: Quantiles  # filing -> the provider's first reply
    awaiting_reply: int  # filed, open, no reply yet
    resolve: Quantiles  # filing -> resolution, for the cases resolved now
    open_by_age: dict[str, int]  # open cases by age since filing, AGE_BUCKETS
    resolved: int  # cases resolved at least once
    reopened: int  # of those, reopened at least once
    desk_sources: tuple[str, ...] = ()  # how the desks were known: provider, filing, config

    @property
    def reopen_ratio(self) -> float | None:
        return self.reopened / self.resolved if self.resolved else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider, "desk": self.desk, "escalations": self.escalations, "cases": self.cases,
            "first_reply": self.first_reply.to_dict(), "awaiting_reply": self.awaiting_reply,
            "resolve": self.resolve.to_dict(), "open_by_age": dict(self.open_by_age), "resolved": self.resolved,
            "reopened": self.reopened, "reopen_ratio": self.reopen_ratio, "desk_sources": list(self.desk_sources),
        }  # fmt: skip


def _age_bucket(age: timedelta) -> str:
    label = AGE_BUCKETS[0][0]
    for name, low in AGE_BUCKETS:
        if age >= low:
            label = name
    return label


def group_stats(provider: str, desk: str | None, cases: Sequence[CaseTimes], now: datetime) -> GroupStats:
    """The track record of these escalations (all of one provider, or of one desk)."""
    filed = [c for c in cases if c.filed_at is not None]
    replies = [(c.first_reply_at - c.filed_at).total_seconds() for c in filed if c.first_reply_at and c.filed_at]
    resolves = [(c.resolved_at - c.filed_at).total_seconds() for c in filed if c.resolved_at and c.filed_at]
    open_cases = [c for c in filed if c.is_open]
    by_age = {name: 0 for name, _ in AGE_BUCKETS}
    for c in open_cases:
        by_age[_age_bucket(now - (c.filed_at or c.created_at))] += 1
    ever_resolved = [c for c in filed if c.resolutions]
    return GroupStats(
        provider=provider, desk=desk, escalations=len(cases), cases=len(filed),
        first_reply=Quantiles.of([max(s, 0.0) for s in replies]),
        awaiting_reply=sum(1 for c in open_cases if c.first_reply_at is None),
        resolve=Quantiles.of([max(s, 0.0) for s in resolves]), open_by_age=by_age,
        resolved=len(ever_resolved), reopened=sum(1 for c in ever_resolved if c.reopened),
        desk_sources=tuple(sorted({c.desk_source for c in cases})),
    )  # fmt: skip


# -- repeat offenders ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EarlierCase:
    """An earlier escalation of a repeat offender."""

    id: str
    case_id: str | None
    created_at: str
    resolved_at: str | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def key_kind(key: str) -> str:
    """What a key names: "host", "port" (a component on a host: NIC port, GPU, NVLink) or "switch" (shared)."""
    if _label_host(key):
        return "port"
    return "switch" if ":" in key else "host"


def key_host_component(key: str) -> tuple[str, str]:
    """(host, component) of a key the way metrics label them: ("gpu001", "host"), ("gpu001", "rdma:mlx5_3/1"),
    ("", "switch:leaf-3")."""
    host = _label_host(key)
    if host is not None:
        return host, key[len(host) + 1:]
    return ("", key) if ":" in key else (key, "host")


def _linked(earlier: Sequence[CaseTimes], moment: datetime, window: timedelta) -> list[CaseTimes]:
    """The earlier cases last resolved (before `moment`) within `window` of it."""
    out = []
    for c in earlier:
        resolved = c.resolved_before(moment)
        if resolved is not None and moment - resolved <= window and c.created_at <= moment:
            out.append(c)
    return out


def _runs(cases: Sequence[CaseTimes], window: timedelta) -> list[list[CaseTimes]]:
    """The runs of escalations of one thing (cases oldest first): two are in one run when the later was created
    within `window` of a resolution of the earlier, and runs join through their members. Oldest run first."""
    parent = {c.id: c.id for c in cases}

    def root(esc_id: str) -> str:
        while parent[esc_id] != esc_id:
            parent[esc_id] = parent[parent[esc_id]]
            esc_id = parent[esc_id]
        return esc_id

    for i, c in enumerate(cases):
        for earlier in _linked(cases[:i], c.created_at, window):
            parent[root(earlier.id)] = root(c.id)
    runs: dict[str, list[CaseTimes]] = {}
    for c in cases:
        runs.setdefault(root(c.id), []).append(c)
    return list(runs.values())


@dataclass(frozen=True)
class RepeatOffender:
    """A host, port or switch escalated again within `days` of a resolution: its current run of escalations."""

    provider: str
    key: str
    kind: str  # host, port, switch
    escalations: tuple[EarlierCase, ...]  # oldest first; the last is the repeat

    @property
    def host_component(self) -> tuple[str, str]:
        return key_host_component(self.key)

    def to_dict(self) -> dict[str, Any]:
        host, component = self.host_component
        return {"provider": self.provider, "key": self.key, "kind": self.kind, "host": host or None,
                "component": component, "count": len(self.escalations),
                "escalations": [e.to_dict() for e in self.escalations]}  # fmt: skip


def _earlier(c: CaseTimes) -> EarlierCase:
    resolved = c.resolved_at
    return EarlierCase(c.id, c.case_id, iso(c.created_at), iso(resolved) if resolved else None)


def _by_key(cases: Iterable[CaseTimes]) -> dict[tuple[str, str], list[CaseTimes]]:
    grouped: dict[tuple[str, str], list[CaseTimes]] = {}
    for c in sorted(cases, key=lambda x: (x.created_at, x.seq)):
        for key in c.keys:
            grouped.setdefault((c.provider, key), []).append(c)
    return grouped


def repeat_offenders(cases: Sequence[CaseTimes], *, days: int = DEFAULT_REPEAT_DAYS,
                     since: datetime | None = None) -> list[RepeatOffender]:
    """Per provider, each host, port or switch escalated again within `days` of a resolution, once per run (with
    `since`: a run whose latest escalation was created since then). A host whose run is one of its ports' is
    listed as the port only."""
    window = timedelta(days=days)
    found = []
    for (provider, key), mine in _by_key(cases).items():
        for run in _runs(mine, window):
            if len(run) < 2 or (since is not None and run[-1].created_at < since):
                continue
            found.append(RepeatOffender(provider, key, key_kind(key), tuple(_earlier(c) for c in run)))
    ports = {(r.provider, key_host_component(r.key)[0], r.escalations) for r in found if r.kind == "port"}
    found = [r for r in found if r.kind != "host" or (r.provider, r.key, r.escalations) not in ports]
    return sorted(found, key=lambda r: (r.provider, r.key, r.escalations[0].created_at))


# -- the whole record ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrackRecord:
    """`fabricase providers stats`: per provider and per desk, and the repeat offenders."""

    now: str
    since: str | None  # escalations created at or after this count; None: all
    repeat_days: int
    providers: list[GroupStats]
    desks: list[GroupStats]
    repeat_offenders: list[RepeatOffender] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "now": self.now, "since": self.since, "repeat_days": self.repeat_days,
            "age_buckets": [name for name, _ in AGE_BUCKETS],
            "providers": [g.to_dict() for g in self.providers], "desks": [g.to_dict() for g in self.desks],
            "repeat_offenders": [r.to_dict() for r in self.repeat_offenders],
        }  # fmt: skip


def track_record(cases: Sequence[CaseTimes], *, now: datetime, since: timedelta | None = None,
                 repeat_days: int = DEFAULT_REPEAT_DAYS) -> TrackRecord:
    """The track record of the escalations created in the last `since` (None: all of them). The repeat
    offenders' earlier escalations may be older than the window; their latest one is in it."""
    start = now - since if since is not None else None
    window = [c for c in cases if start is None or c.created_at >= start]
    providers = sorted({c.provider for c in window})
    desks = sorted({(c.provider, c.desk) for c in window})
    return TrackRecord(
        now=iso(now), since=iso(start) if start else None, repeat_days=repeat_days,
        providers=[group_stats(p, None, [c for c in window if c.provider == p], now) for p in providers],
        desks=[group_stats(p, d, [c for c in window if (c.provider, c.desk) == (p, d)], now) for p, d in desks],
        repeat_offenders=repeat_offenders(cases, days=repeat_days, since=start),
    )  # fmt: skip


# -- the ticket's history line ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RepeatHistory:
    """What a new escalation repeats: one host, port or switch, and its earlier escalations (oldest first)."""

    key: str
    kind: str
    earlier: tuple[EarlierCase, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "kind": self.kind, "earlier": [e.to_dict() for e in self.earlier]}


def _labels(components: Iterable[tuple[str | None, str] | str]) -> list[str]:
    """Component labels of (host, component) pairs (a label passes as it is)."""
    return [c if isinstance(c, str) else component_label(c[0], c[1]) for c in components]


def repeat_history_of(cases: Sequence[CaseTimes], *, provider: str | None, hosts: Iterable[str],
                      components: Iterable[tuple[str | None, str] | str], now: datetime,
                      days: int = DEFAULT_REPEAT_DAYS, exclude: str | None = None) -> list[RepeatHistory]:
    """For a new escalation of these hosts and (host, component) pairs, filed `now`: each that is a repeat
    offender (an earlier escalation of it, with `provider` when given, was resolved within `days` before now),
    with the run of earlier escalations it continues. `exclude`: the new escalation's own id, when recorded."""
    keys = escalated_keys(hosts, _labels(components))
    earlier = [c for c in cases if c.id != exclude and c.created_at <= now
               and (provider is None or c.provider == provider)]  # fmt: skip
    window = timedelta(days=days)
    out = []
    for key in keys:
        mine = sorted((c for c in earlier if key in c.keys), key=lambda x: (x.created_at, x.seq))
        linked = {c.id for c in _linked(mine, now, window)}
        runs = [run for run in _runs(mine, window) if linked & {c.id for c in run}]
        if runs:
            run = sorted((c for r in runs for c in r), key=lambda x: (x.created_at, x.seq))
            out.append(RepeatHistory(key, key_kind(key), tuple(_earlier(c) for c in run)))
    return out


def repeat_history(tracker: Tracker, *, provider: str | None, hosts: Iterable[str],
                   components: Iterable[tuple[str | None, str] | str], now: datetime,
                   days: int = DEFAULT_REPEAT_DAYS, exclude: str | None = None) -> list[RepeatHistory]:
    """repeat_history_of over the tracker's escalations. Only those sharing a host, port or switch with the new one
    are read with their history: `open` calls this on every filing, whatever the size of the tracker."""
    hosts, components = list(hosts), list(components)
    keys = set(escalated_keys(hosts, _labels(components)))
    candidates = [esc for esc in tracker.list(state="all", provider=provider)
                  if esc.id != exclude and keys & set(escalated_keys(esc.hosts, esc.components))]  # fmt: skip
    return repeat_history_of([case_times(tracker.get(esc.id)) for esc in candidates], provider=provider, hosts=hosts,
                             components=components, now=now, days=days, exclude=exclude)


def _ordinal(n: int) -> str:
    if n <= len(_ORDINALS):
        return _ORDINALS[n - 1]
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _thing(h: RepeatHistory) -> str:
    if h.kind == "host":
        return "host"
    component = key_host_component(h.key)[1]
    family = component.partition(":")[0]
    return (_PORT_WORDS if h.kind == "port" else _SHARED_WORDS).get(family, "component")


def history_line(h: RepeatHistory) -> str:
    """The ticket's line, e.g. "third escalation for this port since 2026-10-02: FC-12 (case 5551234), FC-31".
    The count includes the new escalation; each earlier one is named by its tracker id and, once filed, by the
    desk's case id (what the desk's engineer can look up)."""
    cases = ", ".join(e.id + (f" (case {e.case_id})" if e.case_id else "") for e in h.earlier)
    since = h.earlier[0].created_at[:10]
    return f"{_ordinal(len(h.earlier) + 1)} escalation for this {_thing(h)} since {since}: {cases}"


def history_lines(history: Iterable[RepeatHistory]) -> dict[str, str]:
    """key ("gpu001", "gpu001/rdma:mlx5_3/1", "switch:leaf-3") -> its history_line: what make_draft takes."""
    return {h.key: history_line(h) for h in history}
