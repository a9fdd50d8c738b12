"""A job's `NCCL_DEBUG=INFO` output (many ranks interleaved) -> ranks, their NICs, and classified events.

NCCL prefixes its lines with `host:pid:tid [cudaDev]`. The init lines tie that prefix to a rank
(`comm 0x.. rank 11 nranks 16 cudaDev 3 ... busId 3b000`), the `NET/IB : Using [0]mlx5_0:1/RoCE ...` line lists
the NICs a process may use, and `Channel ... via NET/IB/3` lines say which of them a rank actually uses. Warnings
and errors are then attributed to the host and NIC they name (`hca mlx5_3`, `mlx5_3:1 Got async event`), or,
when a line names no NIC, to the one NIC its rank uses. PyTorch watchdog timeouts name only a rank.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

__all__ = ["EVENT_KINDS", "NcclEvent", "NcclLog", "NcclRank", "parse_nccl_log", "parse_nccl_log_lines"]

EVENT_KINDS = ("ib-completion-error", "port-error", "nic-fatal", "async-event", "ibv-failed", "timeout", "warn")
# Kinds whose NIC may be inferred from the one NIC a rank uses when the line names none.
_NIC_KINDS = frozenset({"ib-completion-error", "ibv-failed"})
MAX_EVENTS = 100_000  # a log of a hung 4,096-rank job can hold millions of warnings; counts stay exact below this
# Numbers are bounded (ranks, pids and devices are at most 10 digits; int() of thousands of digits raises) and
# end where the digits end, so a longer run is no number at all rather than its first digits.
_N = r"[0-9]{1,10}(?![0-9])"
_HOST = r"[A-Za-z0-9][\w.\-]*"
# The lookbehind starts a host only at the start of a word: from every position of a long word, `[\w.-]*:` would
# scan the rest of it (quadratic).
_PREFIX = re.compile(rf"(?<![\w.\-])(?P<host>{_HOST}):(?P<pid>{_N}):(?P<tid>{_N}) \[(?P<dev>{_N})\] ", re.ASCII)
_LEVEL = re.compile(r"\bNCCL (?P<level>INFO|WARN|TRACE|ABORT|ERROR)\b")
_TASK = re.compile(rf"^\s*(?:\[[0-9]+,(?P<mpi>{_N})\]<std(?:out|err)>:|(?P<srun>{_N}):\s)", re.ASCII)
_RANK_HINT = re.compile(rf"\[[Rr]ank ?(?P<rank>{_N})\]", re.ASCII)
_COMM = re.compile(
    rf"\bcomm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>{_N}) n[Rr]anks (?P<nranks>{_N})"
    rf"(?:.*?\bcudaDev (?P<dev>{_N}))?(?:.*?\bbusId (?P<bus>[0-9a-fA-F:.]+))?",
    re.ASCII,
)
_USING = re.compile(r"NET/(?P<net>\w+)\s*:\s*Using\s+(?P<list>\[\d+\].*?)(?:;|$)")
# "[3]mlx5_3:1/RoCE"; not "[0]eth0:192.0.2.2<0>" (NET/Socket lists interfaces and addresses).
_NIC = re.compile(rf"\[(?P<idx>{_N})\](?P<dev>[\w.\-]+):(?P<port>{_N})(?:/(?P<layer>\w+))?(?=[\s\[;]|$)", re.ASCII)
_NETWORK = re.compile(r"\bUsing network (?P<net>\w+)")
_OOB = re.compile(r"(?:OOB|Bootstrap\s*:\s*Using)\s+(?P<if>[\w.\-]+):(?P<ip>[0-9A-Fa-f:.%\w]+?)<\d+>")
# A bus id holds no bracket: `[^\]]*` alone would run from every "Channel" of a long line to its end.
_CHANNEL = re.compile(
    rf"Channel \d+(?:/\d+)? : (?P<a>{_N})\[[^\]\[]*\] -> (?P<b>{_N})\[[^\]\[]*\] \[(?P<dir>send|receive)\] via "
    rf"NET/(?P<net>\w+)/(?P<idx>{_N})",
    re.ASCII,
)
_COMPLETION = re.compile(
    r"Got completion(?: from peer(?: (?P<peer>[^\s<]+)(?:<\d+>)?)?)? with (?:error |status=)(?:[A-Z_]+\()?"
    r"(?P<status>[0-9]{1,10})(?![\w.])"
)
_OPCODE = re.compile(r"opcode[ =](?:[A-Z_]+\()?(?P<op>[0-9]{1,10})(?![\w.])")
_VENDOR = re.compile(r"vendor[ _]err(?:[ =]|or )?(?P<v>[0-9]{1,10})(?![\w.])")
# The event is the rest of the line (`\s*(.+?)\s*$` was quadratic in a run of spaces).
_ASYNC = re.compile(
    rf"NET/\w+\s*:\s*(?P<dev>{_HOST}):(?P<port>{_N}) (?:Got async event|async fatal event)[^:]*:(?P<event>.+)"
)
_IBV = re.compile(r"Call to (?P<fn>ibv_\w+) failed")
_HCA = re.compile(rf"\b(?:hca|on dev|dev(?:ice)?)\s+(?P<dev>[A-Za-z][\w.\-]*?)(?::(?P<port>{_N}))?(?=[\s,;]|$)")
_TIMEOUT = re.compile(r"(?i)watchdog caught collective operation timeout|\btime[d ]?\s?out\b|\btimeout\b")


@dataclass
class NcclRank:
    """A rank: where it ran, and its NICs as `dev:port` (nics: all the process may use; nics_used: in channels)."""

    rank: int
    host: str | None = None
    pid: int | None = None
    cuda_dev: int | None = None
    bus_id: str | None = None
    nranks: int | None = None
    nics: list[str] = field(default_factory=list)
    nics_used: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class NcclEvent:
    """One classified warning or error line. device/port: the NIC it is attributed to; inferred: True when the
    line did not name the NIC and it was taken from the only NIC its rank uses. peer_host: the host whose
    OOB address is the named peer."""

    kind: str
    host: str | None
    pid: int | None
    rank: int | None
    device: str | None
    port: int | None
    peer: str | None
    peer_host: str | None
    status: int | None
    vendor_err: int | None
    opcode: int | None
    line_no: int
    text: str
    inferred: bool = False


@dataclass
class NcclLog:
    source: str | None = None
    ranks: dict[int, NcclRank] = field(default_factory=dict)
    events: list[NcclEvent] = field(default_factory=list)
    oob: dict[str, str] = field(default_factory=dict)  # host -> the address NCCL bootstraps over
    transport: str | None = None  # "IB", "Socket", ...: `Using network <x>`, else the NET/<x> that listed NICs
    total_lines: int = 0
    dropped_events: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def hosts(self) -> list[str]:
        hosts = {r.host for r in self.ranks.values() if r.host} | {e.host for e in self.events if e.host}
        return sorted(hosts)

    def of_kind(self, kind: str) -> list[NcclEvent]:
        return [e for e in self.events if e.kind == kind]


@dataclass
class _Process:
    nics: dict[int, str] = field(default_factory=dict)
    ranks: dict[int, int] = field(default_factory=dict)  # cudaDev -> rank (several GPUs per process: -g 8)


def _classify(message: str) -> tuple[str, dict[str, object]] | None:
    if match := _COMPLETION.search(message):
        info: dict[str, object] = {"status": int(match.group("status")), "peer": match.group("peer")}
        if op := _OPCODE.search(message):
            info["opcode"] = int(op.group("op"))
        if vendor := _VENDOR.search(message):
            info["vendor_err"] = int(vendor.group("v"))
        return "ib-completion-error", info
    if match := _ASYNC.search(message):
        event = match.group("event").lower()
        kind = "port-error" if "port error" in event else "nic-fatal" if "catastrophic" in event else "async-event"
        return kind, {"device": match.group("dev"), "port": int(match.group("port"))}
    if "port error" in message.lower():
        return "port-error", {}
    if match := _IBV.search(message):
        return "ibv-failed", {}
    if _TIMEOUT.search(message):
        return "timeout", {}
    return None


class _Parser:
    def __init__(self, source: str | None) -> None:
        self.log = NcclLog(source=source)
        self.procs: dict[tuple[str, int], _Process] = {}

    def rank(self, number: int) -> NcclRank:
        return self.log.ranks.setdefault(number, NcclRank(number))

    def line(self, number: int, raw: str) -> None:
        self.log.total_lines += 1
        if "NCCL" not in raw and "atchdog" not in raw:
            return
        prefix = _PREFIX.search(raw)
        host = prefix.group("host") if prefix else None
        pid = int(prefix.group("pid")) if prefix else None
        dev = int(prefix.group("dev")) if prefix else None
        message = raw[prefix.end() :] if prefix else raw
        proc = self.procs.setdefault((host, pid), _Process()) if host and pid is not None else None
        if proc is not None and self.info(message, host, pid, dev, proc):
            return
        level = _LEVEL.search(message)
        if level is None and "atchdog" not in message:
            return
        if level is not None and level.group("level") in ("INFO", "TRACE"):
            return
        self.event(number, raw, message, host, pid, dev, proc)

    def info(self, message: str, host: str, pid: int, dev: int | None, proc: _Process) -> bool:
        """Learn ranks, NICs and addresses from an INFO line; True when it was one of those."""
        # Substring checks first: a job log is millions of lines, most of them none of these.
        if "comm 0x" in message and (match := _COMM.search(message)):
            rank = self.rank(int(match.group("rank")))
            nranks = int(match.group("nranks"))
            if rank.nranks is None or nranks >= rank.nranks:
                rank.host, rank.pid, rank.nranks = host, pid, nranks
                cuda = int(match.group("dev")) if match.group("dev") else dev
                rank.cuda_dev = cuda if cuda is not None else rank.cuda_dev
                rank.bus_id = match.group("bus") or rank.bus_id
                if cuda is not None:
                    proc.ranks[cuda] = rank.rank
                rank.nics = rank.nics or [proc.nics[i] for i in sorted(proc.nics)]
            return True
        if "Using" not in message:
            return "Channel" in message and self._channel(message, proc)
        handled = False
        if match := _NETWORK.search(message):
            self.log.transport = match.group("net")  # the network NCCL settled on (IB may have failed first)
            return True
        if match := _USING.search(message):
            handled = True
            for nic in _NIC.finditer(match.group("list")):
                proc.nics[int(nic.group("idx"))] = f"{nic.group('dev')}:{nic.group('port')}"
                self.log.transport = self.log.transport or match.group("net")
            for number in proc.ranks.values():
                self.rank(number).nics = [proc.nics[i] for i in sorted(proc.nics)]
        if match := _OOB.search(message):
            self.log.oob.setdefault(host, match.group("ip").split("%")[0])
            handled = True
        return handled

    def _channel(self, message: str, proc: _Process) -> bool:
        match = _CHANNEL.search(message)
        if match is None:
            return False
        local = int(match.group("a") if match.group("dir") == "send" else match.group("b"))
        nic = proc.nics.get(int(match.group("idx")))
        rank = self.rank(local)
        if nic and nic not in rank.nics_used:
            rank.nics_used.append(nic)
        return True

    def event(self, number, raw, message, host, pid, dev, proc) -> None:
        found = _classify(message)
        level = _LEVEL.search(message)
        if found is None and (level is None or level.group("level") == "INFO"):
            return
        kind, info = found or ("warn", {})
        rank = proc.ranks.get(dev) if proc is not None and dev is not None else None
        if rank is None and proc is not None and len(set(proc.ranks.values())) == 1:
            rank = next(iter(proc.ranks.values()))
        if rank is None and (hint := _RANK_HINT.search(raw) or _TASK.search(raw)):
            groups = hint.groupdict()
            rank = int(groups.get("rank") or groups.get("mpi") or groups.get("srun"))
        device, port = info.get("device"), info.get("port")
        if device is None and (named := _HCA.search(message)):
            device = named.group("dev")
            port = int(named.group("port")) if named.group("port") else None
        if len(self.log.events) >= MAX_EVENTS:
            self.log.dropped_events += 1
            return
        peer, status, vendor, opcode = (info.get(k) for k in ("peer", "status", "vendor_err", "opcode"))
        text = raw.strip()[:500]
        event = NcclEvent(kind, host, pid, rank, device, port, peer, None, status, vendor, opcode, number, text)
        self.log.events.append(event)

    def finish(self) -> NcclLog:
        """Resolve what only the whole log tells: a rank's host and NIC, a port from the NIC list, a peer's host."""
        by_ip = {ip: host for host, ip in self.log.oob.items()}
        resolved = []
        for event in self.log.events:
            rank = self.log.ranks.get(event.rank) if event.rank is not None else None
            host, device, port, inferred = event.host, event.device, event.port, False
            if host is None and rank is not None:
                host = rank.host
            if device is None and rank is not None and len(rank.nics_used) == 1 and event.kind in _NIC_KINDS:
                device, inferred = rank.nics_used[0].split(":")[0], True
            if device is not None and port is None:
                port = self._port(host, device, rank)
            peer_host = by_ip.get(event.peer) if event.peer else None
            if event.peer and peer_host is None and event.peer in by_ip.values():
                peer_host = event.peer  # NCCL printed the peer's host name instead of its address
            resolved.append(replace(event, host=host, device=device, port=port, peer_host=peer_host, inferred=inferred))
        self.log.events = resolved
        self.log.ranks = dict(sorted(self.log.ranks.items()))
        if self.log.dropped_events:
            self.log.errors.append(f"{self.log.dropped_events} events beyond the first {MAX_EVENTS} not kept")
        return self.log

    def _port(self, host: str | None, device: str, rank: NcclRank | None) -> int | None:
        candidates = rank.nics if rank is not None else []
        if not candidates:
            candidates = [n for r in self.log.ranks.values() if r.host == host for n in r.nics]
        ports = {n.split(":")[1] for n in candidates if n.split(":")[0] == device}
        return int(ports.pop()) if len(ports) == 1 else None


def parse_nccl_log_lines(lines: Iterable[str], source: str | None = None) -> NcclLog:
    """parse_nccl_log over an iterable of lines (a file object: a job log can be hundreds of MiB)."""
    parser = _Parser(source)
    for number, line in enumerate(lines, start=1):
        parser.line(number, line.rstrip("\r\n"))
    return parser.finish()


def parse_nccl_log(text: str | None, source: str | None = None) -> NcclLog:
    """Ranks, NICs and classified warning/error events of an NCCL_DEBUG=INFO log; never raises."""
    log = parse_nccl_log_lines((text or "").splitlines(), source)
    if text and text.strip() and not log.ranks and not log.events:
        log.errors.append("parse: no NCCL rank or warning lines found")
    return log
