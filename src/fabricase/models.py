"""Typed records passed between the stages. Plain dataclasses: no I/O here except HostCapture.read,
which reads one stored item from the capture directory it was loaded from."""

from __future__ import annotations

import enum
import fnmatch
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

__all__ = [
    "Bundle",
    "Capture",
    "CaptureItem",
    "Escalation",
    "EscalationEvent",
    "EscalationState",
    "Evidence",
    "Finding",
    "Host",
    "HostCapture",
    "HostStatus",
    "HostSummary",
    "InputFile",
    "MetricSample",
    "Placement",
    "Severity",
    "SnapshotInfo",
    "TicketDraft",
]


class HostStatus(enum.StrEnum):
    OK = "ok"
    PARTIAL = "partial"  # the stream was cut off: what came back is kept
    TIMED_OUT = "timed-out"
    UNREACHABLE = "unreachable"
    AUTH_FAILED = "auth-failed"
    FAILED = "failed"  # the capture script could not run or its output was unreadable


class Severity(enum.StrEnum):
    CRITICAL = "critical"
    MAJOR = "major"
    MINOR = "minor"
    INFO = "info"

    @property
    def rank(self) -> int:
        return ["critical", "major", "minor", "info"].index(self.value)


class EscalationState(enum.StrEnum):
    DRAFT = "draft"
    FILED = "filed"
    WAITING_PROVIDER = "waiting-provider"
    WAITING_US = "waiting-us"
    RESOLVED = "resolved"
    CLOSED = "closed"

    @property
    def is_open(self) -> bool:
        return self not in (EscalationState.RESOLVED, EscalationState.CLOSED)


@dataclass(frozen=True)
class Host:
    name: str
    address: str | None = None


@dataclass(slots=True)  # thousands per GPU host: no per-object __dict__
class CaptureItem:
    """One file read or one command run on one host in one snapshot.

    source: the absolute path read (`/sys/class/net/eth0/statistics/rx_errors`) or `cmd:<name>`;
    a command's stderr is a separate item with source `cmd:<name>` and kind `stderr`.
    path: where the bytes are stored, relative to the host's folder in the capture directory: the host's
    packed stream (`stream.fc1`, with `offset`), or a file of its own (format 1, and recorded test hosts).
    """

    source: str
    snapshot: int
    kind: str  # "file" | "command" | "stderr"
    collector: str
    path: str
    bytes: int
    sha256: str
    rc: int | None = None
    duration_ms: float | None = None
    truncated: bool = False
    error: str | None = None
    command: str | None = None
    offset: int | None = None  # set when `path` is the host's packed stream: the item is bytes[offset:+bytes]

    def to_dict(self) -> dict[str, Any]:
        # Every field is a plain value; asdict's deep copy costs ~60 us an item on a 4,000-item host.
        return {name: getattr(self, name) for name in _ITEM_FIELDS}


_ITEM_FIELDS = tuple(f.name for f in fields(CaptureItem))


@dataclass(frozen=True)
class HostSummary:
    """What a capture says of one host, read once per run: its status, and its identity (hostname, kernel, DMI
    strings, the Azure physical host) that locate, the ticket and the summary share."""

    host: str
    status: str  # HostStatus value
    reason: str | None = None
    identity: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form providers' `locate` and the templates read: {host, status, reason, identity}."""
        return {"host": self.host, "status": self.status, "reason": self.reason, "identity": dict(self.identity)}


@dataclass
class SnapshotInfo:
    index: int
    epoch: float | None  # host wall clock at snapshot start
    uptime_start: float | None  # host /proc/uptime at start and end: the monotonic interval between snapshots
    uptime_end: float | None


@dataclass
class HostCapture:
    host: str
    status: HostStatus
    transport: str
    reason: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    items: list[CaptureItem] = field(default_factory=list)
    snapshots: list[SnapshotInfo] = field(default_factory=list)
    root: Path | None = None  # the host's folder in the capture directory
    # Lookups and reads are memoized: every analysis domain reads the same items, often the same ones.
    _index: dict[tuple[str, int, str], CaptureItem] = field(default_factory=dict, init=False, repr=False,
                                                            compare=False)
    _indexed: int = field(default=-1, init=False, repr=False, compare=False)
    _blobs: dict[str, bytes] = field(default_factory=dict, init=False, repr=False, compare=False)
    cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def _lookup(self) -> dict[tuple[str, int, str], CaptureItem]:
        if self._indexed != len(self.items):
            self._index = {}
            for it in self.items:
                self._index.setdefault((it.source, it.snapshot, it.kind), it)
            self._indexed = len(self.items)
        return self._index

    def item(self, source: str, snapshot: int = 0, kind: str | None = None) -> CaptureItem | None:
        index = self._lookup()
        if kind is not None:
            return index.get((source, snapshot, kind))
        return index.get((source, snapshot, "file")) or index.get((source, snapshot, "command"))

    def matching(self, pattern: str, snapshot: int = 0) -> list[CaptureItem]:
        """Items whose source matches a shell-style pattern, in source order."""
        # Cheap prefix test first: a GPU host has ~3,000 items and fnmatch on each, per call, adds up over a fleet.
        prefix = pattern[: min((i for i, c in enumerate(pattern) if c in "*?["), default=len(pattern))]
        found = [
            it
            for it in self.items
            if it.snapshot == snapshot and it.kind != "stderr" and it.source.startswith(prefix)
            and fnmatch.fnmatchcase(it.source, pattern)
        ]
        return sorted(found, key=lambda it: it.source)

    def read(self, item: CaptureItem) -> bytes:
        if self.root is None:
            raise ValueError(f"host {self.host}: capture has no directory to read {item.source} from")
        data = self._blobs.get(item.path)
        if data is None:
            data = self._blobs[item.path] = (self.root / item.path).read_bytes()
        if item.offset is not None:
            return data[item.offset:item.offset + item.bytes]
        return data

    def texts(self, prefix: str, kind: str = "file") -> dict[tuple[str, int], str]:
        """The text (undecodable bytes replaced) of every item of this kind whose source starts with prefix, by
        (source, snapshot), in one pass: the first item of each (source, snapshot) wins, as in item(). A
        subclass may read them in bulk; a failed read raises as read() does."""
        out: dict[tuple[str, int], str] = {}
        for it in self.items:
            if it.kind == kind and it.source.startswith(prefix) and (it.source, it.snapshot) not in out:
                out[(it.source, it.snapshot)] = self.read(it).decode("utf-8", errors="replace")
        return out

    def release(self) -> None:
        """Drop memoized reads, parses and the lookup index (rebuilt on the next lookup): a fleet's captures must
        not all stay in memory at once, and the index of a GPU host is as large as its items."""
        self._blobs.clear()
        self.cache.clear()
        self._index = {}
        self._indexed = -1

    def text(self, source: str, snapshot: int = 0) -> str | None:
        """The item's content as text (undecodable bytes replaced), or None when it was not captured."""
        it = self.item(source, snapshot)
        if it is None or (it.kind == "command" and it.rc not in (0, None) and it.bytes == 0):
            return None
        return self.read(it).decode("utf-8", errors="replace")

    @property
    def interval_s(self) -> float | None:
        """Seconds between the starts of snapshot 0 and 1, on the host's monotonic clock."""
        by_index = {s.index: s for s in self.snapshots}
        s0, s1 = by_index.get(0), by_index.get(1)
        if not s0 or not s1:
            return None
        if s0.uptime_start is not None and s1.uptime_start is not None:
            return max(s1.uptime_start - s0.uptime_start, 0.0) or None
        if s0.epoch is not None and s1.epoch is not None:
            return max(s1.epoch - s0.epoch, 0.0) or None
        return None


@dataclass
class Capture:
    root: Path
    format_version: int
    created_at: str
    tool_version: str
    interval_s: float
    collectors: dict[str, int]  # name -> collector version
    targets: dict[str, Any]
    hosts: list[HostCapture]
    inputs: list[InputFile] = field(default_factory=list)
    # host -> its analysis, done by the recording worker as the host was written (pipeline.collect with
    # analyze_hosts), with the per-host hook it ran; analysis.analyze takes them once, instead of analyzing again.
    analyzed: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    analyzed_with: Any = field(default=None, repr=False, compare=False)

    def host(self, name: str) -> HostCapture | None:
        return next((h for h in self.hosts if h.host == name), None)

    def read_input(self, item: InputFile) -> bytes:
        return (self.root / item.path).read_bytes()


@dataclass
class InputFile:
    """A file given to fabricase rather than read on a host: a job's NCCL debug log, for instance."""

    kind: str  # "nccl-log"
    source: str  # where it was read from, as given
    path: str  # relative to the capture directory: inputs/<kind>/<nnn>-<name>
    bytes: int
    sha256: str
    truncated: bool = False


@dataclass
class Placement:
    """Where a host sits in the provider's world. Vendor raw fields go in extra."""

    host: str
    provider: str
    instance_id: str | None = None
    instance_type: str | None = None
    region: str | None = None
    zone: str | None = None
    placement_group: str | None = None
    topology: list[str] = field(default_factory=list)  # outermost first: network nodes, block/sub-block, rack
    extra: dict[str, Any] = field(default_factory=dict)
    source: str | None = None  # where it came from: "provider:<name>" or "inventory:<file>" (placements.json)


@dataclass(slots=True)  # a fleet's analysis makes millions: no per-object __dict__
class MetricSample:
    host: str
    component: str  # `netdev:eth2`, `rdma:mlx5_3/1`, ...
    metric: str  # normalized name, e.g. `rx_errors`
    value: float | None  # None = not exposed, never 0
    unit: str
    source: str | None = None  # capture item source
    delta: float | None = None  # increase over the interval (counters only)
    rate: float | None = None  # per second over the interval
    note: str | None = None  # e.g. "counter reset"

    def __reduce__(self) -> tuple[type[MetricSample], tuple]:
        # The analysis pool sends each host's samples back through a pipe: a plain tuple of the fields pickles
        # and loads several times faster than a dataclass's state.
        return MetricSample, (self.host, self.component, self.metric, self.value, self.unit, self.source, self.delta,
                              self.rate, self.note)


@dataclass
class Evidence:
    metric: str
    value: float | str | None
    unit: str
    baseline: float | str | None = None
    source: str | None = None  # capture item source (and snapshot) behind the value
    snapshot: int | None = None


@dataclass
class Finding:
    kind: str
    severity: Severity
    host: str | None  # None for a shared component (switch, network node, block)
    component: str
    summary: str
    evidence: list[Evidence] = field(default_factory=list)
    confidence: float | None = None
    q_value: float | None = None
    related: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["severity"] = str(self.severity)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        return cls(
            kind=d["kind"],
            severity=Severity(d["severity"]),
            host=d.get("host"),
            component=d["component"],
            summary=d["summary"],
            evidence=[Evidence(**e) for e in d.get("evidence", [])],
            confidence=d.get("confidence"),
            q_value=d.get("q_value"),
            related=list(d.get("related", [])),
        )

    @property
    def sort_key(self) -> tuple:
        """Most severe first, then most certain, then by place: the order a ticket lists them in."""
        return (self.severity.rank, -(self.confidence or 0.0), self.host or "", self.component, self.kind)


@dataclass
class Bundle:
    path: Path
    bundle_id: str  # sha256 of MANIFEST.json
    members: int
    size: int


@dataclass
class TicketDraft:
    provider: str
    title: str
    body: str
    severity: Severity
    hosts: list[str]
    components: list[str]
    bundle_id: str | None = None
    summary: str | None = None  # the Markdown summary attachment


@dataclass
class EscalationEvent:
    at: str
    kind: str  # "created", "filed", "state", "comment", "attach", "sync", ...
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Escalation:
    id: str
    provider: str
    state: EscalationState
    title: str
    symptom: str
    severity: Severity
    created_at: str
    updated_at: str
    provider_case_id: str | None = None
    raw_status: str | None = None
    hosts: list[str] = field(default_factory=list)
    components: list[str] = field(default_factory=list)
    bundle_id: str | None = None
    bundle_path: str | None = None
    ticket_path: str | None = None
    events: list[EscalationEvent] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["state"] = str(self.state)
        d["severity"] = str(self.severity)
        return d
