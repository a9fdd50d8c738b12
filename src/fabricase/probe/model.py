"""The probe's records: what was planned (ProbeTest), how each test ended (ProbeResult), and the document that
goes into the capture as probe.json, beside capture.json, so that the analysis, the bundle and the ticket read
the same plan.

A test's output is a capture item of the host that reports the figure (the client of a pair; the launcher's
host of a collective): `cmd:perf-probe-<test id>`; the server side of a pair is `cmd:probe-server-<test id>` on
the server host (stored, not analyzed as a result). The figure is always parsed again from the item: probe.json
says what ran, never what it measured.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "PAIR_KINDS", "PROBE_FORMAT", "PROBE_FORMAT_VERSION", "PROBE_NAME", "STAGES", "TEST_STATUSES",
    "ProbeDoc", "ProbeResult", "ProbeTest", "item_source", "server_item_source",
]  # fmt: skip

PROBE_NAME = "probe.json"
PROBE_FORMAT = "fabricase-probe"
PROBE_FORMAT_VERSION = 1
PAIR_KINDS = ("ib_write_bw", "ib_read_bw", "ib_send_bw", "iperf3")  # server/client tests between two hosts
COLLECTIVE_KINDS = ("all_reduce_perf",)
GPU_KINDS = ("dcgmi",)
# collective: the whole set (bisection round 1); bisect: a halving set; bisect-pair: a suspect host with a
# known-good one; bisect-confirm: a host whose pair was slow, again with another known-good host; bisect-control:
# two known-good hosts, the reference of a round without an expected busbw.
STAGES = ("pairs", "tcp", "collective", "bisect", "bisect-pair", "bisect-confirm", "bisect-control", "gpu")
TEST_STATUSES = ("ok", "failed", "timed-out", "interrupted", "skipped")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,120}")


@dataclass(frozen=True)
class ProbeTest:
    """One planned test.

    id: unique in the probe, names the capture items (`r2-ib_write_bw-03`); kind: the tool; stage: which part of
    the probe planned it; round: tests of one round run at once on disjoint hosts (1-based, over the whole probe);
    hosts: a pair test's (server, client), or a collective's set in rank order; rail: the NIC index a pair
    test used on both sides (NIC i to NIC i), None for TCP and collectives; devices: the RDMA device on
    (server, client); parent: a bisection test's parent set id (None at the top), or for a pair test run again
    because its figure was slow, the first test's id; argv: the reporting side's
    command line as run on its host; server_argv: the server side's.
    """

    id: str
    kind: str
    stage: str
    round: int
    hosts: tuple[str, ...]
    rail: int | None = None
    devices: tuple[str, ...] = ()
    parent: str | None = None
    argv: tuple[str, ...] = ()
    server_argv: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _ID.fullmatch(self.id):
            raise ValueError(f"invalid probe test id: {self.id!r}")

    @property
    def reporter(self) -> str:
        """The host whose item holds the figure: the client of a pair, the first rank of a collective."""
        return self.hosts[1] if self.kind in PAIR_KINDS and len(self.hosts) == 2 else self.hosts[0]

    @property
    def server(self) -> str | None:
        return self.hosts[0] if self.kind in PAIR_KINDS and len(self.hosts) == 2 else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("hosts", "devices", "argv", "server_argv"):
            d[key] = list(d[key])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProbeTest:
        return cls(id=str(d["id"]), kind=str(d["kind"]), stage=str(d["stage"]), round=int(d["round"]),
                   hosts=tuple(str(h) for h in d["hosts"]), rail=None if d.get("rail") is None else int(d["rail"]),
                   devices=tuple(str(x) for x in d.get("devices") or ()),
                   parent=None if d.get("parent") is None else str(d["parent"]),
                   argv=tuple(str(x) for x in d.get("argv") or ()),
                   server_argv=tuple(str(x) for x in d.get("server_argv") or ()))  # fmt: skip


@dataclass(frozen=True)
class ProbeResult:
    """How one test ended. status: ok | failed | timed-out | interrupted | skipped; error: why, in one line;
    duration_s: wall time of the test; leftovers: processes of this test still running on its hosts afterwards
    (each was killed; a non-empty list is reported)."""

    test: ProbeTest
    status: str
    error: str | None = None
    duration_s: float | None = None
    started_at: str | None = None
    leftovers: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"test": self.test.to_dict(), "status": self.status, "error": self.error,
                "duration_s": self.duration_s, "started_at": self.started_at, "leftovers": list(self.leftovers)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProbeResult:
        status = str(d.get("status"))
        if status not in TEST_STATUSES:
            raise ValueError(f"probe test status {status[:40]!r} is not one of {', '.join(TEST_STATUSES)}")
        return cls(test=ProbeTest.from_dict(d["test"]), status=status,
                   error=None if d.get("error") is None else str(d["error"])[:500],
                   duration_s=None if d.get("duration_s") is None else float(d["duration_s"]),
                   started_at=None if d.get("started_at") is None else str(d["started_at"]),
                   leftovers=tuple(str(x) for x in d.get("leftovers") or ()))


@dataclass
class ProbeDoc:
    """probe.json. expected: what each figure was held against and where that came from, e.g.
    {"pair_gbps": 360.0, "pair_basis": "90% of the 400 Gb/s port rate", "busbw_gbs": None, "busbw_basis": ...};
    options: the probe's settings (budget, per-test timeout, duration, sizes, GID index, QPs, ports);
    interrupted: Ctrl-C or the budget ended it early (the tests that finished are kept); stopped_reason: why;
    notes: what a stage found out as it ran, e.g. {"rdma": "no RDMA rail on every host ...", "bisection":
    {"conclusion": "slow-hosts", "suspects": [...], "note": "..."}} (the analysis re-judges from the items)."""

    hosts: list[str]
    results: list[ProbeResult] = field(default_factory=list)
    expected: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False
    stopped_reason: str | None = None
    transport: str = "ssh"
    notes: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"format": PROBE_FORMAT, "format_version": PROBE_FORMAT_VERSION, "hosts": list(self.hosts),
                "transport": self.transport, "expected": dict(self.expected), "options": dict(self.options),
                "interrupted": self.interrupted, "stopped_reason": self.stopped_reason,
                "notes": dict(self.notes), "results": [r.to_dict() for r in self.results]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProbeDoc:
        if not isinstance(d, dict) or d.get("format") != PROBE_FORMAT:
            raise ValueError("not a fabricase probe record")
        if d.get("format_version") != PROBE_FORMAT_VERSION:
            raise ValueError(f"probe record format_version {d.get('format_version')!r} is not {PROBE_FORMAT_VERSION}")
        return cls(hosts=[str(h) for h in d.get("hosts") or ()],
                   results=[ProbeResult.from_dict(r) for r in d.get("results") or ()],
                   expected=dict(d.get("expected") or {}), options=dict(d.get("options") or {}),
                   interrupted=bool(d.get("interrupted")),
                   stopped_reason=None if d.get("stopped_reason") is None else str(d["stopped_reason"])[:500],
                   transport=str(d.get("transport") or "ssh"),
                   notes=dict(d.get("notes") or {}) if isinstance(d.get("notes"), dict) else {})  # fmt: skip


def item_source(test_id: str) -> str:
    """The capture item that holds a test's reported output (on the reporting host)."""
    return f"cmd:perf-probe-{test_id}"


def server_item_source(test_id: str) -> str:
    """The capture item that holds a pair test's server-side output (on the server host)."""
    return f"cmd:probe-server-{test_id}"
